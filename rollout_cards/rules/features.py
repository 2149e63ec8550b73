"""Step features: per-episode values aggregated from the steps table, by streaming.

The steps table is never held in memory. It is read in record batches with only the
columns the features need (projection) and the part of the features' `where`
conditions that reads step columns pushed into the scan (their disjunction, so one
pass serves every feature). Steps are stored grouped by episode, so within a batch
the selected steps of an episode form a run: each batch is reduced per run with
numpy `reduceat` over the run starts (`_segments`), without hashing. Partials merge
associatively (count and sum add, min/max/any/all combine, first/last keep the
smallest/largest `seq`) with one final group-by, so batches in any order, episodes
split across batches and tables that are not grouped all give the same answer; the
grouping only makes it fast. `list` and `set` keep the selected items, which is the
size of their answer, capped per episode (MAX_LIST_ITEMS).

Episode columns are visible in a feature's `where` and `value` by name (a step
column of the same name wins; the episode's is then `episode.<name>`), e.g.
`where: "kind == 'message' and contains(content, task.target)"`.

    compile_features(specs, steps_schema, episodes_schema=..) -> [CompiledFeature]
    compute_features(features=..., card=card, episodes=table) -> {name: (episode_id, value)}
    attach_features(episodes, computed, features)   aligned columns, empty-step defaults
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExpressionError, RuleError
from ..model.rule import Feature, FeatureAgg
from . import _segments as seg
from .expressions import Expression, parse_expression

__all__ = [
    "MAX_LIST_ITEMS",
    "CompiledFeature",
    "attach_features",
    "compile_features",
    "compute_features",
    "feature_schema",
]

#: Items a list or set feature may hold for one episode; more is a rule error.
MAX_LIST_ITEMS = 100_000

#: Partial rows kept before they are merged into one table (bounds memory per feature).
_COMPACT_ROWS = 1_000_000

#: Prefix under which an episode column shadowed by a step column is visible.
EPISODE_PREFIX = "episode."

_ORDERED = (FeatureAgg.FIRST, FeatureAgg.LAST, FeatureAgg.LIST)
_LISTS = (FeatureAgg.LIST, FeatureAgg.SET)


@dataclass(frozen=True)
class CompiledFeature:
    """A feature with parsed, type-checked expressions and its result type.

    `episode_columns` maps the names the expressions use for episode columns to the
    episode column they read (`task.target` -> `task.target`, `episode.agent` -> `agent`).
    """

    name: str
    agg: FeatureAgg
    where: Expression | None
    value: Expression | None
    value_type: pa.DataType | None
    type: pa.DataType
    episode_columns: dict[str, str] = field(default_factory=dict)
    file: str | None = None
    rule: str | None = None

    @property
    def columns(self) -> set[str]:
        """Step columns the feature reads."""
        names = set(self.where.names if self.where else ()) | set(
            self.value.names if self.value else ()
        )
        names -= set(self.episode_columns)
        if self.agg in _ORDERED:
            names.add("seq")
        return names


def feature_schema(
    steps_schema: pa.Schema, episodes_schema: pa.Schema | None
) -> tuple[pa.Schema, dict[str, str]]:
    """The columns a feature expression sees: the steps', then the episodes' (as
    `episode.<name>` where a step column has the name), and name -> episode column."""
    schema, visible = steps_schema, {}
    if episodes_schema is None:
        return schema, visible
    step_names = set(steps_schema.names)
    for f in episodes_schema:
        name = f.name if f.name not in step_names else EPISODE_PREFIX + f.name
        if name in visible or name in step_names:
            continue
        visible[name] = f.name
        schema = schema.append(pa.field(name, f.type))
    return schema, visible


def _result_type(agg: FeatureAgg, value_type: pa.DataType | None) -> pa.DataType:
    if agg is FeatureAgg.COUNT:
        return pa.int64()
    if agg in (FeatureAgg.ANY, FeatureAgg.ALL):
        return pa.bool_()
    if agg is FeatureAgg.MEAN:
        return pa.float64()
    assert value_type is not None
    if agg is FeatureAgg.SUM:
        return pa.float64() if pa.types.is_floating(value_type) else pa.int64()
    if agg in _LISTS:
        return pa.list_(value_type)
    return value_type


def compile_features(
    features: dict[str, Feature],
    steps_schema: pa.Schema,
    *,
    file: str | None = None,
    episodes_schema: pa.Schema | None = None,
    rule: str | None = None,
) -> list[CompiledFeature]:
    """Parse and type-check every feature against the steps (and episodes) schema.

    Raises ExpressionError (unknown column, type error) naming the file and the key,
    e.g. `features.transferred.where`.
    """
    schema, visible = feature_schema(steps_schema, episodes_schema)
    out = []
    for name, spec in features.items():
        key = f"features.{name}"
        where = value = None
        value_type = None
        used: set[str] = set()
        if spec.where is not None:
            where = parse_expression(spec.where, file=file, key=f"{key}.where")
            where.typecheck(schema, expect="boolean")
            used |= where.names
        if spec.value is not None:
            value = parse_expression(spec.value, file=file, key=f"{key}.value")
            value_type = value.typecheck(schema)
            _check_value_type(spec.agg, value, value_type, file, key)
            used |= value.names
        out.append(
            CompiledFeature(
                name,
                spec.agg,
                where,
                value,
                value_type,
                _result_type(spec.agg, value_type),
                {n: visible[n] for n in sorted(used) if n in visible},
                file,
                rule,
            )
        )
    return out


def _check_value_type(
    agg: FeatureAgg, value: Expression, value_type: pa.DataType, file: str | None, key: str
) -> None:
    numeric = pa.types.is_integer(value_type) or pa.types.is_floating(value_type)
    is_list = pa.types.is_list(value_type)
    ok = {
        FeatureAgg.SUM: numeric or pa.types.is_boolean(value_type),
        FeatureAgg.MEAN: numeric or pa.types.is_boolean(value_type),
        FeatureAgg.ANY: pa.types.is_boolean(value_type),
        FeatureAgg.ALL: pa.types.is_boolean(value_type),
        FeatureAgg.MIN: not is_list,
        FeatureAgg.MAX: not is_list,
        FeatureAgg.LIST: not is_list,
        FeatureAgg.SET: not is_list,
    }.get(agg, True) and not pa.types.is_null(value_type)
    if not ok:
        need = {
            FeatureAgg.ANY: "a boolean",
            FeatureAgg.ALL: "a boolean",
            FeatureAgg.SUM: "a number",
            FeatureAgg.MEAN: "a number",
        }.get(agg, "a scalar (not a list)")
        raise RuleError(
            f"agg {agg.value} needs {need} value, but {value.text!r} is {value_type}",
            file=file,
            key=f"{key}.value",
        )


# ---------------------------------------------------------------------- partials


def _too_many(feature: CompiledFeature, episode: object) -> RuleError:
    who = f"rule {feature.rule!r}, " if feature.rule else ""
    return RuleError(
        f"{who}feature {feature.name!r}: episode {episode!r} has more than {MAX_LIST_ITEMS:,} "
        f"items in its {feature.agg.value} (the cap of a list or set feature); narrow `where`, "
        "or use count / any instead of a list",
        file=feature.file,
        key=f"features.{feature.name}",
    )


def _value_column(feature: CompiledFeature, batch: pa.RecordBatch) -> pa.Array:
    if feature.value is None:
        return pa.repeat(pa.scalar(True), batch.num_rows)  # any: "a selected step exists"
    values = feature.value.evaluate(batch)
    if feature.agg in (FeatureAgg.SUM, FeatureAgg.MEAN) and pa.types.is_boolean(values.type):
        values = values.cast(pa.int64())
    return values


def _numpy(values: pa.Array, fill: object) -> np.ndarray:
    return pc.fill_null(values, pa.scalar(fill, values.type)).to_numpy(zero_copy_only=False)


def _valid_counts(values: pa.Array, starts: np.ndarray) -> np.ndarray:
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.add.reduceat(valid, starts)


def _segment_partial(
    feature: CompiledFeature, ids: pa.Array, values: pa.Array | None, starts: np.ndarray, n: int
) -> pa.Table | None:
    """Per-run partial state, or None when the value type needs the group-by path."""
    agg = feature.agg
    run_ids = ids.take(pa.array(starts))
    if agg is FeatureAgg.COUNT:
        return pa.table({"episode_id": run_ids, "n": np.diff(np.append(starts, n))})
    assert values is not None
    t = values.type
    if agg in (FeatureAgg.ANY, FeatureAgg.ALL):
        # skip nulls, as Arrow's any/all do: any = some true, all = no false
        wanted = agg is FeatureAgg.ANY
        hits = np.asarray(_numpy(values, not wanted), dtype=bool) == wanted
        found = np.add.reduceat(hits.astype(np.int64), starts) > 0
        return pa.table({"episode_id": run_ids, "v": found if wanted else ~found})
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    if agg is FeatureAgg.SUM or agg is FeatureAgg.MEAN:
        data = _numpy(values, 0)
        sums = np.add.reduceat(data, starts)
        if pa.types.is_integer(t):
            # numpy wraps int64 sums silently; a float sum of the same values shows it
            approx = np.add.reduceat(data.astype(np.float64), starts)
            if np.any(np.abs(approx) > 2.0**62):
                raise RuleError(
                    f"integer overflow in the sum of feature {feature.name!r}",
                    file=feature.file,
                    key=f"features.{feature.name}.value",
                )
        if agg is FeatureAgg.SUM:
            return pa.table({"episode_id": run_ids, "v": pa.array(sums, feature.type)})
        counts = _valid_counts(values, starts)
        return pa.table({"episode_id": run_ids, "s": sums, "c": counts})
    if agg in (FeatureAgg.MIN, FeatureAgg.MAX):
        is_min = agg is FeatureAgg.MIN
        if pa.types.is_floating(t):
            fill = np.inf if is_min else -np.inf
        else:
            info = np.iinfo(np.int64)
            fill = info.max if is_min else info.min
        data = _numpy(values, fill)
        if pa.types.is_floating(t) and np.isnan(data).any():
            return None  # NaN ordering: leave it to Arrow's kernels
        reduced = (np.minimum if is_min else np.maximum).reduceat(data, starts)
        counts = _valid_counts(values, starts)
        return pa.table(
            {"episode_id": run_ids, "v": pa.array(reduced, t, mask=counts == 0)}
        )
    return None


def _partial(feature: CompiledFeature, batch: pa.RecordBatch) -> pa.Table:
    """One batch of selected steps reduced to partial state per run of episode_id."""
    agg = feature.agg
    ids = batch.column("episode_id")
    n = batch.num_rows
    starts = seg.run_starts(ids)
    if agg is FeatureAgg.COUNT:
        return _segment_partial(feature, ids, None, starts, n)  # type: ignore[return-value]
    values = _value_column(feature, batch)
    if agg in _LISTS:
        lengths = np.diff(np.append(starts, n))
        if lengths.max(initial=0) > MAX_LIST_ITEMS:
            raise _too_many(feature, ids[int(starts[int(np.argmax(lengths))])].as_py())
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        if agg is FeatureAgg.SET:
            rows = rows.filter(pc.is_valid(values)).group_by(["episode_id", "v"]).aggregate(
                [("seq", "min")]
            )
            rows = _named(rows, episode_id="episode_id", seq="seq_min", v="v")
        return rows
    if agg in _ORDERED:
        seq = batch.column("seq").to_numpy(zero_copy_only=False)
        inner = np.ones(n, dtype=bool)
        inner[starts] = False
        if n and np.all(np.diff(seq)[inner[1:]] > 0):
            # seq ascends within each run: first / last are at the run's ends
            at = starts if agg is FeatureAgg.FIRST else np.append(starts[1:], n) - 1
            take = pa.array(at)
            return pa.table(
                {"episode_id": ids.take(take), "seq": batch.column("seq").take(take), "v": values.take(take)}
            )
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        return _merge(feature, [rows])
    partial = _segment_partial(feature, ids, values, starts, n)
    if partial is not None:
        return partial
    return _merge_plain(agg, pa.table({"episode_id": ids, "v": values}), first=True)


def _merge_plain(agg: FeatureAgg, table: pa.Table, *, first: bool) -> pa.Table:
    """Group partial (or raw, when `first`) rows by episode_id with the merge operation."""
    grouped = table.group_by("episode_id")
    if agg is FeatureAgg.MEAN:
        if first:
            out = grouped.aggregate([("v", "sum"), ("v", "count")])
            return _named(out, episode_id="episode_id", s="v_sum", c="v_count")
        out = grouped.aggregate([("s", "sum"), ("c", "sum")])
        return _named(out, episode_id="episode_id", s="s_sum", c="c_sum")
    function = {
        FeatureAgg.SUM: "sum",
        FeatureAgg.MIN: "min",
        FeatureAgg.MAX: "max",
        FeatureAgg.ANY: "any",
        FeatureAgg.ALL: "all",
    }[agg]
    out = grouped.aggregate([("v", function)])
    return _named(out, episode_id="episode_id", v=f"v_{function}")


def _named(table: pa.Table, **columns: str) -> pa.Table:
    """A table of `table`'s columns picked by their generated names and renamed."""
    return pa.table({new: table.column(old) for new, old in columns.items()})


