from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.steps import StepBuffer, parse_timestamp
from tests.fuzzing import cases, seed


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


# -- StepBuffer.extend: the bulk path is the step-by-step path -------------------------------------
_FIELDS = ("kind", "t", "role", "agent", "name", "call_id", "content", "args", "is_error", "input_tokens",
           "output_tokens", "cost_usd", "payload", "parent_seq", "depth")
_payloads = st.sampled_from([None, '{"a":1}', "[1]", "not json", {"b": [1, None]}, [1, 2], {"x": float("nan")},
                             {"source_call_id": "a"}, {"source_call_id": "zz"}])
_step = st.fixed_dictionaries({
    "kind": st.sampled_from(["message", "tool_call", "tool_call", "tool_result", "tool_result", "state", "bogus"]),
    "t": st.none() | st.integers(0, 10),
    "role": st.sampled_from([None, "assistant", "tool"]),
    "agent": st.sampled_from([None, "sub"]),
    "name": st.sampled_from([None, "search"]),
    "call_id": st.sampled_from([None, "a", "a", "b", "a#2"]),
    "content": st.sampled_from([None, "text", 3]),
    "args": st.sampled_from([None, '{"q":1}']),
    "is_error": st.sampled_from([None, True, False]),
    "input_tokens": st.sampled_from([None, 0, 5, -1, True]),
    "output_tokens": st.sampled_from([None, 7, -2]),
    "cost_usd": st.sampled_from([None, 0.0, 0.5, 2, float("inf"), float("nan"), True]),
    "payload": _payloads,
    "parent_seq": st.none() | st.integers(0, 3),
    "depth": st.sampled_from([None, 0, 1]),
})


def _outcome(steps: StepBuffer, run) -> tuple:
    try:
        run()
        error = None
    except (SourceFormatError, ValueError) as exc:
        error = (type(exc).__name__, str(exc))
    return error, steps.rows, steps.orphan_results, steps.reused_call_ids


def _one_by_one(steps: StepBuffer, specs: list[dict]) -> None:
    for spec in specs:
        fields = dict(spec)
        kind = fields.pop("kind")
        if kind == "tool_call":
            steps.tool_call(fields.pop("name"), fields.pop("args"), fields.pop("call_id"), **fields)
        elif kind == "tool_result":
            steps.tool_result(fields.pop("call_id"), fields.pop("content"), **fields)
        else:
            steps.add(kind, **fields)


@settings(max_examples=cases(300), deadline=None, database=None)
@given(st.lists(_step, max_size=12))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_extend_is_add_tool_call_and_tool_result_step_by_step(specs):
    specs = [s if s["kind"] != "tool_result" or s["call_id"] is not None else {**s, "call_id": "b"} for s in specs]
    calls = [i for i, s in enumerate(specs) if s["kind"] in ("tool_call", "tool_result")]
    columns = [[s[f] for s in specs] for f in _FIELDS]
    one, bulk = _buffer(), _buffer()
    for steps in (one, bulk):  # a step before: seqs and errors count on from it
        steps.tool_call("search", None, "a")
    assert _outcome(bulk, lambda: bulk.extend(columns, calls)) == _outcome(one, lambda: _one_by_one(one, specs))



_valid_step = st.fixed_dictionaries({
    "kind": st.sampled_from(["message", "tool_call", "tool_result", "state"]), "t": st.none() | st.integers(0, 10),
    "role": st.sampled_from([None, "tool"]), "agent": st.sampled_from([None, "sub"]), "name": st.just(None),
    "call_id": st.sampled_from(["a", "b"]), "content": st.sampled_from([None, "text"]), "args": st.just(None),
    "is_error": st.sampled_from([None, True]), "input_tokens": st.sampled_from([None, 5]),
    "output_tokens": st.just(None), "cost_usd": st.sampled_from([None, 0.5, 2]),
    "payload": st.sampled_from([None, '{"a":1}', {"b": 1}]), "parent_seq": st.none() | st.integers(0, 3),
    "depth": st.sampled_from([None, 1]),
})


def _columns_of(rows: list[tuple]) -> list[list]:
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(17)]


