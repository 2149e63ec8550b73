"""Expressions over dictionary-encoded batches (rules/_encoded.py): evaluated once per
distinct value combination, they must equal the row-by-row evaluation of the decoded batch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.expr import parse_expression
from rollout_cards.rules import _encoded as enc

EXPRESSIONS = [
    "kind == 'tool_call' and name == 'lookup'",
    "kind == 'tool_call' and name in ['book', 'cancel']",
    "is_null(name) or startswith(name, 'lo')",
    "coalesce(name, 'none') + ':' + kind",
    "regex_extract(content, r'ANSWER: ([A-D])', 1)",
    "len(coalesce(content, '')) + seq",  # seq is not encoded: row by row
    "if(kind == 'message', content, name)",
]

VALUES = {
    "kind": ["message", "tool_call", "tool_result"],
    "name": ["lookup", "book", "cancel", "search"],
    "content": ["hi", "ANSWER: B", "x ANSWER: D", ""],
}


def _column(rng: np.random.Generator, values: list[str], n: int, *, repeat: bool, nulls: bool) -> pa.Array:
    dictionary = values + values if repeat else values  # a dictionary may repeat a value
    mask = rng.random(n) < 0.25 if nulls else None
    indices = pa.array(rng.integers(0, len(dictionary), n).astype(np.int32), mask=mask)
    return pa.DictionaryArray.from_arrays(indices, pa.array(dictionary))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), repeat=st.booleans(), nulls=st.booleans(),
       offset=st.integers(0, 5), which=st.sampled_from(EXPRESSIONS))
def test_per_value_evaluation_equals_the_decoded_batch(seed, n, repeat, nulls, offset, which):
    rng = np.random.default_rng(seed)
    columns = {k: _column(rng, v, n + offset, repeat=repeat, nulls=nulls and k != "kind") for k, v in VALUES.items()}
    columns["seq"] = pa.array(np.arange(n + offset))
    batch = pa.record_batch(columns).slice(offset)
    decoded = pa.record_batch({k: enc.decoded(c) for k, c in zip(batch.schema.names, batch.columns, strict=True)})
    expr = parse_expression(which)
    expected = expr.evaluate(decoded)
    assert enc.evaluate(expr, batch).equals(expected)
    if expected.type == pa.bool_():
        mask = enc.evaluate_mask(expr, batch)
        assert mask.tolist() == [bool(v) for v in expected.to_pylist()]


def test_many_distinct_combinations_fall_back_to_rows():
    n = 500
    batch = pa.record_batch({"name": pa.array([f"n{i}" for i in range(n)]).dictionary_encode(),
                             "kind": pa.array([f"k{i}" for i in range(n)]).dictionary_encode()})
    expr = parse_expression("name + kind")
    assert enc.PerValue(expr)._slots(batch) is None  # 501 x 501 > the batch's rows
    assert enc.evaluate(expr, batch).to_pylist() == [f"n{i}k{i}" for i in range(n)]


@pytest.mark.parametrize("empty", [True, False])
def test_no_rows_or_no_columns(empty):
    batch = pa.record_batch({"kind": pa.array(["a", "b"]).dictionary_encode()})
    if empty:
        batch = batch.slice(0, 0)
    expr = parse_expression("1 + 1")
    assert enc.evaluate(expr, batch).to_pylist() == [2] * batch.num_rows


class _Poisoned:
    """An expression that fails on the value 'poison' (as one may on a value: an overflow,
    a bad pattern), and records the batches it is evaluated on."""

    def __init__(self, expr):
        self.expr, self.names, self.calls = expr, expr.names, 0

    def evaluate(self, batch):
        self.calls += 1
        if any("poison" in batch.column(n).to_pylist() for n in self.names):
            raise pa.ArrowInvalid("poisoned")
        return self.expr.evaluate(batch)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(EXPRESSIONS[:5]), batches=st.integers(1, 12),
       large=st.booleans())
def test_a_stream_of_batches_with_changing_dictionaries(seed, which, batches, large):
    # Row groups bring their own dictionaries: the same values in other orders, repeated values,
    # other subsets, nulls, slices, and (large) dictionaries remembered only while they come
    # back. Every batch must equal its row-by-row evaluation; a dictionary may hold a value
    # the expression fails on ('poison'): only a batch with a row that holds it fails.
    rng = np.random.default_rng(seed)
    expr = _Poisoned(parse_expression(which))
    per_value = enc.PerValue(expr)
    extra = [f"x{i}" for i in range(300)] if large else []
    shared = None
    for _ in range(batches):
        n = int(rng.integers(1, 2500 if large else 200))
        columns = {}
        for k, values in VALUES.items():
            values = values + extra if k == "name" else values
            order = list(rng.permutation(values))  # mostly all values, in another order
            if rng.random() < 0.3:
                order = order[: int(rng.integers(1, len(values) + 1))]
            dictionary = order + order[:1] if rng.random() < 0.3 else order
            used = len(dictionary)
            if rng.random() < 0.3:
                dictionary = dictionary + ["poison"]
                used += rng.random() < 0.2  # now and then a row holds it
            mask = rng.random(n) < 0.2 if k != "kind" else None
            indices = pa.array(rng.integers(0, used, n).astype(np.int32), mask=mask)
            columns[k] = pa.DictionaryArray.from_arrays(indices, pa.array(dictionary))
        batch = pa.record_batch(columns)
        if shared is not None and rng.random() < 0.5:  # the same dictionaries again, other rows
            batch = shared.slice(int(rng.integers(0, shared.num_rows)))
        shared = batch
        if batch.num_rows == 0:
            continue
        decoded = pa.record_batch({k: enc.decoded(c) for k, c in zip(batch.schema.names, batch.columns, strict=True)})
        try:
            expected = expr.evaluate(decoded)
        except pa.ArrowInvalid:
            with pytest.raises(pa.ArrowInvalid, match="poisoned"):
                per_value.values(batch)
            with pytest.raises(pa.ArrowInvalid, match="poisoned"):
                per_value.mask(batch)
            continue
        assert per_value.values(batch).equals(expected)
        if expected.type == pa.bool_():
            assert per_value.mask(batch).tolist() == [bool(v) for v in expected.to_pylist()]


TABLE_EXPRESSIONS = [
    "regex_extract(final, r'ANSWER: ([A-D])', 1) == target",
    "coalesce(final, '') + target",
    "if(target == 'A', 1, 0) + len(coalesce(final, ''))",
    "final == target or is_null(final)",
    "regex_extract(final, r'ANSWER: ([A-D])', 1) == target and n > 2",  # n is no string: rows
]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200), chunks=st.integers(1, 4), nulls=st.booleans(),
       distinct=st.sampled_from([3, 40]), which=st.sampled_from(TABLE_EXPRESSIONS))
def test_table_evaluation_per_value_equals_the_rows(seed, n, chunks, nulls, distinct, which):
    # few distinct strings: encoded and evaluated per value; many (over the sample's limit) or
    # a non-string column: row by row; the same values either way
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(enc, "_SAMPLE", 8)
        patch.setattr(enc, "_SAMPLE_DISTINCT", 5)
        _check_table_evaluation(seed, n, chunks, nulls, distinct, which)


def _check_table_evaluation(seed, n, chunks, nulls, distinct, which):  # noqa: ANN001
    rng = np.random.default_rng(seed)
    finals = [f"x ANSWER: {'ABCD'[i % 4]}{i // 4 if i >= 4 else ''}" for i in range(distinct)]
    rows = {
        "final": [None if nulls and rng.random() < 0.2 else finals[int(rng.integers(distinct))] for _ in range(n)],
        "target": [["A", "B", "C", "D"][int(rng.integers(4))] for _ in range(n)],
        "n": rng.integers(0, 5, n).tolist(),
    }
    cut = sorted(rng.integers(0, n + 1, chunks - 1).tolist())
    bounds = [0, *cut, n]
    table = pa.Table.from_batches(
        [pa.record_batch({k: pa.array(v[a:b], pa.int64() if k == "n" else pa.string()) for k, v in rows.items()})
         for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    expr = parse_expression(which)
    expected = expr.evaluate(table)
    got = enc.evaluate_rows(expr, table)
    assert got.to_pylist() == expected.to_pylist()
    assert got.type == expected.type


def _garbage_under_nulls(rng: np.random.Generator, values: list[str], n: int) -> pa.Array:
    # a null row's index slot may hold anything (Parquet writes 0; another writer may not):
    # here values far outside the dictionary, which the combination code must not read
    codes = rng.integers(0, len(values), n).astype(np.int32)
    null = rng.random(n) < 0.4
    codes[null] = rng.integers(-300, 70000, int(null.sum()))
    bits = pa.py_buffer(np.packbits(~null, bitorder="little"))
    indices = pa.Array.from_buffers(pa.int32(), n, [bits, pa.py_buffer(codes)], null_count=int(null.sum()))
    return pa.DictionaryArray.from_arrays(indices, pa.array(values))


@pytest.mark.parametrize("names", [4, 20, 70])  # 3 x 5 combinations (one byte), 3 x 21 (two), 71 x 71 (two, not whole)
@pytest.mark.parametrize("which", [
    "name == 'n1'",                                    # one true combination per kind
    "kind == 'k1' and name == 'n1'",                   # one
    "kind == 'k1' and name in ['n1', 'n2']",           # two
    "is_null(name) or kind == 'k2'",                   # many, nulls among them
    "kind == 'nowhere'",                               # none
])
def test_masks_and_values_equal_the_rows_with_garbage_under_nulls(names, which):
    # Reference: the expression over the decoded batch (Arrow's kernels, row by row)
    rng = np.random.default_rng(names)
    n = 6000  # more rows than 71 x 71 combinations (fewer go row by row)
    name_values = [f"n{i}" for i in range(names)]
    kinds = name_values if names == 70 else ["k0", "k1", "k2"]
    batch = pa.record_batch({"kind": _garbage_under_nulls(rng, kinds, n),
                             "name": _garbage_under_nulls(rng, name_values, n)}).slice(7)
    decoded = pa.record_batch({k: enc.decoded(c) for k, c in zip(batch.schema.names, batch.columns, strict=True)})
    expr = parse_expression(which)
    expected = expr.evaluate(decoded)
    per_value = enc.PerValue(expr)
    assert per_value._slots(batch) is not None  # evaluated per combination, not row by row
    assert per_value.mask(batch).tolist() == [bool(v) for v in expected.to_pylist()]
    assert per_value.values(batch).equals(expected)
