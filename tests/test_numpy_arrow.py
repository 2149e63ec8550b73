"""numpy_arrow builds the same arrays as pyarrow's own conversion."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards.numpy_arrow import (
    bool_array,
    check_batch,
    dictionary_codes,
    int64_array,
    validity,
)

ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300)


@given(ints, st.integers(0, 5), st.integers(1, 3))
def test_int64_array_equals_pyarrow_s_conversion(values, start, step):
    array = np.array(values, dtype=np.int64)[start::step]  # offsets and strides: not contiguous
    built = int64_array(array)
    assert built.type == pa.int64() and built.null_count == 0
    assert built.equals(pa.array(array, pa.int64()))
    assert built.to_pylist() == values[start::step]


@given(st.lists(st.booleans(), max_size=300), st.integers(0, 9))
def test_bool_array_equals_pyarrow_s_conversion(values, start):
    mask = np.array(values, dtype=bool)[start:]
    built = bool_array(mask)
    built.validate(full=True)
    assert built.equals(pa.array(mask, pa.bool_()))
    assert built.to_pylist() == values[start:]


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.booleans()), max_size=300))
def test_int64_array_with_validity_equals_pyarrow_s_masked_conversion(pairs):
    values = np.array([v for v, _ in pairs], dtype=np.int64)
    valid = np.array([ok for _, ok in pairs], dtype=bool)
    built = int64_array(values, valid=valid)
    built.validate(full=True)
    assert built.null_count == int((~valid).sum())
    assert built.to_pylist() == [v if ok else None for v, ok in pairs]
    assert built.equals(pa.array(values, pa.int64(), mask=~valid))


def test_python_sequences_and_the_array_s_lifetime():
    built = int64_array([3, 1, 2])
    assert pa.array(["a", "b", "c", "d"]).take(built).to_pylist() == ["d", "b", "c"]
    source = np.arange(5, dtype=np.int64)
    shared = int64_array(source)
    del source  # the buffer keeps the NumPy memory alive
    assert shared.to_pylist() == [0, 1, 2, 3, 4]


def test_refuses_more_than_one_dimension():
    with pytest.raises(ValueError, match="1-D"):
        int64_array(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="1-D"):
        bool_array(np.zeros((2, 2), dtype=bool))


@given(st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=200), st.integers(0, 20),
       st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64()]))
def test_dictionary_codes_and_validity_read_from_the_buffers(indices, offset, index_type):
    words = pa.array([f"w{i}" for i in range(10)])
    column = pa.DictionaryArray.from_arrays(pa.array(indices, index_type), words).slice(offset)
    expected = column.indices.to_pylist()
    assert dictionary_codes(column, -7).tolist() == [-7 if i is None else i for i in expected]
    if column.indices.null_count:
        assert validity(column.indices).tolist() == [i is not None for i in expected]


@given(st.lists(st.one_of(st.none(), st.integers(-3, 12)), max_size=100), st.integers(0, 10),
       st.integers(0, 5), st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64()]))
def test_dictionary_codes_keep_their_width_unless_the_null_code_needs_more(indices, words, null_code, index_type):
    column = pa.DictionaryArray.from_arrays(pa.array(indices, index_type), pa.array([f"w{i}" for i in range(words)]),
                                            safe=False)
    for code in (null_code, 300, -(2**40)):
        codes = dictionary_codes(column, code)
        assert codes.tolist() == [code if i is None else i for i in indices]
        assert codes.dtype.itemsize >= np.dtype(index_type.to_pandas_dtype()).itemsize
        if None not in indices:
            assert codes.dtype == np.dtype(index_type.to_pandas_dtype())  # a view, not widened


@given(st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=120),
       st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=7), st.integers(0, 9),
       st.sampled_from([0, -7, 9, 300, 2**40]), st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64()]))
def test_dictionary_codes_ignore_what_null_rows_hold(indices, garbage, offset, null_code, index_type):
    # a null row's index slot may hold any value (Arrow leaves it undefined): it must not leak
    dtype = np.dtype(index_type.to_pandas_dtype())
    info = np.iinfo(dtype)
    slots = np.array([garbage[i % len(garbage)] if v is None else v for i, v in enumerate(indices)], dtype=np.int64)
    slots = np.clip(slots, info.min, info.max).astype(dtype)
    valid = bool_array([v is not None for v in indices]).buffers()[1]
    raw = pa.Array.from_buffers(index_type, len(indices), [valid, pa.py_buffer(slots)])
    column = pa.DictionaryArray.from_arrays(raw, pa.array([f"w{i}" for i in range(10)])).slice(min(offset, len(indices)))
    expected = [null_code if i is None else i for i in indices[min(offset, len(indices)):]]
    assert dictionary_codes(column, null_code).tolist() == expected


def _string_array(values: list[bytes | None]) -> pa.Array:
    """A string array over raw bytes, which may be invalid UTF-8 (pa.array would refuse them)."""
    data = b"".join(v or b"" for v in values)
    offsets = np.concatenate([[0], np.cumsum([len(v or b"") for v in values])]).astype(np.int32)
    mask = None if None not in values else bool_array([v is not None for v in values])
    validity_buffer = None if mask is None else mask.buffers()[1]
    return pa.Array.from_buffers(pa.string(), len(values), [validity_buffer, pa.py_buffer(offsets), pa.py_buffer(data)])


def _validates(batch: pa.RecordBatch, check) -> bool:
    try:
        check(batch)
    except pa.ArrowInvalid:
        return False
    return True


words_bytes = st.lists(st.one_of(st.none(), st.sampled_from([b"a", b"bb", b"", b"\xff", b"\xc3\xa9", b"\xc3"])),
                       max_size=6)


@given(st.lists(st.one_of(st.none(), st.integers(-2, 7)), max_size=60), words_bytes, st.integers(0, 4),
       st.sampled_from([pa.int8(), pa.int32(), pa.int64()]), st.lists(st.sampled_from([b"x", b"\xfe", None]), max_size=3))
def test_check_batch_accepts_and_refuses_what_full_validation_does(indices, words, offset, index_type, plain):
    # out-of-range indices (also at null rows, which full validation ignores), invalid UTF-8 in
    # the dictionary or in a plain column, an empty dictionary, sliced arrays
    column = pa.DictionaryArray.from_arrays(pa.array(indices, index_type), _string_array(words), safe=False)
    n = len(indices)
    other = _string_array([plain[i % len(plain)] if plain else b"y" for i in range(n)])
    batch = pa.record_batch({"d": column, "s": other, "i": pa.array(range(n))}).slice(min(offset, n))
    full = _validates(batch, lambda b: b.validate(full=True))
    assert _validates(batch, check_batch) == full


def test_check_batch_names_the_column_and_the_row():
    column = pa.DictionaryArray.from_arrays(pa.array([0, 1, 9], pa.int32()), pa.array(["a", "b"]), safe=False)
    with pytest.raises(pa.ArrowInvalid, match=r"column 'name': dictionary index 9 at row 2 is out of bounds"):
        check_batch(pa.record_batch({"name": column}))


def test_check_batch_names_the_column_of_invalid_text():
    bad = _string_array([b"ok", b"\xff"])
    with pytest.raises(pa.ArrowInvalid, match=r"column 'content': .*UTF-?8"):
        check_batch(pa.record_batch({"seq": pa.array([0, 1]), "content": bad}))
    encoded = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), bad)
    with pytest.raises(pa.ArrowInvalid, match=r"column 'name': its dictionary: .*UTF-?8"):
        check_batch(pa.record_batch({"name": encoded}))
