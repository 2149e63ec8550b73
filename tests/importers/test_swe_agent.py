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
    ("RuntimeError", "error"), ("skipped", "skipped"),
    # SWE-agent 1.x agents.py: the agent's own `exit` / `exit_forfeit` end the run (autosubmitted too)
    ("exit_command", "completed"), ("exit_forfeit", "completed"), ("submitted (exit_forfeit)", "completed"),
    ("submitted (exit_api)", "error"), ("skipped (submitted)", "skipped"), ("early_exit", "error")])
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
    ({"info": [], "history": []}, "info"),
    ({"info": {"exit_status": "submitted", "model_stats": {"tokens_sent": -1}}, "history": []}, "tokens_sent"),
])
def test_bad_trajectories_name_file_and_field(tmp_path, doc, needle):
    src = tmp_path / "bad.traj"
    src.write_text(json.dumps(doc))
    with pytest.raises(SourceFormatError) as err:
        run_import("swe-agent", [src], tmp_path / "card")
    assert needle in str(err.value) and "bad.traj" in str(err.value)


def test_a_history_only_demonstration_imports_with_its_outcome_declared_unknown(tmp_path):
    """SWE-agent's trajectories/demonstrations/function_calling_simple.traj (@c37c3234) is
    {"history": [...]} alone; SWE-agent's inspector reads such a file with info {} (inspector/server.py
    @3ea751c0). It was refused ("has no info object"); it imports with status error, error_type
    unrecorded_exit_status and the missing outcome and usage declared."""
    history = [{"role": "system", "content": "you are"}, {"role": "user", "content": "fix it"},
               {"role": "assistant", "content": "ls", "thought": "look", "action": "ls"},
               {"role": "user", "content": "a.py"}]
    src = tmp_path / "demo.traj"
    src.write_text(json.dumps({"history": history}))
    _r, card = run_import("swe-agent", [src], tmp_path / "card")
    assert_valid(tmp_path / "card")
    (ep,) = card.episodes().to_pylist()
    assert (ep["status"], ep["error_type"]) == ("error", "unrecorded_exit_status")
    assert ep["n_steps"] == len(history)
    assert card.steps(columns=["content"]).column("content").to_pylist() == [m["content"] for m in history]
    (drop,) = [d for d in card.manifest.drops if d.target == "episodes.status"]
    assert drop.count == 1 and drop.selector == "error_type == 'unrecorded_exit_status'"
    assert {d.target for d in card.manifest.drops} >= {"episodes.input_tokens", "episodes.cost_usd"}


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


def _traj(exit_status, **info):
    return {"environment": "main", "info": {"exit_status": exit_status, "submission": None, **info},
            "history": [{"role": "system", "content": "s", "message_type": "system_prompt"},
                        {"role": "assistant", "content": "look", "message_type": "action", "action": "ls",
                         "thought": "look", "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "bash", "arguments": "{}"}}]},
                        {"role": "tool", "content": "a.py", "message_type": "observation", "tool_call_ids": ["c1"]}],
            "trajectory": [{"action": "ls", "observation": "a.py", "response": "look", "thought": "look",
                            "execution_time": 0.5, "state": {}, "query": [{"role": "system", "content": "s"}],
                            "extra_info": {}}]}


@pytest.mark.parametrize("info", [{"exit_status": None}, {}], ids=["null", "absent"])
def test_a_trajectory_saved_mid_run_is_an_incomplete_error_with_its_steps(tmp_path, info):
    # SWE-agent 1.x (agents.py `step`) sets info["exit_status"] = step_output.exit_status after
    # every step and saves the .traj: it is None until the last step, so a run killed or crashed
    # mid-way leaves a trajectory with a null exit status (run_batch's should_skip redoes those).
    # This used to be exit 1 ("info.exit_status is missing").
    doc = _traj(None, swe_agent_version="1.1.0")
    doc["info"] = {k: v for k, v in doc["info"].items() if k != "exit_status"} | info
    src = tmp_path / "x__y-1.traj"
    src.write_text(json.dumps(doc))
    _, card = run_import("swe-agent", [src], tmp_path / "card")
    assert_valid(tmp_path / "card")
    row = card.episodes().to_pylist()[0]
    assert (row["status"], row["error_type"], row["meta.exit_status"]) == ("error", "incomplete", None)
    assert "stopped before it ended" in row["error_message"]
    kinds = [s["kind"] for s in card.steps().to_pylist()]
    assert kinds == ["message", "message", "tool_call", "tool_result"]


def test_a_retry_agent_trajectory_maps_the_chosen_attempt_and_keeps_every_attempt(tmp_path):
    # RetryAgent.get_trajectory_data(choose=True): {"attempts": [...]} | the chosen attempt, with
    # info.best_attempt_idx and info.rloop_model_stats added; choose=False (saved mid-run): attempts only
    first, chosen = _traj("exit_cost"), _traj("submitted")
    final = {"attempts": [first, chosen], **chosen}
    final["info"] = dict(chosen["info"], best_attempt_idx=1, rloop_model_stats={"instance_cost": 0.5})
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "a.traj").write_text(json.dumps(final))
    _, card = run_import("swe-agent", [tmp_path / "final" / "a.traj"], tmp_path / "c1")
    assert_valid(tmp_path / "c1")
    row = card.episodes().to_pylist()[0]
    assert row["status"] == "completed" and row["meta.info.best_attempt_idx"] == "1"
    assert [a["info"]["exit_status"] for a in json.loads(row["meta.attempts"])] == ["exit_cost", "submitted"]
    (tmp_path / "mid").mkdir()
    (tmp_path / "mid" / "a.traj").write_text(json.dumps({"attempts": [first]}))
    result, card = run_import("swe-agent", [tmp_path / "mid" / "a.traj"], tmp_path / "c2")
    assert_valid(tmp_path / "c2")
    row = card.episodes().to_pylist()[0]
    assert (row["status"], row["error_type"], row["n_steps"]) == ("error", "incomplete", 0)
    assert json.loads(row["meta.attempts"])[0]["info"]["exit_status"] == "exit_cost"
    assert any("attempts only" in n for n in result.notes)


