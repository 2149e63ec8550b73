"""arrow_compute calls Arrow kernels by name: each function against pyarrow.compute's own wrapper
(or the Array/Table method it stands for) on the same inputs, nulls, chunked arrays and tables
included."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards import arrow_compute as ac

ints = st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=30)
texts = st.lists(st.one_of(st.none(), st.sampled_from(["", "a", "b", "[redacted]", "é", "ab" * 40])), max_size=30)
bools = st.lists(st.one_of(st.none(), st.booleans()), max_size=30)
floats = st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), max_size=30)


def _chunked(values, type_):
    half = len(values) // 2
    return pa.chunked_array([pa.array(values[:half], type_), pa.array(values[half:], type_)], type_)


@given(ints, ints)
def test_comparisons_and_boolean_kernels_match_pyarrow_compute(xs, ys):
    n = min(len(xs), len(ys))
    a, b = pa.array(xs[:n], pa.int64()), pa.array(ys[:n], pa.int64())
    for ours, theirs in ((ac.equal, pc.equal), (ac.less, pc.less), (ac.greater_equal, pc.greater_equal)):
        assert ours(a, b).equals(theirs(a, b))
        assert ours(a, 0).equals(theirs(a, 0))  # a Python scalar operand
    p, q = pc.less(a, 1), pc.greater_equal(b, -1)
    for ours, theirs in ((ac.and_, pc.and_), (ac.or_, pc.or_), (ac.or_kleene, pc.or_kleene)):
        assert ours(p, q).equals(theirs(p, q))
    assert ac.invert(p).equals(pc.invert(p))
    assert ac.is_valid(a).equals(a.is_valid()) and ac.is_null(a).equals(a.is_null())


@given(ints, st.sampled_from([0, -1, 7]))
def test_fill_null_cast_take_filter_match_the_methods(xs, fill):
    a = pa.array(xs, pa.int32())
    c = _chunked(xs, pa.int32())
    for arr in (a, c):
        assert ac.fill_null(arr, fill).equals(pc.fill_null(arr, fill))
        assert ac.fill_null(arr, pa.scalar(fill, pa.int64())).equals(pc.fill_null(arr, pa.scalar(fill, pa.int64())))
        assert ac.cast(arr, pa.int64()).equals(arr.cast(pa.int64()))
        idx = pa.array(list(range(len(xs)))[::-2], pa.int64())
        assert ac.take(arr, idx).equals(arr.take(idx))
        keep = pc.is_valid(arr)
        assert ac.filter(arr, keep).equals(arr.filter(keep))
    table = pa.table({"x": c, "y": c})
    idx = pa.array([i for i in range(len(xs)) if i % 3 == 0], pa.int64())
    assert ac.take(table, idx).equals(table.take(idx))


def test_take_and_cast_refuse_what_the_methods_refuse():
    a = pa.array([1, 2, 3])
    with pytest.raises(IndexError):
        ac.take(a, pa.array([3]))
    with pytest.raises(pa.ArrowInvalid):  # a safe cast: overflow raises, as .cast() does
        ac.cast(pa.array([300]), pa.int8())
    with pytest.raises(pa.ArrowInvalid):
        ac.cast(pa.array([1.5]), pa.int64())


@given(texts, st.lists(st.sampled_from(["", "a", "é", "zz"]), max_size=4, unique=True), st.booleans())
def test_set_lookups_and_string_kernels_match(values, wanted, skip_nulls):
    arr = pa.array(values, pa.string())
    vs = pa.array(wanted, pa.string())
    assert ac.is_in(arr, value_set=vs).equals(pc.is_in(arr, value_set=vs))
    assert ac.index_in(arr, value_set=vs, skip_nulls=skip_nulls).equals(
        pc.index_in(arr, value_set=vs, skip_nulls=skip_nulls))
    assert ac.match_substring_regex(arr, "^(a|\\[redacted\\])$").equals(pc.match_substring_regex(arr, "^(a|\\[redacted\\])$"))
    assert ac.binary_length(arr).equals(pc.binary_length(arr))
    assert ac.unique(arr).equals(arr.unique())
    assert ac.dictionary_encode(arr).equals(arr.dictionary_encode())
    big = _chunked(values, pa.large_string())
    assert ac.dictionary_encode(big).equals(big.dictionary_encode())


@given(floats, bools)
def test_aggregates_and_is_finite_match(xs, bs):
    a = pa.array(xs, pa.float64())
    assert ac.is_finite(a).equals(pc.is_finite(a))
    assert ac.min(a).equals(pc.min(a)) and ac.sum(a).equals(pc.sum(a))
    b = pa.array(bs, pa.bool_())
    assert ac.any(b).equals(pc.any(b))


def test_cast_batch_matches_record_batch_cast():
    batch = pa.record_batch({"a": pa.array(["x", None, "x"]).dictionary_encode(), "b": pa.array([1, 2, None])})
    target = pa.schema([("a", pa.string()), ("b", pa.int64())])
    assert ac.cast_batch(batch, target).equals(batch.cast(target))
    with pytest.raises(ValueError, match="not nullable"):
        ac.cast_batch(batch, pa.schema([("a", pa.string()), pa.field("b", pa.int64(), nullable=False)]))
    with pytest.raises(ValueError, match="cannot cast"):
        ac.cast_batch(batch, pa.schema([("b", pa.int64()), ("a", pa.string())]))


def test_field_builds_the_same_filter_expression():
    batch = pa.record_batch({"episode_id": ["a", "b", "a"]})
    assert str(ac.field("episode_id") == "a") == str(pc.field("episode_id") == "a")
    assert batch.filter(ac.field("episode_id") == "a").num_rows == 2
