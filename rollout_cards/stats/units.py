"""Mergeable per-unit sufficient statistics.

A cluster-robust interval over independent units (tasks, runs, seeds) needs only, per
unit, the number of observations n_c, their sum Σy and their sum of squares Σy².
Those three numbers add up across batches, files or machines, so a statistic over
millions of episodes can be computed by streaming and merging partial `UnitStats`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import finite_array, jsonable

__all__ = ["UnitStats", "align_units"]


def _as_unit_array(units: Iterable[Any] | np.ndarray) -> np.ndarray:
    """Return unit ids as a 1-D array without numpy's silent int → str coercion."""
    if isinstance(units, np.ndarray):
        if units.ndim != 1:
            raise StatisticsError(f"unit ids must be 1-dimensional, got shape {units.shape}")
        return units
    # fromiter with dtype=object keeps tuples (e.g. (task_id, trial)) as single ids.
    arr = np.fromiter(units, dtype=object)
    if arr.size == 0:
        return arr
    kinds = {type(u) for u in arr}
    if all(issubclass(k, str) for k in kinds):
        return arr.astype(str)
    if all(issubclass(k, int | np.integer) and not issubclass(k, bool) for k in kinds):
        return arr.astype(np.int64)
    return arr


def _factorize(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct unit ids (sorted when they are orderable) and each row's position in them."""
    try:
        uniques, inverse = np.unique(units, return_inverse=True)
        return uniques, inverse.reshape(-1)
    except TypeError:
        # Mixed, unorderable ids: keep first-seen order so results are still deterministic.
        index: dict[Any, int] = {}
        inverse = np.fromiter(
            (index.setdefault(u, len(index)) for u in units.tolist()),
            dtype=np.intp,
            count=units.size,
        )
        uniques = np.empty(len(index), dtype=object)
        for u, i in index.items():
            uniques[i] = u
        return uniques, inverse


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class UnitStats:
    """Per-unit count, sum and sum of squares of an observed value.

    `units[i]` has `counts[i]` observations whose values sum to `sums[i]` and whose
    squares sum to `sumsq[i]`. Unit ids are unique; every count is ≥ 1. The arrays
    are read-only copies. Equality is by value via `same_as` (arrays make `==` ambiguous).
    """

    units: np.ndarray
    counts: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray

    def __post_init__(self) -> None:
        units = _as_unit_array(self.units)
        counts = np.asarray(self.counts)
        if (
            counts.size
            and not np.issubdtype(counts.dtype, np.integer)
            and not np.all(counts == np.round(counts))
        ):
            raise StatisticsError("UnitStats counts must be whole numbers")
        counts = counts.astype(np.int64)
        sums = finite_array(self.sums, "UnitStats sums")
        sumsq = finite_array(self.sumsq, "UnitStats sumsq")
        if not (units.shape == counts.shape == sums.shape == sumsq.shape):
            raise StatisticsError(
                "UnitStats arrays must have the same length: "
                f"units {units.shape}, counts {counts.shape}, sums {sums.shape}, sumsq {sumsq.shape}"
            )
        if counts.ndim != 1:
            raise StatisticsError("UnitStats arrays must be 1-dimensional")
        if np.any(counts < 1):
            raise StatisticsError("every unit in UnitStats needs at least one observation")
        if np.any(sumsq < 0):
            raise StatisticsError("UnitStats sumsq cannot be negative")
        if _factorize(units)[0].size != units.size:
            raise StatisticsError("UnitStats unit ids must be unique; use merge() to combine")
        for name, arr in (("units", units), ("counts", counts), ("sums", sums), ("sumsq", sumsq)):
            object.__setattr__(self, name, _frozen(arr))

    # --- constructors -------------------------------------------------------------

    @classmethod
    def from_values(
        cls, values: ArrayLike, units: Iterable[Any] | np.ndarray | None = None
    ) -> UnitStats:
        """Summarise raw observations; `units[i]` is the unit of `values[i]`.

        Without `units`, every value is its own unit (ids 0..n-1).
        """
        vals = finite_array(values, "values")
        unit_ids = np.arange(vals.size) if units is None else _as_unit_array(units)
        if unit_ids.size != vals.size:
            raise StatisticsError(
                f"values and units must have the same length ({vals.size} vs {unit_ids.size})"
            )
        return cls._grouped(unit_ids, np.ones(vals.size, dtype=np.int64), vals, vals * vals)

    @classmethod
    def empty(cls) -> UnitStats:
        """A `UnitStats` with no units (the identity of `merge`)."""
        return cls(
            np.array([], dtype=object), np.array([], dtype=np.int64), np.array([]), np.array([])
        )

    @classmethod
    def _grouped(
        cls, units: np.ndarray, counts: np.ndarray, sums: np.ndarray, sumsq: np.ndarray
    ) -> UnitStats:
        if units.size == 0:
            return cls.empty()
        uniques, inverse = _factorize(units)
        k = uniques.size
        return cls(
            uniques,
            np.bincount(inverse, weights=counts, minlength=k).round().astype(np.int64),
            np.bincount(inverse, weights=sums, minlength=k),
            np.bincount(inverse, weights=sumsq, minlength=k),
        )

    def merge(self, *others: UnitStats) -> UnitStats:
        """Combine partial statistics; observations of the same unit id are pooled."""
        parts = [self, *others]
        nonempty = [p for p in parts if p.n_units]
        if not nonempty:
            return UnitStats.empty()
        units = np.concatenate([_as_object_if_mixed(p.units, nonempty) for p in nonempty])
        return UnitStats._grouped(
            units,
            np.concatenate([p.counts for p in nonempty]),
            np.concatenate([p.sums for p in nonempty]),
            np.concatenate([p.sumsq for p in nonempty]),
        )

    # --- views --------------------------------------------------------------------

    @property
    def n_units(self) -> int:
        """Number of distinct units."""
        return int(self.units.size)

    @property
    def n(self) -> int:
        """Total number of observations over all units."""
        return int(self.counts.sum())

    @property
    def total(self) -> float:
        """Sum of all observations."""
        return float(self.sums.sum())

    @property
    def unit_means(self) -> np.ndarray:
        """Per-unit mean of the observations."""
        return self.sums / self.counts

    @property
    def mean(self) -> float:
        """Mean of all observations (units weighted by their size)."""
        if self.n == 0:
            raise StatisticsError("the mean of no observations is undefined")
        return self.total / self.n

    def take(self, positions: ArrayLike) -> UnitStats:
        """The statistics of the units at `positions` (in that order)."""
        idx = np.asarray(positions, dtype=np.intp)
        return UnitStats(self.units[idx], self.counts[idx], self.sums[idx], self.sumsq[idx])

    def same_as(self, other: UnitStats, *, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
        """True if both hold the same units and counts and (up to rounding) sums."""
        return (
            self.units.shape == other.units.shape
            and bool(np.all(self.units == other.units))
            and bool(np.array_equal(self.counts, other.counts))
            and bool(np.allclose(self.sums, other.sums, rtol=rtol, atol=atol))
            and bool(np.allclose(self.sumsq, other.sumsq, rtol=rtol, atol=atol))
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, e.g. to ship a partial result between workers."""
        return {
            "units": jsonable(self.units),
            "counts": jsonable(self.counts),
            "sums": jsonable(self.sums),
            "sumsq": jsonable(self.sumsq),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnitStats:
        """Inverse of `to_dict` (list-valued unit ids become tuples)."""
        units = [tuple(u) if isinstance(u, list) else u for u in data["units"]]
        return cls(_as_unit_array(units), data["counts"], data["sums"], data["sumsq"])


def _as_object_if_mixed(units: np.ndarray, parts: list[UnitStats]) -> np.ndarray:
    """Concatenating str and int id arrays would turn ints into strs; use object instead."""
    kinds = {p.units.dtype.kind for p in parts}
    return units.astype(object) if len(kinds) > 1 else units


def align_units(a: UnitStats, b: UnitStats) -> tuple[UnitStats, UnitStats, int, int]:
    """Restrict `a` and `b` to their shared unit ids, in `a`'s order.

    Returns (a_shared, b_shared, only_in_a, only_in_b): the last two count the units
    dropped because the other side does not have them, so a report can say so.
    """
    position_in_b = {u: i for i, u in enumerate(b.units.tolist())}
    pos_a: list[int] = []
    pos_b: list[int] = []
    for i, u in enumerate(a.units.tolist()):
        j = position_in_b.get(u)
        if j is not None:
            pos_a.append(i)
            pos_b.append(j)
    shared = len(pos_a)
    if shared == 0:
        return UnitStats.empty(), UnitStats.empty(), a.n_units, b.n_units
    return a.take(pos_a), b.take(pos_b), a.n_units - shared, b.n_units - shared
