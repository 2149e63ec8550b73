"""From per-unit sufficient statistics to a headline value and its interval.

The engine hands each (group, stratum) cell over as a `UnitStats` (count, Σy, Σy²
per unit), which merges across batches; everything here is computed from those.

`auto` picks Wilson for a mean of 0/1 scores when every unit is one observation
(the episode, or the reduce key after a reduce), the cluster-robust t interval for
other means, and the seeded percentile bootstrap over units for median and IQM.
Methods that cannot apply to the rule raise RuleError at `aggregate.interval.method`
with the fix; a cell the data cannot support (one unit, zero events under a
bootstrap) gets an undefined interval and a warning, never a failed report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

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
from ..stats._resample import unit_values_of, zero_event_kind
from ..stats.aggregates import SPREAD_STATISTICS
from ..stats.exact_bootstrap import DEFAULT_EXACT_UNITS
from ..stats.intervals import REASON_NO_DATA, REASON_ONE_UNIT, negligible, t_interval
from ..stats.pvalues import bootstrap_p_value, mcnemar_exact, t_p_value
from ..stats.units import align_units

__all__ = [
    "CellSummary",
    "PairedResult",
    "best_of_k_warning",
    "group_difference",
    "headline",
    "paired",
    "pooled_interval",
    "pooled_warnings",
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
    if statistic in SPREAD_STATISTICS and units.n_units < 2:
        # std/var/stderr divide by n − 1: one unit has no spread to measure, and no number is made up
        undefined = undefined_interval(method, level, units.n, units.n_units, REASON_ONE_UNIT)
        return CellSummary(None, undefined, None, (f"the {statistic} of {where} is undefined: 1 unit of {unit}",))
    value = units.mean if statistic == "mean" else aggregate(units.unit_means, statistic)
    # a count of successes describes a mean of 0/1 scores, not their spread (std/var/stderr)
    successes = int(round(units.total)) if is01 and statistic not in SPREAD_STATISTICS else None
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
        kind = zero_event_kind(unit_values_of(units))
        if method == "exact_bootstrap" and units.n_units > DEFAULT_EXACT_UNITS:
            warnings.append(
                f"exact_bootstrap enumerates at most {DEFAULT_EXACT_UNITS} units and {where} has "
                f"{units.n_units} units of {unit}: the seeded percentile bootstrap "
                f"({spec.resamples} resamples) is used instead"
            )
            method = "bootstrap"
        try:
            if kind is not None and spec.method is IntervalMethod.AUTO:
                # auto chose the bootstrap, and for this cell every resample is identical:
                # say so here and keep the other cells (an explicit bootstrap still fails).
                interval = undefined_interval(
                    method,
                    level,
                    units.n,
                    units.n_units,
                    f"undefined ({kind}: every resample gives {value:g})",
                    estimate=value,
                    details={"statistic": name},
                )
                warnings.append(
                    f"no {method} interval for {where}: {kind} in {units.n} observations, so "
                    "every resample is identical; for a proportion use wilson or "
                    "clopper_pearson (the statistic mean), which give an exact bound"
                )
            elif method == "bootstrap":
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
    if statistic != "mean" and not unit_is_observation:
        # rliable's median/IQM are over episode (run × task) scores; here each unit's
        # observations are averaged first, which is a different statistic: name it.
        over = f"{statistic} of the {units.n_units} {unit} means"
        interval = replace(interval, details={**interval.details, "statistic_over": over})
        warnings.append(
            f"the {statistic} is the {over} (each unit's {units.n} observations averaged first)"
            + ("" if statistic in SPREAD_STATISTICS else f", not rliable's {statistic} over the observations themselves")
        )
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
    strata: list[tuple[float, UnitStats]],
    level: float,
    unit_count: int,
    names: list[str] | None = None,
) -> Interval:
    """t interval of Σ_s w_s · mean_s, linearized over units, with the design named.

    Unit c of stratum s contributes z_c = w_s (Σy_sc − n_sc·ȳ_s)/N_s (each stratum centred
    on its own mean: the strata sizes are fixed, a stratified design).

    - Units nested in strata (every unit in one stratum — tasks within difficulty
      levels): the design-based variance of survey sampling, Σ_s n_s/(n_s−1) Σ_c z_c²
      with n_s the units of stratum s, and t on C − S degrees of freedom
      (`stratified_design_t`).
    - Units crossing strata (a run holds episodes of every difficulty): z summed per
      unit, C/(C−1)·Σ_c z_c², t on C − 1 df (`stratified_cluster_t`).

    A stratum with a single unit has no within-stratum variance: centred on its own
    mean it would add exactly zero and the interval would come from the other strata
    alone. Such a "lonely unit" is centred on the pooled estimate instead (survey's
    `lonely.psu = "adjust"`), which widens the interval; `details["lonely_strata"]`
    names the strata and `pooled_warnings` turns that into the result's warning.
    """
    labels = names or [f"stratum {i + 1}" for i in range(len(strata))]
    kept = [(w, u, label) for (w, u), label in zip(strata, labels, strict=True) if u.n > 0]
    n = sum(u.n for _, u, _ in kept)
    if n == 0:
        return undefined_interval("stratified_cluster_t", level, 0, 0, REASON_NO_DATA)
    estimate = sum(w * u.mean for w, u, _ in kept)
    seen: dict[object, int] = {}
    for _, u, _ in kept:
        for unit in u.units.tolist():
            seen[unit] = seen.get(unit, 0) + 1
    nested = all(count == 1 for count in seen.values())
    method = "stratified_design_t" if nested else "stratified_cluster_t"
    if unit_count < 2:
        return undefined_interval(method, level, n, unit_count, REASON_ONE_UNIT, estimate=estimate)
    lonely = [label for _, u, label in kept if u.n_units == 1]
    details: dict[str, object] = {"strata": len(kept)}
    if lonely:
        details["lonely_strata"] = lonely
        details["lonely_unit"] = "centred on the pooled estimate (survey lonely.psu='adjust')"

    def scores(w: float, u: UnitStats) -> np.ndarray:
        centre = estimate if u.n_units == 1 else u.mean
        return w * (u.sums - u.counts * centre) / u.n

    scale = max(float(np.max(np.abs(u.unit_means))) for _, u, _ in kept) or 1.0
    if nested:
        c = len(seen)
        df = c - len(kept)
        details.update(
            design="units nested in strata",
            correction="n_s/(n_s-1) within each stratum",
            df="C - S",
        )
        var = 0.0
        every: list[np.ndarray] = []
        for w, u, _ in kept:
            z = scores(w, u)
            every.append(z)
            factor = u.n_units / (u.n_units - 1) if u.n_units > 1 else 1.0
            var += factor * float(z @ z)
        vec = np.concatenate(every)
        if df < 1:
            return undefined_interval(
                method,
                level,
                n,
                c,
                f"undefined ({c} units in {len(kept)} strata: no degrees of freedom left, C - S = {df})",
                estimate=estimate,
                details=details,
            )
    else:
        contributions: dict[object, float] = {}
        for w, u, _ in kept:
            for unit, score in zip(u.units.tolist(), scores(w, u).tolist(), strict=True):
                contributions[unit] = contributions.get(unit, 0.0) + score
        c = len(contributions)
        df = c - 1
        details.update(design="units crossing strata", correction="C/(C-1)", df="C - 1")
        vec = np.fromiter(contributions.values(), dtype=np.float64, count=c)
        var = c / (c - 1) * float(vec @ vec)
    return t_interval(
        estimate,
        math.sqrt(var),
        df,
        level,
        method=method,
        n=n,
        n_units=c,
        details=details,
        no_variation=negligible(vec, scale),
    )


def pooled_warnings(interval: Interval, unit: str) -> list[str]:
    """The notes a pooled interval needs next to it (lonely units in strata)."""
    lonely = interval.details.get("lonely_strata")
    if not lonely:
        return []
    shown = ", ".join(map(str, lonely[:5])) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
    return [
        f"{len(lonely)} stratum/strata have a single unit of {unit} ({shown}): a lone unit has no "
        "within-stratum variance, so it is centred on the pooled estimate instead of its "
        "stratum's mean (survey lonely.psu='adjust'), which widens the pooled interval"
    ]


@dataclass(frozen=True)
class PairedResult:
    """A paired interval of a − b and the units dropped for lack of a partner.

    `interval.details` carries the two-sided `p_value` of H0: no difference and the
    `p_method` that gave it (exact McNemar, paired t, or the paired bootstrap).
    """

    interval: Interval
    only_a: int
    only_b: int
    se_unpaired: float | None

    @property
    def p_value(self) -> float | None:
        """The two-sided p-value of the paired comparison (None when undefined)."""
        return self.interval.details.get("p_value")


def _mcnemar_counts(a: UnitStats, b: UnitStats) -> tuple[int, int] | None:
    """Discordant pairs (a=1,b=0), (a=0,b=1) when both sides hold one 0/1 value per unit."""
    if a.n_units == 0 or not (np.all(a.counts == 1) and np.all(b.counts == 1)):
        return None
    if not (np.all(np.isin(a.sums, (0.0, 1.0))) and np.all(np.isin(b.sums, (0.0, 1.0)))):
        return None
    return int(np.sum((a.sums == 1) & (b.sums == 0))), int(np.sum((a.sums == 0) & (b.sums == 1)))


def _with_p_value(interval: Interval, a: UnitStats, b: UnitStats) -> Interval:
    details = dict(interval.details)
    if interval.method == "paired_bootstrap":
        if "p_le_zero" in details and interval.defined:
            details["p_value"] = bootstrap_p_value(details["p_le_zero"], details["p_ge_zero"])
            details["p_method"] = "paired bootstrap (percentile inversion)"
    else:
        shared_a, shared_b, _, _ = align_units(a, b)
        counts = _mcnemar_counts(shared_a, shared_b)
        if counts is not None and interval.n_units >= 1:
            details["p_value"] = mcnemar_exact(*counts)
            details["p_method"] = "exact McNemar"
            details["discordant"] = {"a_only": counts[0], "b_only": counts[1]}
        elif interval.defined and interval.se and interval.df:
            details["p_value"] = t_p_value(interval.estimate, interval.se, interval.df)
            details["p_method"] = f"{interval.method} (t, {interval.df} df)"
    return replace(interval, details=details)


def paired(
    a: UnitStats,
    b: UnitStats,
    *,
    statistic: str,
    spec: IntervalSpec,
    seed: int,
    file: str | None = None,
) -> PairedResult:
    """Interval and p-value of statistic(a) − statistic(b) on the units both share.

    Means use the cluster-robust paired difference (t on shared units − 1 df), with
    the exact McNemar p-value when both sides hold one 0/1 value per unit; median and
    IQM a paired percentile bootstrap that resamples shared units jointly.
    """
    if statistic == "mean":
        d = paired_cluster_difference(a, b, level=spec.level)
        return PairedResult(
            _with_p_value(d.interval, a, b), d.dropped_only_in_a, d.dropped_only_in_b, d.se_unpaired
        )
    shared_a, shared_b, only_a, only_b = align_units(a, b)
    kind_a = zero_event_kind(unit_values_of(shared_a))
    kind_b = zero_event_kind(unit_values_of(shared_b))
    if kind_a is not None and kind_b is not None:
        # Both sides constant: every joint resample gives the same difference. Say so for
        # this comparison instead of failing the report.
        interval = undefined_interval(
            "paired_bootstrap",
            spec.level,
            shared_a.n + shared_b.n,
            shared_a.n_units,
            f"undefined ({kind_a} in one group and {kind_b} in the other: every resample gives the same difference)",
            details={"statistic": statistic},
        )
        return PairedResult(interval, only_a, only_b, None)
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
        _with_p_value(interval, a, b),
        int(details.get("dropped_only_in_a", 0)),
        int(details.get("dropped_only_in_b", 0)),
        None,
    )


def group_difference(
    a: UnitStats, b: UnitStats, *, statistic: str, spec: IntervalSpec, seed: int
) -> Interval:
    """Interval of statistic(a) − statistic(b) for two groups of one rule.

    Paired on the units both share when they share at least two (`paired`); otherwise
    the groups are independent samples and, for means, the interval is
    estimate ± t·√(se_a² + se_b²) from each group's cluster-robust SE, on
    min(C_a, C_b) − 1 degrees of freedom (conservative Welch), `independent_cluster_t`.
    """
    shared = align_units(a, b)[0].n_units
    if shared >= 2 or statistic != "mean":
        try:
            return paired(a, b, statistic=statistic, spec=spec, seed=seed).interval
        except RuleError as exc:
            return undefined_interval(
                "paired_bootstrap", spec.level, a.n + b.n, shared, f"undefined ({exc})"
            )
    level = spec.level
    method = "independent_cluster_t"
    if a.n == 0 or b.n == 0:
        return undefined_interval(method, level, a.n + b.n, 0, REASON_NO_DATA)
    ia, ib = cluster_t_interval(a, level), cluster_t_interval(b, level)
    estimate = a.mean - b.mean
    if ia.se is None or ib.se is None:
        return undefined_interval(
            method, level, a.n + b.n, a.n_units + b.n_units, REASON_ONE_UNIT, estimate=estimate
        )
    se = math.sqrt(ia.se**2 + ib.se**2)
    df = min(a.n_units, b.n_units) - 1
    interval = t_interval(
        estimate,
        se,
        df,
        level,
        method=method,
        n=a.n + b.n,
        n_units=a.n_units + b.n_units,
        details={"df": "min(C_a, C_b) - 1", "shared_units": shared},
    )
    if interval.defined:
        details = {**interval.details, "p_value": t_p_value(estimate, se, df), "p_method": f"{method} (t, {df} df)"}
        interval = replace(interval, details=details)
    return interval
