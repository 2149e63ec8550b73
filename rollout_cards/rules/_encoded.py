"""Expressions over dictionary-encoded batches, evaluated once per distinct value.

The reader can hand out step batches with their string columns still dictionary-encoded
(`Card.iter_steps(encoded=True)`): `kind` holds a handful of values over millions of rows,
`name` a few dozen. An expression is a function of its row's values only, so when every
column it reads is dictionary-encoded it is evaluated on the distinct combinations of
values that occur in the batch (a few rows) and the result is mapped back to the rows
through the indices, without expanding a string. Otherwise the batch is evaluated as is
(`Expression.evaluate` decodes dictionaries itself).

A `PerValue` evaluator remembers what it has evaluated for the dictionaries of recent
batches (Parquet gives each row group its own dictionary, usually the same few values in
one of a few orders), so a scan evaluates the expression a few times in all, and per
batch only maps codes: one pass to combine them, one to look the results up. Few
combinations are evaluated all at once; if that fails (an expression may fail on values
that no row holds, e.g. an overflow), and for many, only those that occur, as they come,
so a batch fails exactly when its row-by-row evaluation does.

    PerValue(expr).values(batch) -> pa.Array   the same values as expr.evaluate(batch)
    PerValue(expr).mask(batch) -> bool ndarray a boolean expression, null as False
    evaluate(expr, batch), evaluate_mask(expr, batch): the same, without memory
    evaluate_rows(expr, table) -> expr.evaluate(table), per value when its string columns repeat
    decoded(array) -> the array with a dictionary cast to its value type
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..expr import Expression
from ..numpy_arrow import int64_array, raw_codes, validity

__all__ = ["PerValue", "decoded", "evaluate", "evaluate_mask", "evaluate_rows"]

#: Combinations of distinct values (product of the dictionaries' sizes) above which the
#: batch is evaluated row by row: the lookup table would cost more than it saves.
MAX_COMBINATIONS = 1 << 16
#: Combinations up to which all are evaluated at once (see _Table).
_WHOLE = 1 << 12
#: Dictionaries of strings this small (values, bytes) are remembered by their values (others
#: only while the same dictionary comes back, as within one row group).
_SMALL_DICTIONARY = 256
_SMALL_BYTES = 1 << 16
#: Sets of dictionaries whose evaluated combinations a PerValue keeps (a row group's dictionary
#: lists its values in the order they first occur, so a few values come in many orders).
_REMEMBERED = 64


def decoded(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """`array` with a dictionary type cast to its value type (other arrays unchanged)."""
    if pa.types.is_dictionary(array.type):
        return array.cast(array.type.value_type)
    return array


class _Table:
    """The expression's results over the value combinations of one set of dictionaries.

    A table of at most _WHOLE combinations is evaluated on all of them at once (`whole`:
    a row's combination is its position in `results`, so a batch is mapped with one
    lookup). An expression may fail on a combination no row holds (an overflow, a bad
    pattern in a column): then, and for larger tables, only the combinations that occur
    are evaluated, as they come (`slot[c]`: combination c's position in `results`, -1
    not yet), and a failure is the one row-by-row evaluation raises."""

    def __init__(self, expr: Expression, names: list[str], dictionaries: list[pa.Array], sizes: list[int],
                 keep: bool):
        self.dictionaries = dictionaries if keep else None  # alive while their buffers identify them
        self.values = [pa.concat_arrays([d, pa.nulls(1, d.type)]) for d in dictionaries]  # null: last code
        self.sizes = sizes
        self.results: pa.Array | None = None
        self.truth = np.zeros(0, dtype=bool)  # results as a mask (null: False)
        total = int(np.prod(sizes))
        self.whole = False
        if total <= _WHOLE:
            try:
                self.results = expr.evaluate(self._combinations(names, np.arange(total)))
                self.whole = True
            except Exception:  # noqa: BLE001 - speculative: the exact path below raises what rows raise
                self.results = None
        self.slot = None if self.whole else np.full(total, -1, dtype=np.int32)

    def _combinations(self, names: list[str], combos: np.ndarray) -> pa.RecordBatch:
        digits, rest = [], combos
        for size in reversed(self.sizes):
            rest, digit = np.divmod(rest, size)
            digits.append(digit)
        digits.reverse()
        return pa.RecordBatch.from_arrays(
            [v.take(int64_array(d)) for v, d in zip(self.values, digits, strict=True)], names=names
        )

    def slots(self, expr: Expression, names: list[str], row: np.ndarray) -> np.ndarray:
        """Each row's position in `results` (evaluating the combinations not seen yet)."""
        if self.whole:
            return row
        assert self.slot is not None
        slots = self.slot[row]
        if slots.min() < 0:
            combos = np.flatnonzero(np.bincount(row[slots < 0], minlength=len(self.slot)))
            new = expr.evaluate(self._combinations(names, combos))
            start = 0 if self.results is None else len(self.results)
            self.results = new if self.results is None else pa.concat_arrays([self.results, new])
            self.slot[combos] = np.arange(start, start + len(combos), dtype=np.int32)
            slots = self.slot[row]
        return slots

    def mask(self) -> np.ndarray:
        """The (boolean) results as a mask, null as False."""
        assert self.results is not None
        if len(self.truth) < len(self.results):
            self.truth = np.asarray(pc.fill_null(self.results, False).to_numpy(zero_copy_only=False), dtype=bool)
        return self.truth