def test_a_run_batch_dir_reads_pred_files_and_the_exit_status_listing(tmp_path):
    # SWE-agent 1.x run_batch: <out>/<id>/<id>.traj + <id>.pred (save_predictions), preds.json only
    # once merge_predictions ran, and run_batch_exit_statuses.yaml (_progress.py) listing every
    # finished instance, "Uncaught <Exception>" for one that crashed before a trajectory was saved.
    run = tmp_path / "run"
    for iid, status in (("a", "submitted"), ("b", None)):
        (run / iid).mkdir(parents=True)
        doc = _traj(status)
        doc["info"]["submission"] = f"diff {iid}" if status else None
        (run / iid / f"{iid}.traj").write_text(json.dumps(doc))
        (run / iid / f"{iid}.pred").write_text(json.dumps({"model_name_or_path": "run", "instance_id": iid,
                                                           "model_patch": doc["info"]["submission"]}))
    (run / "run_batch_exit_statuses.yaml").write_text(
        "instances_by_exit_status:\n    submitted:\n    - a\n    Uncaught RuntimeError:\n    - b\n    - c\n"
        "total_cost: 0.5\n")
    _, card = run_import("swe-agent", [run], tmp_path / "card")
    assert_valid(tmp_path / "card")
    rows = {r["task_id"]: r for r in card.episodes().to_pylist()}
    assert set(rows) == {"a", "b"} and rows["a"]["agent"] == "run"
    assert rows["b"]["meta.listed_exit_status"] == "Uncaught RuntimeError" and rows["b"]["status"] == "error"
    assert "Uncaught RuntimeError" in rows["b"]["error_message"]
    assert (tmp_path / "card" / "artifacts" / rows["a"]["meta.patch_artifact"]).read_text() == "diff a"
    assert sorted(card.manifest.plan.tasks) == ["a", "b", "c"]
    drop = next(d for d in card.manifest.drops if d.target == "episodes")
    assert drop.count == 1 and "'c'" in drop.selector and "Uncaught RuntimeError" in drop.reason
    assert {"a.pred", "run_batch_exit_statuses.yaml"} <= {s.name for s in card.manifest.provenance.sources}


def test_a_relative_trajectory_without_predictions_is_named_after_its_directory(tmp_path, monkeypatch):
    # `rcard import swe-agent x.traj` in the run's directory, no predictions to name the model: the
    # agent was Path('x.traj').parent.name == '' (refused: "the episode's agent name is empty").
    from typer.testing import CliRunner

    import rollout_cards as rc
    from rollout_cards.cli import app

    run = tmp_path / "my-run"
    run.mkdir()
    traj = sorted(external("swe-agent/v1").glob("*.traj"))[0]
    (run / traj.name).write_bytes(traj.read_bytes())
    monkeypatch.chdir(run)
    result = CliRunner().invoke(app, ["import", "swe-agent", traj.name, "-o", str(tmp_path / "card")])
    assert result.exit_code == 0, result.output
    assert {r["agent"] for r in rc.open(tmp_path / "card").episodes().to_pylist()} == {"my-run"}


def test_predictions_alone_are_an_error_that_says_what_to_import(tmp_path):
    # SWE-agent's own test data has an all_preds.jsonl beside its .traj; given alone it said only
    # "holds no SWE-agent trajectory (.traj)", not why nor what to give instead
    preds = tmp_path / "all_preds.jsonl"
    preds.write_text("".join(json.dumps({"model_name_or_path": "m", "instance_id": i, "model_patch": "diff"}) + "\n"
                             for i in ("a", "b")))
    with pytest.raises(SourceFormatError) as err:
        run_import("swe-agent", [preds], tmp_path / "card")
    assert err.value.file == str(preds)
    assert "its 2 prediction(s)" in str(err.value) and "import the run directory that holds the .traj" in str(err.value)
    assert not (tmp_path / "card").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceFormatError, match=r"holds no SWE-agent trajectory \(\.traj\)$"):
        run_import("swe-agent", [empty], tmp_path / "card")
