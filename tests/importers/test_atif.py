from __future__ import annotations

import json
import shutil

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.atif import trial_status
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

SUMMARIZATION = "harbor/hello-world-context-summarization.trajectory.json"


def _steps(doc):
    return doc["steps"]


def test_harbor_subagents_are_nested_under_the_step_that_launched_them(tmp_path):
    path = external(SUMMARIZATION)
    main = json.loads(path.read_text())
    result, card = run_import("atif", [path], tmp_path / "c")
    subs = {p.name: json.loads(p.read_text()) for p in path.parent.glob("*summarization-1-*.json")}
    steps = card.steps().to_pylist()
    begins = [s for s in steps if s["kind"] == "span_begin"]
    assert [b["name"] for b in begins] == [
        "terminus-2-summarization-summary", "terminus-2-summarization-questions", "terminus-2-summarization-answers"]
    for b in begins:
        assert b["depth"] == 0 and b["parent_seq"] is None
        children = [s for s in steps if s["parent_seq"] == b["seq"]]
        assert children and all(s["depth"] == 1 for s in children)
        sub = next(d for d in subs.values() if d["agent"]["name"] == b["name"])
        assert sum(s["input_tokens"] or 0 for s in children) == sum(
            (x.get("metrics") or {}).get("prompt_tokens", 0) for x in _steps(sub))
    (ep,) = card.episodes().to_pylist()
    # Harbor's final_metrics of the main trajectory include its sub-agents' tokens
    assert ep["input_tokens"] == main["final_metrics"]["total_prompt_tokens"] == sum(
        s["input_tokens"] or 0 for s in steps)
    assert all(s["depth"] == 0 for s in steps if s["parent_seq"] is None)
    assert_valid(tmp_path / "c")


def test_nemo_ancestry_names_the_acting_agent(tmp_path):
    path = external("nemo-agent-toolkit/exmp06_atif.json")
    doc = json.loads(path.read_text())
    _r, card = run_import("atif", [path], tmp_path / "c")
    agents = card.steps(columns=["agent"]).column("agent").to_pylist()
    assert agents == [((s.get("extra") or {}).get("ancestry") or {}).get("function_name") for s in doc["steps"]]
    assert_valid(tmp_path / "c")


def _traj(steps, **kw):
    return {"schema_version": "ATIF-v1.7", "session_id": "s", "agent": {"name": "lead"}, "steps": steps, **kw}


def test_embedded_subagents_and_ancestry_nesting(tmp_path):
    sub = _traj([{"step_id": 1, "source": "agent", "message": "sub work",
                  "metrics": {"prompt_tokens": 5, "completion_tokens": 1}}], trajectory_id="t-1",
                agent={"name": "helper"})
    doc = _traj([
        {"step_id": 1, "source": "user", "message": "go"},
        {"step_id": 2, "source": "agent", "message": "", "tool_calls": [
            {"tool_call_id": "c1", "function_name": "delegate", "arguments": {},
             "extra": {"ancestry": {"function_id": "fn-tool", "function_name": "delegate"}}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "done",
                                      "subagent_trajectory_ref": [{"trajectory_id": "t-1"}]}]}},
        {"step_id": 3, "source": "agent", "message": "inner",
         "extra": {"ancestry": {"function_id": "fn-inner", "function_name": "inner", "parent_id": "fn-tool"}}},
    ], subagent_trajectories=[sub])
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    _r, card = run_import("atif", [path], tmp_path / "c")
    rows = card.steps(columns=["seq", "kind", "agent", "parent_seq", "depth"]).to_pylist()
    kinds = [(r["kind"], r["parent_seq"], r["depth"]) for r in rows]
    assert kinds == [("message", None, 0), ("tool_call", None, 0), ("tool_result", None, 0),
                     ("span_begin", None, 0), ("message", 3, 1), ("span_end", None, 0), ("message", 1, 1)]
    assert rows[4]["agent"] == "helper" and rows[6]["agent"] == "inner"
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize(("ref", "message"), [
    ({"trajectory_path": "nowhere.json"}, "does not exist beside the trajectory"),
    ({"trajectory_path": "../outside.json"}, "points outside the source directory"),
    ({"trajectory_path": "/etc/passwd"}, "points outside the source directory"),
    ({"trajectory_path": "s3://bucket/x.json"}, "points outside the source directory"),
    ({"trajectory_id": "missing"}, "names no embedded trajectory_id"),
    ({"trajectory_path": "t.json"}, "refers back to a trajectory"),
])
def test_bad_subagent_refs_name_the_ref(tmp_path, ref, message):
    (tmp_path / "outside.json").write_text(json.dumps(_traj([])))
    d = tmp_path / "src"
    d.mkdir()
    doc = _traj([{"step_id": 1, "source": "system", "message": "x",
                  "observation": {"results": [{"subagent_trajectory_ref": [ref]}]}}])
    (d / "t.json").write_text(json.dumps(doc))
    with pytest.raises(SourceFormatError) as info:
        run_import("atif", [d / "t.json"], tmp_path / "c")
    assert message in str(info.value) and "subagent_trajectory_ref[0]" in str(info.value)
    assert "t.json" in str(info.value)


