"""The one call-id rule (io/call_ids.py), used by CardWriter and by every importer's StepBuffer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import SourceFormatError, WriterError
from rollout_cards.importers.steps import StepBuffer
from rollout_cards.io.call_ids import CallIds, with_source_call_id
from rollout_cards.tables import STEP_COLUMNS
from tests.conftest import external


def _store(ids: CallIds, source: str) -> str:
    stored = ids.stored_id(source)
    ids.add(source, stored)
    return stored


def test_an_id_reused_four_times_gets_four_distinct_stored_ids():
    """The importers' old rule gave call_0, call_0#2, call_0#3, call_0#2 (a duplicate)."""
    ids = CallIds()
    assert [_store(ids, "call_0") for _ in range(5)] == ["call_0", "call_0#2", "call_0#3", "call_0#4", "call_0#5"]
    assert ids.reused == 4 and ids.result_id("call_0") == "call_0#5"


def test_a_source_id_that_looks_like_a_suffix_does_not_collide():
    ids = CallIds()
    assert [_store(ids, s) for s in ("c", "c#2", "c", "c#2")] == ["c", "c#2", "c#3", "c#2#2"]
    assert ids.result_id("c") == "c#3" and ids.result_id("c#2") == "c#2#2" and ids.result_id("x") is None


@given(st.lists(st.sampled_from(["a", "a#2", "a#3", "b", "a#2#2", "#", "a#"]), max_size=40))
def test_stored_ids_are_unique_and_results_pair_with_the_latest_call(sources):
    ids = CallIds()
    stored = [_store(ids, s) for s in sources]
    assert len(set(stored)) == len(stored)
    for s in set(sources):  # plain Python: the latest call with the source id
        assert ids.result_id(s) == stored[len(sources) - 1 - sources[::-1].index(s)]
    assert ids.reused == len(sources) - len(set(sources))


def test_source_id_is_kept_in_the_payload():
    assert with_source_call_id(None, "c") == {"source_call_id": "c"}
    assert with_source_call_id('{"k": 1}', "c") == {"k": 1, "source_call_id": "c"}
    with pytest.raises(ValueError, match="JSON object"):
        with_source_call_id([1], "c")
    with pytest.raises(ValueError, match="source call id is 'c'"):
        with_source_call_id({"source_call_id": "d"}, "c")


def test_importers_store_a_fourfold_reused_id_uniquely():
    steps = StepBuffer("e", file="f.json", record="0")
    for i in range(4):
        steps.tool_call("f", "{}", "call_0")
        steps.tool_result("call_0", f"r{i}")
    names = [c.name for c in STEP_COLUMNS]
    stored = [row[names.index("call_id")] for row in steps.rows]
    assert stored == ["call_0", "call_0", "call_0#2", "call_0#2", "call_0#3", "call_0#3", "call_0#4", "call_0#4"]
    assert steps.reused_call_ids == 3
    assert json.loads(steps.rows[2][names.index("payload")]) == {"source_call_id": "call_0"}
    with pytest.raises(SourceFormatError, match="JSON object"):
        steps.tool_call("f", "{}", "call_0", payload=[1])


def test_the_writer_accepts_reused_ids(tmp_path):
    with rc.CardWriter(tmp_path / "c", id="r", title="R", timestamps=False) as card, \
            card.episode(task_id="t", agent="a") as ep:
        for i in range(4):
            assert ep.tool_call("f", {"i": i}, call_id="c1") == "c1"
            ep.tool_result("c1", f"r{i}")
        with pytest.raises(WriterError, match="JSON object"):
            ep.tool_call("f", call_id="c1", payload=[1])
        ep.tool_call("f", call_id="c1", payload={"k": 1})
    steps = rc.open(tmp_path / "c").steps().to_pylist()
    assert [s["call_id"] for s in steps] == ["c1", "c1", "c1#2", "c1#2", "c1#3", "c1#3", "c1#4", "c1#4", "c1#5"]
    assert steps[0]["payload"] is None
    assert [json.loads(s["payload"]) for s in steps[2:4]] == [{"source_call_id": "c1"}] * 2
    assert json.loads(steps[-1]["payload"]) == {"k": 1, "source_call_id": "c1"}
    assert CliRunner().invoke(app, ["validate", str(tmp_path / "c")]).exit_code == 0


def test_a_tau_bench_trace_with_reused_ids_writes_through_the_writer(tmp_path):
    """49 of the 200 GPT-4o airline episodes reuse a tool-call id; the writer raised on them."""
    source = json.loads(external("tau-bench/gpt-4o-airline.json").read_text())
    path = tmp_path / "tau"
    with rc.CardWriter(path, id="tau", title="tau-bench airline", timestamps=False) as card:
        for k, record in enumerate(source):
            with card.episode(task_id=str(record["task_id"]), agent="gpt-4o", trial=record["trial"],
                              episode_id=f"ep{k}") as ep:
                for m in record["traj"]:
                    if m["role"] == "tool":
                        ep.tool_result(m["tool_call_id"], m["content"])
                    else:
                        ep.message(m["role"], m.get("content"))
                    for call in m.get("tool_calls") or []:
                        ep.tool_call(call["function"]["name"], call["function"]["arguments"], call_id=call["id"])
                ep.score("reward", float(record["reward"]))
    assert CliRunner().invoke(app, ["validate", str(path)]).exit_code == 0
    steps = rc.open(path).steps(columns=["episode_id", "kind", "call_id", "payload"]).to_pylist()
    reusing = 0
    for k, record in enumerate(source):
        # Plain Python over the source: the calls in order, and each result's latest call.
        calls, expected_results = [], []
        for m in record["traj"]:
            if m["role"] == "tool":
                expected_results.append(max(i for i, c in enumerate(calls) if c == m["tool_call_id"]))
            calls += [c["id"] for c in m.get("tool_calls") or []]
        reusing += len(set(calls)) < len(calls)
        mine = [s for s in steps if s["episode_id"] == f"ep{k}"]
        stored = [s["call_id"] for s in mine if s["kind"] == "tool_call"]
        kept = [json.loads(s["payload"])["source_call_id"] if s["payload"] else s["call_id"]
                for s in mine if s["kind"] == "tool_call"]
        assert len(set(stored)) == len(stored) and kept == calls
        results = [s["call_id"] for s in mine if s["kind"] == "tool_result"]
        assert results == [stored[i] for i in expected_results]
    assert reusing == 49
