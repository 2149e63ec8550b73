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

__all__ = ["bool_array", "check_batch", "dictionary_codes", "int64_array", "raw_codes", "validity"]


def int64_array(values: np.ndarray | Sequence[int], valid: np.ndarray | None = None) -> pa.Array:
    """An int64 Arrow array holding `values`, sharing memory when it can; null where `valid`
    (a bool per value) is False, if given."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    if data.ndim != 1:
        raise ValueError(f"expected a 1-D array of indices, got shape {data.shape}")
    if valid is None or valid.all():
        return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])
    if valid.shape != data.shape:
        raise ValueError(f"expected one validity flag per value, got {valid.shape} for {data.shape}")
    bits = np.packbits(np.asarray(valid, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.int64(), len(data), [pa.py_buffer(bits), pa.py_buffer(data)],
                                 null_count=len(data) - int(np.count_nonzero(valid)))


def bool_array(values: np.ndarray | Sequence[bool]) -> pa.Array:
    """A boolean Arrow array (no nulls) holding `values` (bit-packed, as Arrow stores them)."""
    data = np.asarray(values, dtype=bool)
    if data.ndim != 1:
        raise ValueError(f"expected a 1-D mask, got shape {data.shape}")
    bits = np.packbits(data, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(bits)])


def raw_codes(indices: pa.Array) -> np.ndarray:
    """The index buffer of `indices` in its own width (null rows hold anything), read-only."""
    dtype = np.dtype(indices.type.to_pandas_dtype())
    return np.frombuffer(indices.buffers()[1], dtype=dtype)[indices.offset : indices.offset + len(indices)]


def dictionary_codes(arr: pa.Array, null_code: int = 0) -> np.ndarray:
    """The indices of a dictionary array, `null_code` at null rows, read from the buffers (no
    kernel calls: this runs on every batch of a scan). They keep the indices' own width
    (int32 as Parquet reads them; wider only when `null_code` needs it) and, without nulls,
    are a read-only view of the buffer: widening 65,536 codes per column per batch to int64
    was a visible part of a scan."""
    indices = arr.indices
    codes = raw_codes(indices)
    if indices.null_count:
        wide = np.promote_types(codes.dtype, np.min_scalar_type(null_code))
        null = wide.type(null_code)
        # (code - null) * valid + null, valid as 1/0 of the codes' width: plain passes where
        # np.where(valid, ...) branches on every row (~4x slower); a null row's garbage code
        # wraps harmlessly, times 0
        with np.errstate(over="ignore"):
            codes = (codes.astype(wide, copy=False) - null) * validity(indices, wide) + null
    return codes


def check_batch(batch: pa.RecordBatch) -> None:
    """`batch.validate(full=True)`, with the bounds of dictionary indices checked by NumPy
    (pyarrow's full check of a dictionary column costs ~10x a min/max of its codes).

    Checked: the batch's structure, every other column in full, each dictionary in full, and
    that the index of every non-null row is inside its dictionary (what pyarrow's full check
    of a dictionary array adds). Raises pa.ArrowInvalid like `validate(full=True)`, its message
    naming the column (and the row, for an index out of bounds)."""
    batch.validate()
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        encoded = pa.types.is_dictionary(column.type)
        try:
            (column.dictionary if encoded else column).validate(full=True)
        except pa.ArrowInvalid as exc:  # name the column (pyarrow's message of one array does not)
            what = "its dictionary: " if encoded else ""
            raise pa.ArrowInvalid(f"column {name!r}: {what}{str(exc).splitlines()[0]}") from None
        if not encoded:
            continue
        dictionary = column.dictionary
        indices = column.indices
        if indices.null_count == len(indices):
            continue
        codes = raw_codes(indices)  # null rows usually hold 0: look at them only on a miss
        # one pass for both bounds: a negative signed code is a large unsigned one
        unsigned = codes.view(np.dtype(f"u{codes.dtype.itemsize}")) if codes.dtype.kind == "i" else codes
        if len(dictionary) and int(unsigned.max()) < len(dictionary):
            continue
        out = (codes < 0) | (codes >= len(dictionary))
        if indices.null_count:
            out &= validity(indices)
        if out.any():
            row = int(np.argmax(out))
            raise pa.ArrowInvalid(
                f"column {name!r}: dictionary index {int(codes[row])} at row {row} is out of bounds "
                f"(the dictionary has {len(dictionary)} values)")


def validity(arr: pa.Array, dtype: np.dtype | type = bool) -> np.ndarray:
    """The validity bitmap of `arr` as a bool per row (or 1/0 in `dtype`: arithmetic with
    integers of their own width, several times faster than with booleans)."""
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[arr.offset : arr.offset + len(arr)].astype(dtype)
