from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.openhands import terminal_state
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

V0 = "openhands/v0_multi_swe_bench/output.jsonl"
V1 = "openhands/v1_sdk_openagentsafety/output.jsonl"


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_v0_history_calls_linked_to_observations_and_max_iterations_is_a_limit(tmp_path):
    path = external(V0)
    lines = _lines(path)
    result, card = run_import("openhands", [path], tmp_path / "c")
    assert result.statuses == {"completed": 2, "limit": 1}
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    for line in lines:
        e = eps[line["instance_id"]]
        assert e["n_steps"] == len(line["history"])  # every event is one step
        usage = line["metrics"]["accumulated_token_usage"]
        assert (e["input_tokens"], e["output_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
        assert e["cost_usd"] is None  # accumulated_cost 0.0 with tokens used: unpriced, declared
        steps = card.steps(filter=f"episode_id == '{line['instance_id']}'").to_pylist()
        caused = {ev["cause"] for ev in line["history"] if "observation" in ev and ev.get("cause") is not None}
        actions = {ev["id"] for ev in line["history"] if "action" in ev and ev["action"] not in ("message", "system")}
        linked = [s for s in steps if s["kind"] == "tool_result"]
        assert len(linked) == len(caused & actions)
        calls = {s["call_id"] for s in steps if s["kind"] == "tool_call"}
        assert all(s["call_id"] in calls for s in linked)
    limited = next(x for x in lines if x["error"])
    assert eps[limited["instance_id"]]["error_message"] == limited["error"]
    assert eps[limited["instance_id"]]["error_type"] == "RuntimeError"
    assert any(d.target == "episodes.cost_usd" for d in card.manifest.drops)
    assert_valid(tmp_path / "c")


def test_v1_sdk_events_and_numeric_test_results(tmp_path):
    path = external(V1)
    lines = _lines(path)
    _result, card = run_import("openhands", [path], tmp_path / "c")
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    for line in lines:
        e = eps[line["instance_id"]]
        assert e["score.final_score.result"] == line["test_result"]["final_score"]["result"]
        steps = card.steps(filter=f"episode_id == '{line['instance_id']}'").to_pylist()
        actions = [ev for ev in line["history"] if ev["kind"] == "ActionEvent"]
        calls = [s for s in steps if s["kind"] == "tool_call"]
        assert [c["call_id"] for c in calls] == [a["tool_call_id"] for a in actions]
        assert [c["args"] for c in calls] == [a["tool_call"]["arguments"] for a in actions]
        results = [s for s in steps if s["kind"] == "tool_result"]
        assert [r["content"] for r in results] == [ev["observation"].get("output", ev["observation"].get("message")) for ev in line["history"]
                                                   if ev["kind"] == "ObservationEvent"]
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize(("error", "status"), [
    (None, "completed"),
    ("RuntimeError: Agent reached maximum iteration in headless mode. Current iteration: 50, max iteration: 50",
     "limit"),
    ("Agent reached maximum budget for conversation.Current budget: 1.02, max budget: 1.00", "limit"),
    ("AgentStuckInLoopError: Agent got stuck in a loop", "error"),
    ("docker: no space left", "error"),
    # the harness's per-instance time limit: V0 evaluation/utils/shared.py, V1 benchmarks evaluation.py
    ("Timeout after 1800 seconds", "timeout"),
    ("Instance failed after 0 retries. Last error: Instance did not complete within 3600s timeout", "timeout"),
    # an LLM API timeout inside the run is an error of the run, not the harness's limit
    ("litellm.Timeout: APITimeoutError - Request timed out", "error"),
    ("Maximum retries (5) reached: Runtime failed to start", "error"),
])
def test_terminal_state(error, status):
    assert terminal_state(error)[0] == status


def test_a_runtime_status_code_is_the_error_type():
    # V0 agent_controller._react_to_exception sets last_error to a RuntimeStatus value
    assert terminal_state("STATUS$ERROR_LLM_OUT_OF_CREDITS") == ("error", "STATUS$ERROR_LLM_OUT_OF_CREDITS")


def test_the_2024_pair_history_and_top_level_git_patch(tmp_path):
    # OpenDevin 2024 (evaluation/swe_bench/run_infer.py @a081935fd8): 'history': [(event_to_dict(action),
    # event_to_dict(obs)) for action, obs in state.history], 'git_patch' beside test_result. Was exit 1
    # ("history[0] is not an object") and the patch was only in meta.record.
    run = {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}, "message": "Running ls"}
    out = {"id": 2, "source": "agent", "cause": 1, "observation": "run", "content": "a.py", "extras": {}}
    msg = {"id": 3, "source": "agent", "action": "message", "args": {"content": "done"}, "message": "done"}
    null = {"message": "No observation", "observation": "null", "content": "", "extras": {}}
    line = {"instance_id": "x__y-1", "swe_instance": {"repo": "x/y"}, "instruction": "fix",
            "git_patch": "diff --git a/a.py b/a.py\n", "metadata": {"agent_class": "CodeActAgent"},
            "history": [[run, out], [msg, null]], "metrics": {"accumulated_cost": 0.5}, "error": None,
            "test_result": {}}
    src = tmp_path / "output.jsonl"
    src.write_text(json.dumps(line) + "\n")
    result, card = run_import("openhands", [src], tmp_path / "c")
    assert_valid(tmp_path / "c")
    steps = card.steps().to_pylist()
    assert [(s["kind"], s["name"]) for s in steps] == [("tool_call", "run"), ("tool_result", "run"),
                                                       ("message", None), ("observation", "null")]
    assert steps[1]["call_id"] == steps[0]["call_id"] and steps[1]["content"] == "a.py"
    row = card.episodes().to_pylist()[0]
    assert (tmp_path / "c" / "artifacts" / row["meta.patch_artifact"]).read_text() == line["git_patch"]
    assert json.loads(row["meta.record"])["swe_instance"] == {"repo": "x/y"}
    assert any("pairs" in n for n in result.notes)


def _opendevin_pairs():
    run = {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}, "message": "Running ls"}
    out = {"id": 2, "source": "agent", "cause": 1, "observation": "run", "content": "a.py", "extras": {}}
    return [[run, out]]


