"""Group keys as integer codes: the engine's way to group, reduce and cluster in numpy.

`factorize(table, columns)` turns the values of one or more columns into a code per
row and the sorted list of distinct value tuples (labels), so that per-group and
per-unit sums are one `numpy.bincount` each, whatever the number of rows.
Null is a value of its own (label None) and sorts last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..numpy_arrow import dictionary_codes

__all__ = ["Factor", "combine", "factorize", "label_sort_key", "unique_codes"]


@dataclass(frozen=True, eq=False)
class Factor:
    """`codes[i]` is the position of row i's value tuple in `labels` (sorted)."""

    codes: np.ndarray
    labels: list[tuple[Any, ...]]

    @property
    def size(self) -> int:
        """Number of distinct value tuples."""
        return len(self.labels)


def label_sort_key(label: tuple[Any, ...]) -> tuple[Any, ...]:
    """A total order on label tuples of mixed types: None last, then by type, then value."""
    return tuple((v is None, type(v).__name__, "" if v is None else v) for v in label)


def _value_order(dictionary: pa.Array) -> np.ndarray | None:
    """Positions of `dictionary`'s values in `label_sort_key` order, sorted by Arrow, or None
    when Arrow's order could differ from Python's (floats with NaN, nested types). Within one
    column the key is the value itself (one type; nulls are not in a dictionary), and
    Arrow's orders are Python's: strings by code point (UTF-8 byte order), numbers by value,
    ties by position (stable)."""
    t = dictionary.type
    if pa.types.is_floating(t):
        if pc.any(pc.is_nan(dictionary)).as_py():
            return None
    elif not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
              or pa.types.is_boolean(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
              or pa.types.is_temporal(t)):
        return None
    return pc.array_sort_indices(dictionary).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _from_dictionaries(column: pa.ChunkedArray | pa.Array) -> tuple[list[np.ndarray], pa.Array] | None:
    """A dictionary column of strings as (codes per chunk, distinct values), null rows coded len(values),
    from its dictionaries unified across chunks: no string is decoded or hashed per row. Values
    no row holds may be listed (`combine` labels only the codes that occur). None when the
    values are not strings or a dictionary repeats a value."""
    t = column.type.value_type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)):
        return None
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    chunks = pa.table({"c": pa.chunked_array(chunks, column.type)}).unify_dictionaries().column(0).chunks
    if not chunks:
        return None
    dictionary = chunks[0].dictionary
    if dictionary.null_count or pc.count_distinct(dictionary).as_py() != len(dictionary):
        return None
    size = len(dictionary)
    return [dictionary_codes(c, size) for c in chunks], dictionary


def _column_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[Any], bool]:
    """Codes into the column's distinct values, and whether the values are in sorted order
    (then the codes are ranks, and tuples of them sort as their labels do)."""
    if pa.types.is_dictionary(column.type):
        found = _from_dictionaries(column)
        if found is not None:
            return _ranked(*found)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    encoded = pc.dictionary_encode(column)
    dictionary = encoded.dictionary
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    if encoded.null_count:
        # Null rows get the code after the last value; their label is None (sorted last).
        mask = encoded.indices.is_null().to_numpy(zero_copy_only=False)
        indices = np.where(mask, len(dictionary), np.nan_to_num(indices, nan=0)).astype(np.int64)
    return _ranked(indices.astype(np.int64, copy=False), dictionary)