def _key(dictionary: pa.Array) -> tuple:
    """What identifies a dictionary's values: a small one of strings by its values, any
    other by its buffers (kept alive by the table, so their addresses are not reused)."""
    t = dictionary.type
    strings = pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    if strings and len(dictionary) <= _SMALL_DICTIONARY and dictionary.nbytes <= _SMALL_BYTES:
        return (str(t), tuple(dictionary.to_pylist()))
    buffers = tuple(b.address if b is not None else 0 for b in dictionary.buffers())
    return ("buffers", str(t), dictionary.offset, len(dictionary), buffers)


class PerValue:
    """One expression evaluated per distinct value combination over a stream of batches."""

    def __init__(self, expr: Expression):
        self.expr = expr
        self._tables: OrderedDict[tuple, _Table] = OrderedDict()
        self._recent: tuple[tuple, _Table] | None = None

    def _table(self, names: list[str], dictionaries: list[pa.Array], sizes: list[int]) -> _Table:
        keys = [_key(d) for d in dictionaries]
        key = (tuple(names), *keys)
        if any(k[0] == "buffers" for k in keys):
            # a large dictionary (or not of strings) comes back only within its row group:
            # keep the last one only, so that no row group's dictionary is held past it
            if self._recent is None or self._recent[0] != key:
                self._recent = (key, _Table(self.expr, names, dictionaries, sizes, keep=True))
            return self._recent[1]
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table(self.expr, names, dictionaries, sizes, keep=False)
            if len(self._tables) > _REMEMBERED:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return table

    def _slots(self, batch: pa.RecordBatch) -> tuple[_Table, np.ndarray] | None:
        """(the table of this batch's dictionaries, each row's slot in its results), or None
        when the expression does not read only dictionary columns."""
        names = sorted(n for n in self.expr.names if n in batch.schema.names)
        if not names or batch.num_rows == 0:
            return None
        columns = [batch.column(n) for n in names]
        if not all(pa.types.is_dictionary(c.type) for c in columns):
            return None
        dictionaries = [c.dictionary for c in columns]
        sizes = [len(d) + 1 for d in dictionaries]
        if float(np.prod(np.asarray(sizes, dtype=np.float64))) > min(MAX_COMBINATIONS, batch.num_rows):
            return None
        table = self._table(names, dictionaries, sizes)
        return table, table.slots(self.expr, names, _combination_rows(columns, sizes))

    def values(self, batch: pa.RecordBatch) -> pa.Array:
        """`expr.evaluate(batch)`, computed per distinct value when the batch allows it."""
        found = self._slots(batch)
        if found is None:
            return self.expr.evaluate(batch)
        table, slots = found
        assert table.results is not None
        slots = slots.astype(np.int32, copy=False)  # (narrower when the table is whole)
        return table.results.take(pa.Array.from_buffers(pa.int32(), len(slots), [None, pa.py_buffer(slots)]))

    def mask(self, batch: pa.RecordBatch) -> np.ndarray:
        """The rows where the boolean `expr` is true (null counts as false), as a numpy mask."""
        found = self._slots(batch)
        if found is None:
            out = pc.fill_null(self.expr.evaluate(batch), False)
            return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)
        table, slots = found
        return _looked_up(table.mask(), slots)


