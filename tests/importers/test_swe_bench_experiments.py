"""SWE-bench experiments-style submission directories (swe-bench/experiments layout).

No real submission directory is in ../shared, so one is laid out from the real harness
run (its predictions and its per-instance report.json files, ../shared/data/external/
swe-bench) with a results.json written as the experiments repository's get_results does:
category -> instance ids. Expected values are computed from those files by hand.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.rules.loader import parse_rule
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

RUN = "swe-bench/harness_deepseek_chat_dev"


def _submission(tmp_path, extra_lists=None):
    real = external(RUN)
    preds = json.loads((real / "preds.json").read_text())
    report = json.loads((real / "deepseek__deepseek-chat.deepseek_chat_dev.json").read_text())
    sub = tmp_path / "evaluation" / "verified" / "20250101_deepseek-chat"
    (sub / "results").mkdir(parents=True)
    (sub / "trajs").mkdir()
    (sub / "trajs" / "x.traj").write_text("{}")
    (sub / "metadata.yaml").write_text("name: DeepSeek Chat\noss: true\n")
    (sub / "all_preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds.values()))
    for inst in real.iterdir():
        if inst.is_dir():
            (sub / "logs" / inst.name).mkdir(parents=True)
            shutil.copy(inst / "report.json", sub / "logs" / inst.name / "report.json")
    ids = sorted(preds)
    unresolved = [i for i in report["unresolved_ids"]]
    results = {"resolved": report["resolved_ids"], "generated": ids, "with_logs": ids, "applied": ids[:-3],
               "no_generation": [], "no_apply": unresolved[:2], "test_timeout": unresolved[2:3],
               **(extra_lists or {})}
    (sub / "results" / "results.json").write_text(json.dumps(results))
    return sub, preds, report, results


def test_a_submission_directory_imports_with_each_category_kept(tmp_path):
    sub, preds, report, results = _submission(tmp_path)
    result, card = run_import("swe-bench", [sub], tmp_path / "card")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert set(eps) == set(preds)
    for iid, e in eps.items():
        assert e["score.resolved"] == (iid in results["resolved"])
        names = [n for n, ids in results.items() if iid in ids]
        assert e["meta.experiments_lists"].split(",") == names
        if iid in results["no_apply"]:
            assert e["status"] == "error" and "did not apply" in e["error_message"]
        elif iid in results["test_timeout"]:
            assert e["status"] == "timeout" and "timed out" in e["error_message"]
        else:
            assert e["status"] == "completed"
    # per-instance report.json under logs/<instance>/: the per-test results a rule regrades from
    for inst in (sub / "logs").iterdir():
        doc = json.loads((inst / "report.json").read_text())[inst.name]
        f2p = doc["tests_status"]["FAIL_TO_PASS"]
        assert eps[inst.name]["score.f2p_success"] == len(f2p["success"])
        assert eps[inst.name]["score.report_resolved"] == doc["resolved"]
    # the reported rate replays: resolved over every instance of the submission
    [ref] = [r for r in card.manifest.rules if r.id == "swe_bench.resolved_rate"]
    [reported] = parse_rule(card.read_text(ref.path), file=ref.path).reported
    assert reported.value == pytest.approx(len(results["resolved"]) / len(preds))
    agents = {e["agent"] for e in eps.values()}
    assert agents == {next(iter(preds.values()))["model_name_or_path"]}
    assert any("experiments-style submission" in n for n in result.notes)
    assert_valid(tmp_path / "card")


def test_unknown_categories_are_kept_and_named(tmp_path):
    first_id = sorted(json.loads((external(RUN) / "preds.json").read_text()))[0]
    sub, *_ = _submission(tmp_path, {"weird": [first_id]})
    result, card = run_import("swe-bench", [sub], tmp_path / "card")
    assert any("weird" in n and "not known" in n for n in result.notes)
    first = card.episodes(filter=f"task_id == '{first_id}'").to_pylist()[0]
    assert "weird" in first["meta.experiments_lists"].split(",")


def test_a_bad_results_file_and_a_linked_one_are_refused(tmp_path):
    sub, *_ = _submission(tmp_path)
    (sub / "results" / "results.json").write_text(json.dumps({"resolved": [1, 2]}))
    with pytest.raises(SourceFormatError, match="resolved is not a list of instance ids") as info:
        run_import("swe-bench", [sub], tmp_path / "card")
    assert "results.json" in str(info.value)
    (sub / "results" / "results.json").unlink()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"resolved": []}))
    os.symlink(outside, sub / "results" / "results.json")
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("swe-bench", [sub], tmp_path / "card2")
