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
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import CardFormatError, RuleError
from ..model.rule import Rule
from ..stats import UnitStats, pool_strata, undefined_interval
from ..stats.intervals import REASON_NO_DATA
from ..tables import TerminalStatus
from .aggregation import (
    CellSummary,
    best_of_k_warning,
    headline,
    paired,
    pooled_interval,
    pooled_warnings,
)
from .expressions import Expression, parse_expression
from .features import CompiledFeature, attach_features, compile_features, compute_features
from .grouping import Factor, factorize
from .reducers import reduce_attempts
from .results import GroupComparison, GroupResult, RuleRun

__all__ = ["Observations", "StepFeatures", "apply_rule"]

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
    episode columns without a reduce; group, strata, reduce and unit columns after).
    """

    groups: Factor
    codes: np.ndarray
    values: np.ndarray
    identity: pa.Table
    unit: list[str]


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
    used |= (select.names if select else set()) | score.names
    used |= {c for c in keep if c in names}
    for feature in features:
        used |= set(feature.episode_columns.values())
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


# ------------------------------------------------------------------------------- scoring


@dataclass(frozen=True, eq=False)
class _Scored:
    values: np.ndarray
    included: np.ndarray
    selected: np.ndarray
    excluded_status: dict[str, np.ndarray]
    missing: np.ndarray
    missing_excluded: np.ndarray


def _as_float(array: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(array.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _score(table: pa.Table, plan: _Plan) -> _Scored:
    rule, file, n = plan.rule, plan.file, table.num_rows
    if plan.select is not None:
        selected = plan.select.evaluate(table).fill_null(False).to_numpy(zero_copy_only=False)
        selected = np.asarray(selected, dtype=bool)
    else:
        selected = np.ones(n, dtype=bool)
    raw = _as_float(plan.score.evaluate(table)) if n else np.zeros(0)
    statuses = factorize(table, ["status"])
    allowed = {s.value for s in TerminalStatus}
    values = np.full(n, np.nan)
    use_score = np.zeros(n, dtype=bool)
    excluded_status: dict[str, np.ndarray] = {}
    for code, (status,) in enumerate(statuses.labels):
        if status not in allowed:
            raise CardFormatError(
                f"episodes.status holds {str(status)[:40]!r}, which is not a terminal state "
                f"({', '.join(sorted(allowed))}); validate the card"
            )
        rows = statuses.codes == code
        policy = rule.on_status.policy(status)
        if policy == "score":
            use_score |= rows
        elif policy == "exclude":
            excluded_status[status] = rows & selected
        else:
            values[rows] = float(policy)
    values[use_score] = raw[use_score]
    scored = use_score & selected
    infinite = scored & np.isinf(raw)
    if infinite.any():
        first = table.column("episode_id")[int(np.flatnonzero(infinite)[0])].as_py()
        raise RuleError(
            f"the score is infinite for {int(infinite.sum())} episode(s) (first: {first!r}); "
            "bound it, e.g. min(x, 1e6), or exclude those episodes with select",
            file=file,
            key="score",
        )
    missing = scored & np.isnan(raw)
    missing_excluded = np.zeros(n, dtype=bool)
    if missing.any():
        if rule.on_missing == "error":
            first = table.column("episode_id")[int(np.flatnonzero(missing)[0])].as_py()
            raise RuleError(
                f"{int(missing.sum())} scored episode(s) have a null or NaN score (first: {first!r}); "
                "set on_missing to a number or to exclude, or make the score expression total "
                "(e.g. coalesce(score.x, 0))",
                file=file,
                key="on_missing",
            )
        if rule.on_missing == "exclude":
            missing_excluded = missing
        else:
            values[missing] = float(rule.on_missing)
    excluded = np.zeros(n, dtype=bool)
    for rows in excluded_status.values():
        excluded |= rows
    included = selected & ~excluded & ~missing_excluded
    return _Scored(values, included, selected, excluded_status, missing, missing_excluded)


# ------------------------------------------------------------------------ observations


@dataclass(frozen=True, eq=False)
class _Cells:
    """Per-observation codes and values, before cells are formed."""

    values: np.ndarray
    group: np.ndarray
    stratum: np.ndarray
    unit: np.ndarray
    unit_labels: list[tuple[Any, ...]]
    episodes: np.ndarray  # episodes behind each observation (1 without reduce)
    identity: pa.Table
    unit_name: str
    reduce_info: dict[str, Any] | None


def _describe(labels: Sequence[tuple[Any, ...]], columns: Sequence[str], code: int) -> str:
    if not columns:
        return "the whole card"
    return ", ".join(f"{c}={v}" for c, v in zip(columns, labels[code], strict=True))


def _check_units(unit: Factor, columns: list[str], file: str | None) -> None:
    null_units = [i for i, label in enumerate(unit.labels) if any(v is None for v in label)]
    if null_units:
        count = int(np.isin(unit.codes, null_units).sum())
        raise RuleError(
            f"{', '.join(columns)} is null for {count} observed episode(s); every observation needs a "
            "unit: fill the column, or choose another unit",
            file=file,
            key="aggregate.unit",
        )


def _observations(
    table: pa.Table, scored: _Scored, groups: Factor, strata: Factor, plan: _Plan
) -> _Cells:
    rule, file = plan.rule, plan.file
    rows = np.flatnonzero(scored.included)
    obs = table.take(pa.array(rows, pa.int64()))
    values = scored.values[rows]
    gcode, scode = groups.codes[rows], strata.codes[rows]
    if rule.reduce is None:
        unit_columns = plan.unit or ["episode_id"]
        unit = factorize(obs, unit_columns)
        _check_units(unit, unit_columns, file)
        return _Cells(
            values,
            gcode,
            scode,
            unit.codes,
            unit.labels,
            np.ones(rows.size, dtype=np.int64),
            obs,
            "+".join(unit_columns),
            None,
        )
    spec = rule.reduce
    by = factorize(obs, spec.by)
    n_strata, n_by = max(1, strata.size), max(1, by.size)
    key = (gcode * n_strata + scode) * n_by + by.codes
    group_by = rule.aggregate.group_by

    def describe(packed: int) -> str:
        g, rest = divmod(packed, n_strata * n_by)
        text = _describe(by.labels, spec.by, rest % n_by)
        if group_by:
            text += f" of {_describe(groups.labels, group_by, g)}"
        return text

    order = None
    if "trial" in obs.column_names:
        order = np.nan_to_num(_as_float(obs.column("trial")), nan=np.inf)
    reduced = reduce_attempts(values, key, spec, order=order, describe=describe, file=file)
    g_red = reduced.keys // (n_strata * n_by)
    s_red = (reduced.keys // n_by) % n_strata
    b_red = reduced.keys % n_by
    constant = list(dict.fromkeys([*group_by, *rule.aggregate.strata, *spec.by]))
    if plan.unit is None:
        unit_codes, unit_labels, unit_name = b_red, by.labels, "+".join(spec.by)
        _check_units(Factor(b_red, by.labels), spec.by, file)
    else:
        unit = factorize(obs, plan.unit)
        _check_units(unit, plan.unit, file)
        pairs = np.unique(key * max(1, unit.size) + unit.codes).size
        if pairs != reduced.keys.size + reduced.short:  # short: keys left out by reduce.short
            raise RuleError(
                f"unit {'+'.join(plan.unit)} takes several values within one reduce group "
                f"(by {'+'.join(spec.by)}); after a reduce the unit must be constant per reduce "
                f"key: use the reduce key ({'+'.join(spec.by)}) or a coarser column",
                file=file,
                key="aggregate.unit",
            )
        unit_codes, unit_labels = unit.codes[reduced.first_row], unit.labels
        unit_name = "+".join(plan.unit)
        constant += [c for c in plan.unit if c not in constant]
    identity = obs.take(pa.array(reduced.first_row, pa.int64())).select(constant)
    info: dict[str, Any] = {
        "by": list(spec.by),
        "with": spec.with_.value,
        "k": spec.k if spec.k is not None else int(reduced.attempts.max(initial=0)),
        "attempts_min": int(reduced.attempts.min()) if reduced.attempts.size else 0,
        "attempts_max": int(reduced.attempts.max()) if reduced.attempts.size else 0,
    }
    if spec.short == "exclude":
        info["short_excluded"] = reduced.short
        if reduced.short:
            plan.warnings.append(
                f"{reduced.short} {'+'.join(spec.by)} key(s) had fewer than k={spec.k} attempts and were "
                f"left out of {spec.with_.value} (reduce.short: exclude)"
            )
    if spec.with_.value == "max" and reduced.keys.size:
        plan.warnings.append(
            best_of_k_warning("+".join(spec.by), info["attempts_max"], info["attempts_min"])
        )
    return _Cells(
        reduced.values,
        g_red,
        s_red,
        unit_codes,
        unit_labels,
        reduced.attempts,
        identity,
        unit_name,
        info,
    )


# ------------------------------------------------------------------------- aggregation


def _cell_stats(cells: _Cells, n_strata: int) -> dict[tuple[int, int], tuple[UnitStats, bool]]:
    """UnitStats and "all scores are 0/1" for every (group, stratum) cell with observations."""
    n_units = max(1, len(cells.unit_labels))
    packed = (cells.group * n_strata + cells.stratum) * n_units + cells.unit
    uniq, inverse = np.unique(packed, return_inverse=True)
    v = cells.values
    counts = np.bincount(inverse, minlength=uniq.size)
    sums = np.bincount(inverse, weights=v, minlength=uniq.size)
    sumsq = np.bincount(inverse, weights=v * v, minlength=uniq.size)
    binary = np.bincount(inverse, weights=np.isin(v, (0.0, 1.0)), minlength=uniq.size)
    cell_of = uniq // n_units
    units = uniq % n_units
    out: dict[tuple[int, int], tuple[UnitStats, bool]] = {}
    starts = np.flatnonzero(np.r_[True, cell_of[1:] != cell_of[:-1]]) if uniq.size else []
    bounds = [*map(int, starts), int(uniq.size)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        g, s = divmod(int(cell_of[a]), n_strata)
        stats = UnitStats(units[a:b], counts[a:b], sums[a:b], sumsq[a:b])
        out[(g, s)] = (stats, bool(np.all(binary[a:b] == counts[a:b])))
    return out


def _counts(codes: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(codes[mask], minlength=size)


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
    method that cannot apply), always naming the file and the key.
    """
    plan = _plan(card, rule, file, seed, keep_columns)
    table = card.episodes(columns=plan.episode_columns)
    if plan.features:
        if step_features is None:
            computed = compute_features(features=plan.features, card=card, episodes=table)
        else:
            computed = step_features(card, rule, plan.features, table)
        table = attach_features(table, computed, plan.features)
    scored = _score(table, plan)
    agg = rule.aggregate
    groups = factorize(table, agg.group_by)
    strata = factorize(table, agg.strata)
    cells = _observations(table, scored, groups, strata, plan)
    n_groups, n_strata = groups.size, max(1, strata.size)
    cell_codes = groups.codes * n_strata + strata.codes
    size = n_groups * n_strata
    counts = {
        "selected_out": _counts(cell_codes, ~scored.selected, size),
        "missing": _counts(cell_codes, scored.missing, size),
        "missing_excluded": _counts(cell_codes, scored.missing_excluded, size),
        "present": _counts(cell_codes, np.ones(table.num_rows, dtype=bool), size),
    }
    by_status = {s: _counts(cell_codes, rows, size) for s, rows in scored.excluded_status.items()}
    episodes = np.bincount(
        cells.group * n_strata + cells.stratum, weights=cells.episodes, minlength=size
    ).astype(np.int64)
    stats = _cell_stats(cells, n_strata)
    builder = _ResultBuilder(plan, groups, strata, cells, stats, counts, by_status, episodes)
    results = builder.build()
    comparisons = _compare(plan, groups, cells) if rule.compare else []
    return RuleRun(
        rule=rule.rule,
        version=rule.version,
        kind=rule.kind.value,
        file=file,
        statistic=agg.statistic.value,
        group_by=tuple(agg.group_by),
        results=tuple(results),
        comparisons=tuple(comparisons),
        n_episodes_total=table.num_rows,
        n_selected_out=int((~scored.selected).sum()),
        warnings=tuple(plan.warnings),
        observations=Observations(
            groups,
            cells.group,
            cells.values,
            cells.identity,
            (plan.unit or (rule.reduce.by if rule.reduce else ["episode_id"])),
        ),
    )


