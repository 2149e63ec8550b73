"""Scoring and per-unit sums over one partition of the episodes: what a rule run does
between the features and the statistics, in pieces that merge.

    run_partition(plan, table) -> PartitionRun      # score, on_status / on_missing, reduce,
                                                    # per-unit sums per (group, stratum) cell
    engine.merge_partitions(plan, runs) -> RuleRun  # intervals, comparisons (rules/engine.py)

A partition is any set of episodes that holds every episode of each unit it has (and, with
a reduce, every attempt of each key): the local engine runs the whole card as one; the Ray
engine (rollout_cards.scale) runs one per worker task. A `PartitionRun` names groups, strata
and units by their labels, not by codes, so partitions merge: its counts are integers and
its per-unit sums were added in the episodes table's order, exactly as over the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..errors import CardFormatError, RuleError
from ..numpy_arrow import int64_array
from ..tables import TerminalStatus
from ._encoded import evaluate_rows
from .aggregation import best_of_k_warning
from .grouping import Factor, factorize, unique_codes
from .reducers import reduce_attempts

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..model.rule import Reduce
    from .engine import _Plan

__all__ = ["MAX_ABS_SCORE", "Factors", "Identity", "PartitionRun", "ReduceCounts", "partition_factors", "reduce_info",
           "run_partition", "unit_sums"]


# ------------------------------------------------------------------------------- scoring

#: The largest score magnitude a rule may produce: intervals and tests add squares of scores
#: and of per-unit sums, which leave float64's range (~1.8e308) from ~1.3e154 on; 1e100 keeps
#: room for the sums of many units.
MAX_ABS_SCORE = 1e100


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


#: Factors of episode columns by their column names (see `partition_factors`).
Factors = dict[tuple[str, ...], Factor]


def partition_factors(plan: _Plan, table: pa.Table) -> Factors:
    """The factors `run_partition` takes of episode columns alone (status, group_by, strata, and
    text units without a reduce), for a caller that holds the episodes before their features
    are attached: the local engine makes them while the step scan runs, not in the serial tail
    after it (three million-row factorizations of the count benchmark's ~100 ms tail)."""
    rule = plan.rule
    wanted = [["status"], list(rule.aggregate.group_by), list(rule.aggregate.strata)]
    names = set(table.column_names)
    units = list(plan.unit or ["episode_id"])
    if rule.reduce is None and all(c in names and _is_text(table.schema.field(c).type) for c in units):
        wanted.append(units)  # (the only units _observations factorizes over the whole table)
    out: Factors = {}
    for columns in wanted:
        if set(columns) <= names and tuple(columns) not in out:
            out[tuple(columns)] = factorize(table, columns)
    return out


def _factor(table: pa.Table, columns: Sequence[str], factors: Factors | None) -> Factor:
    """`factorize(table, columns)`, or the one made ahead over the same rows."""
    found = factors.get(tuple(columns)) if factors else None
    if found is not None and len(found.codes) == table.num_rows:
        return found
    return factorize(table, columns)


def _score(table: pa.Table, plan: _Plan, factors: Factors | None = None) -> _Scored:
    rule, file, n = plan.rule, plan.file, table.num_rows
    if plan.select is not None:
        selected = evaluate_rows(plan.select, table).fill_null(False).to_numpy(zero_copy_only=False)
        selected = np.asarray(selected, dtype=bool)
    else:
        selected = np.ones(n, dtype=bool)
    raw = _as_float(evaluate_rows(plan.score, table)) if n else np.zeros(0)
    statuses = _factor(table, ["status"], factors)
    codes = statuses.codes
    labels = [status for (status,) in statuses.labels]
    allowed = {s.value for s in TerminalStatus}
    for code, status in enumerate(labels):
        if status not in allowed:
            rows = codes == code
            first = int(np.flatnonzero(rows)[0])
            where = f"{plan.card}: " if plan.card else ""
            raise CardFormatError(
                f"{where}episodes.status holds {str(status)[:40]!r}, which is not a terminal state "
                f"({', '.join(sorted(allowed))}), in {int(rows.sum())} row(s) (first: the row of episode_id "
                f"{str(table.column('episode_id')[first].as_py())[:80]!r}); validate the card"
            )
    # Each status's policy looked up by its code (one gather per table from a few values),
    # not a comparison and a masked assignment per status over every row.
    policies = [rule.on_status.policy(status) for status in labels]
    use_score = np.array([p == "score" for p in policies], dtype=bool)[codes]
    fixed = np.array([np.nan if p in ("score", "exclude") else float(p) for p in policies], dtype=np.float64)
    values = np.where(use_score, raw, fixed[codes])
    excluded_status: dict[str, np.ndarray] = {
        status: (codes == code) & selected
        for code, (status, p) in enumerate(zip(labels, policies, strict=True)) if p == "exclude"
    }
    scored = use_score & selected
    bad = scored & ~np.isfinite(raw)
    found = bool(bad.any())  # (usually none: one pass instead of an isinf and an isnan pass)
    infinite = bad & np.isinf(raw) if found else bad
    if infinite.any():
        first = table.column("episode_id")[int(np.flatnonzero(infinite)[0])].as_py()
        raise RuleError(
            f"the score is infinite for {int(infinite.sum())} episode(s) (first: {first!r}); "
            "bound it, e.g. min(x, 1e6), or exclude those episodes with select",
            file=file,
            key="score",
        )
    missing = bad & np.isnan(raw) if found else bad
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
    beyond = included & (np.abs(values) > MAX_ABS_SCORE)
    if beyond.any():
        i = int(np.flatnonzero(beyond)[0])
        raise RuleError(
            f"{int(beyond.sum())} episode(s) score beyond ±{MAX_ABS_SCORE:g} (first: "
            f"{table.column('episode_id')[i].as_py()!r}, {values[i]:g}); the statistics add squares of "
            "scores and of per-unit sums, which overflow there: rescale the score (e.g. x / 1e6), "
            "bound it (min(x, 1e6)) or exclude those episodes with select",
            file=file,
            key="score",
        )
    return _Scored(values, included, selected, excluded_status, missing, missing_excluded)


# ------------------------------------------------------------------------ observations


@dataclass(frozen=True)
class ReduceCounts:
    """What a reduce left in a partition: keys kept, their fewest and most attempts, keys
    left out as short (`reduce.short: exclude`)."""

    keys: int
    attempts_min: int
    attempts_max: int
    short: int


def reduce_info(spec: Reduce, parts: Sequence[ReduceCounts]) -> tuple[dict[str, Any], list[str]]:
    """The reduce summary of a result and its warnings, from every partition's counts."""
    kept = [p for p in parts if p.keys]
    lowest = min((p.attempts_min for p in kept), default=0)
    highest = max((p.attempts_max for p in kept), default=0)
    short = sum(p.short for p in parts)
    info: dict[str, Any] = {
        "by": list(spec.by),
        "with": spec.with_.value,
        "k": spec.k if spec.k is not None else highest,
        "attempts_min": lowest,
        "attempts_max": highest,
    }
    warnings = []
    if spec.short == "exclude":
        info["short_excluded"] = short
        if short:
            warnings.append(
                f"{short} {'+'.join(spec.by)} key(s) had fewer than k={spec.k} attempts and were "
                f"left out of {spec.with_.value} (reduce.short: exclude)"
            )
    if spec.with_.value == "max" and kept:
        warnings.append(best_of_k_warning("+".join(spec.by), highest, lowest))
    return info, warnings


class Identity:
    """The identity table of the observations, built when first asked for: a rescore that
    compares or exports nothing never copies a million rows of episode columns (the take of
    the included rows and the decode of the key columns were a quarter of the scoring)."""

    def __init__(self, table: pa.Table, rows: np.ndarray | None, keys: frozenset[str]):
        self._parts: tuple[pa.Table, np.ndarray | None, frozenset[str]] | None = (table, rows, keys)
        self.schema = _plain(table.schema.empty_table(), keys).schema
        self._table: pa.Table | None = None

    def __call__(self) -> pa.Table:
        if self._table is None:
            assert self._parts is not None
            table, rows, keys = self._parts
            self._table = _plain(table if rows is None else table.take(int64_array(rows)), keys)
            self._parts = None  # the episodes table is no longer held
        return self._table


@dataclass(frozen=True, eq=False)
class _Cells:
    """Per-observation codes and values, before cells are formed."""

    values: np.ndarray
    group: np.ndarray
    stratum: np.ndarray
    unit: np.ndarray
    unit_labels: list[tuple[Any, ...]]
    episodes: np.ndarray  # episodes behind each observation (1 without reduce)
    identity_of: Identity
    unit_name: str
    reduced: ReduceCounts | None

    @property
    def identity(self) -> pa.Table:
        return self.identity_of()


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


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _restricted(factor: Factor, rows: np.ndarray) -> Factor:
    """`factor` of a table, for its rows `rows` only: the labels those rows hold (in order)."""
    used, codes = unique_codes(factor.codes[rows], max(1, factor.size))
    return Factor(codes, [factor.labels[i] for i in used.tolist()])


def _plain(table: pa.Table, keys: frozenset[str]) -> pa.Table:
    """`table` with the key columns the local engine kept dictionary-encoded (`keys`, text
    columns of the card) decoded: the observations' identity holds them as the card does."""
    for i, f in enumerate(table.schema):
        if f.name in keys and pa.types.is_dictionary(f.type):
            table = table.set_column(i, pa.field(f.name, f.type.value_type, f.nullable, f.metadata),
                                     table.column(i).cast(f.type.value_type))
    return table


def _observations(
    table: pa.Table, scored: _Scored, groups: Factor, strata: Factor, plan: _Plan, factors: Factors | None = None
) -> _Cells:
    rule, file = plan.rule, plan.file
    rows = np.flatnonzero(scored.included)
    values = scored.values[rows]
    gcode, scode = groups.codes[rows], strata.codes[rows]
    if rule.reduce is None:
        unit_columns = plan.unit or ["episode_id"]
        if all(_is_text(table.schema.field(c).type) for c in unit_columns):
            # text sorts the same in any subset: the units of the whole table, cut to the rows
            unit = _restricted(_factor(table, unit_columns, factors), rows)
        else:
            unit = factorize(table.take(int64_array(rows)), unit_columns)
        _check_units(unit, unit_columns, file)
        return _Cells(
            values,
            gcode,
            scode,
            unit.codes,
            unit.labels,
            np.ones(rows.size, dtype=np.int64),
            Identity(table, rows, plan.key_columns),
            "+".join(unit_columns),
            None,
        )
    obs = table.take(int64_array(rows))
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
    identity = Identity(obs.take(int64_array(reduced.first_row)).select(constant), None, plan.key_columns)
    counts = ReduceCounts(
        int(reduced.keys.size),
        int(reduced.attempts.min()) if reduced.attempts.size else 0,
        int(reduced.attempts.max()) if reduced.attempts.size else 0,
        reduced.short,
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
        counts,
    )


# ------------------------------------------------------------------------- partitions

#: Per (group, stratum) cell: its units' codes (ascending), counts, sums, sums of squares,
#: and whether every value is 0 or 1.
CellSums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]
#: Per group, on a pairing unit: the units' labels (sorted), counts, sums, sums of squares.
GroupSums = tuple[list[tuple[Any, ...]], np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class PartitionRun:
    """One partition's share of a rule run. Cells are `g * max(1, len(strata)) + s` over
    this partition's own (sorted) `groups` and `strata` labels; `units` are the labels the
    cells' unit codes point into. `group_units` (when asked for) holds, per group, the
    per-unit sums on the pairing unit that comparisons and rankings use; `cells_local`
    keeps every observation (the local engine's `Observations`, never sent anywhere)."""

    rows: int
    selected_out: int
    groups: list[tuple[Any, ...]]
    strata: list[tuple[Any, ...]]
    counts: dict[str, np.ndarray]
    by_status: dict[str, np.ndarray]
    episodes: np.ndarray
    units: list[tuple[Any, ...]]
    cells: dict[tuple[int, int], CellSums]
    unit_name: str
    reduced: ReduceCounts | None
    identity: pa.Schema
    group_units: dict[int, GroupSums] | None = None
    cells_local: _Cells | None = None
    group_factor: Factor | None = None


def _cell_sums(cells: _Cells, n_strata: int) -> dict[tuple[int, int], CellSums]:
    """Per-unit sums for every (group, stratum) cell with observations: one bincount each,
    so each unit's values are added in the order of the observations."""
    n_units = max(1, len(cells.unit_labels))
    packed = _cell_of(cells.group, cells.stratum, n_strata) * n_units + cells.unit
    n_cells = (int(cells.group.max()) + 1) * n_strata if cells.group.size else 1
    uniq, inverse = unique_codes(packed, n_cells * n_units)
    v = cells.values
    counts = np.bincount(inverse, minlength=uniq.size)
    sums = np.bincount(inverse, weights=v, minlength=uniq.size)
    is01 = (v == 0.0) | (v == 1.0)
    if is01.all():
        # the usual success rule: v * v == v exactly, so the squares' sums are the sums (added
        # in the same order) and every cell is binary; two weighted bincounts of a million
        # observations fewer in the serial tail of a rule run
        sumsq, binary = sums.copy(), counts
    else:
        sumsq = np.bincount(inverse, weights=v * v, minlength=uniq.size)
        binary = np.bincount(inverse, weights=is01, minlength=uniq.size)
    cell_of = uniq // n_units
    units = uniq % n_units
    out: dict[tuple[int, int], CellSums] = {}
    starts = np.flatnonzero(np.r_[True, cell_of[1:] != cell_of[:-1]]) if uniq.size else []
    bounds = [*map(int, starts), int(uniq.size)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        g, s = divmod(int(cell_of[a]), n_strata)
        out[(g, s)] = (units[a:b], counts[a:b], sums[a:b], sumsq[a:b],
                       bool(np.all(binary[a:b] == counts[a:b])))
    return out


def _cell_of(group: np.ndarray, stratum: np.ndarray, n_strata: int) -> np.ndarray:
    """Each row's (group, stratum) cell, g * n_strata + s: the group codes themselves without
    strata (every stratum code is then 0), not two passes over a million rows."""
    return group if n_strata == 1 else group * n_strata + stratum


def _counts(codes: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
    if not mask.any():  # (the usual missing, selected-out: no copy of the codes to count none)
        return np.zeros(size, dtype=np.int64)
    return np.bincount(codes[mask], minlength=size)


def unit_sums(codes: np.ndarray, values: np.ndarray, identity: pa.Table, group: int,
              columns: list[str]) -> GroupSums | None:
    """A group's observations summed per value of `columns` (None: the group has none)."""
    mask = codes == group
    if not mask.any():
        return None
    pair = factorize(identity.filter(pa.array(mask)), columns)
    v = values[mask]
    return (pair.labels, np.bincount(pair.codes, minlength=pair.size),
            np.bincount(pair.codes, weights=v, minlength=pair.size),
            np.bincount(pair.codes, weights=v * v, minlength=pair.size))


def run_partition(plan: _Plan, table: pa.Table, *, pair_units: list[str] | None = None,
                  keep: bool = False, factors: Factors | None = None) -> PartitionRun:
    """Score `table` (episodes with their features attached) and sum per unit.

    `pair_units`: also sum per group on these columns (for comparisons and rankings
    computed elsewhere); `keep`: keep the observations (the local engine's Observations);
    `factors`: `partition_factors` of the same rows, made ahead.
    Raises what the local engine raises for the same rows (RuleError, CardFormatError)."""
    agg = plan.rule.aggregate
    scored = _score(table, plan, factors)
    groups = _factor(table, agg.group_by, factors)
    strata = _factor(table, agg.strata, factors)
    cells = _observations(table, scored, groups, strata, plan, factors)
    n_strata = max(1, strata.size)
    cell_codes = _cell_of(groups.codes, strata.codes, n_strata)
    size = groups.size * n_strata
    counts = {
        "selected_out": _counts(cell_codes, ~scored.selected, size),
        "missing": _counts(cell_codes, scored.missing, size),
        "missing_excluded": _counts(cell_codes, scored.missing_excluded, size),
        "present": np.bincount(cell_codes, minlength=size),
    }
    by_status = {s: _counts(cell_codes, rows, size) for s, rows in scored.excluded_status.items()}
    cell_of_obs = _cell_of(cells.group, cells.stratum, n_strata)
    if cells.reduced is None:  # one episode per observation: a count, no float weights
        episodes = np.bincount(cell_of_obs, minlength=size).astype(np.int64)
    else:
        episodes = np.bincount(cell_of_obs, weights=cells.episodes, minlength=size).astype(np.int64)
    group_units = None
    if pair_units is not None:
        group_units = {}
        for g in range(groups.size):
            sums = unit_sums(cells.group, cells.values, cells.identity, g, pair_units)
            if sums is not None:
                group_units[g] = sums
    return PartitionRun(
        rows=table.num_rows,
        selected_out=int((~scored.selected).sum()),
        groups=groups.labels,
        strata=strata.labels,
        counts=counts,
        by_status=by_status,
        episodes=episodes,
        units=cells.unit_labels,
        cells=_cell_sums(cells, n_strata),
        unit_name=cells.unit_name,
        reduced=cells.reduced,
        identity=cells.identity_of.schema,
        group_units=group_units,
        cells_local=cells if keep else None,
        group_factor=groups if keep else None,
    )