def test_2024_opendevin_benchmark_lines_are_keyed_by_their_own_id_field(tmp_path):
    """OpenDevin's 2024 benchmarks wrote their own dicts before EvalOutput (OpenHands @a9823491
    evaluation/logic_reasoning/run_infer.py: `id`; evaluation/gorilla/run_infer.py @fc7b6bba:
    `question_id`, an int; humanevalfix: `task_id`), each with a history of [action, observation]
    pairs. Their committed outputs (evaluation_outputs/.../ProntoQA/.../output.jsonl, gorilla's
    output_gpt-4o-2024-05-13_tf.jsonl) were refused: "has no instance_id"."""
    lines = [{"id": "ProntoQA_1", "instance": {"answer": "B"}, "instruction": "solve", "history": _opendevin_pairs(),
              "final_message": "'A'", "error": None, "test_result": {"result": False}},
             {"question_id": 7, "text": "<<<api_call>>>", "correct": True, "metadata": {"agent_class": "CodeActAgent"},
              "history": _opendevin_pairs(), "error": None},
             {"task_id": "Python/3", "instruction": "fix", "history": _opendevin_pairs(), "error": None,
              "test_result": {"result": {"pass@1": 1.0}}}]
    src = tmp_path / "output.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result, card = run_import("openhands", [src], tmp_path / "c")
    assert_valid(tmp_path / "c")
    rows = card.episodes().to_pylist()
    expected = [str(x.get("id", x.get("question_id", x.get("task_id")))) for x in lines]
    assert [r["episode_id"] for r in rows] == [r["task_id"] for r in rows] == expected
    assert rows[0]["score.result"] is False and rows[2]["score.result.pass@1"] == 1.0
    assert json.loads(rows[1]["meta.record"]) == {"text": "<<<api_call>>>", "correct": True}
    assert sum("id field" in n for n in result.notes) == 3


