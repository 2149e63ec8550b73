"""Inspect sub-agents (handoff, as_tool, subtask, a tool that calls a model) nest their steps;
so do the events an older log's `subtask` event, or tool event with an `agent`, holds itself.

The logs are written by inspect-ai's own eval() (tests/importers/inspect_runs.py:run_nested);
each step's depth, agent and launching span are compared with a plain-Python walk over the
log's span tree (read by Inspect's read_eval_log), and the model calls' depths with Inspect's
own agent timeline (`inspect_ai.event.timeline_build`)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="the Inspect nesting tests need the `inspect` extra (inspect-ai)")

from inspect_ai.event import timeline_build  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

import rollout_cards as rc  # noqa: E402
from tests.conftest import external  # noqa: E402
from tests.importers.conftest import assert_valid, run_import  # noqa: E402
from tests.importers.inspect_runs import old_subtasks, old_tool_agents, run_nested  # noqa: E402


@pytest.fixture(scope="module", params=["eval", "json"])
def logs(request, tmp_path_factory):
    return request.param, run_nested(tmp_path_factory.mktemp(f"nest-{request.param}"), request.param)


def _events(path: Path) -> list[list[dict]]:
    return [[e.model_dump(mode="json", exclude_none=True) for e in s.events] for s in read_eval_log(str(path)).samples]


def _reference(events: list[dict]) -> dict[str, tuple[int, str | None, str | None]]:
    """{event uuid (older logs: index): (depth, uuid of the launching span_begin or None, agent)}
    by walking each event's span ancestry (parent_id links) over the whole log."""
    begins = {e["id"]: e for e in events if e["event"] == "span_begin"}

    def ancestry(span_id):  # innermost first
        out = []
        while span_id is not None:
            out.append(begins[span_id])
            span_id = begins[span_id].get("parent_id")
        return out

    def owner(e):
        if e["event"] == "span_begin":
            return e.get("parent_id")
        if e["event"] == "span_end":
            return begins[e["id"]].get("parent_id")
        return e.get("span_id")

    with_model = {s["id"] for e in events if e["event"] == "model" for s in ancestry(e["span_id"])}
    with_agent = {s["id"] for b in begins.values() if b.get("type") in ("agent", "subtask")
                  for s in ancestry(b.get("parent_id"))}

    def sub_agent(span):
        above = ancestry(span.get("parent_id"))
        return (span["type"] == "subtask"
                or (span["type"] == "agent" and any(a["type"] in ("tool", "handoff", "agent", "subtask") for a in above))
                or (span["type"] == "tool" and span["id"] in with_model and span["id"] not in with_agent))

    out = {}
    for i, e in enumerate(events):
        chain = ancestry(owner(e))
        subs = [s for s in chain if sub_agent(s)]
        named = [s for s in chain if sub_agent(s) or s["type"] == "agent"]
        out[e.get("uuid", i)] = (len(subs), subs[0].get("uuid") if subs else None, named[0]["name"] if named else None)
    return out


def _inspect_depths(events: list[dict], path: Path, index: int) -> dict[str, int]:
    """{model event uuid: depth} in Inspect's own agent timeline (the root agent is depth 0)."""
    sample = read_eval_log(str(path)).samples[index]
    out: dict[str, int] = {}

    def walk(span, depth):
        for item in span.content:
            if hasattr(item, "content"):
                walk(item, depth + (item.span_type == "agent"))
            elif item.event.event == "model":
                out[item.event.uuid] = depth

    walk(timeline_build(sample.events).root, 0)
    return out


def _uuid(step) -> str | None:
    try:
        payload = json.loads(step["payload"]) if step["payload"] else None
    except ValueError:
        return None
    return payload.get("uuid") if isinstance(payload, dict) and "event" in payload else None