def _merge(feature: CompiledFeature, parts: list[pa.Table]) -> pa.Table:
    """Merge partial tables into one (associative: the order of parts does not matter)."""
    table = pa.concat_tables(parts, promote_options="permissive")
    agg = feature.agg
    if agg is FeatureAgg.COUNT:
        out = table.group_by("episode_id").aggregate([("n", "sum")])
        return _named(out, episode_id="episode_id", n="n_sum")
    if agg in _LISTS:
        return table  # lists keep every selected item; they are ordered at the end
    if agg in _ORDERED:
        table = table.sort_by([("episode_id", "ascending"), ("seq", "ascending")])
        which = "first" if agg is FeatureAgg.FIRST else "last"
        out = table.group_by("episode_id", use_threads=False).aggregate(
            [("seq", which), ("v", which, pc.ScalarAggregateOptions(skip_nulls=False))]
        )
        return _named(out, episode_id="episode_id", seq=f"seq_{which}", v=f"v_{which}")
    return _merge_plain(agg, table, first=False)


def _list_rows(feature: CompiledFeature, table: pa.Table) -> tuple[pa.Array, pa.Array]:
    """(episode ids, lists in seq order) from the kept (episode_id, seq, v) rows."""
    ids = table.column("episode_id").combine_chunks()
    seq = table.column("seq").combine_chunks()
    values = table.column("v").combine_chunks()
    n = len(ids)
    starts = seg.run_starts(ids)
    seq_np = seq.to_numpy(zero_copy_only=False)
    inner = np.ones(n, dtype=bool)
    inner[starts] = False
    ascending = n == 0 or bool(np.all(np.diff(seq_np)[inner[1:]] > 0))
    if not ascending or pc.count_distinct(ids.take(pa.array(starts))).as_py() != len(starts):
        order = pc.sort_indices(
            pa.table({"e": ids, "s": seq}), sort_keys=[("e", "ascending"), ("s", "ascending")]
        )
        ids, values = ids.take(order), values.take(order)
        starts = seg.run_starts(ids)
    lengths = np.diff(np.append(starts, n))
    if lengths.max(initial=0) > MAX_LIST_ITEMS:
        raise _too_many(feature, ids[int(starts[int(np.argmax(lengths))])].as_py())
    return ids.take(pa.array(starts)), seg.lists_from_runs(values, starts, n)