def test_a_linked_subagent_file_is_refused(tmp_path):
    (tmp_path / "secret.json").write_text(json.dumps(_traj([])))
    d = tmp_path / "src"
    d.mkdir()
    (d / "sub.json").symlink_to(tmp_path / "secret.json")
    doc = _traj([{"step_id": 1, "source": "system", "message": "x",
                  "observation": {"results": [{"subagent_trajectory_ref": [{"trajectory_path": "sub.json"}]}]}}])
    (d / "t.json").write_text(json.dumps(doc))
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("atif", [d / "t.json"], tmp_path / "c")


@pytest.mark.parametrize(("exc", "status"), [(None, "completed"), ({"exception_type": "AgentTimeoutError"}, "timeout"),
                                             ({"exception_type": "CancelledError"}, "cancelled"),
                                             ({"exception_type": "RuntimeError"}, "error")])
def test_trial_status(exc, status):
    assert trial_status(exc)[0] == status


def _trial(root, name, reward, exception=None, trajectory=None):
    d = root / name
    (d / "agent").mkdir(parents=True)
    result = {"id": "00000000-0000-0000-0000-000000000000", "task_name": "hello-world", "trial_name": name,
              "trial_uri": "file:///x", "task_id": {"path": "tasks/hello-world"}, "source": "demo",
              "task_checksum": "abc", "config": {"agent": {"name": "terminus-2"}},
              "agent_info": {"name": "terminus-2", "version": "2.0.0",
                             "model_info": {"name": "gpt-4o", "provider": "openai"}},
              "agent_result": {"n_input_tokens": 982, "n_cache_tokens": 0, "n_output_tokens": 145, "cost_usd": 0.004},
              "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
              "exception_info": exception, "started_at": "2025-11-01T10:00:00.000000",
              "finished_at": "2025-11-01T10:02:00.000000"}
    (d / "result.json").write_text(json.dumps(result))
    if trajectory is not None:
        shutil.copy(trajectory, d / "agent" / "trajectory.json")
    return d


def test_harbor_job_directory_reads_the_timeout_from_the_trial_result(tmp_path):
    trajectory = external("harbor/hello-world-timeout.trajectory.json")
    job = tmp_path / "job"
    _trial(job, "hello-world__a", 0.0, {"exception_type": "AgentTimeoutError", "exception_message": "120 s",
                                         "exception_traceback": "Traceback...\nAgentTimeoutError: 120 s",
                                         "occurred_at": "2025-11-01T10:02:00"}, trajectory)
    _trial(job, "hello-world__b", 1.0)
    _trial(job, "hello-world__c", None, {"exception_type": "RuntimeError", "exception_message": "docker",
                                         "exception_traceback": "tb", "occurred_at": "2025-11-01T10:02:00"})
    (job / "result.json").write_text(json.dumps({"id": "j", "started_at": "2025-11-01T10:00:00", "n_total_trials": 4,
                                                 "stats": {"n_trials": 3, "n_errors": 2, "evals": {
                                                     "terminus-2__gpt-4o__demo": {"metrics": [{"mean": 1 / 3}]}}}}))
    result, card = run_import("atif", [job], tmp_path / "c")
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    assert eps["hello-world__a"]["status"] == "timeout" and eps["hello-world__a"]["error_type"] == "AgentTimeoutError"
    assert eps["hello-world__a"]["n_steps"] > 0 and eps["hello-world__a"]["input_tokens"] == 982
    assert eps["hello-world__c"]["status"] == "error" and eps["hello-world__c"]["score.reward"] is None
    assert eps["hello-world__b"]["agent"] == "terminus-2/gpt-4o"
    (rule,) = result.rules
    assert rule["reported"][0]["value"] == pytest.approx(1 / 3)  # Harbor's Mean: unscored trials count 0
    missing = [d for d in card.manifest.drops if d.loss_class == "interrupted_run"]
    assert missing and missing[0].count == 1
    assert_valid(tmp_path / "c")


