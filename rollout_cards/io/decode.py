"""A decoded-bytes budget for reading tables: strings are read dictionary-encoded, and a batch's
plain size is computed from its dictionary and indices before anything is expanded.

A Parquet dictionary page can hold one 1 MiB string that thousands of rows refer to: a
7 KB file then decodes to gigabytes (validate and replay reached 1.65 GB). Reading string
and binary columns dictionary-encoded keeps such a page at its real size; `DecodeBudget`
then computes what the batch would decode to (lengths of the dictionary values taken by
the indices) and

- refuses (`DecodeLimitError`) once the variable-width data decoded from a table exceeds
  `DECODE_FLOOR` + `DECODE_RATIO` x the table's stored bytes — a decompression bomb, not
  data: real cards repeat long prompts, but not a thousand times their own size;
- otherwise hands the batch out in slices that each decode to at most `BATCH_DECODED_BYTES`
  (at least one row), so memory stays bounded even within the budget.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..errors import DecodeLimitError
from ..numpy_arrow import dictionary_codes, raw_codes, validity

__all__ = [
    "BATCH_DECODED_BYTES",
    "DECODE_FLOOR",
    "DECODE_RATIO",
    "DecodeBudget",
    "variable_width",
]

#: Variable-width bytes a table may always decode to.
DECODE_FLOOR = 64 * 1024 * 1024
#: ... plus this many times its stored size.
DECODE_RATIO = 1000
#: Decoded variable-width bytes handed out in one batch (larger batches are sliced).
BATCH_DECODED_BYTES = 256 * 1024 * 1024
#: Dictionaries up to this size are counted value by value (larger ones by bincount).
_FEW_VALUES = 8


def variable_width(t: pa.DataType) -> bool:
    """Whether values of `t` are strings or binaries (the types a dictionary page can inflate)."""
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t))


def _lengths(arr: pa.Array) -> np.ndarray:
    dictionary = arr.dictionary
    if pa.types.is_string(dictionary.type) or pa.types.is_binary(dictionary.type):
        # the offsets buffer holds every length (a null value's is 0)
        offsets = np.frombuffer(dictionary.buffers()[1], dtype=np.int32)
        offsets = offsets[dictionary.offset : dictionary.offset + len(dictionary) + 1]
        lengths = np.diff(offsets).astype(np.int64)
        if dictionary.null_count:
            lengths[~validity(dictionary)] = 0
        return lengths
    return ac.fill_null(ac.binary_length(dictionary), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _indices(arr: pa.Array) -> np.ndarray:
    return dictionary_codes(arr, 0)


def _row_bytes(arr: pa.Array) -> np.ndarray:
    lengths = _lengths(arr)
    return lengths[_indices(arr)] if len(lengths) else np.zeros(len(arr), dtype=np.int64)


def _column_bytes(arr: pa.Array) -> int:
    """What the column decodes to: the sum of each row's value length (a null row counts as
    value 0). Exact, and cheap on the usual columns: this runs on every encoded column of
    every batch of a scan (a tenth of the count rule's time on 20M steps)."""
    lengths = _lengths(arr)
    if not len(lengths):
        return 0
    rows = len(arr)
    if lengths.min() == lengths.max():
        return rows * int(lengths[0])  # fixed-width ids: every row (a null one is value 0) has that length
    if len(lengths) <= _FEW_VALUES:
        return _few_values_bytes(arr, lengths)
    # each row's length, summed: a gather from a small table (~2x faster than bincount's counts)
    return int(np.take(lengths, _indices(arr)).sum())


def _few_values_bytes(arr: pa.Array, lengths: np.ndarray) -> int:
    """`_column_bytes` of a small dictionary: every row at the most common length, corrected
    by a comparison pass per value of another length, on the raw codes (a pass per value:
    bincount's increments of a few counters wait on each other; null rows, whose raw codes
    hold anything, are masked out here and counted as value 0, instead of rewriting every
    code as `dictionary_codes` does)."""
    indices = arr.indices
    # (any length would do as the base, the corrections make the total exact; the most common
    # saves passes. In Python: np.unique of at most _FEW_VALUES lengths cost ~20 us a column)
    listed = lengths.tolist()
    common = max(listed, key=listed.count)
    codes = raw_codes(indices)
    valid = validity(indices) if indices.null_count else None
    total = len(arr) * common
    for j in np.flatnonzero(lengths != common):
        hit = codes == codes.dtype.type(j)  # (an int64 j would widen every code first: ~3x slower)
        if valid is not None:
            hit &= valid
        total += (int(lengths[j]) - common) * int(np.count_nonzero(hit))
    if valid is not None:
        total += (int(lengths[0]) - common) * indices.null_count
    return total


class DecodeBudget:
    """The budget of one table (`name`, `stored_bytes` on disk) over all the batches read from it.

    `decode(batch, schema, expand)` takes a batch whose `expand` columns are dictionary-encoded
    and yields it with those columns cast to their type in `schema`, sliced to BATCH_DECODED_BYTES;
    `charge(batch, expand)` only counts what the batch would decode to (for a reader that keeps
    the columns encoded), with the same refusal.
    """

    def __init__(self, name: str, stored_bytes: int):
        self.name = name
        self.limit = DECODE_FLOOR + DECODE_RATIO * stored_bytes
        self.used = 0

    def _encoded(self, batch: pa.RecordBatch, expand: set[str]) -> list[str]:
        return [n for n in batch.schema.names if n in expand and pa.types.is_dictionary(batch.schema.field(n).type)]

    def charge(self, batch: pa.RecordBatch, expand: set[str]) -> int:
        """Count the variable-width bytes `batch` decodes to; DecodeLimitError past the limit."""
        return self.spend(self.sizes(batch, expand), batch.num_rows)

    def sizes(self, batch: pa.RecordBatch, expand: set[str]) -> dict[str, int]:
        """What each `expand` column of `batch` decodes to, in bytes (nothing is counted)."""
        return {name: _column_bytes(batch.column(name)) for name in self._encoded(batch, expand)}

    def spend(self, sizes: dict[str, int], rows: int) -> int:
        """Count a batch of `rows` rows that decodes to `sizes` (by column, from `sizes`, perhaps
        measured in another process); DecodeLimitError past the limit."""
        total = sum(sizes.values())
        self.used += total
        if self.used > self.limit:
            largest = max(sizes, key=lambda k: sizes[k])
            raise DecodeLimitError(
                f"{self.name} decodes to more than {self.limit:,} bytes of text ({DECODE_RATIO:,} times its "
                f"{(self.limit - DECODE_FLOOR) // DECODE_RATIO:,} stored bytes, plus {DECODE_FLOOR:,}), most of it "
                f"in column {largest!r} ({sizes[largest]:,} bytes in {rows:,} rows): a dictionary page "
                "repeated over many rows, a decompression bomb; regenerate the file")
        return total

    def decode(self, batch: pa.RecordBatch, schema: pa.Schema, expand: set[str]) -> Iterator[pa.RecordBatch]:
        columns = self._encoded(batch, expand)
        if not columns:
            yield batch
            return
        total = self.charge(batch, expand)
        target = pa.schema([schema.field(n) if n in columns else batch.schema.field(n) for n in batch.schema.names])
        if total <= BATCH_DECODED_BYTES:
            yield ac.cast_batch(batch, target)
            return
        rows = np.zeros(batch.num_rows, dtype=np.int64)
        for name in columns:
            rows += _row_bytes(batch.column(name))
        ends = np.cumsum(rows)
        start = 0
        while start < batch.num_rows:
            base = int(ends[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(ends, base + BATCH_DECODED_BYTES, side="right")))
            yield ac.cast_batch(batch.slice(start, stop - start), target)
            start = stop
