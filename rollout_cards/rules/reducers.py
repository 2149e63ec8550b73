"""`reduce`: combine the attempts of each key (e.g. task) into one value, vectorized.

Rows are sorted once by (key, order) and every reducer is a `numpy.*.reduceat` or an
index into the sorted values, so a million attempts reduce in well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import RuleError
from ..model.rule import Reduce, ReduceWith
from ..stats import pass_at_k_many, pass_hat_k_many

__all__ = ["Reduced", "reduce_attempts"]


@dataclass(frozen=True, eq=False)
class Reduced:
    """One value per key: `keys[j]` (ascending key codes), its value, its number of
    attempts, and the row (in the input order) of its first attempt."""

    keys: np.ndarray
    values: np.ndarray
    attempts: np.ndarray
    first_row: np.ndarray
    #: keys left out because they had fewer than k attempts (`short: exclude`)
    short: int = 0


def reduce_attempts(
    values: np.ndarray,
    keys: np.ndarray,
    spec: Reduce,
    *,
    order: np.ndarray | None = None,
    describe: Callable[[int], str] = str,
    file: str | None = None,
) -> Reduced:
    """Reduce `values` grouped by integer `keys` with `spec.with_`.

    `order` ranks attempts for `first` (e.g. trial); ties and a missing order fall
    back to the input order. `describe(key)` names a key in errors. pass_at_k and
    pass_hat_k need 0/1 values and at least k attempts per key (RuleError otherwise).
    """
    how = spec.with_
    if values.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Reduced(empty, np.zeros(0), empty, empty)
    position = np.arange(values.size)
    if how is ReduceWith.MEDIAN:
        perm = np.lexsort((position, values, keys))
    elif how in (ReduceWith.FIRST, ReduceWith.MODE) and order is not None:
        perm = np.lexsort((position, order, keys))
    else:
        perm = np.lexsort((position, keys))
    k_sorted, v_sorted = keys[perm], values[perm]
    starts = np.flatnonzero(np.r_[True, k_sorted[1:] != k_sorted[:-1]])
    counts = np.diff(np.r_[starts, k_sorted.size])
    if how is ReduceWith.MEAN:
        out = np.add.reduceat(v_sorted, starts) / counts
    elif how is ReduceWith.MAX:
        out = np.maximum.reduceat(v_sorted, starts)
    elif how is ReduceWith.MIN:
        out = np.minimum.reduceat(v_sorted, starts)
    elif how is ReduceWith.MEDIAN:
        out = (v_sorted[starts + (counts - 1) // 2] + v_sorted[starts + counts // 2]) / 2.0
    elif how is ReduceWith.FIRST:
        out = v_sorted[starts]
    elif how is ReduceWith.MODE:
        out = _mode(v_sorted, starts, counts)
    else:
        keep = np.ones(starts.size, dtype=bool)
        if spec.short == "exclude":
            keep = counts >= int(spec.k or 1)
            if not keep.all():
                ends = starts + counts
                rows = np.concatenate([np.arange(a, b) for a, b in zip(starts[keep], ends[keep], strict=True)]
                                      or [np.zeros(0, dtype=np.int64)])
                sub = reduce_attempts(v_sorted[rows], k_sorted[rows], spec, describe=describe, file=file)
                return Reduced(sub.keys, sub.values, sub.attempts, perm[rows][sub.first_row],
                               int((~keep).sum()))
        out = _pass_k(v_sorted, k_sorted, starts, counts, spec, describe, file)
    return Reduced(k_sorted[starts], out.astype(np.float64), counts, perm[starts])


def _mode(v_sorted: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The most frequent value of each run; ties go to the value whose first attempt comes first."""
    out = np.empty(starts.size)
    for j, (a, n) in enumerate(zip(starts.tolist(), counts.tolist(), strict=True)):
        seen: dict[float, int] = {}
        for v in v_sorted[a : a + n].tolist():
            seen[v] = seen.get(v, 0) + 1
        out[j] = max(seen, key=seen.__getitem__)  # max keeps the first of equal counts (insertion order)
    return out


def _pass_k(
    v_sorted: np.ndarray,
    k_sorted: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    spec: Reduce,
    describe: Callable[[int], str],
    file: str | None,
) -> np.ndarray:
    k = int(spec.k or 1)
    name = spec.with_.value
    not01 = ~np.isin(v_sorted, (0.0, 1.0))
    if not01.any():
        bad = int(np.flatnonzero(not01)[0])
        raise RuleError(
            f"{name} counts successes, so scores must be 0/1, but {describe(int(k_sorted[bad]))} "
            f"has score {v_sorted[bad]:g}; make the score a boolean, or reduce with mean",
            file=file,
            key="reduce.with",
        )
    short = np.flatnonzero(counts < k)
    if short.size:
        j = int(short[0])
        raise RuleError(
            f"{describe(int(k_sorted[starts[j]]))} has {int(counts[j])} attempt(s), fewer than "
            f"k={k} ({short.size} key(s) are short); {name} needs at least k attempts per key: "
            "lower k, or exclude fewer statuses",
            file=file,
            key="reduce.k",
        )
    successes = np.add.reduceat(v_sorted, starts).round().astype(np.int64)
    many = pass_at_k_many if spec.with_ is ReduceWith.PASS_AT_K else pass_hat_k_many
    return many(counts.astype(np.int64), successes, k)
