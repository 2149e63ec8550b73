"""Exact bootstrap: all Cᶜ equally likely unit resamples, enumerated as weighted multisets.

With C units there are Cᶜ ordered resamples but only C(2C−1, C) distinct multisets;
each multiset with draw counts k₁…k_C stands for C!/∏kᵢ! of them. Enumerating the
multisets makes up to 12 units fast (the default cap) and removes all randomness. Statistics and refusals
are those of `rollout_cards.stats.bootstrap`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count, check_level
from rollout_cards.stats._quantiles import check_quantile_method, repeated_quantile
from rollout_cards.stats._resample import (
    BLOCK_ELEMENTS,
    REASON_DEGENERATE,
    Statistic,
    UnitValues,
    estimate_of,
    evaluate,
    first_checks,
    refuse_zero_events,
    statistic_name,
    unit_values_of,
)
from rollout_cards.stats.intervals import Interval, undefined_interval
from rollout_cards.stats.units import UnitStats

__all__ = [
    "DEFAULT_EXACT_UNITS",
    "MAX_EXACT_UNITS",
    "BootstrapDistribution",
    "exact_bootstrap_distribution",
    "exact_bootstrap_interval",
]

# Beyond 15 units C! and Cᶜ no longer fit int64 weights (and C(2C−1, C) > 7·10⁷ anyway).
MAX_EXACT_UNITS = 15
#: The default cap on distinct multisets: C(23, 12) = 1,352,078, so 12 units (a few
#: seconds for a median); more units need a raised `max_multisets` and the memory for it.
DEFAULT_MAX_MULTISETS = 1_400_000
DEFAULT_EXACT_UNITS = 12


@dataclass(frozen=True, eq=False)
class BootstrapDistribution:
    """The exact bootstrap distribution: each distinct value of the statistic and how
    many of the `total` = Cᶜ equally likely resamples give it (values sorted ascending;
    values within 1e-12 of each other, relative to their scale, count as one)."""

    values: np.ndarray
    counts: np.ndarray
    total: int
    n_units: int
    multisets: int
    statistic: str
    tolerance: float

    @property
    def probabilities(self) -> np.ndarray:
        """counts / total."""
        return self.counts / self.total

    def cdf(self, x: float) -> float:
        """P(statistic* ≤ x) over the equally likely resamples."""
        return float(self.counts[self.values <= x + self.tolerance].sum()) / self.total

    def quantile(self, q: float, method: str = "linear") -> float:
        """`np.quantile` of all Cᶜ resampled values, with numpy's rule `method`."""
        return repeated_quantile(self.values, self.counts, q, method)

    def std(self) -> float:
        """Standard deviation of the statistic over the Cᶜ resamples."""
        p = self.probabilities
        mean = float(p @ self.values)
        return math.sqrt(max(0.0, float(p @ (self.values - mean) ** 2)))


def _compositions(c: int) -> np.ndarray:
    """Every way to draw c times from c units, as rows of draw counts k₁…k_c (Σk = c).

    Built part by part with vectorized repeats (no Python loop over the C(2C−1, C)
    rows): each partial row with r draws left is extended by every k in 0..r, and the
    last part takes what remains.
    """
    counts = np.zeros((1, 0), dtype=np.int8)
    remaining = np.array([c], dtype=np.int64)
    for _ in range(c - 1):
        reps = remaining + 1
        rows = np.repeat(np.arange(counts.shape[0]), reps)
        k = np.arange(rows.size) - np.repeat(np.cumsum(reps) - reps, reps)
        counts = np.concatenate([counts[rows], k[:, None].astype(np.int8)], axis=1)
        remaining = remaining[rows] - k
    return np.concatenate([counts, remaining[:, None].astype(np.int8)], axis=1)


def _multisets(c: int, max_multisets: int) -> tuple[np.ndarray, np.ndarray]:
    """All size-c multisets of c units (rows of draw counts) and their multinomial weights."""
    if c > MAX_EXACT_UNITS:
        raise StatisticsError(
            f"exact bootstrap supports at most {MAX_EXACT_UNITS} units, got {c}; "
            "use bootstrap_interval instead"
        )
    m = math.comb(2 * c - 1, c)
    if m > max_multisets:
        raise StatisticsError(
            f"exact bootstrap over {c} units needs {m} distinct resamples, more than "
            f"max_multisets={max_multisets} (the default allows {DEFAULT_EXACT_UNITS} units); "
            "use bootstrap_interval instead"
        )
    drawn = _compositions(c)
    factorials = np.array([math.factorial(i) for i in range(c + 1)], dtype=np.int64)
    # c!/∏k_i! orderings of each multiset; ∏k_i! ≤ c! so int64 never overflows here.
    weights = factorials[c] // np.prod(factorials[drawn], axis=1)
    return drawn, weights