def test_sub_agent_steps_have_the_depth_agent_and_launching_span_of_the_log(logs, tmp_path):
    fmt, paths = logs
    for label, path in paths.items():
        result, card = run_import("inspect", [path], tmp_path / label)
        assert_valid(result.path)
        steps = card.steps().to_pylist()
        samples = _events(path)
        episodes = sorted({s["episode_id"] for s in steps})
        assert len(episodes) == len(samples) == 2
        for index, (episode, events) in enumerate(zip(episodes, samples, strict=True)):
            mine = [s for s in steps if s["episode_id"] == episode]
            by_seq = {s["seq"]: s for s in mine}
            ref = _reference(events)
            seen = set()
            for s in mine:
                uuid = _uuid(s)
                if uuid is None:
                    continue
                seen.add(uuid)
                depth, parent, agent = ref[uuid]
                assert (s["depth"], s["agent"]) == (depth, agent), (label, s["seq"], s["kind"], s["name"])
                assert (None if s["parent_seq"] is None else _uuid(by_seq[s["parent_seq"]])) == parent
            assert seen == set(ref), (label, "every event is a step")
            # results sit with their calls; a model call's input messages with the call
            calls = {s["call_id"]: s for s in mine if s["kind"] == "tool_call"}
            for s in mine:
                if s["kind"] == "tool_result":
                    assert (s["depth"], s["agent"]) == (calls[s["call_id"]]["depth"], calls[s["call_id"]]["agent"])
                elif _uuid(s) is None and s["kind"] == "message":
                    call = next(t for t in mine[s["seq"] - mine[0]["seq"]:] if _uuid(t) is not None)
                    assert (s["depth"], s["parent_seq"]) == (call["depth"], call["parent_seq"]), s["content"]
            models = {_uuid(s): s["depth"] for s in mine if s["kind"] == "message" and _uuid(s) is not None}
            assert {u: models[u] for u in _inspect_depths(events, path, index)} == _inspect_depths(events, path, index)
            # the run launches sub-agents at depth 1 and one (leaf, inside calc) at depth 2
            assert {d for d, _p, _a in ref.values()} == {0, 1, 2}
            assert {a for d, _p, a in ref.values() if d} == {"researcher", "calc", "leaf", "fetch_value", "summarize"}
            assert {a for d, _p, a in ref.values() if not d} == ({None, "main"} if label == "react" else {None})


def test_a_rule_selects_the_top_level_agents_calls_by_depth(logs, tmp_path):
    fmt, paths = logs
    path = paths["react"]
    result, card = run_import("inspect", [path], tmp_path / "c")
    rule = tmp_path / "r.yaml"
    rule.write_text("rule: t.top\nfeatures:\n  top: {where: \"kind == 'tool_call' and coalesce(depth, 0) == 0\", "
                    "agg: count}\n  sub: {where: \"kind == 'tool_call' and depth > 0\", agg: count}\n"
                    "score: \"top * 100 + sub\"\n")
    [run] = [r for r in rc.rescore(card, str(rule)).runs if r.rule == "t.top"]
    per_sample = []
    for events in _events(path):
        ref = _reference(events)
        tools = [ref[e["uuid"]][0] for e in events if e["event"] == "tool"]
        per_sample.append(100 * sum(1 for d in tools if d == 0) + sum(1 for d in tools if d > 0))
    assert per_sample == [501, 501]  # the 5 calls of the main agent (4 tools + submit); calc's call of leaf
    assert run.results[0].value == sum(per_sample) / len(per_sample)


def test_logs_without_span_ids_nest_by_the_order_of_their_spans(logs, tmp_path):
    """Logs whose events carry no span_id / parent_id: spans nest as they begin and end (a tool
    event, which Inspect writes inside the span of its call, is the caller's): the same nesting
    as from the ids."""
    fmt, paths = logs
    if fmt != "json":
        pytest.skip("one container is enough: the ids are stripped from the .json log")
    source = json.loads(paths["generate"].read_text())
    for sample in source["samples"]:
        for ev in sample["events"]:
            ev.pop("span_id", None)
            ev.pop("parent_id", None)
    stripped = tmp_path / "stripped.json"
    stripped.write_text(json.dumps(source))
    result, card = run_import("inspect", [stripped], tmp_path / "c")
    assert_valid(tmp_path / "c")
    assert not [n for n in result.notes if "clock" in n]
    steps = card.steps().to_pylist()
    refs = {}
    for events in _events(paths["generate"]):
        refs.update(_reference(events))
    by_seq = {(s["episode_id"], s["seq"]): s for s in steps}
    mine = {_uuid(s): s for s in steps if _uuid(s) is not None}
    assert set(mine) == set(refs)
    for uuid, s in mine.items():
        depth, parent, agent = refs[uuid]
        assert (s["depth"], s["agent"]) == (depth, agent), (s["kind"], s["name"])
        assert (None if s["parent_seq"] is None else _uuid(by_seq[(s["episode_id"], s["parent_seq"])])) == parent


