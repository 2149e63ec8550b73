"""`rescore(card, rules)`: the card's declared rules and alternative rules on the same episodes.

Every rule runs over the same stored episodes. Each alternative is then compared
with each declared rule of kind `original` (with every declared rule when none is
marked original): per shared group, the difference of the headlines with a paired
interval over the units both rules observed, and every group whose rank moves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import RuleError
from ..io.reader import Card, open_card
from ..model.rule import Rule
from ..stats import undefined_interval
from .aggregation import paired
from .engine import Observations, apply_rule, unit_stats_on
from .loader import declared_rules, load_rule
from .replay import check_reported
from .results import RankChange, RescoreReport, RuleDifference, RuleRun

__all__ = ["rescore"]

RuleSource = Rule | str | os.PathLike[str]


def _alternatives(rules: Iterable[RuleSource]) -> list[tuple[Rule, str | None]]:
    out = []
    for source in rules:
        if isinstance(source, Rule):
            out.append((source, None))
        else:
            out.append((load_rule(source), str(source)))
    return out


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


def rescore(
    card: Card | str | os.PathLike[str],
    rules: Iterable[RuleSource] | RuleSource | None = None,
    *,
    seed: int | None = None,
) -> RescoreReport:
    """Run the card's declared rules and the alternative `rules` (paths or `Rule`s).

    Without `rules` this replays the card's own rules. `seed` overrides every rule's
    bootstrap seed. Raises RuleError (or ExpressionError) naming the file and key of
    a rule that cannot be read or applied, CardFormatError for an unreadable card.
    """
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
    keep = _keep_columns([r for r, _ in [*declared, *alternatives]])
    runs = [
        apply_rule(card, rule, file=file, seed=seed, keep_columns=keep)
        for rule, file in [*declared, *alternatives]
    ]
    declared_runs, alternative_runs = runs[: len(declared)], runs[len(declared) :]
    targets = [r for r in declared_runs if r.kind == "original"] or declared_runs
    differences: list[RuleDifference] = []
    changes: list[RankChange] = []
    specs = {rule.rule: rule for rule, _ in [*declared, *alternatives]}
    for alt in alternative_runs:
        for target in targets:
            if alt.group_by != target.group_by:
                continue
            differences += _differences(alt, target, specs[alt.rule], seed)
            changes += _rank_changes(alt, target)
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
    )


def _pairing_unit(a: Observations, b: Observations) -> list[str] | None:
    for candidate in (b.unit, a.unit):
        if all(c in a.identity.column_names and c in b.identity.column_names for c in candidate):
            return list(candidate)
    return None


def _group_code(obs: Observations, label: tuple[Any, ...]) -> int:
    return obs.groups.labels.index(label)


def _differences(
    alt: RuleRun, target: RuleRun, spec: Rule, seed: int | None
) -> list[RuleDifference]:
    a_obs, b_obs = alt.observations, target.observations
    unit = _pairing_unit(a_obs, b_obs)
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
                n_units=interval.n_units,
                dropped_only_in_rule=only_a,
                dropped_only_in_against=only_b,
                warnings=tuple(warnings),
            )
        )
    return out


def _ranks(run: RuleRun) -> dict[tuple[Any, ...], tuple[int, float]]:
    values = {k: r.value for k, r in run.headlines().items() if r.value is not None}
    order = sorted(values, key=lambda k: (-values[k], tuple(map(str, k))))
    return {k: (i + 1, values[k]) for i, k in enumerate(order)}


def _rank_changes(alt: RuleRun, target: RuleRun) -> list[RankChange]:
    a, b = _ranks(alt), _ranks(target)
    shared = [k for k in a if k in b]
    if len(shared) < 2:
        return []
    # Rank among the groups both rules rank, so a group missing on one side moves nothing.
    a_rank = {k: i + 1 for i, k in enumerate(sorted(shared, key=lambda k: a[k][0]))}
    b_rank = {k: i + 1 for i, k in enumerate(sorted(shared, key=lambda k: b[k][0]))}
    heads = alt.headlines()
    return [
        RankChange(
            rule=alt.rule,
            against=target.rule,
            group=heads[k].group,
            rank=a_rank[k],
            against_rank=b_rank[k],
            value=a[k][1],
            against_value=b[k][1],
        )
        for k in sorted(shared, key=lambda k: a_rank[k])
        if a_rank[k] != b_rank[k]
    ]