def _finish(feature: CompiledFeature, table: pa.Table) -> pa.Table:
    """Final per-episode values from merged partial state: (episode_id, <name>)."""
    agg, name = feature.agg, feature.name
    ids = table.column("episode_id")
    if agg is FeatureAgg.COUNT:
        column = table.column("n")
    elif agg is FeatureAgg.MEAN:
        s, c = table.column("s").cast(pa.float64()), table.column("c")
        column = pc.if_else(pc.equal(c, 0), pa.scalar(None, pa.float64()), pc.divide(s, c))
    elif agg in _LISTS:
        ids, column = _list_rows(feature, table)
        if agg is FeatureAgg.SET:
            column = seg.sort_lists(column, distinct=True)
    else:
        column = table.column("v")
    if agg is FeatureAgg.SUM:
        column = pc.coalesce(column, pa.scalar(0, column.type))
    return pa.table({"episode_id": ids, name: column.cast(feature.type)})


# ------------------------------------------------------------------------ scanning


def _scan_filter(features: Sequence[CompiledFeature], schema: pa.Schema) -> pc.Expression | None:
    """The disjunction of what each feature's `where` lets the scan check (None: all rows)."""
    filters = []
    for where in dict.fromkeys(f.where for f in features):
        pushed = where.prefilter(schema) if where is not None else None
        if pushed is None:
            return None
        filters.append(pushed)
    return functools.reduce(operator.or_, filters)