@pytest.mark.parametrize(("line", "message"), [
    ({"id": "a", "task_id": "b"}, "it has id, task_id"),
    ({"id": "a", "history": [{"action": "run"}]}, "has no instance_id"),
])
def test_a_line_without_instance_id_is_read_only_in_the_2024_shape(tmp_path, line, message):
    src = tmp_path / "output.jsonl"
    src.write_text(json.dumps({"history": _opendevin_pairs(), **line}) + "\n")
    with pytest.raises(SourceFormatError) as info:
        run_import("openhands", [src], tmp_path / "c")
    assert message in str(info.value) and "line 1" in str(info.value)


def test_v1_attempt_files_are_trials_of_one_instance(tmp_path):
    # V1 iterative runs (benchmarks utils/evaluation.py, iterative.py): output.critic_attempt_<n>.jsonl, each
    # line with `attempt` n; two attempt files of one instance were "episode id occurs twice"
    srcs = []
    for n in (1, 2):
        srcs.append(tmp_path / f"output.critic_attempt_{n}.jsonl")
        srcs[-1].write_text(json.dumps(_sdk_line([], attempt=n, error=None if n == 2 else "x: failed")) + "\n")
    _, card = run_import("openhands", srcs, tmp_path / "c")
    assert_valid(tmp_path / "c")
    rows = sorted(card.episodes().to_pylist(), key=lambda r: r["trial"])
    assert [(r["episode_id"], r["task_id"], r["trial"], r["status"]) for r in rows] == [
        ("i1", "i1", 0, "error"), ("i1/attempt-2", "i1", 1, "completed")]
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(_sdk_line([], attempt=0)) + "\n")
    with pytest.raises(SourceFormatError, match="attempt 0"):
        run_import("openhands", [src], tmp_path / "c2")


def _sdk_line(history, **kw):
    return {"instance_id": "i1", "instruction": "do", "metadata": {"llm": {"model": "m"}}, "history": history,
            "metrics": None, "error": None, "test_result": {}, **kw}


def test_sdk_error_events_messages_and_unknown_kinds(tmp_path):
    history = [
        {"kind": "SystemPromptEvent", "source": "agent", "system_prompt": {"type": "text", "text": "be good"}},
        {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user",
                                                                 "content": [{"type": "text", "text": "hi"}]}},
        {"kind": "ActionEvent", "source": "agent", "tool_name": "bash", "tool_call_id": "c1",
         "tool_call": {"id": "c1", "name": "bash", "arguments": "{\"command\": \"ls\"}"},
         "thought": [{"type": "text", "text": "look"}]},
        {"kind": "AgentErrorEvent", "source": "agent", "tool_call_id": "c1", "error": "bash crashed"},
        {"kind": "PauseEvent", "source": "user"},
    ]
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(_sdk_line(history)) + "\n")
    _r, card = run_import("openhands", [path], tmp_path / "c")
    steps = card.steps(columns=["kind", "role", "content", "is_error", "name"]).to_pylist()
    assert [(s["kind"], s["role"]) for s in steps] == [
        ("message", "system"), ("message", "user"), ("tool_call", "assistant"), ("tool_result", "tool"),
        ("annotation", None)]
    assert steps[2]["content"] == "look" and steps[3]["is_error"] is True and steps[3]["content"] == "bash crashed"
    assert_valid(tmp_path / "c")


_ACT = {"kind": "ActionEvent", "source": "agent", "tool_name": "bash", "tool_call_id": "c1",
        "tool_call": {"id": "c1", "name": "bash", "arguments": "{}"}}
_OBS = {"kind": "ObservationEvent", "source": "environment", "tool_name": "bash", "tool_call_id": "c1",
        "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": "ok"}]}}


def _conv_error(code):
    return {"kind": "ConversationErrorEvent", "source": "environment", "code": code, "detail": f"{code} detail"}


