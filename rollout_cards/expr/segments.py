"""Segment operations: reductions over runs of equal keys, and per-list operations.

Steps are stored grouped by episode, so the selected steps of one record batch form
contiguous runs of equal `episode_id`. A reduction over runs (numpy `reduceat` on the
run starts) costs one vectorized pass and no hash table, where a `group_by` hashes
every row. Lists are Arrow list arrays; sorting, deduplicating, comparing and
searching their items is done on the flattened items with the parent index of each
item, so every operation is vectorized over all lists of a column at once.

    run_starts(keys) -> int64 starts of the runs of equal values (keys grouped or not;
        a dictionary-encoded key compares its indices)
    lists_from_runs(values, starts, n) -> ListArray with one list per run
    sort_lists(lists, distinct=False) -> the items of each list sorted (and deduplicated)
    lists_equal(a, b) -> bool per row: same length and equal items in order
    list_contains(lists, x) -> bool per row: x is an item of the list
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..numpy_arrow import dictionary_codes

__all__ = [
    "as_array",
    "flatten",
    "index_of",
    "item_at",
    "list_contains",
    "lists_equal",
    "lists_from_runs",
    "offsets_of",
    "rebuild",
    "run_starts",
    "sort_lists",
]


def run_starts(keys: pa.Array) -> np.ndarray:
    """Positions where a run of equal keys starts (0 first); empty for no rows."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    if pa.types.is_dictionary(keys.type) and keys.null_count == 0:
        # Equal indices are equal values; a dictionary that repeats a value only splits a
        # run in two, which every consumer merges like an episode split across batches.
        codes = dictionary_codes(keys)
        return np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1]).astype(np.int64)
    changed = pc.not_equal(keys.slice(1), keys.slice(0, n - 1))
    changed = np.asarray(changed.to_numpy(zero_copy_only=False), dtype=bool)
    return np.concatenate([[0], np.flatnonzero(changed) + 1]).astype(np.int64)


def lists_from_runs(values: pa.Array, starts: np.ndarray, n: int) -> pa.Array:
    """One list per run: the values from each start to the next (n = len(values))."""
    offsets = pa.array(np.concatenate([starts, [n]]).astype(np.int32), pa.int32())
    return pa.ListArray.from_arrays(offsets, values)


def as_array(x: pa.Array | pa.ChunkedArray) -> pa.Array:
    """x as one Array (chunks combined)."""
    if isinstance(x, pa.ChunkedArray):
        return x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
    return x


def offsets_of(lists: pa.Array) -> np.ndarray:
    """The (n + 1) offsets of a list array, relative to its own first item."""
    lists = as_array(lists)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


