"""numpy_arrow builds the same arrays as pyarrow's own conversion."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards.numpy_arrow import bool_array, dictionary_codes, int64_array, validity

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