def _combination_rows(columns: list[pa.Array], sizes: list[int]) -> np.ndarray:
    """Each row's combination of codes (null as the last code of its column), in the
    narrowest unsigned type that holds every combination: the product of the sizes is at most
    MAX_COMBINATIONS, so uint16 at most, and usually uint8 (a where over kind and name: 3 x 5).
    In-place passes over one or two bytes per row cost a third of the same passes over int32
    (the 20M-step count rule spent ~0.25 ms a batch here). A valid row's index must be inside
    its dictionary, as in every batch the reader hands out (numpy_arrow.check_batch)."""
    dtype = np.min_scalar_type(int(np.prod(sizes)) - 1)
    row = None
    for column, size in zip(columns, sizes, strict=True):
        indices = column.indices
        codes = raw_codes(indices).astype(dtype)  # a copy: a null row's garbage wraps, times 0 below
        if indices.null_count:
            null = dtype.type(size - 1)
            codes -= null
            codes *= validity(indices, dtype)
            codes += null
        if row is None:
            row = codes
        else:
            row *= dtype.type(size)
            row += codes
    assert row is not None
    return row


def _looked_up(truth: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """`truth[slots]` (a new, writable mask). One-byte slots (a small whole table) are looked
    up without np.take, which widens every index to intp first: by comparison when at most
    two slots are true (a where naming one kind and one name has one), else by a byte
    translation table (~0.6x the take)."""
    if slots.dtype != np.uint8:
        return np.take(truth, slots)  # (take: ~2x faster than indexing with int32 slots)
    hits = np.flatnonzero(truth)
    if len(hits) == 0:
        return np.zeros(len(slots), dtype=bool)
    if len(hits) <= 2:
        out = slots == slots.dtype.type(hits[0])
        if len(hits) == 2:
            out |= slots == slots.dtype.type(hits[1])
        return out
    table = np.zeros(256, dtype=np.uint8)
    table[: len(truth)] = truth
    return np.frombuffer(bytearray(slots.tobytes().translate(table.tobytes())), dtype=bool)


#: A string column is encoded for `evaluate_rows` when this many of its first rows hold at
#: most _SAMPLE_DISTINCT values (a sample: judging the whole column costs what encoding it does).
_SAMPLE = 1 << 14
_SAMPLE_DISTINCT = 256


def evaluate_rows(expr: Expression, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """`expr.evaluate(table)`; per distinct value when every column it reads is a string
    column repeating few values (an extracted answer against a target letter): those are
    dictionary-encoded (one hash pass each, instead of the expression's kernels, e.g. a regex,
    over every row) and `PerValue` evaluates their combinations. Same values either way."""
    names = sorted(n for n in expr.names if n in table.schema.names)
    if not names or table.num_rows < 2 * _SAMPLE:
        return expr.evaluate(table)
    columns = []
    for name in names:
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            return expr.evaluate(table)
        if pc.count_distinct(column.slice(0, _SAMPLE)).as_py() > _SAMPLE_DISTINCT:
            return expr.evaluate(table)
        whole = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        columns.append(pc.dictionary_encode(whole))
    return PerValue(expr).values(pa.RecordBatch.from_arrays(columns, names=names))


def evaluate(expr: Expression, batch: pa.RecordBatch) -> pa.Array:
    """`expr.evaluate(batch)`, computed per distinct value when the batch allows it."""
    return PerValue(expr).values(batch)


def evaluate_mask(expr: Expression, batch: pa.RecordBatch) -> np.ndarray:
    """The rows where the boolean `expr` is true (null counts as false), as a numpy mask."""
    return PerValue(expr).mask(batch)
