"""The rule engine: replay one reporting rule over a card's stored episodes.

    select -> features -> score -> on_status / on_missing -> reduce
           -> aggregate per group and stratum -> interval over the unit -> compare

    apply_rule(card, rule, *, file=None, seed=None, keep_columns=()) -> RuleRun

The episodes table is read once with only the columns the rule needs; step features
stream the steps table (`features.py`). Per-episode arithmetic is vectorized
(Arrow kernels, then numpy on integer group codes); per-unit sums become `UnitStats`,
the mergeable sufficient statistics every interval is computed from.

Counting is exhaustive: every episode of the card is either removed by `select`
(`n_selected_out`), excluded by its status (`excluded_by_status`), excluded for a
missing score (`n_missing_excluded`), or observed (`n_episodes`). Groups come from
all episodes, so a group that `select` empties is still shown, with n = 0.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from .._threads import Background
from ..errors import RuleError
from ..expr import Expression, parse_expression
from ..io.decode import variable_width
from ..io.read_ahead import head_start
from ..model.rule import Rule
from ..stats import UnitStats, pool_strata, undefined_interval
from ..stats.intervals import REASON_NO_DATA
from .aggregation import (
    CellSummary,
    headline,
    paired,
    pooled_interval,
    pooled_warnings,
)
from .features import (
    CompiledFeature,
    attach_features,
    compile_features,
    compute_features,
    step_batches,
)
from .grouping import Factor, label_sort_key
from .loader import located
from .results import GroupComparison, GroupResult, RuleRun
from .scoring import (
    PartitionRun,
    _describe,
    partition_factors,
    reduce_info,
    run_partition,
    unit_sums,
)

__all__ = [
    "Observations",
    "StepFeatures",
    "UnitObservations",
    "apply_rule",
    "merge_partitions",
    "observation_unit",
    "plan_rule",
]

#: (card, rule, compiled features, episodes table) -> {feature: (episode_id, value)}, the
#: contract of `features.compute_features` for engines that run it elsewhere.
StepFeatures = Callable[[Any, Rule, list[CompiledFeature], pa.Table], dict[str, pa.Table]]

#: Drop actions that mean a column's values are not (all) what the source held.
_LOSSY = {"omitted", "redacted", "hashed", "truncated", "unobserved"}


@dataclass(frozen=True, eq=False)
class Observations:
    """The values a rule's statistic is over, kept so other rules can pair with it.

    `codes[i]` is the group (into `groups.labels`) of observation i, `values[i]` its
    value and `identity` row i the columns that are constant within it (all read
    episode columns without a reduce; group, strata, reduce and unit columns after),
    built on first use from `identity_of` (a table, or a function giving it).
    """

    groups: Factor
    codes: np.ndarray
    values: np.ndarray
    identity_of: pa.Table | Callable[[], pa.Table]
    unit: list[str]

    @cached_property
    def identity(self) -> pa.Table:
        return self.identity_of if isinstance(self.identity_of, pa.Table) else self.identity_of()


@dataclass(frozen=True, eq=False)
class UnitObservations:
    """Observations summed per unit, for an engine that scored elsewhere: per group, the
    per-unit sums on `unit` (all comparisons and rankings pair on it). `identity` holds
    the columns of the observations (no rows)."""

    groups: Factor
    unit: list[str]
    identity: pa.Table
    sums: dict[int, Any]

    def unit_stats(self, group: int, columns: list[str]) -> UnitStats:
        if list(columns) != list(self.unit):
            raise RuleError(
                f"these observations are summed per {'+'.join(self.unit)}, not per "
                f"{'+'.join(columns)}; rerun with --engine local"
            )
        sums = self.sums.get(group)
        if sums is None:
            return UnitStats.empty()
        labels, counts, total, squares = sums
        keys = np.array(["\x1f".join(map(str, label)) for label in labels], dtype=object)
        return UnitStats(keys, counts, total, squares)


def observation_unit(rule: Rule) -> list[str]:
    """The columns an observation of `rule` is identified by: its unit, else its reduce
    key, else the episode (what comparisons and rankings pair on by default)."""
    return rule.aggregate.unit_columns() or (rule.reduce.by if rule.reduce else ["episode_id"])


@dataclass
class _Plan:
    rule: Rule
    file: str | None
    seed: int
    features: list[CompiledFeature]
    select: Expression | None
    score: Expression
    episode_columns: list[str]
    unit: list[str] | None
    pair_on: list[str] | None
    warnings: list[str] = field(default_factory=list)
    #: Text columns of the episodes the rule only groups, counts or pairs on (no expression
    #: reads them): the local engine keeps them dictionary-encoded, as stored (see _episodes).
    key_columns: frozenset[str] = frozenset()
    #: Where the card was opened from: errors about its rows name it (a library caller, or a
    #: script over many cards, could not tell which card an enum violation is in).
    card: str | None = None


def _unknown(name: str, names: Sequence[str], what: str = "column") -> str:
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(sorted(names)[:40])
    return f"unknown {what} {name[:80]!r}; available episode columns: {listed}{hint}"


def _plan(card: Any, rule: Rule, file: str | None, seed: int | None, keep: Sequence[str]) -> _Plan:
    episodes_schema: pa.Schema = card.schema("episodes")
    names = episodes_schema.names
    features = (
        compile_features(
            rule.features,
            card.schema("steps"),
            file=file,
            episodes_schema=episodes_schema,
            rule=rule.rule,
        )
        if rule.features
        else []
    )
    schema = episodes_schema
    for feature in features:
        if feature.name in names:
            raise RuleError(
                f"feature {feature.name!r} has the name of an episodes column; rename the feature",
                file=file,
                key=f"features.{feature.name}",
            )
        schema = schema.append(pa.field(feature.name, feature.type))
    select = None
    if rule.select is not None:
        select = parse_expression(rule.select, file=file, key="select")
        select.typecheck(schema, expect="boolean")
    score = parse_expression(rule.score, file=file, key="score")
    score.typecheck(schema, expect="number")
    agg = rule.aggregate
    keyed: list[tuple[str, list[str]]] = [
        ("aggregate.group_by", agg.group_by),
        ("aggregate.strata", agg.strata),
        ("aggregate.unit", agg.unit_columns() or []),
        ("reduce.by", rule.reduce.by if rule.reduce else []),
        ("compare.pair_on", (rule.compare.pair_on or []) if rule.compare else []),
    ]
    for key, columns in keyed:
        for name in columns:
            if name not in names:
                raise RuleError(_unknown(name, names), file=file, key=key)
    used = {"episode_id", "status"} | {c for _, cols in keyed for c in cols}
    evaluated = (select.names if select else set()) | score.names
    for feature in features:
        evaluated |= set(feature.episode_columns.values())
    used |= evaluated | {c for c in keep if c in names}
    if rule.reduce is not None and "trial" in names:
        used.add("trial")
    feature_names = {f.name for f in features}
    plan = _Plan(
        rule=rule,
        file=file,
        seed=seed if seed is not None else (rule.aggregate.interval.seed or 0),
        features=features,
        select=select,
        score=score,
        episode_columns=[c for c in names if c in used and c not in feature_names],
        unit=agg.unit_columns(),
        pair_on=rule.compare.pair_on if rule.compare else None,
        key_columns=frozenset(c for c in used - evaluated - {"episode_id"}
                              if c in names and variable_width(episodes_schema.field(c).type)),
        card=getattr(card, "path", None),
    )
    plan.warnings += _drop_warnings(card, rule, plan)
    return plan


def _drop_warnings(card: Any, rule: Rule, plan: _Plan) -> list[str]:
    step_columns = set().union(*(f.columns for f in plan.features)) if plan.features else set()
    read = {("episodes", c) for c in plan.episode_columns} | {("steps", c) for c in step_columns}
    out = []
    for drop in card.manifest.drops:
        table, _, column = drop.target.partition(".")
        action = drop.action.value
        if column and (table, column) in read and action in _LOSSY:
            out.append(
                f"the rule reads {drop.target}, which the drops manifest marks {action} "
                f"({drop.declaration.value}): {drop.reason}"
            )
        elif rule.rule in drop.affects:
            out.append(
                f"the drops manifest says {drop.target} ({action}) limits this rule: {drop.reason}"
            )
    return out



def apply_rule(
    card: Any,
    rule: Rule,
    *,
    file: str | None = None,
    seed: int | None = None,
    keep_columns: Sequence[str] = (),
    step_features: StepFeatures | None = None,
) -> RuleRun:
    """Run `rule` over `card` and return its headlines, comparisons and warnings.

    `file` names the rule file in errors; `seed` overrides the rule's bootstrap seed;
    `keep_columns` are extra episode columns kept with the observations (for pairing
    with other rules); `step_features` computes the step features (default: in this
    process; rollout_cards.scale runs the same kernels on Ray). Raises RuleError / ExpressionError for a rule that does not fit
    the card (unknown column, type error, k larger than the attempts, an interval
    method that cannot apply), always naming the file and the key, and the key's line when
    `file` is a `loader.RuleFile` (as `loader.read_rule` gives it).
    """
    try:
        return _apply(card, rule, file, seed, keep_columns, step_features)
    except RuleError as exc:
        raise located(exc, file) from None


def _apply(card: Any, rule: Rule, file: str | None, seed: int | None, keep_columns: Sequence[str],
           step_features: StepFeatures | None) -> RuleRun:
    plan = _plan(card, rule, file, seed, keep_columns)
    steps = None
    if plan.features and step_features is None:
        # The steps table starts decoding now, on threads, while the episodes table is read
        # (the scan runs ahead by up to io.reader._AHEAD_BYTES of batches).
        steps = head_start(step_batches(card, plan.features))
    try:
        table = _episodes(card, plan)
    except BaseException:
        if steps is not None:
            steps.close()
        raise
    factors = None
    if plan.features:
        if steps is not None:
            # on the core the scan's decoding leaves idle near its end (nice), not in the tail
            factors = Background(partition_factors, plan, table, name="rollout-cards-scoring", nice=10)
            computed = compute_features(steps, plan.features, episodes=table)
        else:
            computed = step_features(card, rule, plan.features, table)
        table = attach_features(table, computed, plan.features)
    return merge_partitions(plan, [run_partition(plan, table, keep=True,
                                                 factors=factors.result() if factors is not None else None)])


def _episodes(card: Any, plan: _Plan) -> pa.Table:
    """The episode columns `plan` reads, the strings of its key columns still dictionary-
    encoded as stored: grouping then works on the codes (grouping._from_dictionaries) instead
    of hashing a million strings per column, and no key string is decoded until the
    observations are (scoring keeps them plain). The other columns are decoded as
    `card.episodes` decodes them; the decode budget counts every column either way. A card-like
    object without `iter_episodes` gives `episodes()` as it is."""
    scan = getattr(card, "iter_episodes", None)  # (an importer's in-memory episodes have none)
    encoded = [b for b in scan(columns=plan.episode_columns, encoded=True) if b.num_rows] if scan else []
    if not encoded:
        return card.episodes(columns=plan.episode_columns)
    table = pa.Table.from_batches(encoded)
    stored = card.schema("episodes")
    for i, f in enumerate(table.schema):
        want = stored.field(f.name)
        if f.name not in plan.key_columns and f.type != want.type:
            table = table.set_column(i, want, table.column(i).cast(want.type))
    return table.unify_dictionaries()


def plan_rule(card: Any, rule: Rule, *, file: str | None = None, seed: int | None = None,
              keep_columns: Sequence[str] = ()) -> _Plan:
    """The checked plan of `rule` over `card` (what `apply_rule` reads and computes), for
    engines that run its partitions elsewhere; raises as `apply_rule` does."""
    return _plan(card, rule, file, seed, keep_columns)


def _merged_labels(parts: Sequence[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    if len(parts) == 1:
        return list(parts[0])
    return sorted({label for labels in parts for label in labels}, key=label_sort_key)


def merge_partitions(plan: _Plan, parts: Sequence[PartitionRun]) -> RuleRun:
    """The RuleRun of `plan` from the runs of partitions that each hold whole units (and
    whole reduce keys). Labels are merged (sorted as over the whole table), counts added,
    and each cell's per-unit sums concatenated in unit order: every sum is the one the
    whole table gives, so results are identical field for field."""
    rule, agg = plan.rule, plan.rule.aggregate
    group_labels = _merged_labels([p.groups for p in parts]) if agg.group_by else [()]
    strata_labels = _merged_labels([p.strata for p in parts]) if agg.strata else [()]
    unit_labels = _merged_labels([p.units for p in parts])
    n_strata = max(1, len(strata_labels))
    size = len(group_labels) * n_strata
    gindex = {label: i for i, label in enumerate(group_labels)}
    sindex = {label: i for i, label in enumerate(strata_labels)}
    uindex = {label: i for i, label in enumerate(unit_labels)}
    counts = {name: np.zeros(size, dtype=np.int64) for name in
              ("selected_out", "missing", "missing_excluded", "present")}
    by_status: dict[str, np.ndarray] = {}
    episodes = np.zeros(size, dtype=np.int64)
    pieces: dict[tuple[int, int], list[tuple[np.ndarray, ...]]] = {}
    binary: dict[tuple[int, int], bool] = {}
    group_sums: dict[int, list[Any]] = {}
    for p in parts:
        local_strata = max(1, len(p.strata))
        g_of = np.array([gindex[label] for label in p.groups] or [0], dtype=np.int64)
        s_of = np.array([sindex[label] for label in p.strata] or [0], dtype=np.int64)
        u_of = np.array([uindex[label] for label in p.units] or [0], dtype=np.int64)
        cell_of = (g_of[:, None] * n_strata + s_of[None, :]).reshape(-1)[: len(p.groups) * local_strata]
        for name, values in p.counts.items():
            np.add.at(counts[name], cell_of, values)
        for status, values in p.by_status.items():
            np.add.at(by_status.setdefault(status, np.zeros(size, dtype=np.int64)), cell_of, values)
        np.add.at(episodes, cell_of, p.episodes)
        for (g, s), (units, c, total, squares, is01) in p.cells.items():
            key = (int(g_of[g]), int(s_of[s]))
            pieces.setdefault(key, []).append((u_of[units], c, total, squares))
            binary[key] = binary.get(key, True) and is01
        for g, sums in (p.group_units or {}).items():
            group_sums.setdefault(int(g_of[g]), []).append(sums)
    stats = {}
    for key, chunks in pieces.items():
        units, c, total, squares = (np.concatenate(arrays) for arrays in zip(*chunks, strict=True))
        order = np.argsort(units, kind="stable")
        stats[key] = (UnitStats(units[order], c[order], total[order], squares[order]), binary[key])
    unit_name = parts[0].unit_name if parts else "+".join(observation_unit(rule))
    info = None
    if rule.reduce is not None:
        info, warnings = reduce_info(rule.reduce, [p.reduced for p in parts if p.reduced is not None])
        plan.warnings += warnings
    groups, strata = Factor(np.zeros(0, dtype=np.int64), group_labels), Factor(np.zeros(0, dtype=np.int64), strata_labels)
    if len(parts) == 1 and parts[0].cells_local is not None:
        local, factor = parts[0].cells_local, parts[0].group_factor
        observations: Any = Observations(factor, local.group, local.values, local.identity_of, observation_unit(rule))

        def identity() -> pa.Table:  # built only when a comparison or a caller needs it
            return observations.identity

        def pair_stats(g: int, columns: list[str]) -> UnitStats:
            return unit_stats_on(observations, g, columns)
    else:
        empty = (parts[0].identity if parts else pa.schema([])).empty_table()

        def identity() -> pa.Table:
            return empty

        observations = UnitObservations(groups, observation_unit(rule), empty,
                                        {g: _merged_sums(chunks) for g, chunks in group_sums.items()})
        pair_stats = observations.unit_stats
    builder = _ResultBuilder(plan, groups, strata, unit_name, info, stats, counts, by_status, episodes)
    results = builder.build()
    comparisons = _compare(plan, groups, identity(), pair_stats) if rule.compare else []
    return RuleRun(
        rule=rule.rule,
        version=rule.version,
        kind=rule.kind.value,
        file=plan.file,
        statistic=agg.statistic.value,
        group_by=tuple(agg.group_by),
        results=tuple(results),
        comparisons=tuple(comparisons),
        n_episodes_total=sum(p.rows for p in parts),
        n_selected_out=sum(p.selected_out for p in parts),
        warnings=tuple(plan.warnings),
        observations=observations,
    )


def _merged_sums(chunks: list[Any]) -> Any:
    """One group's per-unit sums from partitions holding disjoint units, in label order."""
    if len(chunks) == 1:
        return chunks[0]
    rows = sorted(((label, int(c), float(t), float(q)) for labels, counts, total, squares in chunks
                   for label, c, t, q in zip(labels, counts, total, squares, strict=True)),
                  key=lambda row: label_sort_key(row[0]))
    return ([r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2] for r in rows]), np.array([r[3] for r in rows]))


