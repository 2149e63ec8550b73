"""`power_analysis(card, rule)`: how many units a comparison needs, from the card itself.

For each group against its baseline (the rule's `compare`, else every pair of groups),
the per-unit sufficient statistics the rule produced give the standard error of the
difference — paired when the groups share units (same tasks), independent otherwise —
and from it the minimum detectable effect at the current number of units and the
units per group needed to detect `delta`. The variance of each group is also split
into within-unit and between-unit parts, with the standard error that K attempts per
unit would give (the resampling advice of Miller 2024, "Adding Error Bars to Evals").
Nothing is re-read: the rule is applied once, as `rescore` would.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ..errors import RuleError
from ..io.reader import Card, open_card
from ..model.rule import Rule
from ..stats import cluster_t_interval, paired_cluster_difference
from ..stats._common import check_level, jsonable
from ..stats.power import minimum_detectable_effect, variance_components
from ..stats.units import align_units
from .engine import apply_rule, unit_stats_on
from .loader import read_rule

__all__ = ["PowerReport", "PowerResult", "power_analysis"]

METHOD = (
    "normal approximation: n_needed = n_units * ((z_(1-alpha/2) + z_power) * se / delta)^2, "
    "se of the difference from the card's per-unit variance ({})"
)

#: Past 2^53 a count of units is not exact as a float, and far past anything a study collects.
MAX_UNITS_NEEDED = 2**53


@dataclass(frozen=True)
class PowerResult:
    """One comparison's power figures (the JSON fields of `rcard power`)."""

    rule: str
    group: dict[str, Any]
    baseline: dict[str, Any]
    design: str
    alpha: float
    power: float
    se: float | None
    mde: float | None
    delta: float | None
    delta_source: str
    difference: float | None
    n_units: int
    n_units_needed: int | None
    unit: str
    method: str
    #: Why `n_units_needed` is missing although `delta` and `mde` are known.
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return jsonable(self.__dict__)


