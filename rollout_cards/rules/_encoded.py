"""Expressions over dictionary-encoded batches, evaluated once per distinct value.

The reader can hand out step batches with their string columns still dictionary-encoded
(`Card.iter_steps(encoded=True)`): `kind` holds a handful of values over millions of rows,
`name` a few dozen. An expression is a function of its row's values only, so when every
column it reads is dictionary-encoded it is evaluated on the distinct combinations of
values that occur in the batch (a few rows) and the result is mapped back to the rows
through the indices, without expanding a string. Otherwise the batch is evaluated as is
(`Expression.evaluate` decodes dictionaries itself).

    evaluate(expr, batch) -> pa.Array          the same values as expr.evaluate(batch)
    evaluate_mask(expr, batch) -> bool ndarray  a boolean expression, null as False
    decoded(array) -> the array with a dictionary cast to its value type
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..expr import Expression
from ..numpy_arrow import dictionary_codes

__all__ = ["decoded", "evaluate", "evaluate_mask"]

#: Combinations of distinct values (product of the dictionaries' sizes) above which the
#: batch is evaluated row by row: the lookup table would cost more than it saves.
MAX_COMBINATIONS = 1 << 16


def decoded(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """`array` with a dictionary type cast to its value type (other arrays unchanged)."""
    if pa.types.is_dictionary(array.type):
        return array.cast(array.type.value_type)
    return array


def _codes(column: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Row codes into the dictionary, with null rows at the position after its last value,
    and the dictionary's values with that null appended."""
    dictionary = column.dictionary
    codes = dictionary_codes(column, len(dictionary))
    values = pa.concat_arrays([dictionary, pa.nulls(1, dictionary.type)])
    return codes, values


def _combinations(expr: Expression, batch: pa.RecordBatch) -> tuple[pa.Array, np.ndarray] | None:
    """(the expression over the distinct value combinations of the batch, each row's
    combination), or None when the expression does not read only dictionary columns."""
    names = sorted(n for n in expr.names if n in batch.schema.names)
    if not names or batch.num_rows == 0:
        return None
    columns = [batch.column(n) for n in names]
    if not all(pa.types.is_dictionary(c.type) for c in columns):
        return None
    sizes = [len(c.dictionary) + 1 for c in columns]
    if float(np.prod(np.asarray(sizes, dtype=np.float64))) > min(MAX_COMBINATIONS, batch.num_rows):
        return None
    row = np.zeros(batch.num_rows, dtype=np.int64)
    values = []
    for column, size in zip(columns, sizes, strict=True):
        codes, dictionary = _codes(column)
        row = row * size + codes
        values.append(dictionary)
    present = np.flatnonzero(np.bincount(row, minlength=int(np.prod(sizes))))
    digits, rest = [], present
    for size in reversed(sizes):
        rest, digit = np.divmod(rest, size)
        digits.append(digit)
    digits.reverse()
    small = pa.RecordBatch.from_arrays(
        [v.take(pa.array(d)) for v, d in zip(values, digits, strict=True)], names=names
    )
    position = np.zeros(int(np.prod(sizes)), dtype=np.int64)
    position[present] = np.arange(present.size)
    return expr.evaluate(small), position[row]


def evaluate(expr: Expression, batch: pa.RecordBatch) -> pa.Array:
    """`expr.evaluate(batch)`, computed per distinct value when the batch allows it."""
    found = _combinations(expr, batch)
    if found is None:
        return expr.evaluate(batch)
    small, rows = found
    return small.take(pa.array(rows))


def evaluate_mask(expr: Expression, batch: pa.RecordBatch) -> np.ndarray:
    """The rows where the boolean `expr` is true (null counts as false), as a numpy mask."""
    found = _combinations(expr, batch)
    if found is None:
        out = pc.fill_null(expr.evaluate(batch), False)
        return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)
    small, rows = found
    small = np.asarray(pc.fill_null(small, False).to_numpy(zero_copy_only=False), dtype=bool)
    return small[rows]
