"""Shared machinery of the bootstraps: unit-level values, statistics, refusals (private)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import finite_array, trim_mean_quarter
from rollout_cards.stats.intervals import (
    REASON_NO_DATA,
    REASON_ONE_UNIT,
    Interval,
    undefined_interval,
)
from rollout_cards.stats.units import UnitStats

BOOTSTRAP_STATISTICS = ("mean", "ratio", "median", "iqm", "std", "var", "stderr")
Statistic = str | Callable[[np.ndarray], ArrayLike]

REASON_DEGENERATE = "undefined (every resample gives the same value)"
# Bound the (resamples × units) index block held in memory at once.
BLOCK_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class UnitValues:
    """Unit-level arrays a resampled statistic is computed from."""

    means: np.ndarray
    counts: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray
    n: int

    @property
    def size(self) -> int:
        """Number of units."""
        return int(self.means.size)


def unit_values_of(data: UnitStats | ArrayLike) -> UnitValues:
    """Per-unit arrays from a `UnitStats`, or from a 1-D array holding one value per unit."""
    if isinstance(data, UnitStats):
        return UnitValues(
            data.unit_means, data.counts.astype(np.float64), data.sums, data.sumsq, data.n
        )
    values = finite_array(data, "values")
    return UnitValues(values, np.ones(values.size), values, values * values, int(values.size))


def statistic_name(statistic: Statistic) -> str:
    """The name reported in `details`; refuses unknown names."""
    if isinstance(statistic, str):
        if statistic not in BOOTSTRAP_STATISTICS:
            raise StatisticsError(
                f"unknown bootstrap statistic {statistic!r}; use one of "
                f"{', '.join(BOOTSTRAP_STATISTICS)} or a callable"
            )
        return statistic
    if callable(statistic):
        return getattr(statistic, "__name__", "callable")
    raise StatisticsError(f"statistic must be a name or a callable, got {statistic!r}")


def evaluate(statistic: Statistic, units: UnitValues, idx: np.ndarray) -> np.ndarray:
    """The statistic of each resample; row r of `idx` lists the units drawn in resample r."""
    if statistic == "ratio":
        return units.sums[idx].sum(axis=-1) / units.counts[idx].sum(axis=-1)
    x = units.means[idx]
    if statistic == "mean":
        return x.mean(axis=-1)
    if statistic == "median":
        return np.median(x, axis=-1)
    if statistic == "iqm":
        return trim_mean_quarter(x, axis=-1)
    if statistic in ("std", "var", "stderr"):  # of the unit values, divisor n − 1 (aggregates.spread)
        if x.shape[-1] < 2:
            raise StatisticsError(f"the {statistic} of fewer than 2 units is undefined")
        if statistic == "var":
            return x.var(axis=-1, ddof=1)
        std = x.std(axis=-1, ddof=1)
        return std if statistic == "std" else std / np.sqrt(x.shape[-1])
    out = np.asarray(statistic(x), dtype=np.float64)  # type: ignore[operator]
    if out.shape != (idx.shape[0],):
        raise StatisticsError(
            f"a callable statistic must return one value per resample (shape {(idx.shape[0],)}), "
            f"got shape {out.shape}"
        )
    return out


def estimate_of(statistic: Statistic, units: UnitValues) -> float:
    """The statistic of the observed sample (the identity resample)."""
    return float(evaluate(statistic, units, np.arange(units.size)[None, :])[0])


def zero_event_kind(units: UnitValues) -> str | None:
    """Which degenerate 0/1 case the data are ("zero events" / "all events"), or None."""
    if units.size == 0:
        return None
    if np.all(units.sumsq == 0):
        return "zero events"
    # Σy = Σy² = n_c in every unit means every observation is exactly 1.
    if np.all(units.sums == units.counts) and np.all(units.sumsq == units.counts):
        return "all events (no failures)"
    return None


def refuse(kind: str, n: int, what: str) -> None:
    """Raise the StatisticsError that points zero-event data to the right interval."""
    raise StatisticsError(
        f"refusing to bootstrap {what}: {kind} ({n} observations), so every resample "
        "is identical and the interval would have zero width. Use wilson_interval or "
        "clopper_pearson_interval for a proportion, or zero_event_upper_bound for a "
        "one-sided bound."
    )


def refuse_zero_events(units: UnitValues) -> None:
    """Raise StatisticsError on zero-event (or all-event) data: no bootstrap then."""
    kind = zero_event_kind(units)
    if kind is not None:
        refuse(kind, units.n, "the data")


def first_checks(units: UnitValues, method: str, level: float, name: str) -> Interval | None:
    """Undefined intervals for 0 or 1 unit; None when the bootstrap can run.

    With one unit every statistic equals that unit's mean, given as the estimate.
    """
    if units.size == 0:
        return undefined_interval(method, level, 0, 0, REASON_NO_DATA, details={"statistic": name})
    if units.size == 1:
        return undefined_interval(
            method,
            level,
            units.n,
            1,
            REASON_ONE_UNIT,
            estimate=float(units.sums.sum() / units.counts.sum()),
            details={"statistic": name},
        )
    return None