class _ResultBuilder:
    """Turns cell statistics into GroupResults (per stratum and pooled)."""

    def __init__(self, plan, groups, strata, unit_name, reduce_info, stats, counts, by_status, episodes):  # noqa: ANN001
        self.plan, self.groups, self.strata = plan, groups, strata
        self.unit_name, self.reduce_info = unit_name, reduce_info
        self.stats, self.counts, self.by_status, self.episodes = stats, counts, by_status, episodes
        self.rule = plan.rule
        self.n_strata = max(1, strata.size)

    def _sum(self, name: str, cells: list[int]) -> int:
        return int(sum(int(self.counts[name][c]) for c in cells))

    def _result(
        self, g: int, cells: list[int], stratum: dict | None, summary, n: int, **extra
    ) -> GroupResult:  # noqa: ANN001
        rule, agg = self.rule, self.rule.aggregate
        excluded = {
            s: int(sum(int(arr[c]) for c in cells))
            for s, arr in sorted(self.by_status.items())
            if sum(int(arr[c]) for c in cells)
        }
        missing = self._sum("missing", cells)
        warnings = [*self.plan.warnings, *summary.warnings, *extra.pop("warnings", [])]
        if missing:
            treated = (
                "excluded" if rule.on_missing == "exclude" else f"counted as {rule.on_missing:g}"
            )
            warnings.append(
                f"{missing} scored episode(s) had a null or NaN score, {treated} (on_missing)"
            )
        return GroupResult(
            rule=rule.rule,
            version=rule.version,
            kind=rule.kind.value,
            group=dict(zip(agg.group_by, self.groups.labels[g], strict=True)),
            stratum=stratum,
            statistic=agg.statistic.value,
            value=summary.value,
            interval=summary.interval,
            unit=self.unit_name,
            n=n,
            n_episodes=int(sum(int(self.episodes[c]) for c in cells)),
            excluded_by_status=excluded,
            n_missing=missing,
            n_missing_excluded=self._sum("missing_excluded", cells),
            n_selected_out=self._sum("selected_out", cells),
            successes=summary.successes,
            reduce=self.reduce_info,
            warnings=tuple(dict.fromkeys(warnings)),
            **extra,
        )

    def _summary(self, g: int, s: int):  # noqa: ANN202
        agg = self.rule.aggregate
        units, is01 = self.stats.get((g, s), (UnitStats.empty(), True))
        where = _describe(self.groups.labels, agg.group_by, g)
        if agg.strata:
            where += " · " + _describe(self.strata.labels, agg.strata, s)
        return headline(
            units,
            statistic=agg.statistic.value,
            spec=agg.interval,
            is01=is01,
            unit_is_observation=bool(np.all(units.counts == 1)),
            unit=self.unit_name,
            seed=self.plan.seed,
            where=where,
            file=self.plan.file,
        ), units

    def build(self) -> list[GroupResult]:
        agg = self.rule.aggregate
        out: list[GroupResult] = []
        pooled_values: dict[int, dict[str, float]] = {}
        pooled_index: dict[int, int] = {}
        for g in range(self.groups.size):
            if not agg.strata:
                summary, units = self._summary(g, 0)
                out.append(self._result(g, [g], None, summary, units.n))
                continue
            present = [
                s for s in range(self.n_strata) if self.counts["present"][g * self.n_strata + s]
            ]
            strata_cells = []
            for s in present:
                summary, units = self._summary(g, s)
                label = dict(zip(agg.strata, self.strata.labels[s], strict=True))
                out.append(self._result(g, [g * self.n_strata + s], label, summary, units.n))
                strata_cells.append((s, summary, units))
            pooled, values = self._pooled(g, strata_cells)
            pooled_values[g] = values
            pooled_index[g] = len(out)
            out.append(pooled)
        if agg.strata:
            note = _ranking_note(self.groups, agg.group_by, pooled_values)
            if note:
                for i in pooled_index.values():
                    r = out[i]
                    out[i] = GroupResult(**{**r.__dict__, "warnings": (*r.warnings, note)})
        return out

    def _pooled(self, g: int, strata_cells: list) -> tuple[GroupResult, dict[str, float]]:  # noqa: ANN001
        agg = self.rule.aggregate
        level = agg.interval.level
        observed = [(s, summary, units) for s, summary, units in strata_cells if units.n > 0]
        cells = [g * self.n_strata + s for s, _, _ in strata_cells]
        n = sum(units.n for _, _, units in observed)
        all_units = set()
        for _, _, units in observed:
            all_units.update(units.units.tolist())
        warnings = []
        missing = [self.strata.labels[s] for s, _, units in strata_cells if units.n == 0]
        if missing:
            warnings.append(
                f"{len(missing)} stratum/strata have no observations and are left out of the pool"
            )
        values: dict[str, float] = {}
        if not observed:
            interval = undefined_interval("stratified_cluster_t", level, 0, 0, REASON_NO_DATA)
            summary = CellSummary(None, interval, None, ())
        else:
            keyed_values = {s: summary.value for s, summary, _ in observed}
            keyed_counts = {s: units.n for s, _, units in observed}
            for weights in ("equal", "by_count"):
                values[weights] = pool_strata(keyed_values, keyed_counts, weights=weights).pooled
            pooled = pool_strata(keyed_values, keyed_counts, weights=agg.weights.value)
            if agg.statistic.value == "mean":
                weight = {sv.key: sv.weight for sv in pooled.strata}
                interval = pooled_interval(
                    [(weight[s], units) for s, _, units in observed],
                    level,
                    len(all_units),
                    names=[_describe(self.strata.labels, agg.strata, s) for s, _, _ in observed],
                )
                warnings += pooled_warnings(interval, self.unit_name)
            else:
                interval = undefined_interval(
                    "stratified",
                    level,
                    n,
                    len(all_units),
                    f"undefined (no interval for a pooled {agg.statistic.value}; see the per-stratum intervals)",
                    estimate=pooled.pooled,
                )
            binary = all(summary.successes is not None for _, summary, _ in observed)
            successes = sum(summary.successes for _, summary, _ in observed) if binary else None
            summary = CellSummary(pooled.pooled, interval, successes, ())
        extra = {
            "pooled": {
                "weights": agg.weights.value,
                "strata": len(observed),
                "equal": values.get("equal"),
                "by_count": values.get("by_count"),
            },
            "warnings": warnings,
        }
        return self._result(g, cells, None, summary, n, **extra), values


