"""`rescore(card, rules)`: the card's declared rules and alternative rules on the same episodes.

Every rule runs over the same stored episodes. Each alternative is then compared
with each declared rule of kind `original` (with every declared rule when none is
marked original, or with those named by `against`): per shared group, the difference
of the headlines with a paired interval over the coarser of the two rules' units and
a p-value, and every group whose rank moves, labelled inside or beyond the noise. The
p-values of every printed comparison are adjusted as one family (`adjust`), and each
rule's ranking comes with bootstrap rank intervals and tied sets.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from .. import progress
from ..errors import RuleError, StatisticsError
from ..io.reader import Card, open_card
from ..model.rule import Rule
from ..stats import Interval, UnitStats, undefined_interval
from ..stats.pvalues import ADJUSTMENTS, adjust
from ..stats.ranks import bootstrap_ranks, point_ranks, tied_sets
from .aggregation import group_difference, paired
from .engine import Observations, apply_rule, observation_unit, unit_stats_on
from .loader import declared_rules, read_rule
from .replay import check_reported
from .results import RankChange, Ranking, RescoreReport, RuleDifference, RuleRun

__all__ = ["MAX_RANKED_GROUPS", "rescore"]

#: A rule with more groups than this gets point ranks only: rank intervals, tied sets and the
#: swaps behind a rank change compare groups pairwise, and a rule grouping by 10,000 agents
#: ran for hours (each pair an interval, each group a pass over the observations).
MAX_RANKED_GROUPS = 100

RuleSource = Rule | str | os.PathLike[str]


def _alternatives(rules: Iterable[RuleSource]) -> list[tuple[Rule, str | None]]:
    return [read_rule(source) for source in rules]


def _keep_columns(rules: Sequence[Rule]) -> list[str]:
    """Unit-like columns of every rule, so any two rules can be paired on them."""
    keep = {"episode_id"}
    for rule in rules:
        keep |= set(rule.aggregate.unit_columns() or [])
        if rule.reduce is not None:
            keep |= set(rule.reduce.by)
        if rule.compare is not None and rule.compare.pair_on:
            keep |= set(rule.compare.pair_on)
    return sorted(keep)


def _targets(
    declared_runs: list[RuleRun], against: Sequence[str] | None
) -> list[RuleRun]:
    """The declared rules alternatives are compared with: `against`, else the originals."""
    if not against:
        return [r for r in declared_runs if r.kind == "original"] or declared_runs
    by_id = {r.rule: r for r in declared_runs}
    unknown = [a for a in against if a not in by_id]
    if unknown:
        listed = ", ".join(by_id) or "none"
        raise RuleError(
            f"{unknown[0]!r} is not a rule the card declares (declared: {listed})",
            key="against",
        )
    return [by_id[a] for a in dict.fromkeys(against)]


def _runs(card: Card, rules: list[tuple[Rule, str | None]], seed: int | None, keep: list[str],
          engine: str, address: str | None, split: bool) -> list[RuleRun]:
    """Every rule's run, by `engine`; `split`: the runs are only ever paired on each rule's
    own unit, so the ray engine may score them on its workers (rollout_cards.scale)."""
    def each(apply: Any) -> list[RuleRun]:
        runs = []
        for rule, file in rules:
            with progress.task(f"rescore {rule.rule}"):
                runs.append(apply(rule, file))
        return runs

    if engine == "local":
        return each(lambda rule, file: apply_rule(card, rule, file=file, seed=seed, keep_columns=keep))
    if engine != "ray":
        raise RuleError(f"unknown engine {engine!r}; use local or ray", key="engine")
    from ..scale.ray_engine import (  # the optional extra, imported when asked for
        RayEngine,
        ray_session,
    )

    with ray_session(address):
        ray = RayEngine(card)
        runs = each(lambda rule, file: ray.run_rule(rule, file=file, seed=seed, keep_columns=tuple(keep),
                                                    split=split))
        ray.finish()
    return runs


def rescore(
    card: Card | str | os.PathLike[str],
    rules: Iterable[RuleSource] | RuleSource | None = None,
    *,
    seed: int | None = None,
    against: Sequence[str] | None = None,
    pair_on: Sequence[str] | None = None,
    adjust: str = "holm",
    engine: str = "local",
    address: str | None = None,
) -> RescoreReport:
    """Run the card's declared rules and the alternative `rules` (paths or `Rule`s).

    Without `rules` this replays the card's own rules. `seed` overrides every rule's
    bootstrap seed. `against` names the declared rules each alternative is compared
    with (default: the rules of kind original, else every declared rule); `pair_on`
    names the columns rule-vs-rule differences pair on (default: the coarser of the two
    rules' units). `adjust` (holm, bh or none) adjusts the p-values of every
    comparison the report prints, as one family. `engine` "ray" computes step features on
    Ray Data (the cluster at `address`, else a local Ray; `pip install 'rollout-cards[ray]'`)
    with the same numbers as "local" (rollout_cards.scale). Raises RuleError (or ExpressionError)
    naming the file and key of a rule that cannot be read or applied, CardFormatError
    for an unreadable card.
    """
    if adjust not in ADJUSTMENTS:
        raise RuleError(f"unknown adjustment {adjust!r}; use one of {', '.join(ADJUSTMENTS)}", key="adjust")
    if not isinstance(card, Card):
        card = open_card(card)
    if rules is None:
        rules = []
    elif isinstance(rules, Rule | str | os.PathLike):
        rules = [rules]
    declared = declared_rules(card)
    alternatives = _alternatives(rules)
    seen: dict[str, str] = {}
    for rule, file in [*declared, *alternatives]:
        if rule.rule in seen:
            raise RuleError(
                f"rule id {rule.rule!r} is used twice (also by {seen[rule.rule]}); "
                "give the alternative rule its own id",
                file=file,
                key="rule",
            )
        seen[rule.rule] = file or "<rule>"
    keep = sorted({*_keep_columns([r for r, _ in [*declared, *alternatives]]), *(pair_on or [])})
    # Rule-vs-rule differences pair on the coarser of two units, which needs every observation;
    # with one unit for all rules (or none to pair) per-unit sums suffice.
    units = {tuple(observation_unit(r)) for r, _ in [*declared, *alternatives]}
    split = not alternatives or (len(units) == 1 and (not pair_on or tuple(pair_on) in units))
    runs = _runs(card, [*declared, *alternatives], seed, keep, engine, address, split)
    declared_runs, alternative_runs = runs[: len(declared)], runs[len(declared) :]
    targets = _targets(declared_runs, against)
    differences: list[RuleDifference] = []
    changes: list[RankChange] = []
    specs = {rule.rule: rule for rule, _ in [*declared, *alternatives]}
    orders = {run.rule: _Order(run, specs[run.rule], seed) for run in runs}
    for alt in alternative_runs:
        for target in targets:
            if alt.group_by != target.group_by:
                continue
            differences += _differences(alt, target, specs[alt.rule], seed, pair_on)
            changes += _rank_changes(orders[alt.rule], orders[target.rule])
    rankings = tuple(o.ranking() for o in orders.values() if o.rankable)
    runs, differences, family = _adjusted(runs, differences, adjust)
    sources = {r.rule: "card" for r, _ in declared} | {
        r.rule: "alternative" for r, _ in alternatives
    }
    reported = [
        check
        for (rule, file), run in zip(declared, declared_runs, strict=True)
        for check in check_reported(rule, run, file=file)
    ]
    return RescoreReport(
        card=card.id,
        card_path=card.path,
        seed=seed,
        runs=tuple(runs),
        sources=sources,
        differences=tuple(differences),
        rank_changes=tuple(changes),
        reported=tuple(reported),
        rankings=rankings,
        adjust=family,
    )


def _distinct(table: pa.Table, columns: Sequence[str]) -> int:
    return table.select(list(columns)).group_by(list(columns)).aggregate([]).num_rows


def _nested(fine: list[str], coarse: list[str], tables: Sequence[pa.Table]) -> bool:
    """True if every value of `fine` lies within one value of `coarse` in each table."""
    both = list(dict.fromkeys([*fine, *coarse]))
    return all(_distinct(t, both) == _distinct(t, fine) for t in tables)


def _pairing_unit(
    a: Observations, b: Observations, named: Sequence[str] | None
) -> tuple[list[str] | None, str, list[str]]:
    """The unit rule-vs-rule differences pair on, why it was chosen, and warnings.

    Pairing on the finer of two nested units would treat correlated observations as
    independent (episodes of one run), so the coarser one is used; `named` overrides.
    """
    tables = (a.identity, b.identity)

    def usable(columns: Sequence[str]) -> bool:
        return all(c in t.column_names for t in tables for c in columns)

    if named:
        if not usable(named):
            missing = [c for c in named if not usable([c])]
            raise RuleError(
                f"--pair-on {'+'.join(named)}: {', '.join(missing)} is not kept by both rules "
                "(after a reduce only group, strata, reduce and unit columns are)",
                key="pair_on",
            )
        return list(named), "named by pair_on", []
    ua, ub = list(a.unit), list(b.unit)
    if ua == ub:
        return (ub, "both rules' unit", []) if usable(ub) else (None, "", [])
    candidates = [u for u in (ub, ua) if usable(u)]
    if not candidates:
        return None, "", []
    if len(candidates) == 1:
        only = candidates[0]
        return only, f"the only one of {'+'.join(ua)} and {'+'.join(ub)} both rules keep", []
    a_in_b, b_in_a = _nested(ua, ub, tables), _nested(ub, ua, tables)
    if a_in_b and b_in_a:
        return ub, f"{'+'.join(ua)} and {'+'.join(ub)} group the observations alike", []
    if a_in_b or b_in_a:
        coarse, fine = (ub, ua) if a_in_b else (ua, ub)
        why = f"the coarser of {'+'.join(ua)} and {'+'.join(ub)}"
        note = (
            f"paired on {'+'.join(coarse)}, {why}: {'+'.join(fine)} is nested in it, and pairing "
            f"on {'+'.join(fine)} would treat observations of one {'+'.join(coarse)} as independent"
        )
        return coarse, why, [note]
    fewer = min(candidates, key=lambda u: _distinct(a.identity, u))
    why = f"the one of the crossed units {'+'.join(ua)} and {'+'.join(ub)} with fewer values"
    note = (
        f"the two rules' units {'+'.join(ua)} and {'+'.join(ub)} cross (neither is nested in the "
        f"other): paired on {'+'.join(fewer)}, {why}; the interval ignores the correlation "
        "within the other unit (name one with pair_on)"
    )
    return fewer, why, [note]


def _group_code(obs: Observations, label: tuple[Any, ...]) -> int:
    return obs.groups.labels.index(label)


def _differences(
    alt: RuleRun, target: RuleRun, spec: Rule, seed: int | None, pair_on: Sequence[str] | None
) -> list[RuleDifference]:
    a_obs, b_obs = alt.observations, target.observations
    unit, why, notes = _pairing_unit(a_obs, b_obs, pair_on)
    a_heads, b_heads = alt.headlines(), target.headlines()
    level = spec.aggregate.interval.level
    out = []
    for label, head in a_heads.items():
        other = b_heads.get(label)
        if other is None:
            continue
        warnings: list[str] = []
        difference = (
            head.value - other.value if head.value is not None and other.value is not None else None
        )
        only_a = only_b = 0
        if unit is None:
            interval = undefined_interval(
                "paired",
                level,
                head.n + other.n,
                0,
                f"undefined (no unit both rules keep: {'+'.join(a_obs.unit)} vs {'+'.join(b_obs.unit)})",
                estimate=difference,
            )
        elif alt.statistic != target.statistic:
            interval = undefined_interval(
                "paired",
                level,
                head.n + other.n,
                0,
                f"undefined (the rules use different statistics: {alt.statistic} vs {target.statistic})",
                estimate=difference,
            )
        else:
            result = paired(
                unit_stats_on(a_obs, _group_code(a_obs, label), unit),
                unit_stats_on(b_obs, _group_code(b_obs, label), unit),
                statistic=alt.statistic,
                spec=spec.aggregate.interval,
                seed=seed if seed is not None else (spec.aggregate.interval.seed or 0),
            )
            interval, only_a, only_b = result.interval, result.only_a, result.only_b
            warnings += notes
            estimate = interval.estimate
            if (
                difference is not None
                and estimate is not None
                and abs(estimate - difference) > 1e-9
            ):
                warnings.append(
                    f"the paired interval is over the {interval.n_units} units of "
                    f"{'+'.join(unit)} that both rules observed; its estimate {estimate:.4f} differs "
                    f"from the difference of the headlines ({difference:.4f}) because units were "
                    "dropped, strata pooled, or a reduce changed the weights"
                )
        out.append(
            RuleDifference(
                rule=alt.rule,
                against=target.rule,
                group=head.group,
                statistic=alt.statistic,
                value=head.value,
                against_value=other.value,
                difference=difference,
                interval=interval,
                unit="+".join(unit) if unit else "",
                pairing=why,
                n_units=interval.n_units,
                dropped_only_in_rule=only_a,
                dropped_only_in_against=only_b,
                warnings=tuple(warnings),
            )
        )
    return out


class _Order:
    """One rule's ranking of its groups: values, direction, pairwise and bootstrap intervals."""

    def __init__(self, run: RuleRun, spec: Rule, seed: int | None) -> None:
        self.run, self.spec = run, spec
        self.higher = spec.aggregate.higher_is_better
        self.seed = seed if seed is not None else (spec.aggregate.interval.seed or 0)
        heads = run.headlines()
        self.values = {k: r.value for k, r in heads.items() if r.value is not None}
        self.heads = heads
        sign = -1.0 if self.higher else 1.0
        self.order = sorted(self.values, key=lambda k: (sign * self.values[k], tuple(map(str, k))))
        self._pairs: dict[tuple[Any, Any], Interval] = {}
        self._units: dict[tuple[Any, ...], UnitStats] = {}
        self.rankable = len(self.order) >= 2 and run.observations is not None
        self.too_many = len(self.order) > MAX_RANKED_GROUPS

    def rank_among(self, keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], int]:
        """1-based positions of `keys` in this rule's order (best first)."""
        wanted = set(keys)
        return {k: i + 1 for i, k in enumerate(k for k in self.order if k in wanted)}

    def units(self, key: tuple[Any, ...]) -> UnitStats:
        if key not in self._units:
            obs = self.run.observations
            self._units[key] = unit_stats_on(obs, _group_code(obs, key), list(obs.unit))
        return self._units[key]

    def between(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> Interval:
        """Interval of value(a) − value(b) under this rule (paired on its unit when shared)."""
        if (a, b) not in self._pairs:
            self._pairs[(a, b)] = group_difference(
                self.units(a),
                self.units(b),
                statistic=self.run.statistic,
                spec=self.spec.aggregate.interval,
                seed=self.seed,
            )
        return self._pairs[(a, b)]

    def separated(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        interval = self.between(a, b)
        return bool(interval.defined and (interval.low > 0 or interval.high < 0))

    def ranking(self) -> Ranking:
        """Ranks with bootstrap intervals and the tied sets (rules with strata: point ranks only)."""
        interval_spec = self.spec.aggregate.interval
        statistic = "ratio" if self.run.statistic == "mean" else self.run.statistic
        details: dict[str, Any] = {
            "higher_is_better": self.higher,
            "tied_sets": "adjacent groups whose pairwise intervals (unadjusted) all contain zero",
            "level": interval_spec.level,
        }
        low = high = None
        if self.too_many:
            skipped = f"not computed: {len(self.order):,} groups, more than the {MAX_RANKED_GROUPS} ranked with intervals"
            details["rank_interval"] = details["tied_sets"] = skipped
        elif self.spec.aggregate.strata:
            details["rank_interval"] = "not computed for strata pooled with weights"
        else:
            try:
                boot = bootstrap_ranks(
                    [self.units(k) for k in self.order],
                    statistic=statistic,
                    higher_is_better=self.higher,
                    level=interval_spec.level,
                    n_resamples=interval_spec.resamples,
                    seed=self.seed,
                )
                low, high = boot.low.tolist(), boot.high.tolist()
                details.update(boot.details)
            except StatisticsError as exc:
                details["rank_interval"] = f"not computed: {exc}"
        sets = [] if self.too_many else tied_sets(
            list(range(len(self.order))),
            lambda i, j: self.separated(self.order[i], self.order[j]),
        )
        ranks = point_ranks([self.values[k] for k in self.order], higher_is_better=self.higher)
        entries = tuple(
            {
                "group": self.heads[k].group,
                "value": self.values[k],
                "rank": int(ranks[i]),
                "rank_low": None if low is None else low[i],
                "rank_high": None if high is None else high[i],
            }
            for i, k in enumerate(self.order)
        )
        return Ranking(
            rule=self.run.rule,
            statistic=self.run.statistic,
            higher_is_better=self.higher,
            entries=entries,
            tied_sets=tuple(tuple(self.heads[self.order[i]].group for i in s) for s in sets),
            details=details,
        )


def _rank_changes(alt: _Order, target: _Order) -> list[RankChange]:
    shared = [k for k in alt.order if k in target.values]
    if len(shared) < 2:
        return []
    # Rank among the groups both rules rank, so a group missing on one side moves nothing.
    a_rank, b_rank = alt.rank_among(shared), target.rank_among(shared)
    out = []
    assess = len(shared) <= MAX_RANKED_GROUPS  # the swaps' intervals are pairwise (see MAX_RANKED_GROUPS)
    for k in sorted(shared, key=lambda k: a_rank[k]):
        if a_rank[k] == b_rank[k]:
            continue
        if not assess:
            out.append(RankChange(rule=alt.run.rule, against=target.run.rule, group=alt.heads[k].group,
                                  rank=a_rank[k], against_rank=b_rank[k], value=alt.values[k],
                                  against_value=target.values[k],
                                  noise=f"not assessed ({len(shared):,} groups, more than {MAX_RANKED_GROUPS})"))
            continue
        swaps = []
        for j in shared:
            if j == k or (a_rank[k] < a_rank[j]) == (b_rank[k] < b_rank[j]):
                continue
            here, there = alt.between(k, j), target.between(k, j)
            swaps.append(
                {
                    "group": alt.heads[j].group,
                    "difference": here.estimate,
                    "interval": [here.low, here.high],
                    "excludes_zero": alt.separated(k, j),
                    "against_difference": there.estimate,
                    "against_interval": [there.low, there.high],
                    "against_excludes_zero": target.separated(k, j),
                    "method": here.method,
                }
            )
        beyond = bool(swaps) and all(s["excludes_zero"] and s["against_excludes_zero"] for s in swaps)
        out.append(
            RankChange(
                rule=alt.run.rule,
                against=target.run.rule,
                group=alt.heads[k].group,
                rank=a_rank[k],
                against_rank=b_rank[k],
                value=alt.values[k],
                against_value=target.values[k],
                noise="beyond the noise" if beyond else "inside the noise",
                swapped_with=tuple(swaps),
            )
        )
    return out


def _adjusted(
    runs: list[RuleRun], differences: list[RuleDifference], method: str
) -> tuple[list[RuleRun], list[RuleDifference], dict[str, Any]]:
    """Adjust the p-values of every printed comparison as one family; name the family."""
    comparisons = [c for run in runs for c in run.comparisons]
    family = [*differences, *comparisons]
    adjusted = adjust([c.p_value for c in family], method)
    lookup = {id(c): p for c, p in zip(family, adjusted, strict=True)}
    differences = [replace(d, p_adjusted=lookup[id(d)]) for d in differences]
    runs = [
        replace(run, comparisons=tuple(replace(c, p_adjusted=lookup[id(c)]) for c in run.comparisons))
        for run in runs
    ]
    m = sum(p is not None for p in adjusted)
    info = {
        "method": method,
        "m": m,
        "family": (
            f"the {m} comparisons with a defined p-value among the {len(differences)} rule "
            f"differences and {len(comparisons)} group comparisons of this report"
        ),
    }
    return runs, differences, info
