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
import pyarrow.compute as pc

from ..errors import DecodeLimitError

__all__ = ["BATCH_DECODED_BYTES", "DECODE_FLOOR", "DECODE_RATIO", "DecodeBudget", "variable_width"]

#: Variable-width bytes a table may always decode to.
DECODE_FLOOR = 64 * 1024 * 1024
#: ... plus this many times its stored size.
DECODE_RATIO = 1000
#: Decoded variable-width bytes handed out in one batch (larger batches are sliced).
BATCH_DECODED_BYTES = 256 * 1024 * 1024


def variable_width(t: pa.DataType) -> bool:
    """Whether values of `t` are strings or binaries (the types a dictionary page can inflate)."""
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t))


def _row_bytes(arr: pa.Array) -> np.ndarray:
    lengths = pc.fill_null(pc.binary_length(arr.dictionary), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    indices = pc.fill_null(arr.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return lengths[indices] if len(lengths) else np.zeros(len(arr), dtype=np.int64)


class DecodeBudget:
    """The budget of one table (`name`, `stored_bytes` on disk) over all the batches read from it.

    `decode(batch, schema, expand)` takes a batch whose `expand` columns are dictionary-encoded
    and yields it with those columns cast to their type in `schema`, sliced to BATCH_DECODED_BYTES.
    """

    def __init__(self, name: str, stored_bytes: int):
        self.name = name
        self.limit = DECODE_FLOOR + DECODE_RATIO * stored_bytes
        self.used = 0

    def decode(self, batch: pa.RecordBatch, schema: pa.Schema, expand: set[str]) -> Iterator[pa.RecordBatch]:
        columns = [n for n in batch.schema.names if n in expand and pa.types.is_dictionary(batch.schema.field(n).type)]
        if not columns:
            yield batch
            return
        rows = np.zeros(batch.num_rows, dtype=np.int64)
        largest, most = columns[0], -1
        for name in columns:
            sizes = _row_bytes(batch.column(name))
            rows += sizes
            if int(sizes.sum()) > most:
                largest, most = name, int(sizes.sum())
        total = int(rows.sum())
        self.used += total
        if self.used > self.limit:
            raise DecodeLimitError(
                f"{self.name} decodes to more than {self.limit:,} bytes of text ({DECODE_RATIO:,} times its "
                f"{(self.limit - DECODE_FLOOR) // DECODE_RATIO:,} stored bytes, plus {DECODE_FLOOR:,}), most of it "
                f"in column {largest!r} ({most:,} bytes in {batch.num_rows:,} rows): a dictionary page repeated over "
                "many rows, a decompression bomb; regenerate the file")
        target = pa.schema([schema.field(n) if n in columns else batch.schema.field(n) for n in batch.schema.names])
        if total <= BATCH_DECODED_BYTES:
            yield batch.cast(target)
            return
        ends = np.cumsum(rows)
        start = 0
        while start < batch.num_rows:
            base = int(ends[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(ends, base + BATCH_DECODED_BYTES, side="right")))
            yield batch.slice(start, stop - start).cast(target)
            start = stop