def _ranking_note(
    groups: Factor, group_by: list[str], pooled: dict[int, dict[str, float]]
) -> str | None:
    """A warning when equal and by-count pooling order the groups differently."""
    ranked = {g: v for g, v in pooled.items() if "equal" in v}
    if len(ranked) < 2:
        return None

    def order(weights: str) -> list[int]:
        return sorted(ranked, key=lambda g: (-ranked[g][weights], g))

    equal, by_count = order("equal"), order("by_count")
    if equal == by_count:
        return None

    def text(seq: list[int]) -> str:
        return " > ".join(_describe(groups.labels, group_by, g) for g in seq)

    return (
        "strata pooled by count rank the groups differently than strata pooled equally "
        f"(equal: {text(equal)}; by_count: {text(by_count)})"
    )


# ------------------------------------------------------------------------- comparisons


def _match_group(groups: Factor, group_by: list[str], wanted: dict[str, Any]) -> int | None:
    """The code of the group whose labels equal `wanted` (numbers and text compared as text)."""
    target = tuple(wanted[c] for c in group_by)
    for code, label in enumerate(groups.labels):
        if label == target or tuple(map(str, label)) == tuple(map(str, target)):
            return code
    return None


def unit_stats_on(obs: Observations | UnitObservations, group: int, columns: list[str]) -> UnitStats:
    """A group's observations summed per value of `columns` (the pairing unit)."""
    if isinstance(obs, UnitObservations):
        return obs.unit_stats(group, columns)
    sums = unit_sums(obs.codes, obs.values, obs.identity, group, columns)
    if sums is None:
        return UnitStats.empty()
    labels, counts, total, squares = sums
    keys = np.array(["\x1f".join(map(str, label)) for label in labels], dtype=object)
    return UnitStats(keys, counts, total, squares)