def _evaluate_counts(statistic: Statistic, units: UnitValues, drawn: np.ndarray) -> np.ndarray:
    """The statistic of each multiset, given as a block of draw-count rows."""
    k = drawn.astype(np.float64)
    if statistic == "ratio":
        return (k @ units.sums) / (k @ units.counts)
    if statistic == "mean":
        return (k @ units.means) / units.size
    # Order statistics need the drawn units themselves: expand counts into index rows.
    rows, c = drawn.shape
    idx = np.repeat(np.tile(np.arange(c), rows), drawn.ravel().astype(np.intp)).reshape(rows, c)
    return evaluate(statistic, units, idx)


def exact_bootstrap_distribution(
    data: UnitStats | ArrayLike,
    *,
    statistic: Statistic = "mean",
    max_multisets: int = DEFAULT_MAX_MULTISETS,
) -> BootstrapDistribution:
    """Enumerate all Cᶜ equally likely unit resamples as C(2C−1, C) weighted multisets.

    Twelve units (1,352,078 multisets, the default cap) take about a second for a mean.
    Raises StatisticsError with no units, with more multisets than `max_multisets`, or
    for zero-event data.
    """
    name = statistic_name(statistic)
    max_multisets = check_count(max_multisets, "max_multisets", minimum=1)
    units = unit_values_of(data)
    if units.size == 0:
        raise StatisticsError("an exact bootstrap needs at least one unit")
    refuse_zero_events(units)
    drawn, weights = _multisets(units.size, max_multisets)
    rows = max(1, BLOCK_ELEMENTS // units.size)
    boot = np.concatenate(
        [
            _evaluate_counts(statistic, units, drawn[s : s + rows])
            for s in range(0, drawn.shape[0], rows)
        ]
    )
    order = np.argsort(boot, kind="stable")
    boot, weights = boot[order], weights[order]
    # Equal means reached by different sums differ in the last bits; merge them.
    tolerance = 1e-12 * max(1.0, float(np.max(np.abs(boot))))
    starts = np.concatenate(([0], np.flatnonzero(np.diff(boot) > tolerance) + 1))
    return BootstrapDistribution(
        values=boot[starts],
        counts=np.add.reduceat(weights, starts),
        total=units.size**units.size,
        n_units=units.size,
        multisets=int(drawn.shape[0]),
        statistic=name,
        tolerance=tolerance,
    )


def exact_bootstrap_interval(
    data: UnitStats | ArrayLike,
    *,
    statistic: Statistic = "mean",
    level: float = 0.95,
    quantile_method: str = "linear",
    max_multisets: int = DEFAULT_MAX_MULTISETS,
) -> Interval:
    """Percentile interval from the exact bootstrap distribution (no randomness).

    The bounds are what `np.quantile(all Cᶜ resampled values, method=quantile_method)`
    would give. `details` carries the resample count Cᶜ, the number of distinct
    multisets, the quantile rule and ``p_le_zero`` = P(statistic* ≤ 0).
    """
    level = check_level(level)
    check_quantile_method(quantile_method)
    name = statistic_name(statistic)
    units = unit_values_of(data)
    early = first_checks(units, "exact_bootstrap", level, name)
    if early is not None:
        return early
    dist = exact_bootstrap_distribution(data, statistic=statistic, max_multisets=max_multisets)
    estimate = estimate_of(statistic, units)
    details = {
        "resamples": dist.total,
        "multisets": dist.multisets,
        "enumeration": "multisets with multinomial weights",
        "quantile_method": quantile_method,
        "statistic": name,
        "resampled": "units",
        "p_le_zero": dist.cdf(0.0),
    }
    if dist.values.size == 1:
        return undefined_interval(
            "exact_bootstrap",
            level,
            units.n,
            units.size,
            REASON_DEGENERATE,
            estimate=estimate,
            details=details,
        )
    alpha = 1.0 - level
    return Interval(
        low=dist.quantile(alpha / 2, quantile_method),
        high=dist.quantile(1 - alpha / 2, quantile_method),
        method="exact_bootstrap",
        level=level,
        n=units.n,
        n_units=units.size,
        estimate=estimate,
        se=dist.std(),
        details=details,
    )