class _ResultBuilder:
    """Turns cell statistics into GroupResults (per stratum and pooled)."""

    def __init__(self, plan, groups, strata, cells, stats, counts, by_status, episodes):  # noqa: ANN001
        self.plan, self.groups, self.strata, self.cells = plan, groups, strata, cells
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
            unit=self.cells.unit_name,
            n=n,
            n_episodes=int(sum(int(self.episodes[c]) for c in cells)),
            excluded_by_status=excluded,
            n_missing=missing,
            n_missing_excluded=self._sum("missing_excluded", cells),
            n_selected_out=self._sum("selected_out", cells),
            successes=summary.successes,
            reduce=self.cells.reduce_info,
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
            unit=self.cells.unit_name,
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
                warnings += pooled_warnings(interval, self.cells.unit_name)
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


def unit_stats_on(obs: Observations, group: int, columns: list[str]) -> UnitStats:
    """A group's observations summed per value of `columns` (the pairing unit)."""
    mask = obs.codes == group
    if not mask.any():
        return UnitStats.empty()
    pair = factorize(obs.identity.filter(pa.array(mask)), columns)
    keys = np.array(["\x1f".join(map(str, label)) for label in pair.labels], dtype=object)
    values = obs.values[mask]
    return UnitStats(
        keys,
        np.bincount(pair.codes, minlength=pair.size),
        np.bincount(pair.codes, weights=values, minlength=pair.size),
        np.bincount(pair.codes, weights=values * values, minlength=pair.size),
    )


def _compare(plan: _Plan, groups: Factor, cells: _Cells) -> list[GroupComparison]:
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
    missing = [c for c in pair_on if c not in cells.identity.column_names]
    if missing:
        raise RuleError(
            f"pair_on {missing} is not constant within the reduced observations; after a reduce "
            f"pair on columns of reduce.by, group_by, strata or unit ({', '.join(cells.identity.column_names)})",
            file=file,
            key="compare.pair_on",
        )
    obs = Observations(groups, cells.group, cells.values, cells.identity, pair_on)
    base_stats = unit_stats_on(obs, baseline, pair_on)
    out = []
    for g in range(groups.size):
        if g == baseline:
            continue
        result = paired(
            unit_stats_on(obs, g, pair_on),
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