class _EpisodeColumns:
    """Adds the episode columns features read to step batches, by episode_id."""

    def __init__(self, episodes: pa.Table, visible: dict[str, str]):
        self.visible = visible
        self.table = episodes.select(sorted(set(visible.values())))
        ids = episodes.column("episode_id").to_pylist()
        self.row = {e: i for i, e in enumerate(ids)}

    def add(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        ids = batch.column("episode_id")
        starts = seg.run_starts(ids)
        run_ids = ids.take(pa.array(starts)).to_pylist()
        rows = pa.array([self.row.get(e) for e in run_ids], pa.int64())
        lengths = np.diff(np.append(starts, batch.num_rows))
        index = pa.array(np.repeat(np.arange(len(starts)), lengths))
        per_row = rows.take(index)
        columns = dict(zip(batch.schema.names, batch.columns, strict=True))
        for name, column in self.visible.items():
            columns[name] = self.table.column(column).take(per_row).combine_chunks()
        return pa.RecordBatch.from_pydict(columns)


def compute_features(
    batches: Iterable[pa.RecordBatch] | None = None,
    features: Sequence[CompiledFeature] = (),
    *,
    card: object | None = None,
    episodes: pa.Table | None = None,
    batch_size: int = 262_144,
) -> dict[str, pa.Table]:
    """Stream steps; per feature, a table (episode_id, value) of episodes with a selected step.

    Pass a `card` (steps are read with projection and the features' `where` pushed
    down) or `batches` of steps that hold the needed columns; `episodes` (with
    episode_id and the episode columns the features read) when a feature reads
    episode columns. Episodes absent from a result get the agg's empty value in
    `attach_features`.
    """
    features = list(features)
    if not features:
        return {}
    visible: dict[str, str] = {}
    for f in features:
        visible.update(f.episode_columns)
    joiner = None
    if visible:
        if episodes is None:
            raise ValueError("a feature reads episode columns: pass the episodes table")
        joiner = _EpisodeColumns(episodes, visible)
    pushed_all = False
    if batches is None:
        if card is None:
            raise ValueError("compute_features needs batches or a card")
        columns = sorted({"episode_id"} | set().union(*(f.columns for f in features)))
        schema = card.schema("steps")  # type: ignore[attr-defined]
        scan_filter = _scan_filter(features, schema)
        batches = card.iter_steps(  # type: ignore[attr-defined]
            columns=columns, filter=scan_filter, batch_size=batch_size
        )
        # With one distinct `where` that the scan could check whole, it is already applied.
        wheres = {f.where for f in features}
        (only,) = wheres if len(wheres) == 1 else (None,)
        pushed_all = only is not None and only.pushable(schema)
    parts: list[list[pa.Table]] = [[] for _ in features]
    rows = [0] * len(features)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if joiner is not None:
            batch = joiner.add(batch)
        masks: dict[Expression | None, pa.RecordBatch] = {}
        for i, feature in enumerate(features):
            selected = masks.get(feature.where)
            if selected is None:
                selected = batch
                if feature.where is not None and not pushed_all:
                    selected = batch.filter(
                        feature.where.evaluate(batch), null_selection_behavior="drop"
                    )
                masks[feature.where] = selected
            if selected.num_rows == 0:
                continue
            try:
                part = _partial(feature, selected)
            except ExpressionError:
                raise
            except pa.ArrowException as exc:
                raise RuleError(
                    f"cannot compute feature {feature.name!r}: {str(exc).splitlines()[0]}",
                    file=feature.file,
                    key=f"features.{feature.name}",
                ) from None
            parts[i].append(part)
            rows[i] += part.num_rows
            if rows[i] > _COMPACT_ROWS and feature.agg not in _LISTS:
                parts[i] = [_merge(feature, parts[i])]
                rows[i] = parts[i][0].num_rows
    out: dict[str, pa.Table] = {}
    for feature, feature_parts in zip(features, parts, strict=True):
        if feature_parts:
            out[feature.name] = _finish(feature, _merge(feature, feature_parts))
        else:
            out[feature.name] = pa.table(
                {"episode_id": pa.array([], pa.string()), feature.name: pa.array([], feature.type)}
            )
    return out


def _default(feature: CompiledFeature) -> pa.Scalar:
    agg = feature.agg
    if agg is FeatureAgg.COUNT:
        return pa.scalar(0, pa.int64())
    if agg is FeatureAgg.SUM:
        return pa.scalar(0, feature.type)
    if agg is FeatureAgg.ANY:
        return pa.scalar(False)
    if agg is FeatureAgg.ALL:
        return pa.scalar(True)
    if agg in _LISTS:
        return pa.scalar([], feature.type)
    return pa.scalar(None, feature.type)


def attach_features(
    episodes: pa.Table, computed: dict[str, pa.Table], features: Sequence[CompiledFeature]
) -> pa.Table:
    """`episodes` with one column per feature, aligned on episode_id.

    Episodes with no selected step get each agg's empty value: count 0, sum 0, any
    false, all true, list/set empty; mean, min, max, first and last stay null (there
    is no value), which `on_missing` then handles if the score uses them.
    """
    ids = episodes.column("episode_id")
    for feature in features:
        table = computed[feature.name]
        positions = pc.index_in(ids, value_set=table.column("episode_id"))
        column = table.column(feature.name).take(positions)
        default = _default(feature)
        if default.is_valid:
            if pa.types.is_list(feature.type):
                column = pc.if_else(pc.is_null(column), pa.repeat(default, len(column)), column)
            else:
                column = pc.coalesce(column, default)
        episodes = episodes.append_column(pa.field(feature.name, feature.type), column)
    return episodes
