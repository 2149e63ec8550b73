"""From per-unit sufficient statistics to a headline value and its interval.

The engine hands each (group, stratum) cell over as a `UnitStats` (count, Σy, Σy²
per unit), which merges across batches; everything here is computed from those.

`auto` picks Wilson for a mean of 0/1 scores when every unit is one observation
(the episode, or the reduce key after a reduce), the cluster-robust t interval for
other means, and the seeded percentile bootstrap over units for median and IQM.
Methods that cannot apply raise RuleError at `aggregate.interval.method` with the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import RuleError, StatisticsError
from ..model.rule import IntervalMethod, IntervalSpec
from ..stats import (
    Interval,
    UnitStats,
    aggregate,
    best_of_k_optimism,
    bootstrap_interval,
    clopper_pearson_interval,
    cluster_t_interval,
    exact_bootstrap_interval,
    paired_bootstrap_interval,
    paired_cluster_difference,
    undefined_interval,
    wilson_interval,
)
from ..stats.intervals import REASON_NO_DATA, REASON_ONE_UNIT, negligible, t_interval

__all__ = [
    "CellSummary",
    "PairedResult",
    "best_of_k_warning",
    "headline",
    "paired",
    "pooled_interval",
    "resolve_method",
]

#: A cluster interval this much wider than the episode-level one is called out.
WIDER_FACTOR = 1.5


@dataclass(frozen=True)
class CellSummary:
    """A cell's value, interval and the notes a reader needs next to it."""

    value: float | None
    interval: Interval
    successes: int | None
    warnings: tuple[str, ...]


def resolve_method(
    spec: IntervalSpec, statistic: str, is01: bool, unit_is_observation: bool
) -> str:
    """The concrete interval method for `spec.method` (auto resolved)."""
    method = spec.method
    if method is IntervalMethod.AUTO:
        if statistic != "mean":
            return "bootstrap"
        return "wilson" if is01 and unit_is_observation else "cluster_t"
    return method.value


def _statistics_error(exc: StatisticsError, method: str, file: str | None) -> RuleError:
    return RuleError(
        f"interval {method} cannot apply here: {exc}",
        file=file,
        key="aggregate.interval.method",
    )


def headline(
    units: UnitStats,
    *,
    statistic: str,
    spec: IntervalSpec,
    is01: bool,
    unit_is_observation: bool,
    unit: str,
    seed: int,
    where: str,
    file: str | None = None,
) -> CellSummary:
    """Value and interval of one cell; `where` names the group/stratum in messages."""
    method = resolve_method(spec, statistic, is01, unit_is_observation)
    level = spec.level
    warnings: list[str] = []
    if units.n == 0:
        return CellSummary(None, undefined_interval(method, level, 0, 0, REASON_NO_DATA), None, ())
    value = units.mean if statistic == "mean" else aggregate(units.unit_means, statistic)
    successes = int(round(units.total)) if is01 else None
    if method in ("wilson", "clopper_pearson"):
        if statistic != "mean":
            raise RuleError(
                f"{method} is an interval for a proportion (statistic mean of 0/1 scores), "
                f"not for the {statistic}; use bootstrap, exact_bootstrap or auto",
                file=file,
                key="aggregate.interval.method",
            )
        if not is01:
            raise RuleError(
                f"{method} needs 0/1 scores, but the scores of {where} take other values; "
                "use cluster_t (or auto)",
                file=file,
                key="aggregate.interval.method",
            )
        fn = wilson_interval if method == "wilson" else clopper_pearson_interval
        interval = fn(successes or 0, units.n, level)
        if not unit_is_observation:
            warnings.append(
                f"{method} treats the {units.n} observations as independent, but the declared "
                f"unit is {unit} ({units.n_units} units): use cluster_t for an interval over the unit"
            )
    elif method == "cluster_t":
        if statistic != "mean":
            raise RuleError(
                f"cluster_t is an interval for the mean, not for the {statistic}; "
                "use bootstrap, exact_bootstrap or auto",
                file=file,
                key="aggregate.interval.method",
            )
        interval = cluster_t_interval(units, level)
        warnings += _wider_note(interval, units, is01, unit)
        if is01 and interval.defined and (interval.low < 0.0 or interval.high > 1.0):
            # Not clipped: the published bounds stay the method's, and the overshoot is the news.
            warnings.append(
                f"the cluster_t interval [{interval.low:.4f}, {interval.high:.4f}] reaches outside [0, 1]: "
                f"with {units.n_units} units of {unit} the t approximation is poor for a proportion; "
                "consider exact_bootstrap over the units, or more units"
            )
    else:
        name = "ratio" if statistic == "mean" else statistic
        try:
            if method == "bootstrap":
                interval = bootstrap_interval(
                    units,
                    statistic=name,
                    level=level,
                    n_resamples=spec.resamples,
                    seed=seed,
                    quantile_method=spec.quantile_method,
                )
            else:
                interval = exact_bootstrap_interval(
                    units, statistic=name, level=level, quantile_method=spec.quantile_method
                )
        except StatisticsError as exc:
            raise _statistics_error(exc, method, file) from None
    if interval.defined and interval.width == 0.0:
        warnings.append(
            f"the {method} interval has zero width: (almost) every resample gives {value:g}; "
            "this is a property of these few distinct values, not certainty"
        )
    if units.n_units < 2:
        warnings.append(
            f"only {units.n_units} unit ({unit}): the interval is undefined; "
            "an interval needs at least 2 independent units"
        )
    return CellSummary(value, interval, successes, tuple(warnings))


