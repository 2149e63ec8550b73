"""Step features: per-episode values aggregated from the steps table, by streaming.

The steps table is never held in memory. It is read in record batches with only the
columns the features need (projection) and the features' `where` conditions pushed
into the scan (their disjunction, so one pass serves every feature). Each batch is
reduced to a partial aggregate per episode_id; partials merge associatively
(count and sum add, min/max/any/all combine, first/last keep the smallest/largest
`seq`), so batches, files or machines can be combined in any order. `list` keeps
(episode_id, seq, value) rows of the selected steps, which is the size of its answer.

    compile_features(specs, steps_schema) -> [CompiledFeature]   parsed and type-checked
    compute_features(features=..., card=card) -> {name: (episode_id, value) table}
    attach_features(episodes, computed, features)   aligned columns, empty-step defaults
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExpressionError, RuleError
from ..model.rule import Feature, FeatureAgg
from .expressions import Expression, parse_expression

__all__ = ["CompiledFeature", "attach_features", "compile_features", "compute_features"]

#: Partial rows kept before they are merged into one table (bounds memory per feature).
_COMPACT_ROWS = 1_000_000

_ORDERED = (FeatureAgg.FIRST, FeatureAgg.LAST, FeatureAgg.LIST)


@dataclass(frozen=True)
class CompiledFeature:
    """A feature with parsed, type-checked expressions and its result type."""

    name: str
    agg: FeatureAgg
    where: Expression | None
    value: Expression | None
    value_type: pa.DataType | None
    type: pa.DataType

    @property
    def columns(self) -> set[str]:
        """Step columns the feature reads."""
        names = set(self.where.names if self.where else ()) | set(
            self.value.names if self.value else ()
        )
        if self.agg in _ORDERED:
            names.add("seq")
        return names


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
    if agg in (FeatureAgg.LIST, FeatureAgg.SET):
        return pa.list_(value_type)
    return value_type


def compile_features(
    features: dict[str, Feature], steps_schema: pa.Schema, *, file: str | None = None
) -> list[CompiledFeature]:
    """Parse and type-check every feature against the steps schema.

    Raises ExpressionError (unknown column, type error) naming the file and the key,
    e.g. `features.transferred.where`.
    """
    out = []
    for name, spec in features.items():
        key = f"features.{name}"
        where = value = None
        value_type = None
        if spec.where is not None:
            where = parse_expression(spec.where, file=file, key=f"{key}.where")
            where.typecheck(steps_schema, expect="boolean")
        if spec.value is not None:
            value = parse_expression(spec.value, file=file, key=f"{key}.value")
            value_type = value.typecheck(steps_schema)
            _check_value_type(spec.agg, value, value_type, file, key)
        out.append(
            CompiledFeature(
                name, spec.agg, where, value, value_type, _result_type(spec.agg, value_type)
            )
        )
    return out


def _check_value_type(
    agg: FeatureAgg, value: Expression, value_type: pa.DataType, file: str | None, key: str
) -> None:
    numeric = pa.types.is_integer(value_type) or pa.types.is_floating(value_type)
    ok = {
        FeatureAgg.SUM: numeric or pa.types.is_boolean(value_type),
        FeatureAgg.MEAN: numeric or pa.types.is_boolean(value_type),
        FeatureAgg.ANY: pa.types.is_boolean(value_type),
        FeatureAgg.ALL: pa.types.is_boolean(value_type),
    }.get(agg, not pa.types.is_null(value_type))
    if not ok:
        need = "a boolean" if agg in (FeatureAgg.ANY, FeatureAgg.ALL) else "a number"
        raise RuleError(
            f"agg {agg.value} needs {need} value, but {value.text!r} is {value_type}",
            file=file,
            key=f"{key}.value",
        )


# ---------------------------------------------------------------------- partials


def _value_column(feature: CompiledFeature, batch: pa.RecordBatch) -> pa.Array:
    if feature.value is None:
        return pa.repeat(pa.scalar(True), batch.num_rows)  # any: "a selected step exists"
    values = feature.value.evaluate(batch)
    if feature.agg in (FeatureAgg.SUM, FeatureAgg.MEAN) and pa.types.is_boolean(values.type):
        values = values.cast(pa.int64())
    return values


def _partial(feature: CompiledFeature, batch: pa.RecordBatch) -> pa.Table:
    """One batch of selected steps reduced to partial state per episode_id."""
    agg = feature.agg
    ids = batch.column("episode_id")
    if agg is FeatureAgg.COUNT:
        counted = (
            pa.table({"episode_id": ids}).group_by("episode_id").aggregate([([], "count_all")])
        )
        return _named(counted, episode_id="episode_id", n="count_all")
    values = _value_column(feature, batch)
    if agg in _ORDERED:
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        return rows if agg is FeatureAgg.LIST else _merge(feature, [rows])
    table = pa.table({"episode_id": ids, "v": values})
    if agg is FeatureAgg.SET:
        return (
            table.filter(pc.is_valid(table.column("v"))).group_by(["episode_id", "v"]).aggregate([])
        )
    return _merge_plain(agg, table, first=True)


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
    if agg in _ORDERED:
        if agg is FeatureAgg.LIST:
            return table  # list keeps every selected step; it is ordered at the end
        table = table.sort_by([("episode_id", "ascending"), ("seq", "ascending")])
        which = "first" if agg is FeatureAgg.FIRST else "last"
        out = table.group_by("episode_id", use_threads=False).aggregate(
            [("seq", which), ("v", which, pc.ScalarAggregateOptions(skip_nulls=False))]
        )
        return _named(out, episode_id="episode_id", seq=f"seq_{which}", v=f"v_{which}")
    if agg is FeatureAgg.SET:
        return table.group_by(["episode_id", "v"]).aggregate([])
    return _merge_plain(agg, table, first=False)


def _finish(feature: CompiledFeature, table: pa.Table) -> pa.Table:
    """Final per-episode values from merged partial state: (episode_id, <name>)."""
    agg, name = feature.agg, feature.name
    if agg is FeatureAgg.COUNT:
        column = table.column("n")
    elif agg is FeatureAgg.MEAN:
        s, c = table.column("s").cast(pa.float64()), table.column("c")
        column = pc.if_else(pc.equal(c, 0), pa.scalar(None, pa.float64()), pc.divide(s, c))
    elif agg in (FeatureAgg.LIST, FeatureAgg.SET):
        order = "seq" if agg is FeatureAgg.LIST else "v"
        table = table.sort_by([("episode_id", "ascending"), (order, "ascending")])
        table = table.group_by("episode_id", use_threads=False).aggregate([("v", "list")])
        column = table.column("v_list")
    else:
        column = table.column("v")
    if agg is FeatureAgg.SUM:
        column = pc.coalesce(column, pa.scalar(0, column.type))
    return pa.table({"episode_id": table.column("episode_id"), name: column.cast(feature.type)})


# ------------------------------------------------------------------------ scanning


def _scan_filter(features: Sequence[CompiledFeature], schema: pa.Schema) -> pc.Expression | None:
    wheres = [f.where for f in features]
    if any(w is None for w in wheres):
        return None
    distinct = list(dict.fromkeys(wheres))
    return functools.reduce(operator.or_, [w.to_arrow(schema) for w in distinct])  # type: ignore[union-attr]


def compute_features(
    batches: Iterable[pa.RecordBatch] | None = None,
    features: Sequence[CompiledFeature] = (),
    *,
    card: object | None = None,
    batch_size: int = 262_144,
) -> dict[str, pa.Table]:
    """Stream steps; per feature, a table (episode_id, value) of episodes with a selected step.

    Pass a `card` (steps are read with projection and the features' `where` pushed
    down) or `batches` of steps that hold the needed columns. Episodes absent from
    a result get the agg's empty value in `attach_features`.
    """
    features = list(features)
    if not features:
        return {}
    if batches is None:
        if card is None:
            raise ValueError("compute_features needs batches or a card")
        columns = sorted({"episode_id"} | set().union(*(f.columns for f in features)))
        schema = card.schema("steps")  # type: ignore[attr-defined]
        batches = card.iter_steps(  # type: ignore[attr-defined]
            columns=columns, filter=_scan_filter(features, schema), batch_size=batch_size
        )
    # With one distinct `where`, the scan filter already applied it.
    distinct_where = {f.where for f in features}
    prefiltered = card is not None and len(distinct_where) == 1 and None not in distinct_where
    parts: list[list[pa.Table]] = [[] for _ in features]
    rows = [0] * len(features)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        masks: dict[Expression | None, pa.RecordBatch] = {}
        for i, feature in enumerate(features):
            selected = masks.get(feature.where)
            if selected is None:
                selected = batch
                if feature.where is not None and not prefiltered:
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
                    key=f"features.{feature.name}",
                ) from None
            parts[i].append(part)
            rows[i] += part.num_rows
            if rows[i] > _COMPACT_ROWS and feature.agg is not FeatureAgg.LIST:
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
    if agg in (FeatureAgg.LIST, FeatureAgg.SET):
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