@pytest.mark.parametrize(("tail", "error", "expected"), [
    # the SDK's run loop stops on a run limit or an exception and says so in an event; the V1 harness
    # writes error None (local_conversation.py run(); benchmarks EvalOutput(error=None))
    ([_conv_error("MaxIterationsReached")], None, ("limit", "MaxIterationsReached", "MaxIterationsReached detail")),
    ([_conv_error("MaxBudgetReached"), {"kind": "ConversationStateUpdateEvent", "key": "execution_status",
                                        "value": "error"}], None, ("limit", "MaxBudgetReached",
                                                                   "MaxBudgetReached detail")),
    ([_conv_error("LLMBadRequestError")], None, ("error", "LLMBadRequestError", "LLMBadRequestError detail")),
    ([{"kind": "ConversationStateUpdateEvent", "key": "execution_status", "value": "stuck"}], None,
     ("error", "stuck", None)),
    # the run went on after the error (a new message, an agent action): not its end
    ([_conv_error("MaxIterationsReached"), {"kind": "MessageEvent", "source": "user", "llm_message": {
        "role": "user", "content": [{"type": "text", "text": "continue"}]}}, _ACT, _OBS], None,
     ("completed", None, None)),
    ([{"kind": "ConversationStateUpdateEvent", "key": "execution_status", "value": "finished"}], None,
     ("completed", None, None)),
    # the line's own error wins
    ([_conv_error("MaxIterationsReached")], "RuntimeError: boom", ("error", "RuntimeError", "RuntimeError: boom")),
])
def test_v1_terminal_state_from_the_last_conversation_error(tmp_path, tail, error, expected):
    line = dict(_sdk_line([_ACT, _OBS, *tail]), error=error)
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(line) + "\n")
    _r, card = run_import("openhands", [path], tmp_path / "c")
    [ep] = card.episodes(columns=["status", "error_type", "error_message"]).to_pylist()
    assert ep["status"] == expected[0] and ep["error_type"] == expected[1]
    if expected[2] is not None:
        assert ep["error_message"] == expected[2]
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize(("line", "message"), [
    ('{"instance_id": 5.5, "history": []}', "instance_id 5.5 is not an id"),
    ('{"instance_id": "a", "history": {"x": 1}}', "history is dict"),
    ('{"instance_id": "a", "history": [], "metrics": {"accumulated_token_usage": {"prompt_tokens": 1e999}}}',
     "line 1"),
    ('{"instance_id": "a", "history": [], "metrics": {"accumulated_token_usage": {"prompt_tokens": '
     '99999999999999999999999}}}', "line 1"),
    ('{"instance_id": "a", "history": [{"kind": "ActionEvent", "tool_call_id": 7}]}', "tool_call_id is not text"),
    ('{"instance_id": "a", "history": [', "line 1"),
])
def test_bad_lines_are_located(tmp_path, line, message):
    path = tmp_path / "output.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(SourceFormatError) as info:
        run_import("openhands", [path], tmp_path / "c")
    assert message in str(info.value) and "output.jsonl" in str(info.value)


def test_keep_going_declares_the_skipped_line(tmp_path):
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(_sdk_line([])) + "\n" + '{"instance_id": [1]}\n'
                    + json.dumps(_sdk_line([], instance_id="i2")) + "\n")
    result, card = run_import("openhands", [path], tmp_path / "c", keep_going=True)
    assert result.episodes == 2 and [m.record for m in result.malformed] == ["line 2"]
    assert_valid(tmp_path / "c")


def _ev(id_, source="agent", **fields):
    return {"id": id_, "timestamp": "2025-01-01T00:00:00", "source": source, **fields}


