"""Confidence intervals: Wilson, Clopper–Pearson, zero-event bound, cluster-robust t.

Every function returns an `Interval` that names its method, level, observation count
and independent-unit count. An interval that cannot be computed from the data (no
observations, one unit, no variation) comes back with `defined=False` and a reason,
never as NaN, zero width or an exception: one undefined group must not kill a report.
`StatisticsError` is raised only for inputs that are the caller's mistake
(successes > n, level outside (0, 1), …).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import (
    check_count,
    check_level,
    jsonable,
    t_quantile,
    z_quantile,
)
from rollout_cards.stats.units import UnitStats

__all__ = [
    "Interval",
    "clopper_pearson_interval",
    "cluster_t_interval",
    "undefined_interval",
    "wilson_interval",
    "zero_event_upper_bound",
]

REASON_NO_DATA = "undefined (n = 0)"
REASON_ONE_UNIT = "undefined (1 unit)"
REASON_NO_VARIATION = "undefined (no variation between units)"


@dataclass(frozen=True)
class Interval:
    """A two-sided interval with everything a report needs to state it honestly.

    `low`/`high` are None exactly when `defined` is False, and `reason` then says why.
    `n` counts observations (episodes), `n_units` the independent units the
    uncertainty is computed over. `se` is the standard error the interval is built
    from (for bootstraps: the standard deviation of the resampled statistic), `df`
    the degrees of freedom of a t interval. `details` holds method-specific facts
    (resample count, seed, quantile rule, one-sided zero-event bound, …).
    """

    low: float | None
    high: float | None
    method: str
    level: float
    n: int
    n_units: int
    estimate: float | None = None
    defined: bool = True
    reason: str | None = None
    se: float | None = None
    df: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.defined and (self.low is None or self.high is None):
            raise StatisticsError("a defined interval needs both bounds")
        if not self.defined and (self.low is not None or self.high is not None or not self.reason):
            raise StatisticsError("an undefined interval has no bounds and needs a reason")
        # Copy so a caller mutating its dict cannot change a frozen result.
        object.__setattr__(self, "details", dict(self.details))

    @property
    def width(self) -> float | None:
        """high − low, or None when undefined."""
        if self.low is None or self.high is None:
            return None
        return self.high - self.low

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types only (no numpy scalars, no NaN)."""
        return jsonable(
            {
                "low": self.low,
                "high": self.high,
                "method": self.method,
                "level": self.level,
                "n": self.n,
                "n_units": self.n_units,
                "estimate": self.estimate,
                "defined": self.defined,
                "reason": self.reason,
                "se": self.se,
                "df": self.df,
                "details": self.details,
            }
        )


