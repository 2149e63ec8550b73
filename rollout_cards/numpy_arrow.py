"""Between NumPy and Arrow without pyarrow's conversion paths: index and mask arrays as
Arrow arrays, and a dictionary array's codes and an array's validity as NumPy arrays,
read from the buffers (these run on every batch of a scan).

`pa.array(ndarray)` goes through pyarrow's general conversion, whose first call imports
`numpy.ma` (25-60 ms, a visible part of `rcard validate` on a small card) only to ask
whether the array is masked. Ours never are, so the validator and the reader build their
index and mask arrays from the buffers directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["bool_array", "dictionary_codes", "int64_array", "validity"]


def int64_array(values: np.ndarray | Sequence[int]) -> pa.Array:
    """An int64 Arrow array (no nulls) holding `values`, sharing memory when it can."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    if data.ndim != 1:
        raise ValueError(f"expected a 1-D array of indices, got shape {data.shape}")
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def bool_array(values: np.ndarray | Sequence[bool]) -> pa.Array:
    """A boolean Arrow array (no nulls) holding `values` (bit-packed, as Arrow stores them)."""
    data = np.asarray(values, dtype=bool)
    if data.ndim != 1:
        raise ValueError(f"expected a 1-D mask, got shape {data.shape}")
    bits = np.packbits(data, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(bits)])


def dictionary_codes(arr: pa.Array, null_code: int = 0) -> np.ndarray:
    """The indices of a dictionary array as int64, `null_code` at null rows, read from the
    buffers (no kernel calls: this runs on every batch of a scan)."""
    indices = arr.indices
    n = len(indices)
    dtype = np.dtype(indices.type.to_pandas_dtype())
    codes = np.frombuffer(indices.buffers()[1], dtype=dtype)[indices.offset : indices.offset + n]
    codes = codes.astype(np.int64)
    if indices.null_count:
        codes[~validity(indices)] = null_code
    return codes


def validity(arr: pa.Array) -> np.ndarray:
    """The validity bitmap of `arr` as a bool per row."""
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[arr.offset : arr.offset + len(arr)].astype(bool)
