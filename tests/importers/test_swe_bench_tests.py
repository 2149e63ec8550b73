from __future__ import annotations

import json
import shutil

import pytest

import rollout_cards as rc
from rollout_cards.errors import SourceFormatError
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

RUN = "swe-bench/harness_deepseek_chat_dev"
STRICT = """rule: regrade.strict
version: 1
kind: regrade
description: resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes (from the instance reports)
score: "score.f2p_failure == 0 and score.p2p_failure == 0 and score.f2p_success > 0"
on_missing: exclude
aggregate: {statistic: mean, group_by: [agent], unit: task_id}
"""


def test_instance_reports_become_test_columns_a_rule_can_regrade(tmp_path):
    root = external(RUN)
    result, card = run_import("swe-bench", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    rows = {e["task_id"]: e for e in card.episodes().to_pylist()}
    reports = {p.parent.name: json.loads(p.read_text())[p.parent.name] for p in root.glob("*/report.json")}
    assert len(reports) == 4
    for iid, rep in reports.items():
        row = rows[iid]
        assert row["score.report_resolved"] == rep["resolved"]
        assert row["meta.patch_applied"] == rep["patch_successfully_applied"]
        for cat, stem in (("FAIL_TO_PASS", "f2p"), ("PASS_TO_PASS", "p2p"), ("FAIL_TO_FAIL", "f2f"), ("PASS_TO_FAIL", "p2f")):
            for outcome in ("success", "failure"):
                assert row[f"score.{stem}_{outcome}"] == len(rep["tests_status"][cat][outcome])
                assert json.loads(row[f"meta.tests.{cat}.{outcome}"]) == rep["tests_status"][cat][outcome]
    # pydicom-1413: every FAIL_TO_PASS passes, two PASS_TO_PASS regress: not resolved
    assert rows["pydicom__pydicom-1413"]["score.f2p_failure"] == 0 and rows["pydicom__pydicom-1413"]["score.p2p_failure"] == 2
    drop = next(d for d in card.manifest.drops if d.loss_class == "missing_instance_report")
    assert drop.count == 19
    rule = tmp_path / "strict.yaml"
    rule.write_text(STRICT)
    report = rc.rescore(rc.open(tmp_path / "card"), str(rule))
    value = next(r for r in report.results if r.rule == "regrade.strict").value
    strict = [all(not rep["tests_status"][c]["failure"] for c in ("FAIL_TO_PASS", "PASS_TO_PASS"))
              and bool(rep["tests_status"]["FAIL_TO_PASS"]["success"]) for rep in reports.values()]
    assert value == pytest.approx(sum(strict) / len(strict))


def test_a_bad_instance_report_names_file_and_field(tmp_path):
    root = tmp_path / "run"
    shutil.copytree(external(RUN), root)
    path = root / "pvlib__pvlib-python-1606" / "report.json"
    doc = json.loads(path.read_text())
    doc["pvlib__pvlib-python-1606"]["tests_status"]["FAIL_TO_PASS"]["success"] = "all of them"
    path.write_text(json.dumps(doc))
    with pytest.raises(SourceFormatError) as err:
        run_import("swe-bench", [root], tmp_path / "card")
    assert "report.json" in str(err.value) and "FAIL_TO_PASS.success" in str(err.value)
    result, _ = run_import("swe-bench", [root], tmp_path / "kept", keep_going=True)
    assert len(result.malformed) == 1 and result.episodes == 22


def test_a_symlinked_instance_report_is_refused(tmp_path):
    root = tmp_path / "run"
    shutil.copytree(external(RUN), root)
    target = root / "sqlfluff__sqlfluff-2419" / "report.json"
    outside = tmp_path / "elsewhere.json"
    shutil.move(target, outside)
    target.symlink_to(outside)
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("swe-bench", [root], tmp_path / "card")
