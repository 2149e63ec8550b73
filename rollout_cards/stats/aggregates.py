"""Point aggregates (mean, median, IQM with rliable's definitions; the spread statistics
std, var and stderr, with n − 1) and stratum pooling.

Scores may be 1-D (one value per unit) or 2-D laid out as rliable does,
runs × tasks. Heavy tails move the mean a lot and the median/IQM little, which is
why a report shows them side by side.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count, finite_array, jsonable, trim_mean_quarter
from rollout_cards.stats.units import _as_unit_array, _factorize

__all__ = [
    "AGGREGATE_STATISTICS",
    "STRATUM_WEIGHTS",
    "StratifiedResult",
    "StratumValue",
    "aggregate",
    "iqm",
    "mean",
    "median",
    "pool_strata",
    "spread",
    "stratified",
]

AGGREGATE_STATISTICS = ("mean", "median", "iqm", "std", "var", "stderr")
#: Statistics of the spread of the values, defined from 2 values on.
SPREAD_STATISTICS = ("std", "var", "stderr")
STRATUM_WEIGHTS = ("equal", "by_count")


def _scores(x: ArrayLike) -> np.ndarray:
    arr = finite_array(x, "scores", ndim=None)
    if arr.ndim not in (1, 2):
        raise StatisticsError(f"scores must be 1-D or 2-D (runs × tasks), got shape {arr.shape}")
    if arr.size == 0:
        raise StatisticsError("an aggregate of no values is undefined")
    return arr


def mean(x: ArrayLike) -> float:
    """Mean of all values (for 2-D runs × tasks: of every cell, as rliable does)."""
    return float(np.mean(_scores(x)))


def median(x: ArrayLike) -> float:
    """Median; for 2-D runs × tasks, the median of per-task means (rliable's definition)."""
    arr = _scores(x)
    return float(np.median(arr.mean(axis=0) if arr.ndim == 2 else arr))


def iqm(x: ArrayLike) -> float:
    """Interquartile mean: `scipy.stats.trim_mean(x, 0.25)` over all values flattened.

    This is rliable's definition: floor(0.25·N) values are cut from each end of the
    N sorted values and the rest averaged.
    """
    return float(trim_mean_quarter(_scores(x).ravel()))


def spread(x: ArrayLike, statistic: str) -> float:
    """`std` (sample standard deviation, divisor n − 1), `var` (its square) or `stderr`
    (std / √n, the standard error of the mean) of all values (2-D: every cell). These are
    numpy's `std`/`var` with ddof=1 and what Inspect's std, var and stderr metrics report;
    fewer than 2 values raise StatisticsError (the n − 1 divisor is 0)."""
    arr = _scores(x).ravel()
    if arr.size < 2:
        raise StatisticsError(f"the {statistic} of {arr.size} value is undefined (it divides by n − 1)")
    if statistic == "var":
        return float(np.var(arr, ddof=1))
    std = float(np.std(arr, ddof=1))
    return std if statistic == "std" else std / math.sqrt(arr.size)


_AGGREGATES = {"mean": mean, "median": median, "iqm": iqm}


def aggregate(x: ArrayLike, statistic: str = "mean") -> float:
    """`mean`, `median`, `iqm`, `std`, `var` or `stderr` of `x`, chosen by name (as a rule file names it)."""
    if statistic in SPREAD_STATISTICS:
        return spread(x, statistic)
    try:
        return _AGGREGATES[statistic](x)
    except KeyError:
        raise StatisticsError(
            f"unknown statistic {statistic!r}; use one of {', '.join(AGGREGATE_STATISTICS)}"
        ) from None


@dataclass(frozen=True)
class StratumValue:
    """One stratum's statistic, its observation count and its weight in the pooled value."""

    key: Hashable
    value: float
    n: int
    weight: float


@dataclass(frozen=True)
class StratifiedResult:
    """Per-stratum values and their weighted pool (`weights` is "equal" or "by_count")."""

    strata: tuple[StratumValue, ...]
    pooled: float
    weights: str
    n: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; stratum keys are kept as given (tuples become lists)."""
        return jsonable(
            {
                "pooled": self.pooled,
                "weights": self.weights,
                "n": self.n,
                "strata": [
                    {"key": s.key, "value": s.value, "n": s.n, "weight": s.weight}
                    for s in self.strata
                ],
            }
        )


def pool_strata(
    values: Mapping[Hashable, float],
    counts: Mapping[Hashable, int],
    *,
    weights: str = "equal",
) -> StratifiedResult:
    """Pool per-stratum values with declared weights.

    ``equal``: every stratum weighs 1/S. ``by_count``: stratum s weighs n_s / Σn (for
    a mean this is the mean over all observations, and can reverse the per-stratum
    ranking — Simpson's paradox). Strata keep the order of `values`. A stratum with
    no observations, or keys that differ between `values` and `counts`, raise
    StatisticsError: the pooled value would be undefined.
    """
    if weights not in STRATUM_WEIGHTS:
        raise StatisticsError(f"unknown stratum weights {weights!r}; use equal or by_count")
    if set(values) != set(counts):
        raise StatisticsError(
            f"values and counts must name the same strata ({sorted(map(str, values))} vs "
            f"{sorted(map(str, counts))})"
        )
    if not values:
        raise StatisticsError("pooling needs at least one stratum")
    keys = list(values)
    ns = [check_count(counts[k], f"count of stratum {k!r}") for k in keys]
    empty = [k for k, n in zip(keys, ns, strict=True) if n == 0]
    if empty:
        raise StatisticsError(f"stratum {empty[0]!r} has no observations; its value is undefined")
    vals = finite_array([values[k] for k in keys], "stratum values")
    total = sum(ns)
    w = (
        np.full(len(keys), 1.0 / len(keys))
        if weights == "equal"
        else np.asarray(ns, dtype=np.float64) / total
    )
    strata = tuple(
        StratumValue(key=k, value=float(v), n=n, weight=float(wk))
        for k, v, n, wk in zip(keys, vals, ns, w, strict=True)
    )
    return StratifiedResult(strata=strata, pooled=float(w @ vals), weights=weights, n=total)


def stratified(
    values: ArrayLike,
    strata: ArrayLike,
    *,
    statistic: str = "mean",
    weights: str = "equal",
) -> StratifiedResult:
    """`statistic` of `values` within each stratum label, then `pool_strata`.

    Strata are ordered by label (or first appearance when labels are not orderable).
    """
    vals = finite_array(values, "values")
    labels = _as_unit_array(strata)
    if labels.size != vals.size:
        raise StatisticsError(
            f"values and strata must have the same length ({vals.size} vs {labels.size})"
        )
    if vals.size == 0:
        raise StatisticsError("stratified pooling of no values is undefined")
    keys, inverse = _factorize(labels)
    per_value: dict[Hashable, float] = {}
    per_count: dict[Hashable, int] = {}
    for i, key in enumerate(keys.tolist()):
        members = vals[inverse == i]
        per_value[key] = aggregate(members, statistic)
        per_count[key] = int(members.size)
    return pool_strata(per_value, per_count, weights=weights)