def test_copied_context_of_a_sub_agent_is_not_repeated(tmp_path):
    # Harbor's summarization sub-agents start with the conversation they were handed (is_copied_context)
    path = external(SUMMARIZATION)
    _r, card = run_import("atif", [path], tmp_path / "c")
    steps = card.steps().to_pylist()
    subs = {json.loads(p.read_text())["agent"]["name"]: json.loads(p.read_text())
            for p in path.parent.glob("*summarization-1-*.json")}
    for begin in (s for s in steps if s["kind"] == "span_begin"):
        raw = subs[begin["name"]]["steps"]
        copied = [x for x in raw if x.get("is_copied_context")]
        own = [s for s in steps if s["parent_seq"] == begin["seq"] and s["kind"] == "message"]
        assert json.loads(begin["payload"]).get("copied_context_steps", 0) == len(copied)
        assert [s["content"] for s in own] == [x["message"] for x in raw if not x.get("is_copied_context")]
    total = sum(1 for sub in subs.values() for x in sub["steps"] if x.get("is_copied_context"))
    (drop,) = [d for d in card.manifest.drops if d.loss_class == "copied_context"]
    assert total and drop.count == total
    assert_valid(tmp_path / "c")


def test_a_linear_history_continuation_is_appended_once_with_its_cumulative_tokens(tmp_path):
    # terminus-2 with linear_history: trajectory.json, then trajectory.cont-1.json repeating the
    # conversation so far (is_copied_context, no metrics) before its own steps; final_metrics cumulative
    def step(i, source, text, copied=False, tokens=None):
        s = {"step_id": i, "source": source, "message": text}
        if copied:
            s["is_copied_context"] = True
        if tokens:
            s["metrics"] = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
        return s

    first = [step(1, "user", "task"), step(2, "agent", "a1", tokens=(60, 6)), step(3, "agent", "a2", tokens=(40, 4))]
    second = [step(1, "user", "task", True), step(2, "agent", "a1", True), step(3, "agent", "a2", True),
              step(4, "user", "handoff"), step(5, "agent", "a3", tokens=(150, 20))]
    d = tmp_path / "agent"
    d.mkdir()
    (d / "trajectory.json").write_text(json.dumps(_traj(first, schema_version="ATIF-v1.6", final_metrics={
        "total_prompt_tokens": 100, "total_completion_tokens": 10}, continued_trajectory_ref="trajectory.cont-1.json")))
    (d / "trajectory.cont-1.json").write_text(json.dumps(_traj(second, schema_version="ATIF-v1.6", final_metrics={
        "total_prompt_tokens": 250, "total_completion_tokens": 30})))
    _r, card = run_import("atif", [d / "trajectory.json"], tmp_path / "c")
    contents = card.steps(columns=["content"]).column("content").to_pylist()
    assert contents == [x["message"] for x in first + second if not x.get("is_copied_context")]
    (ep,) = card.episodes().to_pylist()
    assert (ep["input_tokens"], ep["output_tokens"]) == (250, 30)  # the last file's, cumulative
    (drop,) = [d for d in card.manifest.drops if d.loss_class == "copied_context"]
    assert drop.count == 3
    assert_valid(tmp_path / "c")


