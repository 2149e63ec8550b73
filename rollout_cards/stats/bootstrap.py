"""Percentile bootstrap over independent units: random (seeded), exact, and paired.

What is resampled is the unit (task, run, seed), never the episode: each resample
draws C units with replacement from the C observed ones. The statistic is computed
from unit-level values:

- ``"mean"``: mean of per-unit means (every unit weighs the same);
- ``"ratio"``: Σ sums / Σ counts of the drawn units (the episode-weighted mean, i.e.
  units weighted by their size — the estimate of `cluster_t_interval`);
- ``"median"`` / ``"iqm"``: median / interquartile mean of per-unit means;
- a callable ``f(x) -> array`` computing one value per row of a 2-D array
  (resamples × units) of per-unit means, like ``lambda x: x.max(axis=-1)``.

Data are either a 1-D array with one value per unit, or a `UnitStats`.

Zero-event 0/1 data (and all-event data) are refused with StatisticsError: every
resample is identical, so a bootstrap would print [0, 0]. Use `wilson_interval`,
`clopper_pearson_interval` or `zero_event_upper_bound` for those.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations_with_replacement
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count, check_level, finite_array
from rollout_cards.stats._quantiles import check_quantile_method, repeated_quantile
from rollout_cards.stats.intervals import (
    REASON_NO_DATA,
    REASON_ONE_UNIT,
    Interval,
    undefined_interval,
)
from rollout_cards.stats.units import UnitStats, align_units

__all__ = [
    "BOOTSTRAP_STATISTICS",
    "BootstrapDistribution",
    "bootstrap_interval",
    "exact_bootstrap_distribution",
    "exact_bootstrap_interval",
    "paired_bootstrap_interval",
]

BOOTSTRAP_STATISTICS = ("mean", "ratio", "median", "iqm")
Statistic = str | Callable[[np.ndarray], ArrayLike]

REASON_DEGENERATE = "undefined (every resample gives the same value)"
# Bound the (resamples × units) index block held in memory at once.
_BLOCK_ELEMENTS = 2_000_000
_GENERATOR = "numpy.random.default_rng (PCG64)"


@dataclass(frozen=True)
class _Units:
    """Unit-level arrays the statistics are computed from."""

    means: np.ndarray
    counts: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray
    n: int

    @property
    def size(self) -> int:
        return int(self.means.size)


def _units_of(data: UnitStats | ArrayLike) -> _Units:
    if isinstance(data, UnitStats):
        return _Units(
            data.unit_means, data.counts.astype(np.float64), data.sums, data.sumsq, data.n
        )
    values = finite_array(data, "values")
    return _Units(values, np.ones(values.size), values, values * values, int(values.size))


def _statistic_name(statistic: Statistic) -> str:
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


def _evaluate(statistic: Statistic, units: _Units, idx: np.ndarray) -> np.ndarray:
    """The statistic of each resample; row r of `idx` lists the units drawn in resample r."""
    if statistic == "ratio":
        return units.sums[idx].sum(axis=-1) / units.counts[idx].sum(axis=-1)
    x = units.means[idx]
    if statistic == "mean":
        return x.mean(axis=-1)
    if statistic == "median":
        return np.median(x, axis=-1)
    if statistic == "iqm":
        return sps.trim_mean(x, 0.25, axis=-1)
    out = np.asarray(statistic(x), dtype=np.float64)  # type: ignore[operator]
    if out.shape != (idx.shape[0],):
        raise StatisticsError(
            f"a callable statistic must return one value per resample (shape {(idx.shape[0],)}), "
            f"got shape {out.shape}"
        )
    return out


def _estimate(statistic: Statistic, units: _Units) -> float:
    return float(_evaluate(statistic, units, np.arange(units.size)[None, :])[0])


def _zero_event_kind(units: _Units) -> str | None:
    """ "zero events" if every observation is 0, "all events" if every one is 1, else None."""
    if units.size == 0:
        return None
    if np.all(units.sumsq == 0):
        return "zero events"
    # Σy = Σy² = n_c in every unit means every observation is exactly 1.
    if np.all(units.sums == units.counts) and np.all(units.sumsq == units.counts):
        return "all events (no failures)"
    return None


def _refuse(kind: str, n: int, what: str) -> None:
    raise StatisticsError(
        f"refusing to bootstrap {what}: {kind} ({n} observations), so every resample "
        "is identical and the interval would have zero width. Use wilson_interval or "
        "clopper_pearson_interval for a proportion, or zero_event_upper_bound for a "
        "one-sided bound."
    )


def _refuse_zero_events(units: _Units) -> None:
    """Raise StatisticsError on zero-event (or all-event) data: no bootstrap then."""
    kind = _zero_event_kind(units)
    if kind is not None:
        _refuse(kind, units.n, "the data")


def _first_checks(units: _Units, method: str, level: float, name: str) -> Interval | None:
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


def _draw(units: int, n_resamples: int, seed: int) -> Any:
    """Yield blocks of resampled unit indices from one seeded Generator, in a fixed order."""
    rng = np.random.default_rng(seed)
    rows = max(1, _BLOCK_ELEMENTS // units)
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, units, size=(min(rows, n_resamples - start), units))


def _percentile_interval(
    boot: np.ndarray,
    estimate: float,
    method: str,
    level: float,
    quantile_method: str,
    n: int,
    n_units: int,
    details: dict[str, Any],
) -> Interval:
    details = {**details, "p_le_zero": float(np.mean(boot <= 0))}
    if boot.min() == boot.max():
        return undefined_interval(
            method, level, n, n_units, REASON_DEGENERATE, estimate=estimate, details=details
        )
    alpha = 1.0 - level
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2], method=quantile_method)
    return Interval(
        low=float(low),
        high=float(high),
        method=method,
        level=level,
        n=n,
        n_units=n_units,
        estimate=estimate,
        se=float(np.std(boot, ddof=1)),
        details=details,
    )


def bootstrap_interval(
    data: UnitStats | ArrayLike,
    *,
    statistic: Statistic = "mean",
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    quantile_method: str = "linear",
) -> Interval:
    """Percentile bootstrap interval of `statistic`, resampling units with replacement.

    Draws come from ``numpy.random.default_rng(seed)``; `details` reports the resample
    count, seed, generator, quantile rule (a numpy ``method=`` name) and statistic, and
    ``p_le_zero``, the share of resampled statistics ≤ 0.
    """
    level = check_level(level)
    n_resamples = check_count(n_resamples, "n_resamples", minimum=2)
    seed = check_count(seed, "seed")
    check_quantile_method(quantile_method)
    name = _statistic_name(statistic)
    units = _units_of(data)
    early = _first_checks(units, "bootstrap", level, name)
    if early is not None:
        return early
    _refuse_zero_events(units)
    boot = np.concatenate(
        [_evaluate(statistic, units, idx) for idx in _draw(units.size, n_resamples, seed)]
    )
    details = {
        "resamples": n_resamples,
        "seed": seed,
        "generator": _GENERATOR,
        "quantile_method": quantile_method,
        "statistic": name,
        "resampled": "units",
    }
    return _percentile_interval(
        boot,
        _estimate(statistic, units),
        "bootstrap",
        level,
        quantile_method,
        units.n,
        units.size,
        details,
    )


@dataclass(frozen=True, eq=False)
class BootstrapDistribution:
    """The exact bootstrap distribution: each distinct value of the statistic and how
    many of the `total` = Cᶜ equally likely resamples give it (values sorted ascending;
    values within 1e-12 of each other, relative to their scale, count as one)."""

    values: np.ndarray
    counts: np.ndarray
    total: int
    n_units: int
    distinct_resamples: int
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


def _multisets(c: int, max_multisets: int) -> tuple[np.ndarray, np.ndarray]:
    """All size-c multisets of c units (rows of sorted indices) and their multinomial weights."""
    m = math.comb(2 * c - 1, c)
    if m > max_multisets:
        raise StatisticsError(
            f"exact bootstrap over {c} units needs {m} distinct resamples, more than "
            f"max_multisets={max_multisets}; use bootstrap_interval instead"
        )
    idx = np.fromiter(
        (i for row in combinations_with_replacement(range(c), c) for i in row),
        dtype=np.intp,
        count=m * c,
    ).reshape(m, c)
    # Times each unit is drawn in each multiset, via one bincount over (row, unit) cells.
    cells = (idx + (np.arange(m) * c)[:, None]).ravel()
    drawn = np.bincount(cells, minlength=m * c).reshape(m, c)
    factorials = np.array([math.factorial(i) for i in range(c + 1)], dtype=np.int64)
    # c!/∏k_i! orderings of each multiset; ∏k_i! ≤ c! so int64 never overflows here.
    weights = factorials[c] // np.prod(factorials[drawn], axis=1)
    return idx, weights


def exact_bootstrap_distribution(
    data: UnitStats | ArrayLike,
    *,
    statistic: Statistic = "mean",
    max_multisets: int = 200_000,
) -> BootstrapDistribution:
    """Enumerate all Cᶜ equally likely unit resamples as C(2C−1, C) weighted multisets.

    Ten units (92,378 multisets) take well under a second. Raises StatisticsError with
    no units, with more multisets than `max_multisets`, or for zero-event data.
    """
    name = _statistic_name(statistic)
    max_multisets = check_count(max_multisets, "max_multisets", minimum=1)
    units = _units_of(data)
    if units.size == 0:
        raise StatisticsError("an exact bootstrap needs at least one unit")
    _refuse_zero_events(units)
    idx, weights = _multisets(units.size, max_multisets)
    rows = max(1, _BLOCK_ELEMENTS // units.size)
    boot = np.concatenate(
        [_evaluate(statistic, units, idx[s : s + rows]) for s in range(0, idx.shape[0], rows)]
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
        distinct_resamples=int(idx.shape[0]),
        statistic=name,
        tolerance=tolerance,
    )


def exact_bootstrap_interval(
    data: UnitStats | ArrayLike,
    *,
    statistic: Statistic = "mean",
    level: float = 0.95,
    quantile_method: str = "linear",
    max_multisets: int = 200_000,
) -> Interval:
    """Percentile interval from the exact bootstrap distribution (no randomness).

    The bounds are what `np.quantile(all Cᶜ resampled values, method=quantile_method)`
    would give. `details` carries the resample count Cᶜ, the number of distinct
    multisets, the quantile rule and ``p_le_zero`` = P(statistic* ≤ 0).
    """
    level = check_level(level)
    check_quantile_method(quantile_method)
    name = _statistic_name(statistic)
    units = _units_of(data)
    early = _first_checks(units, "exact_bootstrap", level, name)
    if early is not None:
        return early
    dist = exact_bootstrap_distribution(data, statistic=statistic, max_multisets=max_multisets)
    estimate = _estimate(statistic, units)
    details = {
        "resamples": dist.total,
        "distinct_resamples": dist.distinct_resamples,
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


def paired_bootstrap_interval(
    a: UnitStats | ArrayLike,
    b: UnitStats | ArrayLike,
    *,
    statistic: Statistic = "mean",
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    quantile_method: str = "linear",
) -> Interval:
    """Bootstrap interval of statistic(a) − statistic(b), resampling shared units jointly.

    Each resample draws one set of unit indices and applies it to both sides, so the
    pairing (same task, same seed) survives — rliable resamples the two independently,
    which overstates the uncertainty of a difference. `a` and `b` are aligned 1-D
    arrays (one value per unit) or two `UnitStats`, aligned on their shared unit ids;
    units present on one side only are dropped and counted in `details`.
    """
    level = check_level(level)
    n_resamples = check_count(n_resamples, "n_resamples", minimum=2)
    seed = check_count(seed, "seed")
    check_quantile_method(quantile_method)
    name = _statistic_name(statistic)
    details: dict[str, Any] = {}
    if isinstance(a, UnitStats) and isinstance(b, UnitStats):
        a, b, only_a, only_b = align_units(a, b)
        details.update(dropped_only_in_a=only_a, dropped_only_in_b=only_b)
    elif isinstance(a, UnitStats) or isinstance(b, UnitStats):
        raise StatisticsError("pass two UnitStats or two aligned arrays, not one of each")
    ua, ub = _units_of(a), _units_of(b)
    if ua.size != ub.size:
        raise StatisticsError(f"paired arrays must be aligned (lengths {ua.size} and {ub.size})")
    n = ua.n + ub.n
    early = _first_checks(ua, "paired_bootstrap", level, name)
    if early is not None:
        estimate = None
        if early.estimate is not None:
            estimate = early.estimate - float(ub.sums.sum() / ub.counts.sum())
        return undefined_interval(
            "paired_bootstrap",
            level,
            n,
            ua.size,
            early.reason or REASON_NO_DATA,
            estimate=estimate,
            details={**details, **early.details},
        )
    # One zero-event side is fine (the other still varies); both is not.
    kind_a, kind_b = _zero_event_kind(ua), _zero_event_kind(ub)
    if kind_a is not None and kind_b is not None:
        _refuse(f"{kind_a} in a and {kind_b} in b", n, "a paired difference")
    boot = np.concatenate(
        [
            _evaluate(statistic, ua, idx) - _evaluate(statistic, ub, idx)
            for idx in _draw(ua.size, n_resamples, seed)
        ]
    )
    details.update(
        resamples=n_resamples,
        seed=seed,
        generator=_GENERATOR,
        quantile_method=quantile_method,
        statistic=name,
        resampled="shared units, jointly",
        difference="a - b",
    )
    estimate = _estimate(statistic, ua) - _estimate(statistic, ub)
    return _percentile_interval(
        boot, estimate, "paired_bootstrap", level, quantile_method, n, ua.size, details
    )
