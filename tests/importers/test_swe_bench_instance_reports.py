"""SWE-bench per-instance report.json of the harness's versions, and a run with no run report.

Shapes as swebench/harness/grading.py writes them: @v2.0.0 and @v2.1.0 get_pred_report /
get_eval_report set `none` (not patch_is_None) for a prediction without a patch; @7a21e05 (5.x) adds
`infra_failure` / `infra_failure_reason` to an unapplied patch's report; other tools writing the
same shape add their own keys. A run without `<model>.<run_id>.json` is rebuilt as reporting.py
@7a21e05 make_run_report builds its lists (expected outcomes below are written out by hand).
"""

from __future__ import annotations

import json

import pytest

from tests.importers.conftest import assert_valid, run_import

F2P = {"FAIL_TO_PASS": {"success": ["t_new"], "failure": []}, "PASS_TO_PASS": {"success": ["t_old"], "failure": []},
       "FAIL_TO_FAIL": {"success": [], "failure": []}, "PASS_TO_FAIL": {"success": [], "failure": []}}


def _instance(root, iid, **fields):
    d = root / "logs" / "run_evaluation" / "run-1" / "org__model-7b" / iid
    d.mkdir(parents=True)
    base = {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False}
    (d / "report.json").write_text(json.dumps({iid: {**base, **fields}}, indent=4))


def _preds(root, patches):
    (root / "preds.json").write_text(json.dumps(
        {iid: {"model_name_or_path": "org/model-7b", "instance_id": iid, "model_patch": patch}
         for iid, patch in patches.items()}))


def test_a_run_without_its_run_report_is_rebuilt_from_the_instance_reports(tmp_path):
    root = tmp_path / "run"
    _instance(root, "a__a-1", resolved=True, tests_status=F2P)
    _instance(root, "b__b-2", tests_status={**F2P, "PASS_TO_PASS": {"success": [], "failure": ["t_old"]}})
    _preds(root, {"a__a-1": "diff a", "b__b-2": "diff b", "c__c-3": "", "d__d-4": "diff d"})
    result, card = run_import("swe-bench", [root], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    # a, b: a report.json (completed); c: an empty patch (completed, not evaluated); d: no report (error)
    assert {k: (e["status"], e["score.resolved"], e["score.empty_patch"]) for k, e in eps.items()} == {
        "a__a-1": ("completed", True, False), "b__b-2": ("completed", False, False),
        "c__c-3": ("completed", False, True), "d__d-4": ("error", False, False)}
    assert {e["agent"] for e in eps.values()} == {"org/model-7b"}
    assert eps["b__b-2"]["score.p2p_failure"] == 1
    assert all(r["reported"] == [] for r in result.rules)  # the harness's own counts are not in the sources
    assert any("rebuilt" in n for n in result.notes)
    assert_valid(tmp_path / "c")


def test_instance_report_fields_of_every_version_are_kept(tmp_path):
    root = tmp_path / "run"
    _instance(root, "a__a-1", none=True, patch_exists=False, patch_successfully_applied=False)  # 2.0-2.1
    _instance(root, "b__b-2", patch_successfully_applied=False, infra_failure=True,
              infra_failure_reason="docker: no space left on device")  # 5.x
    _instance(root, "c__c-3", resolved=True, tests_status=F2P, f2p_rate=1.0, resolve_status="RESOLVED_FULL")
    _preds(root, {"a__a-1": None, "b__b-2": "diff b", "c__c-3": "diff c"})
    result, card = run_import("swe-bench", [root], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert eps["a__a-1"]["meta.patch_is_none"] is True
    assert eps["b__b-2"]["meta.infra_failure"] is True
    assert eps["b__b-2"]["meta.infra_failure_reason"] == "docker: no space left on device"
    assert json.loads(eps["c__c-3"]["meta.instance_report_other"]) == {"f2p_rate": 1.0,
                                                                       "resolve_status": "RESOLVED_FULL"}
    assert any("'none'" in n for n in result.notes)
    assert_valid(tmp_path / "c")


def test_instance_reports_of_two_models_without_a_run_report_are_refused(tmp_path):
    from rollout_cards.errors import SourceFormatError

    root = tmp_path / "run"
    _instance(root, "a__a-1", resolved=True)
    other = root / "logs" / "run_evaluation" / "run-1" / "org__model-13b" / "b__b-2"
    other.mkdir(parents=True)
    (other / "report.json").write_text(json.dumps({"b__b-2": {"resolved": False}}))
    with pytest.raises(SourceFormatError, match="2 model directories"):
        run_import("swe-bench", [root], tmp_path / "c")


def test_without_predictions_a_report_of_a_none_patch_is_an_empty_patch(tmp_path):
    # grading.py get_eval_report @7a21e05 returns patch_is_None true (2.0-2.1: `none`) for a prediction
    # whose patch is None, and make_run_report counts such a prediction as empty_patch, not evaluated.
    # Rebuilt from the logs alone it was completed + unresolved with score.empty_patch false.
    root = tmp_path / "run"
    _instance(root, "a__a-1", patch_is_None=True, patch_exists=False, patch_successfully_applied=False)
    _instance(root, "b__b-2", none=True, patch_exists=False, patch_successfully_applied=False)
    _instance(root, "c__c-3", resolved=True, tests_status=F2P)
    _instance(root, "d__d-4", patch_successfully_applied=False)  # evaluated, patch did not apply: unresolved
    _r, card = run_import("swe-bench", [root / "logs"], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert {k: (e["status"], e["score.resolved"], e["score.empty_patch"]) for k, e in eps.items()} == {
        "a__a-1": ("completed", False, True), "b__b-2": ("completed", False, True),
        "c__c-3": ("completed", True, False), "d__d-4": ("completed", False, False)}
    assert eps["a__a-1"]["meta.report_lists"] == "submitted,empty_patch"
    assert_valid(tmp_path / "c")