def _wider_note(interval: Interval, units: UnitStats, is01: bool, unit: str) -> list[str]:
    se_iid = interval.details.get("se_iid")
    if not interval.defined or not se_iid or interval.se is None or units.n_units == units.n:
        return []
    ratio = interval.se / se_iid
    if ratio < WIDER_FACTOR:
        return []
    text = (
        f"the interval over {units.n_units} units of {unit} is {ratio:.1f}x wider than if the "
        f"{units.n} observations were independent"
    )
    if is01:
        w = wilson_interval(int(round(units.total)), units.n, interval.level)
        text += f" (Wilson over observations: [{w.low:.4f}, {w.high:.4f}])"
    return [text]


def best_of_k_warning(by: str, k_max: int, k_min: int) -> str:
    """The note that a `max` reduce is a best-of-k, with k and the optimism it buys."""
    k_text = f"k={k_max}" if k_max == k_min else f"k={k_min}..{k_max}"
    return (
        f"reduce max keeps the best of {k_text} attempts per {by}: a best-of-k, not a typical "
        f"attempt (with no true difference, the best of {k_max} is about "
        f"{best_of_k_optimism(max(k_max, 1)):.2f} standard deviations above the mean)"
    )


def pooled_interval(
    strata: list[tuple[float, UnitStats]], level: float, unit_count: int
) -> Interval:
    """Cluster-robust t interval of Σ_s w_s · mean_s, linearized over units.

    Each unit c contributes Σ_s w_s (Σy_sc − n_sc·ȳ_s)/N_s whether units are nested in
    strata or cross them; the variance is C/(C−1)·Σ_c contribution², with t on C−1
    degrees of freedom. Centring each stratum on its own mean treats the strata sizes
    as fixed (a stratified design), so with weights by count the interval is at most
    as wide as `cluster_t_interval` over all observations, which centres on the
    overall mean.
    """
    method = "stratified_cluster_t"
    strata = [(w, u) for w, u in strata if u.n > 0]
    n = sum(u.n for _, u in strata)
    if n == 0:
        return undefined_interval(method, level, 0, 0, REASON_NO_DATA)
    estimate = sum(w * u.mean for w, u in strata)
    if unit_count < 2:
        return undefined_interval(method, level, n, unit_count, REASON_ONE_UNIT, estimate=estimate)
    contributions: dict[object, float] = {}
    for w, u in strata:
        scores = w * (u.sums - u.counts * u.mean) / u.n
        for unit, score in zip(u.units.tolist(), scores.tolist(), strict=True):
            contributions[unit] = contributions.get(unit, 0.0) + score
    c = len(contributions)
    vec = np.fromiter(contributions.values(), dtype=np.float64, count=c)
    se = math.sqrt(c / (c - 1) * float(vec @ vec))
    scale = max(float(np.max(np.abs(u.unit_means))) for _, u in strata)
    return t_interval(
        estimate,
        se,
        c - 1,
        level,
        method=method,
        n=n,
        n_units=c,
        details={"correction": "C/(C-1)", "strata": len(strata)},
        no_variation=negligible(vec, scale),
    )


@dataclass(frozen=True)
class PairedResult:
    """A paired interval of a − b and the units dropped for lack of a partner."""

    interval: Interval
    only_a: int
    only_b: int
    se_unpaired: float | None


def paired(
    a: UnitStats,
    b: UnitStats,
    *,
    statistic: str,
    spec: IntervalSpec,
    seed: int,
    file: str | None = None,
) -> PairedResult:
    """Interval of statistic(a) − statistic(b) on the units both share.

    Means use the cluster-robust paired difference (t on shared units − 1 df);
    median and IQM a paired percentile bootstrap that resamples shared units jointly.
    """
    if statistic == "mean":
        d = paired_cluster_difference(a, b, level=spec.level)
        return PairedResult(d.interval, d.dropped_only_in_a, d.dropped_only_in_b, d.se_unpaired)
    try:
        interval = paired_bootstrap_interval(
            a,
            b,
            statistic=statistic,
            level=spec.level,
            n_resamples=spec.resamples,
            seed=seed,
            quantile_method=spec.quantile_method,
        )
    except StatisticsError as exc:
        raise _statistics_error(exc, "paired bootstrap", file) from None
    details = interval.details
    return PairedResult(
        interval,
        int(details.get("dropped_only_in_a", 0)),
        int(details.get("dropped_only_in_b", 0)),
        None,
    )
