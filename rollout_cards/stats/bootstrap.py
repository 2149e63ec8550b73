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

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count, check_level
from rollout_cards.stats._quantiles import check_quantile_method
from rollout_cards.stats._resample import (
    BLOCK_ELEMENTS,
    BOOTSTRAP_STATISTICS,
    REASON_DEGENERATE,
    Statistic,
    estimate_of,
    evaluate,
    first_checks,
    refuse,
    refuse_zero_events,
    statistic_name,
    unit_values_of,
    zero_event_kind,
)
from rollout_cards.stats.exact_bootstrap import (
    BootstrapDistribution,
    exact_bootstrap_distribution,
    exact_bootstrap_interval,
)
from rollout_cards.stats.intervals import REASON_NO_DATA, Interval, undefined_interval
from rollout_cards.stats.units import UnitStats, align_units

__all__ = [
    "BOOTSTRAP_STATISTICS",
    "BootstrapDistribution",
    "bootstrap_interval",
    "exact_bootstrap_distribution",
    "exact_bootstrap_interval",
    "paired_bootstrap_interval",
]

_GENERATOR = "numpy.random.default_rng (PCG64)"


def _draw(units: int, n_resamples: int, seed: int) -> Any:
    """Yield blocks of resampled unit indices from one seeded Generator, in a fixed order."""
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_ELEMENTS // units)
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
    details = {
        **details,
        "p_le_zero": float(np.mean(boot <= 0)),
        "p_ge_zero": float(np.mean(boot >= 0)),
    }
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
    ``p_le_zero`` / ``p_ge_zero``, the shares of resampled statistics ≤ 0 and ≥ 0.
    """
    level = check_level(level)
    n_resamples = check_count(n_resamples, "n_resamples", minimum=2)
    seed = check_count(seed, "seed")
    check_quantile_method(quantile_method)
    name = statistic_name(statistic)
    units = unit_values_of(data)
    early = first_checks(units, "bootstrap", level, name)
    if early is not None:
        return early
    refuse_zero_events(units)
    boot = np.concatenate(
        [evaluate(statistic, units, idx) for idx in _draw(units.size, n_resamples, seed)]
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
        estimate_of(statistic, units),
        "bootstrap",
        level,
        quantile_method,
        units.n,
        units.size,
        details,
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
    name = statistic_name(statistic)
    details: dict[str, Any] = {}
    if isinstance(a, UnitStats) and isinstance(b, UnitStats):
        a, b, only_a, only_b = align_units(a, b)
        details.update(dropped_only_in_a=only_a, dropped_only_in_b=only_b)
    elif isinstance(a, UnitStats) or isinstance(b, UnitStats):
        raise StatisticsError("pass two UnitStats or two aligned arrays, not one of each")
    ua, ub = unit_values_of(a), unit_values_of(b)
    if ua.size != ub.size:
        raise StatisticsError(f"paired arrays must be aligned (lengths {ua.size} and {ub.size})")
    n = ua.n + ub.n
    early = first_checks(ua, "paired_bootstrap", level, name)
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
    kind_a, kind_b = zero_event_kind(ua), zero_event_kind(ub)
    if kind_a is not None and kind_b is not None:
        refuse(f"{kind_a} in a and {kind_b} in b", n, "a paired difference")
    boot = np.concatenate(
        [
            evaluate(statistic, ua, idx) - evaluate(statistic, ub, idx)
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
    estimate = estimate_of(statistic, ua) - estimate_of(statistic, ub)
    return _percentile_interval(
        boot, estimate, "paired_bootstrap", level, quantile_method, n, ua.size, details
    )