def _compare(plan: _Plan, groups: Factor, identity: pa.Table,
             pair_stats: Callable[[int, list[str]], UnitStats]) -> list[GroupComparison]:
    rule, file = plan.rule, plan.file
    assert rule.compare is not None
    agg = rule.aggregate
    baseline = _match_group(groups, agg.group_by, rule.compare.baseline)
    if baseline is None:
        shown = "; ".join(
            _describe(groups.labels, agg.group_by, g) for g in range(min(groups.size, 10))
        )
        raise RuleError(
            f"no group matches the baseline {rule.compare.baseline}; groups are: {shown}",
            file=file,
            key="compare.baseline",
        )
    pair_on = plan.pair_on or plan.unit or (rule.reduce.by if rule.reduce else ["episode_id"])
    missing = [c for c in pair_on if c not in identity.column_names]
    if missing:
        raise RuleError(
            f"pair_on {missing} is not constant within the reduced observations; after a reduce "
            f"pair on columns of reduce.by, group_by, strata or unit ({', '.join(identity.column_names)})",
            file=file,
            key="compare.pair_on",
        )
    base_stats = pair_stats(baseline, pair_on)
    out = []
    for g in range(groups.size):
        if g == baseline:
            continue
        result = paired(
            pair_stats(g, pair_on),
            base_stats,
            statistic=agg.statistic.value,
            spec=agg.interval,
            seed=plan.seed,
            file=file,
        )
        out.append(
            GroupComparison(
                rule=rule.rule,
                group=dict(zip(agg.group_by, groups.labels[g], strict=True)),
                baseline=dict(zip(agg.group_by, groups.labels[baseline], strict=True)),
                statistic=agg.statistic.value,
                difference=result.interval.estimate,
                interval=result.interval,
                unit="+".join(pair_on),
                n_units=result.interval.n_units,
                dropped_only_in_group=result.only_a,
                dropped_only_in_baseline=result.only_b,
                se_unpaired=result.se_unpaired,
                warnings=tuple(plan.warnings),
            )
        )
    return out