@dataclass(frozen=True)
class PowerReport:
    """Every comparison of the rule, and the variance split of every group."""

    card: str
    rule: str
    results: tuple[PowerResult, ...]
    variance: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON of `rcard power --format json`."""
        return {
            "card": self.card,
            "rule": self.rule,
            "results": [r.to_dict() for r in self.results],
            "variance": [jsonable(v) for v in self.variance],
        }


#: Pairs of groups one power analysis compares at most: all pairs of G groups are G(G-1)/2
#: (10,000 groups: 50 million, which ran out of memory).
MAX_POWER_PAIRS = 10_000


def _rule_of(source: Rule | str | os.PathLike[str]) -> tuple[Rule, str | None]:
    return read_rule(source)


def power_analysis(
    card: Card | str | os.PathLike[str],
    rule: Rule | str | os.PathLike[str],
    *,
    delta: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PowerReport:
    """Power figures of `rule` (a Rule, a rule file, or the id of a rule the card declares).

    Without `delta`, each comparison is powered for its own observed difference (and
    says so in `delta_source`). Raises RuleError for a statistic other than the mean
    (the closed forms are for means) or a rule without two groups.
    """
    if not isinstance(card, Card):
        card = open_card(card)
    check_level(alpha)
    check_level(power)
    spec, file = _declared_or_loaded(card, rule)
    if spec.aggregate.statistic.value != "mean":
        raise RuleError(
            f"power analysis uses the closed forms for a mean; the rule's statistic is "
            f"{spec.aggregate.statistic.value}",
            file=file,
            key="aggregate.statistic",
        )
    run = apply_rule(card, spec, file=file)
    obs = run.observations
    unit = list(obs.unit)
    labels = obs.groups.labels
    stats = [unit_stats_on(obs, g, unit) for g in range(len(labels))]
    names = [dict(zip(spec.aggregate.group_by, label, strict=True)) for label in labels]
    if spec.compare is not None:
        base = next(
            (g for g, n in enumerate(names) if {k: str(v) for k, v in n.items()}
             == {k: str(v) for k, v in spec.compare.baseline.items()}),
            None,
        )
        if base is None:
            raise RuleError(f"no group matches the baseline {spec.compare.baseline}", file=file, key="compare.baseline")
        pairs = [(g, base) for g in range(len(labels)) if g != base]
    else:
        n_pairs = len(labels) * (len(labels) - 1) // 2
        if n_pairs > MAX_POWER_PAIRS:
            raise RuleError(
                f"power analysis without compare.baseline compares every pair of the {len(labels):,} groups "
                f"({n_pairs:,} pairs), more than the {MAX_POWER_PAIRS:,} it computes; add compare.baseline to the "
                "rule (each group against one baseline) or select fewer groups",
                file=file, key="aggregate.group_by")
        pairs = list(combinations(range(len(labels)), 2))
    if not pairs:
        raise RuleError(
            "power analysis compares groups: the rule needs group_by with at least two groups",
            file=file,
            key="aggregate.group_by",
        )
    results = tuple(
        _compare(run.rule, stats[g], stats[b], names[g], names[b], "+".join(unit), delta, alpha, power)
        for g, b in pairs
    )
    variance = tuple(
        {"rule": run.rule, "group": names[g], "unit": "+".join(unit), **variance_components(s).to_dict()}
        for g, s in enumerate(stats)
        if s.n_units
    )
    return PowerReport(card=card.id, rule=run.rule, results=results, variance=variance)


def _declared_or_loaded(card: Card, rule: Rule | str | os.PathLike[str]) -> tuple[Rule, str | None]:
    if isinstance(rule, str) and not os.path.exists(rule):
        from .loader import declared_rules

        for declared, file in declared_rules(card):
            if declared.rule == rule:
                return declared, file
    return _rule_of(rule)


def _compare(
    rule: str,
    a,  # noqa: ANN001 - UnitStats
    b,  # noqa: ANN001
    group: dict[str, Any],
    baseline: dict[str, Any],
    unit: str,
    delta: float | None,
    alpha: float,
    power: float,
) -> PowerResult:
    shared = align_units(a, b)[0].n_units
    if shared >= 2:
        d = paired_cluster_difference(a, b, level=1 - alpha)
        se, difference, n_units, design = d.se_paired, d.difference, shared, "paired"
        how = f"paired cluster-robust over {shared} shared {unit}"
    else:
        ia, ib = cluster_t_interval(a, 1 - alpha), cluster_t_interval(b, 1 - alpha)
        se = math.sqrt(ia.se**2 + ib.se**2) if ia.se and ib.se else None
        difference = a.mean - b.mean if a.n and b.n else None
        n_units, design = min(a.n_units, b.n_units), "independent"
        how = f"independent groups, cluster-robust over {unit}"
    target, source = (delta, "given") if delta is not None else (difference, "observed difference")
    mde = needed = note = None
    if se:
        mde = minimum_detectable_effect(se, alpha=alpha, power=power)
        if target:
            # se shrinks as 1/√n, so n_needed/n_now = (mde/δ)². A float product: a tiny delta
            # gives inf rather than OverflowError.
            ratio = mde / abs(target)
            exact = n_units * ratio * ratio
            if math.isfinite(exact) and exact <= MAX_UNITS_NEEDED:
                needed = math.ceil(exact - 1e-9)
            else:
                note = (f"more than 2^53 {unit} would be needed to detect a difference of {target:.3g} "
                        f"(the minimum detectable effect now is {mde:.3g}): no count is given")
    return PowerResult(
        note=note,
        rule=rule,
        group=group,
        baseline=baseline,
        design=design,
        alpha=alpha,
        power=power,
        se=se,
        mde=mde,
        delta=target,
        delta_source=source,
        difference=difference,
        n_units=n_units,
        n_units_needed=needed,
        unit=unit,
        method=METHOD.format(how),
    )