def _delegating_line(instance="d-1", *, nested=True, closed=True):
    """A V0 history as OpenHands' shared event stream has it: the parent delegates to a
    BrowsingAgent, which itself delegates to a ReaderAgent; the parent finishes last."""
    h = [_ev(0, "user", action="message", args={"content": "find the release date"}),
         _ev(1, action="delegate", args={"agent": "BrowsingAgent", "inputs": {"task": "browse"}}),
         _ev(2, action="browse", args={"url": "https://example.org"}),
         _ev(3, "environment", observation="browse", content="<html>", cause=2)]
    if nested:
        h += [_ev(4, action="delegate", args={"agent": "ReaderAgent", "inputs": {"task": "read"}}),
              _ev(5, action="read", args={"path": "notes.txt"}),
              _ev(6, "environment", observation="read", content="2024-05-01", cause=5),
              _ev(7, action="finish", args={"outputs": {"date": "2024-05-01"}}),
              _ev(8, observation="delegate", content="ReaderAgent finishes task with date", cause=4)]
    h += [_ev(9, action="finish", args={"outputs": {"answer": "2024-05-01"}})]
    if closed:
        h += [_ev(10, observation="delegate", content="BrowsingAgent finishes task", extras={"outputs": {}})]
        h += [_ev(11, action="finish", args={"outputs": {"answer": "2024-05-01"}})]
    return {"instance_id": instance, "instruction": "find it", "metadata": {"agent_class": "DelegatorAgent"},
            "history": h, "metrics": None, "error": None}


def test_v0_delegation_nests_the_sub_agents_events_as_spans(tmp_path):
    src = tmp_path / "output.jsonl"
    src.write_text(json.dumps(_delegating_line()) + "\n")
    _result, card = run_import("openhands", [src], tmp_path / "c")
    steps = card.steps(columns=["seq", "kind", "name", "call_id", "parent_seq", "depth", "agent"]).to_pylist()
    by_seq = {s["seq"]: s for s in steps}
    shape = [(s["kind"], s["name"], s["depth"], s["agent"]) for s in steps]
    assert shape == [
        ("message", None, None, None),
        ("tool_call", "delegate", None, None),
        ("span_begin", "BrowsingAgent", None, None),
        ("tool_call", "browse", 1, "BrowsingAgent"),
        ("tool_result", "browse", 1, "BrowsingAgent"),
        ("tool_call", "delegate", 1, "BrowsingAgent"),
        ("span_begin", "ReaderAgent", 1, "BrowsingAgent"),
        ("tool_call", "read", 2, "ReaderAgent"),
        ("tool_result", "read", 2, "ReaderAgent"),
        ("tool_call", "finish", 2, "ReaderAgent"),
        ("span_end", "ReaderAgent", 1, "BrowsingAgent"),
        ("tool_result", "delegate", 1, "BrowsingAgent"),
        ("tool_call", "finish", 1, "BrowsingAgent"),
        ("span_end", "BrowsingAgent", None, None),
        ("tool_result", "delegate", None, None),  # no cause in the source: linked to the open delegation
        ("tool_call", "finish", None, None),
    ]
    # Every nested step hangs under the span of its delegation, one level below it.
    for s in steps:
        if s["depth"]:
            parent = by_seq[s["parent_seq"]]
            assert parent["kind"] == "span_begin" and (parent["depth"] or 0) + 1 == s["depth"]
    results = [s for s in steps if s["kind"] == "tool_result" and s["name"] == "delegate"]
    calls = {s["call_id"]: s for s in steps if s["kind"] == "tool_call" and s["name"] == "delegate"}
    assert {r["call_id"] for r in results} == set(calls)
    assert_valid(tmp_path / "c")
    # A rule selects by nesting: the top-level agent's calls vs the sub-agents' steps.
    rule = tmp_path / "r.yaml"
    rule.write_text('rule: t.top\nfeatures:\n  top: {where: "kind == \'tool_call\' and coalesce(depth, 0) == 0", '
                    'agg: count}\nscore: "top"\n')
    import rollout_cards as rc
    [run] = [r for r in rc.rescore(card, str(rule)).runs if r.rule == "t.top"]
    assert run.results[0].value == 2  # the parent's delegate and finish (the shape above)