def _ranked(indices: np.ndarray | list[np.ndarray], dictionary: pa.Array) -> tuple[np.ndarray, list[Any], bool]:
    """`_column_codes` from codes into `dictionary` (distinct values; null rows coded
    len(dictionary)), one array or one per chunk: the codes made ranks (int64) when Arrow can
    sort the values as Python does. Chunks are gathered through the ranks straight into the
    int64 result (one pass over a million rows, not a widening concatenation and a gather)."""
    order = _value_order(dictionary)
    values = dictionary.to_pylist()
    rank = None
    if order is not None and not np.array_equal(order, np.arange(len(order))):  # (sorted already: codes are ranks)
        values = [values[i] for i in order.tolist()]
        rank = np.empty(len(order) + 1, dtype=np.int64)
        rank[order] = np.arange(len(order))
        rank[-1] = len(order)  # the null code stays last
    if isinstance(indices, list):
        if rank is None:
            indices = np.concatenate(indices, dtype=np.int64) if indices else np.zeros(0, dtype=np.int64)
        else:
            out = np.empty(sum(len(c) for c in indices), dtype=np.int64)
            at = 0
            for chunk in indices:
                np.take(rank, chunk, out=out[at : at + len(chunk)])
                at += len(chunk)
            indices = out
    elif rank is not None:
        indices = rank[indices]
    if indices.size and int(indices.max()) == len(values):
        values.append(None)
    return indices, values, order is not None


def factorize(table: pa.Table | pa.RecordBatch, columns: Sequence[str]) -> Factor:
    """Codes and sorted labels of the value tuples of `columns` (no columns: one group)."""
    n = table.num_rows
    if not columns:
        return Factor(np.zeros(n, dtype=np.int64), [()])
    per_column = [_column_codes(table.column(c)) for c in columns]
    return combine([codes for codes, _, _ in per_column], [values for _, values, _ in per_column], n,
                   presorted=all(ranked for _, _, ranked in per_column))


def unique_codes(packed: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(packed, return_inverse=True)` of codes in [0, total): when few codes are
    possible, which occur is one counting pass and no sort (the same codes, ascending, and
    each row's position among them; `packed` itself when every code occurs)."""
    if total <= max(1 << 20, 4 * len(packed)):
        uniq = np.flatnonzero(np.bincount(packed, minlength=total))
        if len(uniq) == total:  # every code occurs (one column's ranks, usually): each is its own position
            return uniq, packed
        lookup = np.zeros(total, dtype=np.int64)
        lookup[uniq] = np.arange(uniq.size)
        return uniq, lookup[packed]
    uniq, inverse = np.unique(packed, return_inverse=True)
    return uniq, inverse.reshape(-1)


def combine(codes: Sequence[np.ndarray], values: Sequence[list[Any]], n: int, *, presorted: bool = False) -> Factor:
    """Combine per-column codes (into `values[j]`) into one Factor over the tuples. With
    `presorted`, each `values[j]` is in `label_sort_key` order (None last), so the tuples come
    out of the sort below in label order and need no sort in Python."""
    if not codes:
        return Factor(np.zeros(n, dtype=np.int64), [()])
    if n == 0:
        return Factor(np.zeros(0, dtype=np.int64), [])
    sizes = [max(1, len(v)) for v in values]
    if float(np.prod(np.asarray(sizes, dtype=np.float64))) < 2.0**62:
        # Mixed-radix packing into one int64 makes np.unique a plain 1-D sort.
        packed = np.asarray(codes[0], dtype=np.int64)  # (not zeros * size + codes: two passes fewer)
        for c, size in zip(codes[1:], sizes[1:], strict=True):
            packed = packed * size + np.asarray(c, dtype=np.int64)
        uniq, inverse = unique_codes(packed, int(np.prod(np.asarray(sizes, dtype=np.float64))))
        digits = []
        for size in reversed(sizes):
            uniq, k = np.divmod(uniq, size)
            digits.append(k)
        digits.reverse()
    else:
        stacked = np.stack([np.asarray(c, dtype=np.int64) for c in codes], axis=1)
        uniques, inverse = np.unique(stacked, axis=0, return_inverse=True)
        digits = [uniques[:, j] for j in range(len(codes))]
    # One list per column, then tuples: no Python work per (tuple, column) pair.
    picked = [[column[k] for k in d.tolist()] for column, d in zip(values, digits, strict=True)]
    labels = list(zip(*picked, strict=True))
    if presorted:  # ascending packed codes / rows are lexicographic over per-column ranks
        return Factor(inverse.reshape(-1).astype(np.int64, copy=False), labels)
    order = sorted(range(len(labels)), key=lambda i: label_sort_key(labels[i]))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return Factor(rank[inverse.reshape(-1)], [labels[i] for i in order])