@settings(max_examples=cases(300), deadline=None, database=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "extend"]), st.lists(_valid_step, max_size=5),
                          st.sampled_from([None, "rows", "columns"])), max_size=8))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_rows_and_columns_are_the_same_steps_however_add_and_extend_interleave(ops):
    """StepBuffer holds extended steps as columns and added ones as rows, building one form from the
    other when read: whatever the order of appends and reads, `rows` are the steps the add path
    gives and `columns()` their columns (a step before or after a read is neither lost nor moved)."""
    mixed, plain = _buffer(), _buffer()
    for how, specs, read in ops:
        calls = [i for i, s in enumerate(specs) if s["kind"] in ("tool_call", "tool_result")]
        if how == "extend":
            mixed.extend([[s[f] for s in specs] for f in _FIELDS], calls)
        else:
            _one_by_one(mixed, specs)
        _one_by_one(plain, specs)
        if read == "rows":
            assert mixed.rows == plain.rows
        elif read == "columns":
            assert mixed.columns() == _columns_of(plain.rows)
        assert len(mixed) == len(plain.rows)
    assert mixed.columns() == _columns_of(plain.rows)
    assert mixed.rows == plain.rows and mixed.orphan_results == plain.orphan_results

def test_extend_keeps_call_ids_orphans_and_payloads_as_the_row_path_does():
    steps = _buffer()
    steps.extend([["tool_call", "tool_call", "tool_result", "tool_result", "message"], [1, 2, 3, None, 4],
                  ["assistant", "assistant", "tool", None, "user"], [None] * 5, ["f", "f", "f", "f", None],
                  ["a", "a", "a", "c", None], [None, None, "r", "lost", "hi"], [None] * 5, [None, None, False, True, None],
                  [None, None, None, None, 3], [None] * 4 + [4], [None] * 4 + [1], ['{"k":1}', None, {"result": [1]},
                                                                                  None, None],
                  [None, None, None, None, 0], [0] * 5], calls=[0, 1, 2, 3])
    rows = steps.rows
    assert [r[1] for r in rows] == [0, 1, 2, 3, 4]
    assert [r[7] for r in rows] == ["a", "a#2", "a#2", None, None]  # the result pairs with the latest call
    assert [r[2] for r in rows] == ["tool_call", "tool_call", "tool_result", "message", "message"]
    assert json.loads(rows[1][14]) == {"source_call_id": "a"}
    assert json.loads(rows[2][14]) == {"result": [1], "source_call_id": "a"}
    assert json.loads(rows[3][14]) == {"source_call_id": "c"} and rows[3][4] == "tool"  # an orphan result
    assert rows[4][13] == 1.0 and type(rows[4][13]) is float
    assert steps.orphan_results == 1 and steps.reused_call_ids == 1


def _random_json(rng, depth=0):
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randrange(-(2**63), 2**63)
    if kind == 3:  # floats whose repr msgspec writes otherwise (exponents, 0.0000x) among plain ones
        return rng.choice([1e-05, 2.65e-05, 1e16, 1.5e-07, -0.0, 0.1, 123.456, 1e300, 5e-324, rng.random()])
    if kind == 4:
        return "".join(rng.choice(["a", "é", "\n", '"', "\\", "\u2028", "\x1f", "null", "😀", "0.00001"])
                       for _ in range(rng.randrange(6)))
    if kind == 5:
        return rng.randrange(100)
    if kind in (6, 7):
        return {f"k{rng.randrange(20)}{rng.choice(['', 'é', ' '])}": _random_json(rng, depth + 1)
                for _ in range(rng.randrange(5))}
    return [_random_json(rng, depth + 1) for _ in range(rng.randrange(5))]


def test_decoded_json_text_is_the_canonical_json_of_any_decoded_value():
    # decoded_json_text takes msgspec's encoder where it writes what json_text writes, treating a
    # null as a JSON null (a decoded value has no NaN); the reference is plain json.dumps.
    import random

    from rollout_cards.importers.steps import decoded_json_text

    rng = random.Random(12)
    for _ in range(3000):
        value = json.loads(json.dumps(_random_json(rng)))
        assert decoded_json_text(value) == json.dumps(value, sort_keys=True, ensure_ascii=False,
                                                      separators=(",", ":"), allow_nan=False)