def test_a_history_ending_inside_a_delegation_closes_its_span_and_one_without_sub_events_is_declared(tmp_path):
    src = tmp_path / "output.jsonl"
    filtered = _delegating_line("d-2", nested=False)
    filtered["history"] = [e for e in filtered["history"] if e["id"] in (0, 1, 10, 11)]  # the parent's view only
    src.write_text(json.dumps(_delegating_line("d-1", nested=False, closed=False)) + "\n" + json.dumps(filtered) + "\n")
    _result, card = run_import("openhands", [src], tmp_path / "c")
    ends = card.steps(filter="kind == 'span_end'", columns=["episode_id", "payload"]).to_pylist()
    payloads = {e["episode_id"]: json.loads(e["payload"]) for e in ends}
    assert "unclosed" in payloads["d-1"] and payloads["d-1"]["events"] == 3
    assert payloads["d-2"]["events"] == 0 and "unclosed" not in payloads["d-2"]
    [drop] = [d for d in card.manifest.drops if d.target == "steps"]
    assert drop.count == 1 and "sub-agent" in drop.reason
    assert_valid(tmp_path / "c")


def _sub_agent_events(start):
    """A V1 parent's view of its sub-agents, as the software-agent-sdk records it: DelegateTool
    spawn + delegate (tasks as an object, then as JSON text, as models send it at times) and a
    TaskTool call, each with its observation (the sub-agents' own events are elsewhere)."""
    calls = [
        ("delegate", {"kind": "DelegateAction", "command": "spawn", "ids": ["lodging", "sights"]}),
        ("delegate", {"kind": "DelegateAction", "command": "delegate",
                      "tasks": {"lodging": "find hotels", "sights": "list sights"}}),
        ("delegate", {"kind": "DelegateAction", "command": "delegate", "tasks": json.dumps({"lodging": "again"})}),
        ("task", {"kind": "TaskAction", "prompt": "explore the repo", "subagent_type": "code_explorer"}),
    ]
    events = []
    for n, (tool, action) in enumerate(calls, start):
        cid = f"sub{n}"
        args = {k: v for k, v in action.items() if k != "kind"}
        events.append({"kind": "ActionEvent", "source": "agent", "id": f"a{n}", "tool_name": tool,
                       "tool_call_id": cid, "action": action,
                       "tool_call": {"id": cid, "name": tool, "arguments": json.dumps(args)}, "thought": []})
        events.append({"kind": "ObservationEvent", "source": "environment", "id": f"o{n}", "tool_name": tool,
                       "tool_call_id": cid, "observation": {"kind": "DelegateObservation", "content": [
                           {"type": "text", "text": f"Agent lodging: done {n}"}]}})
    return events


def test_v1_sub_agents_are_not_in_the_line_and_are_declared_with_their_count(tmp_path):
    """The real V1 lines with sub-agent calls added: the calls and observations stay the parent's
    steps (depth null, nothing nested) and one drop counts the sub-agent runs whose events the
    line lacks: 2 + 1 (delegate commands' tasks) + 1 (task) per line; spawn runs none."""
    lines = _lines(external(V1))
    for line in lines:
        line["history"] = line["history"] + _sub_agent_events(len(line["history"]))
    src = tmp_path / "output.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    _r, card = run_import("openhands", [src], tmp_path / "c")
    runs = 0
    for line in lines:
        for ev in line["history"]:
            action = ev.get("action") or {}
            if action.get("kind") == "TaskAction":
                runs += 1
            elif action.get("kind") == "DelegateAction" and action["command"] == "delegate":
                tasks = action["tasks"]
                runs += len(json.loads(tasks) if isinstance(tasks, str) else tasks)
    assert runs == 4 * len(lines)
    [drop] = [d for d in card.manifest.drops if d.target == "steps" and "V1 SDK sub-agents" in d.reason]
    assert drop.count == runs and drop.declaration == "source_missing"
    steps = card.steps(columns=["kind", "name", "depth", "parent_seq"]).to_pylist()
    assert sum(1 for s in steps if s["kind"] == "tool_call" and s["name"] in ("delegate", "task")) == 4 * len(lines)
    assert {s["depth"] for s in steps} == {None} and {s["parent_seq"] for s in steps} == {None}
    assert_valid(tmp_path / "c")
    # the real lines alone launch no sub-agent: no such drop
    _r, plain = run_import("openhands", [external(V1)], tmp_path / "p")
    assert not [d for d in plain.manifest.drops if "V1 SDK sub-agents" in d.reason]