def test_a_step_timed_before_its_sub_agents_span_hangs_under_the_enclosing_agent(logs, tmp_path):
    """A clock that ran back: a model call inside the leaf agent (depth 2) stamped before the leaf's
    span began. Its step cannot follow its parent step in time order, so it hangs under calc
    (depth 1), and the import says so; the card validates."""
    fmt, paths = logs
    if fmt != "json":
        pytest.skip("one container is enough: the .json log is edited")
    source = json.loads(paths["generate"].read_text())
    events = source["samples"][0]["events"]
    leaf = next(e for e in events if e["event"] == "span_begin" and e["name"] == "leaf" and e["type"] == "agent")
    call = next(e for e in events if e["event"] == "model" and e["span_id"] == leaf["id"])
    calc = next(e for e in events if e["event"] == "span_begin" and e["name"] == "calc" and e["type"] == "agent")
    call["timestamp"] = calc["timestamp"]  # after calc began, before leaf did
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(source))
    result, card = run_import("inspect", [edited], tmp_path / "c")
    assert_valid(tmp_path / "c")
    steps = card.steps().to_pylist()
    [step] = [s for s in steps if _uuid(s) == call["uuid"]]
    moved = [s for s in steps if s["episode_id"] == step["episode_id"] and s["t"] == step["t"] and s["depth"] == 1
             and s["agent"] == "calc" and s["kind"] == "message"]  # the call and its input message ("1+1")
    assert [s["content"] for s in moved] == ["1+1", step["content"]]
    assert f"{len(moved)} step(s) are timed before the span_begin of the sub-agent" in " ".join(result.notes)
    [parent] = [s for s in steps if s["episode_id"] == step["episode_id"] and s["seq"] == step["parent_seq"]]
    assert (step["depth"], step["agent"], _uuid(parent)) == (1, "calc", calc["uuid"])


def test_real_logs_have_no_sub_agents_and_every_step_at_depth_0(tmp_path):
    """None of the real logs launches a sub-agent (no agent or subtask span, no tool span with a
    model call inside): every event step is at depth 0 with no parent."""
    root = external("inspect")
    paths = sorted(p for p in root.rglob("*") if p.suffix in (".eval", ".json"))
    assert len(paths) >= 13
    for i, path in enumerate(paths):
        result, card = run_import("inspect", [path], tmp_path / f"c{i}")
        steps = card.steps(columns=["depth", "parent_seq", "agent", "kind", "name"]).to_pylist()
        for events in _events(path):
            if any(e["event"] == "span_begin" for e in events):
                assert {d for d, _p, _a in _reference(events).values()} == {0}, path.name
        assert {s["parent_seq"] for s in steps} == {None} and {s["agent"] for s in steps} == {None}, path.name
        assert {s["depth"] for s in steps} <= {0, None}, path.name
        assert {s["depth"] for s in steps if s["kind"] != "error" or s["name"] != "error_retry"} <= {0}, path.name


def test_an_older_subtask_events_own_events_nest_under_its_span(logs, tmp_path):
    """Older Inspect logs kept a subtask's events in the `subtask` event's own `events` list
    (tests/importers/inspect_runs.py:old_subtasks writes the run so, with Inspect's own
    write_eval_log). The subtask event becomes the span_begin of a sub-agent and its events
    the steps inside it: each event's depth and agent are those the plain-Python walk gives for
    the same event in the log as Inspect writes it now, its parent the subtask event's step; the
    span ends at the subtask's completion; the card validates."""
    fmt, paths = logs
    for label, path in paths.items():
        old = old_subtasks(path, tmp_path / f"old-{label}.{fmt}")
        result, card = run_import("inspect", [old], tmp_path / label)
        assert_valid(result.path)
        steps = card.steps().to_pylist()
        new = {e.get("uuid"): e for events in _events(path) for e in events}
        refs = {}
        for events in _events(path):
            refs.update(_reference(events))
        subtask_events = {}  # uuid of the subtask event -> uuid of its span's span_begin (today's log)
        for events in _events(old):
            for e in events:
                if e["event"] == "subtask":
                    [begin] = [b for b in new.values() if b["event"] == "span_begin" and b.get("type") == "subtask"
                               and b.get("name") == e["name"] and b["timestamp"] <= e["timestamp"]
                               and b.get("id") == new[e["uuid"]]["span_id"]]
                    subtask_events[e["uuid"]] = begin["uuid"]
                    assert e["events"], "the derived log holds the subtask's events in the event"
        assert len(subtask_events) == 2  # one per sample
        launched = {v: k for k, v in subtask_events.items()}
        by_seq = {(s["episode_id"], s["seq"]): s for s in steps}
        nested = 0
        for s in steps:
            uuid = _uuid(s)
            if uuid is None:
                continue
            depth, parent, agent = refs[subtask_events.get(uuid, uuid)]  # the subtask event stands for its span
            parent = launched.get(parent, parent)
            assert (s["depth"], s["agent"]) == (depth, agent), (label, s["seq"], s["kind"], s["name"])
            assert (None if s["parent_seq"] is None else _uuid(by_seq[(s["episode_id"], s["parent_seq"])])) == parent
            if parent in subtask_events:
                nested += 1
                assert (s["depth"], s["agent"]) == (1, "fetch_value")
            if uuid in subtask_events:
                assert (s["kind"], s["name"]) == ("span_begin", "fetch_value")
                assert "events" not in json.loads(s["payload"])  # they are steps of their own
        assert nested == 2  # the subtask's model call, in each sample
        for uuid in subtask_events:  # the span ends when the subtask completed, at the subtask's own level
            [begin] = [s for s in steps if _uuid(s) == uuid]
            ends = [s for s in steps if s["episode_id"] == begin["episode_id"] and s["kind"] == "span_end"
                    and s["name"] == "fetch_value"]
            assert len(ends) == 1 and ends[0]["seq"] > begin["seq"]
            assert (ends[0]["depth"], ends[0]["agent"], ends[0]["parent_seq"]) == (
                begin["depth"], begin["agent"], begin["parent_seq"])
            completed = json.loads(begin["payload"])["completed"]
            assert ends[0]["t"] == datetime.fromisoformat(completed)
        # the steps of the log written today, less one per subtask (its span_begin, span_end and annotation: 2)
        today, _ = run_import("inspect", [path], tmp_path / f"today-{label}")
        assert result.steps == today.steps - len(subtask_events)