def test_a_v16_ref_by_session_id_only_is_an_empty_declared_span(tmp_path):
    # ATIF <= v1.6 (harbor models/trajectories/subagent_trajectory_ref.py @22dafa68): session_id is the
    # ref's only required field; the sub-agent's trajectory need not be in the source
    doc = _traj([{"step_id": 1, "source": "agent", "message": "", "tool_calls": [
        {"tool_call_id": "c1", "function_name": "task", "arguments": {"prompt": "look"}}],
        "observation": {"results": [{"source_call_id": "c1", "content": "found it",
                                     "subagent_trajectory_ref": [{"session_id": "sub-7"}]}]}}],
        schema_version="ATIF-v1.6")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    _r, card = run_import("atif", [path], tmp_path / "c")
    rows = card.steps(columns=["kind", "name", "payload"]).to_pylist()
    assert [r["kind"] for r in rows] == ["tool_call", "tool_result", "span_begin", "span_end"]
    assert rows[2]["name"] == "sub-7" and json.loads(rows[2]["payload"])["ref"] == {"session_id": "sub-7"}
    (drop,) = [d for d in card.manifest.drops if d.loss_class == "missing_trajectory"]
    assert drop.count == 1 and drop.target == "steps"
    assert_valid(tmp_path / "c")


def test_a_ref_whose_trajectory_path_file_is_absent_is_an_empty_declared_span(tmp_path):
    """Harbor's terminus-2 golden `hello-world-context-summarization-linear-history.trajectory.json`
    (harbor tests/golden/terminus_2, as copied in sachiny0106/Xelron @6cb22d12) refs three summarization
    sub-agents by session_id + trajectory_path, and no such file was saved beside it: Harbor's Trajectory
    model accepts it (refs are not resolved). The import declares them instead of refusing the file.
    Its continuation is saved under the golden prefix (`<name>.trajectory.cont-1.json` for the ref
    `trajectory.cont-1.json`) with the episode's session_id, and is found by it."""
    refs = [{"session_id": f"s-{n}", "trajectory_path": f"trajectory.summarization-1-{n}.json",
             "extra": {"summary": n}} for n in ("summary", "questions", "answers")]
    doc = _traj([{"step_id": 1, "source": "user", "message": "go"},
                 {"step_id": 2, "source": "system", "message": "summarized",
                  "observation": {"results": [{"subagent_trajectory_ref": refs}]}}], schema_version="ATIF-v1.6",
                continued_trajectory_ref="trajectory.cont-1.json")
    path = tmp_path / "golden.trajectory.json"
    path.write_text(json.dumps(doc))
    cont = _traj([{"step_id": 1, "source": "user", "message": "go", "is_copied_context": True},
                  {"step_id": 2, "source": "agent", "message": "after"}], schema_version="ATIF-v1.6")
    (tmp_path / "golden.trajectory.cont-1.json").write_text(json.dumps(cont))
    _r, card = run_import("atif", [path], tmp_path / "c")
    rows = card.steps(columns=["kind", "name", "payload", "content"]).to_pylist()
    assert rows[-1]["content"] == "after"
    spans = [r for r in rows if r["kind"] == "span_begin"]
    assert [r["name"] for r in spans] == [ref["session_id"] for ref in refs]
    assert [json.loads(r["payload"])["ref"] for r in spans] == refs
    assert sum(r["kind"] == "span_end" for r in rows) == len(refs)
    (drop,) = [d for d in card.manifest.drops if d.loss_class == "missing_trajectory"]
    assert drop.count == len(refs) and drop.target == "steps"
    assert_valid(tmp_path / "c")


def test_a_v17_root_without_session_id_is_named_by_its_trajectory_id(tmp_path):
    doc = {"schema_version": "ATIF-v1.7", "trajectory_id": "traj-root-1", "agent": {"name": "a", "version": "1"},
           "steps": [{"step_id": 1, "source": "user", "message": "hi"}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    _r, card = run_import("atif", [path], tmp_path / "c")
    assert card.episodes(columns=["episode_id"]).column("episode_id").to_pylist() == ["traj-root-1"]
    assert_valid(tmp_path / "c")