def flatten(lists: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The items of every (non-null) list in order, and the row each item belongs to."""
    lists = as_array(lists)
    items = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    return items, parents


def rebuild(items: pa.Array, parents: np.ndarray, n: int, valid: pa.Array | None) -> pa.Array:
    """A list array of n rows from items and their (non-decreasing) row index."""
    counts = np.bincount(parents, minlength=n) if parents.size else np.zeros(n, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    mask = None if valid is None else pc.invert(valid)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, mask=mask)


def sort_lists(lists: pa.Array, *, distinct: bool = False) -> pa.Array:
    """Each list's items in ascending order (nulls last); with `distinct`, each value once
    and nulls dropped. Null lists stay null."""
    lists = as_array(lists)
    n = len(lists)
    items, parents = flatten(lists)
    if len(items) == 0:
        return lists
    table = pa.table({"p": parents, "v": items})
    # nulls sort last by default
    order = pc.sort_indices(table, sort_keys=[("p", "ascending"), ("v", "ascending")])
    items = items.take(order)
    parents = parents[order.to_numpy()]
    if distinct:
        keep = np.asarray(pc.is_valid(items).to_numpy(zero_copy_only=False), dtype=bool)
        if len(items) > 1:
            same_parent = parents[1:] == parents[:-1]
            same_value = pc.fill_null(pc.equal(items.slice(1), items.slice(0, len(items) - 1)), False)
            same_value = np.asarray(same_value.to_numpy(zero_copy_only=False), dtype=bool)
            keep[1:] &= ~(same_parent & same_value)
        items = items.filter(pa.array(keep))
        parents = parents[keep]
    return rebuild(items, parents, n, pc.is_valid(lists))


def lists_equal(a: pa.Array, b: pa.Array) -> pa.Array:
    """Per row: both lists have the same length and equal items in the same order (two
    null items are equal); null when either list is null."""
    a, b = as_array(a), as_array(b)
    n = len(a)
    len_a = pc.list_value_length(a)
    len_b = pc.list_value_length(b)
    same_len = pc.fill_null(pc.equal(len_a, len_b), False)
    a_same, b_same = a.filter(same_len), b.filter(same_len)
    items_a, parents = flatten(a_same)
    items_b, _ = flatten(b_same)
    eq = pc.equal(items_a, items_b)
    both_null = pc.and_(pc.is_null(items_a), pc.is_null(items_b))
    eq = pc.or_kleene(pc.fill_null(eq, False), both_null)
    mismatch = ~np.asarray(eq.to_numpy(zero_copy_only=False), dtype=bool)
    bad = np.bincount(parents[mismatch], minlength=len(a_same)) if mismatch.any() else None
    result = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(np.asarray(same_len.to_numpy(zero_copy_only=False), dtype=bool))
    result[rows] = True if bad is None else bad == 0
    valid = pc.and_(pc.is_valid(a), pc.is_valid(b))
    return pc.if_else(valid, pa.array(result), pa.scalar(None, pa.bool_()))


def _hits(lists: pa.Array, x: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The row of each item, and whether the item equals its row's x."""
    items, parents = flatten(lists)
    hit = pc.fill_null(pc.equal(items, x.take(pa.array(parents))), False)
    return parents, np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)


def list_contains(lists: pa.Array, x: pa.Array) -> pa.Array:
    """Per row: x equals an item of the list; null when the list or x is null."""
    lists, x = as_array(lists), as_array(x)
    n = len(lists)
    parents, hit = _hits(lists, x)
    found = np.bincount(parents[hit], minlength=n) > 0 if hit.any() else np.zeros(n, dtype=bool)
    valid = pc.and_(pc.is_valid(lists), pc.is_valid(x))
    return pc.if_else(valid, pa.array(found), pa.scalar(None, pa.bool_()))


def item_at(lists: pa.Array, index: pa.Array) -> pa.Array:
    """Per row: the item at `index` (negative counts from the end); null when out of range."""
    lists, index = as_array(lists), as_array(index)
    offsets = offsets_of(lists)
    lengths = np.diff(offsets)
    i = pc.fill_null(index, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    i = np.where(i < 0, i + lengths, i)
    ok = (i >= 0) & (i < lengths)
    ok &= np.asarray(pc.and_(pc.is_valid(lists), pc.is_valid(index)).to_numpy(zero_copy_only=False), dtype=bool)
    items = pc.list_flatten(lists)
    if len(items) == 0:
        return pa.nulls(len(lists), lists.type.value_type)
    where = np.where(ok, offsets[:-1] + i, 0)
    return pc.if_else(pa.array(ok), items.take(pa.array(where)), pa.scalar(None, items.type))


def index_of(lists: pa.Array, x: pa.Array) -> pa.Array:
    """Per row: the position of the first item equal to x; null when absent or either is null."""
    lists, x = as_array(lists), as_array(x)
    n = len(lists)
    parents, hit = _hits(lists, x)
    offsets = offsets_of(lists)
    first = np.full(n, -1, dtype=np.int64)
    positions = np.flatnonzero(hit)
    rows, at = np.unique(parents[hit], return_index=True)  # first hit of each row
    first[rows] = positions[at] - offsets[rows]
    return pa.array(first, pa.int64(), mask=first < 0)