def test_an_older_tool_events_own_agent_events_nest_under_its_call(logs, tmp_path):
    """Older Inspect logs kept the events of an agent a tool ran (as_tool, handoff) in the tool
    event's own `events`, naming it in `agent` (tests/importers/inspect_runs.py:old_tool_agents
    writes the run so, with Inspect's own write_eval_log). The tool_call step launches a sub-agent
    whose steps are those events: each event's depth and agent are those the plain-Python walk
    gives for the same event in the log as Inspect writes it now, its parent the tool event's
    call step where today it is the agent span's span_begin; the card validates."""
    fmt, paths = logs
    for label, path in paths.items():
        old, launched = old_tool_agents(path, tmp_path / f"old-tools-{label}.{fmt}")
        result, card = run_import("inspect", [old], tmp_path / label)
        assert_valid(result.path)
        steps = card.steps().to_pylist()
        refs = {}
        for events in _events(path):
            refs.update(_reference(events))
        today = {e["uuid"]: e for events in _events(path) for e in events}
        held = [e for events in _events(old) for e in events if e["event"] == "tool" and e.get("events")]
        assert held and all(e["agent"] for e in held), "the derived log holds the agents' events in tool events"
        assert {today[u]["name"] for u in launched} >= {"calc", "leaf"}  # as_tool agents, one nested in the other
        by_seq = {(s["episode_id"], s["seq"]): s for s in steps}
        nested = 0
        for s in steps:
            uuid = _uuid(s)
            if uuid is None:
                continue
            depth, parent, agent = refs[uuid]
            parent = launched.get(parent, parent)
            assert (s["depth"], s["agent"]) == (depth, agent), (label, s["seq"], s["kind"], s["name"])
            assert (None if s["parent_seq"] is None else _uuid(by_seq[(s["episode_id"], s["parent_seq"])])) == parent
            nested += parent in launched.values()
            if uuid in launched.values() and s["kind"] == "tool_call":
                assert "events" not in json.loads(s["payload"])  # they are steps of their own
        assert nested >= 2 * len(launched)  # each agent's model calls at least
        # the steps of the log written today, less each agent span's span_begin and span_end
        now, _ = run_import("inspect", [path], tmp_path / f"today-tools-{label}")
        assert result.steps == now.steps - 2 * len(launched)


def test_an_error_in_an_older_subtasks_own_events_names_its_place(tmp_path):
    """A bad timestamp inside an older subtask's events: the error names events[i].events[j]."""
    from rollout_cards.errors import SourceFormatError
    from rollout_cards.importers import import_source

    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "m", "task_id": "x"},
           "samples": [{"id": 1, "epoch": 1, "input": "q", "target": "a", "events": [
               {"event": "info", "timestamp": "2024-05-01T10:00:00+00:00", "data": "start"},
               {"event": "subtask", "name": "look", "input": {}, "timestamp": "2024-05-01T10:00:01+00:00",
                "completed": "2024-05-01T10:00:03+00:00", "events": [
                    {"event": "info", "timestamp": "2024-05-01T10:00:02+00:00", "data": "inside"},
                    {"event": "info", "timestamp": "not a time", "data": "bad"}]}]}]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(log))
    with pytest.raises(SourceFormatError) as info:
        import_source("inspect", [path], tmp_path / "c")
    assert "events[1].events[1]" in str(info.value) and "not a time" in str(info.value)
    log["samples"][0]["events"][1]["events"][1]["timestamp"] = "2024-05-01T10:00:02.5+00:00"
    path.write_text(json.dumps(log))
    result = import_source("inspect", [path], tmp_path / "c")
    steps = rc.open(result.path).steps().to_pylist()
    assert [(s["kind"], s["name"], s["depth"], s["agent"], s["parent_seq"]) for s in steps] == [
        ("annotation", "info", 0, None, None), ("span_begin", "look", 0, None, None),
        ("annotation", "info", 1, "look", 1), ("annotation", "info", 1, "look", 1),
        ("span_end", "look", 0, None, None)]
