from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.swe_agent import terminal_state
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

V1 = "swe-agent/v1/6e44b9__sweagenttestrepo-1c2844.traj"
V0 = "swe-agent/v0/pydicom__pydicom-1458.traj"


@pytest.mark.parametrize("rel", [V1, V0])
def test_real_trajectories_import_and_validate(rel, tmp_path):
    path = external(rel)
    doc = json.loads(path.read_text())
    result, card = run_import("swe-agent", [path], tmp_path / "card")
    assert_valid(tmp_path / "card")
    row = card.episodes().to_pylist()[0]
    stats = doc["info"]["model_stats"]
    assert row["status"] == "completed" and row["task_id"] == path.stem
    assert (row["input_tokens"], row["output_tokens"], row["cost_usd"], row["meta.api_calls"]) == (
        stats["tokens_sent"], stats["tokens_received"], stats["instance_cost"], stats["api_calls"])
    steps = card.steps().to_pylist()
    calls = sum(len(m.get("tool_calls") or []) for m in doc["history"])
    assert sum(s["kind"] == "tool_call" for s in steps) == calls
    assert sum(s["kind"] == "tool_result" for s in steps) == sum(1 for m in doc["history"] if m.get("tool_call_ids"))
    ids = {s["call_id"] for s in steps if s["kind"] == "tool_call"}
    assert all(s["call_id"] in ids for s in steps if s["kind"] == "tool_result")
    assert row["meta.trajectory_steps"] == len(doc["trajectory"])
    patch = (tmp_path / "card" / "artifacts" / row["meta.patch_artifact"]).read_bytes().decode()
    assert patch == doc["info"]["submission"]  # v1's \r\n line endings kept byte for byte


def test_v0_with_all_preds_takes_the_agent_from_the_predictions(tmp_path):
    traj, preds = external(V0), external("swe-agent/v0/all_preds.jsonl")
    pred = json.loads(preds.read_text().splitlines()[0])
    _, card = run_import("swe-agent", [traj, preds], tmp_path / "card")
    assert_valid(tmp_path / "card")
    row = card.episodes().to_pylist()[0]
    assert row["agent"] == pred["model_name_or_path"]
    assert any(json.loads(s["payload"]).get("is_demo") for s in card.steps().to_pylist() if s["payload"])


@pytest.mark.parametrize(("status", "expected"), [
    ("submitted", "completed"), ("exit_cost", "limit"), ("submitted (exit_context)", "limit"),
    ("exit_format", "limit"), ("exit_total_execution_time", "timeout"), ("exit_error", "error"),
    ("RuntimeError", "error"), ("skipped", "skipped")])
def test_exit_statuses_the_real_files_lack(tmp_path, status, expected):
    assert terminal_state(status) == expected
    doc = {"environment": "main", "info": {"exit_status": status, "submission": None,
                                           "model_stats": {"instance_cost": 0.1, "tokens_sent": 5, "tokens_received": 2, "api_calls": 1}},
           "history": [{"role": "system", "content": "s"}], "trajectory": []}
    src = tmp_path / "x__y-1.traj"
    src.write_text(json.dumps(doc))
    _, card = run_import("swe-agent", [src], tmp_path / "card")
    assert_valid(tmp_path / "card")
    row = card.episodes().to_pylist()[0]
    assert row["status"] == expected and (expected == "completed") == (row["error_message"] is None)


def test_a_prediction_without_trajectory_is_a_declared_drop(tmp_path):
    run = tmp_path / "run"
    (run / "a").mkdir(parents=True)
    doc = {"info": {"exit_status": "submitted", "submission": "diff"}, "history": []}
    (run / "a" / "a.traj").write_text(json.dumps(doc))
    (run / "all_preds.jsonl").write_text("\n".join(json.dumps({"instance_id": i, "model_name_or_path": "m",
                                                               "model_patch": "diff"}) for i in ("a", "b")) + "\n")
    result, card = run_import("swe-agent", [run], tmp_path / "card")
    assert_valid(tmp_path / "card")
    drop = next(d for d in card.manifest.drops if d.target == "episodes")
    assert drop.count == 1 and "'b'" in drop.selector


@pytest.mark.parametrize(("doc", "needle"), [
    ({"info": {"exit_status": "submitted"}, "history": "x"}, "history"),
    ({"info": {"submission": ""}, "history": []}, "info.exit_status"),
    ({"info": {"exit_status": "submitted", "model_stats": {"tokens_sent": -1}}, "history": []}, "tokens_sent"),
])
def test_bad_trajectories_name_file_and_field(tmp_path, doc, needle):
    src = tmp_path / "bad.traj"
    src.write_text(json.dumps(doc))
    with pytest.raises(SourceFormatError) as err:
        run_import("swe-agent", [src], tmp_path / "card")
    assert needle in str(err.value) and "bad.traj" in str(err.value)


def test_a_prediction_id_too_long_for_a_selector_leaves_the_selector_out_and_the_card_valid(tmp_path):
    # Fuzzer counterexample (huge-line in all_preds.jsonl): the missing prediction's 3 MiB
    # instance id went into the drop's selector, longer than any expression may be, and the
    # imported card did not validate (drop-selector-invalid).
    run = tmp_path / "run"
    (run / "a").mkdir(parents=True)
    (run / "a" / "a.traj").write_text(json.dumps({"info": {"exit_status": "submitted", "submission": "d"},
                                                  "history": []}))
    (run / "all_preds.jsonl").write_text("\n".join(json.dumps({"instance_id": i, "model_name_or_path": "m",
                                                               "model_patch": "d"}) for i in ("a", "b" * 20_000)))
    _, card = run_import("swe-agent", [run], tmp_path / "card")
    assert_valid(tmp_path / "card")
    drop = next(d for d in card.manifest.drops if d.target == "episodes")
    assert drop.count == 1 and drop.selector is None and "it is left out" in drop.reason
