"""Arrow arrays from NumPy index and mask arrays, zero-copy.

`pa.array(ndarray)` goes through pyarrow's general conversion, whose first call imports
`numpy.ma` (25-60 ms, a visible part of `rcard validate` on a small card) only to ask
whether the array is masked. Ours never are, so the validator and the reader build their
index and mask arrays from the buffers directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["bool_array", "int64_array"]


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
