from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.steps import StepBuffer, parse_timestamp


def _buffer() -> StepBuffer:
    return StepBuffer("ep", file="src.json", record="7")


def test_seq_is_contiguous_and_payload_is_json_text():
    steps = _buffer()
    assert steps.add("message", role="user", content="hi") == 0
    assert steps.add("state", payload={"b": 1, "a": [1, 2]}) == 1
    assert [r[1] for r in steps.rows] == [0, 1]
    assert json.loads(steps.rows[1][14]) == {"a": [1, 2], "b": 1}


def test_result_links_to_its_call():
    steps = _buffer()
    steps.tool_call("search", '{"q": 1}', "c1")
    steps.tool_result("c1", "found")
    assert [(r[2], r[7]) for r in steps.rows] == [("tool_call", "c1"), ("tool_result", "c1")]


def test_a_result_whose_call_is_not_in_the_record_is_kept_as_a_tool_message():
    steps = _buffer()
    steps.tool_call("lookup", "{}", "c1")
    steps.tool_result("ghost", "x", is_error=True)
    steps.tool_result("c1", "y")
    kinds = [(r[2], r[4], r[7], r[8], r[10]) for r in steps.rows]
    assert kinds == [("tool_call", None, "c1", None, None), ("message", "tool", None, "x", True),
                     ("tool_result", None, "c1", "y", None)]
    assert json.loads(steps.rows[1][14]) == {"source_call_id": "ghost"}
    assert steps.orphan_results == 1


def test_a_reused_call_id_gets_a_suffix_and_results_follow_the_latest_call():
    steps = _buffer()
    steps.tool_call("a", None, "c")
    steps.tool_result("c", "1")
    steps.tool_call("b", None, "c")
    steps.tool_result("c", "2")
    steps.tool_call("d", None, "c")
    assert [r[7] for r in steps.rows] == ["c", "c", "c#2", "c#2", "c#3"]
    assert json.loads(steps.rows[2][14]) == {"source_call_id": "c"}
    assert json.loads(steps.rows[3][14]) == {"source_call_id": "c"}
    assert steps.reused_call_ids == 2


def test_a_suffix_never_collides_with_a_real_id():
    steps = _buffer()
    steps.tool_call("a", None, "c#2")
    steps.tool_call("a", None, "c")
    steps.tool_call("a", None, "c")
    assert [r[7] for r in steps.rows] == ["c#2", "c", "c#3"]


@pytest.mark.parametrize(("field", "value"), [("input_tokens", -1), ("output_tokens", 1.5), ("cost_usd", float("nan"))])
def test_bad_counts_are_source_errors(field, value):
    with pytest.raises(SourceFormatError):
        _buffer().add("message", **{field: value})


def test_content_must_be_text():
    with pytest.raises(SourceFormatError, match="content is dict"):
        _buffer().add("message", content={"a": 1})


def test_timestamps_keep_their_offset_and_naive_ones_are_refused():
    assert parse_timestamp("1970-01-01T01:00:00+01:00", file="f", record="r") == 0
    assert parse_timestamp("1970-01-01T00:00:01Z", file="f", record="r") == 1_000_000
    assert parse_timestamp(None, file="f", record="r") is None
    with pytest.raises(SourceFormatError, match="no UTC offset"):
        parse_timestamp("2025-01-01T00:00:00", file="f", record="r")
    with pytest.raises(SourceFormatError, match="not ISO 8601"):
        parse_timestamp("yesterday", file="f", record="r")


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5)), timezone(timedelta(minutes=330))])))
def test_parse_timestamp_is_the_writers_microseconds(t):
    from rollout_cards.io.writer import to_micros

    assert parse_timestamp(t.isoformat(), file="f", record=None) == to_micros(t)
