"""Group codes: sorted labels, nulls last, multi-column tuples."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from rollout_cards.rules.grouping import factorize, label_sort_key, unique_codes


def test_codes_and_sorted_labels_with_nulls_last():
    t = pa.table({"a": ["x", "y", None, "x"], "b": [2, 1, 1, 2], "c": pa.array(["u", "v", "u", "v"]).dictionary_encode()})
    f = factorize(t, ["a", "b"])
    assert f.labels == [("x", 2), ("y", 1), (None, 1)]
    assert f.codes.tolist() == [0, 1, 2, 0]
    assert factorize(t, ["c"]).labels == [("u",), ("v",)]
    assert factorize(t, []).labels == [()] and factorize(t, []).codes.tolist() == [0, 0, 0, 0]


@given(st.lists(st.tuples(st.sampled_from(["p", "q", None]), st.integers(-3, 3)), min_size=1, max_size=60))
def test_codes_round_trip_to_the_values(rows):
    t = pa.table({"s": [r[0] for r in rows], "i": [r[1] for r in rows]})
    f = factorize(t, ["s", "i"])
    assert [f.labels[c] for c in f.codes] == rows
    assert len(set(f.labels)) == len(f.labels) == len(set(rows))


_SCALARS = {
    "string": st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4),
    "int": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(allow_nan=False).map(lambda x: x + 0.0),  # -0.0 == 0.0: one label in Python
    "bool": st.booleans(),
}


@st.composite
def _tables(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(_SCALARS)), min_size=1, max_size=3))
    n = draw(st.integers(1, 40))
    columns = {f"c{j}": draw(st.lists(st.one_of(st.none(), _SCALARS[k]), min_size=n, max_size=n))
               for j, k in enumerate(kinds)}
    return columns


@given(_tables())
def test_labels_sort_as_python_sorts_them(columns):
    """Arrow sorts each column's values (UTF-8 byte order is code point order); the result must be
    Python's own order of the label tuples: sorted(set(...), key=label_sort_key)."""
    names = sorted(columns)
    rows = list(zip(*(columns[c] for c in names), strict=True))
    f = factorize(pa.table(columns), names)
    expected = sorted(set(rows), key=label_sort_key)
    assert f.labels == expected
    assert [f.labels[c] for c in f.codes] == rows


def test_nan_labels_keep_the_python_order():
    t = pa.table({"x": [float("nan"), 1.0, None, 0.5, 1.0]})
    f = factorize(t, ["x"])
    assert f.labels[1:3] == [(0.5,), (1.0,)] or f.labels[:2] == [(0.5,), (1.0,)]
    assert f.labels[-1] == (None,)
    assert [f.labels[c][0] for c in f.codes][1:] == [1.0, None, 0.5, 1.0]


@given(st.lists(st.integers(0, 40), max_size=200), st.sampled_from([41, 1 << 21]))
@example([*range(41), *range(40, -1, -1), 7], 41)  # every possible code occurs: the codes are their own positions
@example([0, 0, 0], 1)
def test_unique_codes_equal_numpy_s_unique(codes, total):
    # counting pass (few possible codes) and sort (many), against np.unique itself
    packed = np.array(codes, dtype=np.int64)
    uniq, inverse = unique_codes(packed, total)
    expected, expected_inverse = np.unique(packed, return_inverse=True)
    assert uniq.tolist() == expected.tolist()
    assert inverse.tolist() == expected_inverse.reshape(-1).tolist()


@st.composite
def _dictionary_chunks(draw):
    """A string column as a reader hands it out: chunks each with its own dictionary (other
    orders, unused values, perhaps a value listed twice), nulls, a slice."""
    words = ["b", "a", "é", "", "ab", "zz"]
    chunks, rows = [], []
    for _ in range(draw(st.integers(1, 4))):
        values = draw(st.lists(st.sampled_from(words), min_size=1, max_size=6, unique=True))
        if draw(st.booleans()) and len(values) > 1:
            values = [*values, values[0]]  # a dictionary repeating a value
        picks = draw(st.lists(st.one_of(st.none(), st.integers(0, len(values) - 1)), max_size=12))
        chunks.append(pa.DictionaryArray.from_arrays(pa.array(picks, pa.int32()), pa.array(values)))
        rows += [None if p is None else values[p] for p in picks]
    start = draw(st.integers(0, len(rows)))
    column = pa.chunked_array(chunks, chunks[0].type).slice(start)
    return column, rows[start:]


_TWICE = pa.DictionaryArray.from_arrays(pa.array([0, 2, None, 1], pa.int32()), pa.array(["a", "b", "a"]))


@given(_dictionary_chunks(), st.lists(st.integers(-2, 2), min_size=100, max_size=100))
@example((pa.chunked_array([_TWICE]), ["a", "a", None, "b"]), [0] * 100)  # one dictionary, "a" twice
def test_dictionary_columns_give_the_labels_of_their_values(encoded, other):
    # grouped from the dictionaries (unified across chunks, only values that occur) or, when a
    # dictionary repeats a value, from the decoded strings: Python's labels either way
    column, rows = encoded
    ints = other[: len(rows)]
    t = pa.table({"s": column, "i": pa.array(ints, pa.int64())})
    for names, expected_rows in ((["s"], [(r,) for r in rows]), (["s", "i"], list(zip(rows, ints, strict=True)))):
        f = factorize(t, names)
        assert f.labels == sorted(set(expected_rows), key=label_sort_key)
        assert [f.labels[c] for c in f.codes] == expected_rows