def undefined_interval(
    method: str,
    level: float,
    n: int,
    n_units: int,
    reason: str,
    *,
    estimate: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> Interval:
    """An `Interval` with no bounds, saying why (e.g. "undefined (1 unit)")."""
    return Interval(
        low=None,
        high=None,
        method=method,
        level=level,
        n=n,
        n_units=n_units,
        estimate=estimate,
        defined=False,
        reason=reason,
        details=dict(details or {}),
    )


def _check_proportion(successes: int, n: int) -> tuple[int, int]:
    n = check_count(n, "n")
    successes = check_count(successes, "successes")
    if successes > n:
        raise StatisticsError(f"successes ({successes}) cannot exceed n ({n})")
    return successes, n


def _boundary_details(successes: int, n: int, level: float) -> dict[str, Any]:
    """One-sided exact bounds for 0/n and n/n, so a report can say "0/n (95% upper bound …)"."""
    alpha = 1.0 - level
    if successes == 0:
        return {
            "zero_events": True,
            "one_sided_upper": 1.0 - alpha ** (1.0 / n),
            "one_sided_level": level,
        }
    if successes == n:
        return {"all_events": True, "one_sided_lower": alpha ** (1.0 / n), "one_sided_level": level}
    return {}


def _one_observation(method: str, successes: int, level: float) -> Interval:
    # One unit says nothing about its own variability: Wilson would give [0.2065, 1] for
    # 1/1 and Clopper–Pearson [0.025, 1], bounds that are artefacts of the formula.
    return undefined_interval(
        method,
        level,
        1,
        1,
        REASON_ONE_UNIT,
        estimate=float(successes),
        details={"successes": successes},
    )


def _binomial_se(successes: int, n: int) -> float:
    p = successes / n
    return math.sqrt(p * (1.0 - p) / n)


def wilson_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval for a proportion (the default for 0/1 scores).

    `se` is the binomial standard error √(p̂q̂/n), reported for comparison with
    cluster-robust errors; the bounds themselves come from the score test.
    """
    successes, n = _check_proportion(successes, n)
    level = check_level(level)
    if n == 0:
        return undefined_interval("wilson", level, 0, 0, REASON_NO_DATA)
    if n == 1:
        return _one_observation("wilson", successes, level)
    p = successes / n
    z = z_quantile(level)
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denom
    # At 0/n and n/n the bound is exactly 0 or 1; rounding must not leave −1e-17.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return Interval(
        low=low,
        high=high,
        method="wilson",
        level=level,
        n=n,
        n_units=n,
        estimate=p,
        se=_binomial_se(successes, n),
        details={"successes": successes, **_boundary_details(successes, n, level)},
    )


def clopper_pearson_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """Clopper–Pearson ("exact") interval for a proportion, from beta quantiles."""
    successes, n = _check_proportion(successes, n)
    level = check_level(level)
    if n == 0:
        return undefined_interval("clopper_pearson", level, 0, 0, REASON_NO_DATA)
    if n == 1:
        return _one_observation("clopper_pearson", successes, level)
    from scipy.special import betaincinv  # imported on first use: scipy is slow to import

    alpha = 1.0 - level
    low = 0.0 if successes == 0 else float(betaincinv(successes, n - successes + 1, alpha / 2))
    high = (
        1.0
        if successes == n
        else float(betaincinv(successes + 1, n - successes, 1 - alpha / 2))
    )
    return Interval(
        low=low,
        high=high,
        method="clopper_pearson",
        level=level,
        n=n,
        n_units=n,
        estimate=successes / n,
        se=_binomial_se(successes, n),
        details={"successes": successes, **_boundary_details(successes, n, level)},
    )


def zero_event_upper_bound(n: int, level: float = 0.95) -> float:
    """Exact one-sided upper bound 1 − α^(1/n) on a rate after 0 events in n trials.

    Raises StatisticsError for n < 1: there is no bound without observations (the
    interval functions report that case as undefined instead).
    """
    n = check_count(n, "n", minimum=1)
    level = check_level(level)
    return 1.0 - (1.0 - level) ** (1.0 / n)


def t_interval(
    estimate: float,
    se: float,
    df: int,
    level: float,
    *,
    method: str,
    n: int,
    n_units: int,
    details: Mapping[str, Any] | None = None,
    no_variation: bool = False,
) -> Interval:
    """estimate ± t_{df, (1+level)/2} · se; undefined when there is no variation.

    Callers pass `no_variation=True` when the unit-level scores are equal up to
    rounding, so float noise never turns "no variation" into a 1e-17-wide interval.
    """
    if no_variation or se <= 0.0:
        return undefined_interval(
            method, level, n, n_units, REASON_NO_VARIATION, estimate=estimate, details=details
        )
    half = t_quantile(level, df) * se
    return Interval(
        low=estimate - half,
        high=estimate + half,
        method=method,
        level=level,
        n=n,
        n_units=n_units,
        estimate=estimate,
        se=se,
        df=df,
        details=dict(details or {}),
    )


def negligible(deviations: np.ndarray, scale: float) -> bool:
    """True if every deviation is rounding noise relative to `scale` (or exactly zero)."""
    return bool(np.max(np.abs(deviations), initial=0.0) <= 1e-12 * scale)


def cluster_t_interval(units: UnitStats, level: float = 0.95) -> Interval:
    """Cluster-robust interval for the mean of all observations, clustered by unit.

    The estimate is Σy / N (units weighted by their size). Its variance is
    C/(C−1) · Σ_c (Σy_c − n_c·ȳ)² / N² (the CR1 sandwich of an intercept-only model,
    as in inspect_ai's `stderr(cluster=)`), and the interval uses t on C−1 degrees of
    freedom. With one observation per unit this is the usual sd/√n t interval.
    `details["se_iid"]` is the standard error if every observation were independent
    (sd with ddof=1 over √N): the gap between the two is the point of clustering.
    """
    level = check_level(level)
    n, c = units.n, units.n_units
    if n == 0:
        return undefined_interval("cluster_t", level, 0, 0, REASON_NO_DATA)
    mean = units.mean
    if c == 1:
        return undefined_interval("cluster_t", level, n, 1, REASON_ONE_UNIT, estimate=mean)
    # Only n_c and Σy_c enter the cluster score; Σy² is needed for the iid comparison.
    scores = units.sums - units.counts * mean
    se = math.sqrt(c / (c - 1) * float(scores @ scores)) / n
    details: dict[str, Any] = {"correction": "C/(C-1)", "units": c}
    if n > 1:
        # Σ(y−ȳ)² from sums of squares can cancel slightly below zero; clamp it.
        ss = max(0.0, float(units.sumsq.sum()) - n * mean * mean)
        details["se_iid"] = math.sqrt(ss / (n - 1) / n)
    # Cluster scores are all zero exactly when every unit has the same mean.
    means = units.unit_means
    flat = negligible(means - mean, float(np.max(np.abs(means))))
    return t_interval(
        mean,
        se,
        c - 1,
        level,
        method="cluster_t",
        n=n,
        n_units=c,
        details=details,
        no_variation=flat,
    )