def _tree_event(i, parent, text):
    return {"kind": "MessageEvent", "source": "user", "id": f"e{i}", "parent_id": parent,
            "llm_message": {"role": "user", "content": [{"type": "text", "text": text}]}}


@pytest.mark.parametrize(("parents", "forks"), [
    # software-agent-sdk @611629e6 event/base.py parent_id: None (legacy: the event before), an id, "__root__"
    ([None, None, None], 0), ([None, "e0", "e1"], 0),
    ([None, "e0", "e1", "e0"], 1),  # a fork from e0 after e2: a second branch follows the first
    ([None, "e0", "__root__", "e2"], 1),  # a new root (navigate to an empty head)
])
def test_a_v1_conversation_tree_is_declared(tmp_path, parents, forks):
    history = [_tree_event(i, p, f"m{i}") for i, p in enumerate(parents)]
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(_sdk_line(history)) + "\n")
    _r, card = run_import("openhands", [path], tmp_path / "c")
    assert card.steps(columns=["content"]).column("content").to_pylist() == [f"m{i}" for i in range(len(parents))]
    drops = [d for d in card.manifest.drops if d.loss_class == "sequence_information_loss"]
    assert [d.count for d in drops] == ([forks] if forks else [])
    assert_valid(tmp_path / "c")


def _acp(call_id, status, **fields):
    """An ACPToolCallEvent as the SDK's ACPAgent dumps it (openhands/sdk/event/acp_tool_call.py)."""
    return {"kind": "ACPToolCallEvent", "source": "agent", "id": f"{call_id}-{status}", "tool_call_id": call_id,
            "title": "Run ls", "status": status, "tool_kind": "execute", "raw_input": {"command": "ls"},
            "raw_output": None, "content": None, "is_error": status == "failed", **fields}


def test_acp_tool_calls_are_calls_with_results(tmp_path):
    # An ACP agent (Claude Code / Codex / Gemini CLI through the SDK's ACPAgent) reports its tool
    # calls as ACPToolCallEvent, one per update of a call (same tool_call_id, the last authoritative;
    # newer SDKs emit only the ending one). Before, every one was an annotation: no tool_call step.
    history = [
        {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "do"}},
        _acp("a1", "pending"), _acp("a1", "in_progress"),
        _acp("a1", "completed", raw_output="a.py\n", content=[{"type": "content", "content": {"type": "text"}}]),
        _acp("a2", "failed", title="Edit x", tool_kind="edit", raw_input={"path": "x"}, raw_output={"error": "denied"}),
    ]
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(_sdk_line(history)) + "\n")
    _r, card = run_import("openhands", [path], tmp_path / "c")
    assert_valid(tmp_path / "c")
    steps = card.steps(columns=["kind", "role", "name", "call_id", "args", "content", "is_error", "payload"]).to_pylist()
    assert [(s["kind"], s["call_id"]) for s in steps] == [
        ("message", None), ("tool_call", "a1"), ("annotation", None), ("tool_result", "a1"),
        ("tool_call", "a2"), ("tool_result", "a2")]
    call, update, result, call2, result2 = steps[1:]
    assert (call["name"], json.loads(call["args"])) == ("execute", {"command": "ls"})
    assert json.loads(call["payload"])["title"] == "Run ls" and json.loads(update["payload"])["status"] == "in_progress"
    assert (result["content"], result["is_error"]) == ("a.py\n", False)
    assert json.loads(result["payload"])["content"] == history[3]["content"]  # kept, not only raw_output
    assert (call2["name"], result2["is_error"], json.loads(result2["content"])) == ("edit", True, {"error": "denied"})
