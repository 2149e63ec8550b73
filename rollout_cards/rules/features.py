"""Step features: per-episode values aggregated from the steps table, by streaming.

The steps table is never held in memory. It is read in record batches with only the
columns the features need (projection), strings still dictionary-encoded: `where` and
`value` are evaluated once per distinct value (`_encoded`), so `kind == 'tool_call'`
compares two strings per batch, not millions. One pass serves every feature. Steps are
stored grouped by episode, so within a batch the selected steps of an episode form a
run: each batch is reduced per run with numpy `reduceat` over the run starts
(`_segments`), without hashing. While the runs follow the episodes table's order (as a
writer stores them), each is numbered with its episode's row (`_Positions`). Partials
merge associatively (count and sum add, min/max/any/all combine, first/last keep the
smallest/largest `seq`): the runs of an episode split across batches by reductions
again, then the values are placed in episode order by row number, or by one hash lookup
of the ids that proves each episode has one partial. When neither holds (steps not
grouped, batches in any order) the general group-by merge runs, so every layout gives
the same answer; the grouping only makes it fast. `list` and `set` keep the selected
items, which is the size of their answer, capped per episode (MAX_LIST_ITEMS).

Episode columns are visible in a feature's `where` and `value` by name (a step
column of the same name wins; the episode's is then `episode.<name>`), e.g.
`where: "kind == 'message' and contains(content, task.target)"`.

    compile_features(specs, steps_schema, episodes_schema=..) -> [CompiledFeature]
    compute_features(features=..., card=card, episodes=table) -> {name: (episode_id, value)}
      = FeatureStream: partials(batch) per batch (the kernel), add, result — the pieces an
        engine that reads the blocks elsewhere (rollout_cards.scale) calls
    attach_features(episodes, computed, features)   aligned columns, empty-step defaults
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExpressionError, RuleError
from ..model.rule import Feature, FeatureAgg
from . import _encoded as enc
from . import _segments as seg
from .expressions import Expression, parse_expression

__all__ = [
    "MAX_LIST_ITEMS",
    "CompiledFeature",
    "FeatureStream",
    "attach_features",
    "compile_features",
    "compute_features",
    "feature_schema",
    "step_columns",
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


def _longest(ids: pa.Array, starts: np.ndarray, lengths: np.ndarray, names: pa.Array | None) -> object:
    """The episode of the longest run (its id; `ids` may hold episode rows into `names`)."""
    episode = ids[int(starts[int(np.argmax(lengths))])].as_py()
    return names[episode].as_py() if names is not None and isinstance(episode, int) else episode


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
    values = enc.decoded(enc.evaluate(feature.value, batch))
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
    run_ids = enc.decoded(ids.take(pa.array(starts)))
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


class _Selection:
    """The rows of a batch one `where` selects: a mask, and the filtered batch on demand
    (count, first and last read the mask and the run starts of the whole batch instead)."""

    def __init__(self, batch: pa.RecordBatch, mask: np.ndarray | None):
        self.batch, self.mask = batch, mask
        self._filtered: pa.RecordBatch | None = None
        self._starts: np.ndarray | None = None

    @property
    def empty(self) -> bool:
        return self.mask is not None and not self.mask.any()

    def filtered(self) -> pa.RecordBatch:
        if self._filtered is None:
            self._filtered = self.batch if self.mask is None else self.batch.filter(pa.array(self.mask))
        return self._filtered

    def starts(self) -> np.ndarray:
        if self._starts is None:
            self._starts = seg.run_starts(self.batch.column("episode_id"))
        return self._starts


def _selected_partial(
    feature: CompiledFeature, selection: _Selection, names: pa.Array | None = None
) -> pa.Table:
    """`_partial` of the selected rows; count and first / last (when seq ascends within
    the runs) straight from the mask, without filtering the batch."""
    agg, batch, mask = feature.agg, selection.batch, selection.mask
    if mask is None or agg not in (FeatureAgg.COUNT, FeatureAgg.FIRST, FeatureAgg.LAST):
        return _partial(feature, selection.filtered(), names)
    ids, n, starts = batch.column("episode_id"), batch.num_rows, selection.starts()
    if agg is FeatureAgg.COUNT:
        counts = np.add.reduceat(mask.astype(np.int64), starts)
        keep = counts > 0
        run_ids = enc.decoded(ids.take(pa.array(starts[keep])))
        return pa.table({"episode_id": run_ids, "n": counts[keep]})
    seq = batch.column("seq").to_numpy(zero_copy_only=False)
    inner = np.ones(n, dtype=bool)
    inner[starts] = False
    if not np.all(np.diff(seq)[inner[1:]] > 0):
        return _partial(feature, selection.filtered(), names)
    rows = np.flatnonzero(mask)
    run_of = np.searchsorted(starts, rows, side="right") - 1
    change = np.flatnonzero(run_of[1:] != run_of[:-1]) + 1
    if agg is FeatureAgg.FIRST:
        at = rows[np.concatenate([[0], change])]
    else:
        at = rows[np.concatenate([change - 1, [rows.size - 1]])]
    picked = batch.take(pa.array(at))
    return pa.table(
        {
            "episode_id": enc.decoded(picked.column("episode_id")),
            "seq": picked.column("seq"),
            "v": _value_column(feature, picked),
        }
    )


def _partial(
    feature: CompiledFeature, batch: pa.RecordBatch, names: pa.Array | None = None
) -> pa.Table:
    """One batch of selected steps reduced to partial state per run of episode_id (the
    ids, or episode rows into `names`)."""
    agg = feature.agg
    ids = batch.column("episode_id")
    n = batch.num_rows
    starts = seg.run_starts(ids)
    if agg is FeatureAgg.COUNT:
        return _segment_partial(feature, ids, None, starts, n)  # type: ignore[return-value]
    if agg in (FeatureAgg.FIRST, FeatureAgg.LAST):
        seq = batch.column("seq").to_numpy(zero_copy_only=False)
        inner = np.ones(n, dtype=bool)
        inner[starts] = False
        if n and np.all(np.diff(seq)[inner[1:]] > 0):
            # seq ascends within each run: first / last are at the run's ends, and the value
            # (a function of its row) is computed for those rows only
            at = pa.array(starts if agg is FeatureAgg.FIRST else np.append(starts[1:], n) - 1)
            picked = batch.take(at)
            return pa.table(
                {
                    "episode_id": enc.decoded(picked.column("episode_id")),
                    "seq": picked.column("seq"),
                    "v": _value_column(feature, picked),
                }
            )
    values = _value_column(feature, batch)
    partial = _segment_partial(feature, ids, values, starts, n)
    if partial is not None:
        return partial
    ids = enc.decoded(ids)
    if agg in _LISTS:
        lengths = np.diff(np.append(starts, n))
        if lengths.max(initial=0) > MAX_LIST_ITEMS:
            raise _too_many(feature, _longest(ids, starts, lengths, names))
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        if agg is FeatureAgg.SET:
            rows = rows.filter(pc.is_valid(values)).group_by(["episode_id", "v"]).aggregate(
                [("seq", "min")]
            )
            rows = _named(rows, episode_id="episode_id", seq="seq_min", v="v")
        return rows
    if agg in _ORDERED:
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        return _merge(feature, [rows])
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


def _compact(feature: CompiledFeature, parts: list[pa.Table]) -> pa.Table:
    """Partials merged into one table to bound memory: adjacent runs first (no hashing),
    the group-by when that leaves more than half of them (steps not grouped)."""
    table = pa.concat_tables(parts, promote_options="permissive")
    merged = _merge_adjacent(feature, table)
    if merged is not None and (_ascending_rows(merged) or 2 * merged.num_rows <= table.num_rows + 1):
        return merged
    return _merge(feature, [table if merged is None else merged])


def _ascending_rows(table: pa.Table) -> bool:
    """Whether the ids are episode rows (`_Positions`) in ascending order: one partial per
    episode, which no group-by would merge further."""
    ids = table.column("episode_id")
    if not pa.types.is_integer(ids.type):
        return False
    rows = seg.as_array(ids).to_numpy(zero_copy_only=False)
    return bool(np.all(np.diff(rows) > 0))


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


def _merge_adjacent(feature: CompiledFeature, table: pa.Table) -> pa.Table | None:
    """Partials of an episode that follow each other (an episode split across batches)
    merged by reductions over the runs of equal ids, without hashing. An id that comes
    back after another one is not merged (`_align` finds it); None for the states that
    need the group-by (lists, min/max of non-numbers, first/last whose seq does not
    ascend within the runs)."""
    agg = feature.agg
    if agg in _LISTS:
        return None
    ids = seg.as_array(table.column("episode_id"))
    n = len(ids)
    starts = seg.run_starts(ids)
    if len(starts) == n:
        return table
    at = pa.array(starts)
    out: dict[str, pa.Array] = {"episode_id": ids.take(at)}

    def column(name: str) -> pa.Array:
        return seg.as_array(table.column(name))

    def add(name: str) -> np.ndarray:
        return np.add.reduceat(_numpy(column(name), 0), starts)

    if agg is FeatureAgg.COUNT:
        out["n"] = pa.array(add("n"), pa.int64())
    elif agg is FeatureAgg.MEAN:
        out["s"], out["c"] = pa.array(add("s")), pa.array(add("c"), pa.int64())
    elif agg is FeatureAgg.SUM:
        v = column("v")
        if pa.types.is_integer(v.type):
            approx = np.add.reduceat(_numpy(v, 0).astype(np.float64), starts)
            if np.any(np.abs(approx) > 2.0**62):
                return None  # the group-by's checked sum reports the overflow
        out["v"] = pa.array(add("v"), v.type)
    elif agg in (FeatureAgg.ANY, FeatureAgg.ALL):
        wanted = agg is FeatureAgg.ANY  # a null partial (no value) is the identity
        hits = np.asarray(_numpy(column("v"), not wanted), dtype=bool) == wanted
        found = np.add.reduceat(hits.astype(np.int64), starts) > 0
        out["v"] = pa.array(found if wanted else ~found)
    elif agg in (FeatureAgg.MIN, FeatureAgg.MAX):
        v = column("v")
        if not (pa.types.is_integer(v.type) or pa.types.is_floating(v.type)):
            return None
        is_min = agg is FeatureAgg.MIN
        if pa.types.is_floating(v.type):
            fill = np.inf if is_min else -np.inf
        else:
            info = np.iinfo(np.int64)
            fill = info.max if is_min else info.min
        data = _numpy(v, fill)
        if pa.types.is_floating(v.type) and np.isnan(data).any():
            return None
        reduced = (np.minimum if is_min else np.maximum).reduceat(data, starts)
        out["v"] = pa.array(reduced, v.type, mask=_valid_counts(v, starts) == 0)
    else:  # first / last: the run's ends when seq ascends within it
        seq = column("seq").to_numpy(zero_copy_only=False)
        inner = np.ones(n, dtype=bool)
        inner[starts] = False
        if not np.all(np.diff(seq)[inner[1:]] > 0):
            return None
        ends = pa.array(starts if agg is FeatureAgg.FIRST else np.append(starts[1:], n) - 1)
        out["episode_id"] = ids.take(ends)
        out["seq"], out["v"] = column("seq").take(ends), column("v").take(ends)
    return pa.table(out)


def _align(finished: pa.Table, episode_ids: pa.ChunkedArray | None) -> pa.Table | None:
    """The finished values with one row per episode, in the order of `episode_ids` (null
    where an episode has none), if every id of `finished` is one episode's; None when an
    id repeats (steps not grouped by episode) or is no episode's. Ids may be episode rows
    (int64, see `_Positions`): then they must ascend. Without episodes: the table itself
    when its ids are distinct."""
    ids = seg.as_array(finished.column("episode_id"))
    name = finished.column_names[1]
    if episode_ids is None:
        return finished if pc.count_distinct(ids).as_py() == len(ids) else None
    if pa.types.is_integer(ids.type):
        rows = ids.to_numpy(zero_copy_only=False)
        if len(rows) > 1 and not np.all(np.diff(rows) > 0):
            return None
        index = np.zeros(len(episode_ids), dtype=np.int64)
        index[rows] = np.arange(len(rows))
        has = np.zeros(len(episode_ids), dtype=bool)
        has[rows] = True
        positions = pa.array(index, mask=~has)
    else:
        positions = pc.index_in(episode_ids, value_set=ids)
        found = positions.drop_null().to_numpy(zero_copy_only=False)
        if len(ids) and not np.all(np.bincount(found, minlength=len(ids)) == 1):
            return None
    return pa.table({"episode_id": episode_ids, name: finished.column(name).take(positions)})


def _final(
    feature: CompiledFeature, parts: list[pa.Table], episode_ids: pa.ChunkedArray | None
) -> pa.Table:
    """The per-episode values of a feature from all its partials: without hashing when the
    steps were grouped by episode, else by the group-by merge."""
    table = pa.concat_tables(parts, promote_options="permissive")
    names = seg.as_array(episode_ids) if episode_ids is not None else None
    if feature.agg in _LISTS:
        fast = _finish(feature, table, grouped=True, names=names)
    else:
        merged = _merge_adjacent(feature, table)
        fast = None if merged is None else _finish(feature, merged)
    if fast is not None:
        aligned = _align(fast, episode_ids)
        if aligned is not None:
            return aligned
    table = _with_ids(table, names)
    return _finish(feature, _merge(feature, [table]))  # type: ignore[return-value]


def _with_ids(table: pa.Table, names: pa.Array | None) -> pa.Table:
    """`table` with episode rows (int64, `_Positions`) turned back into episode ids."""
    column = table.column("episode_id")
    if names is None or not pa.types.is_integer(column.type):
        return table
    at = table.schema.get_field_index("episode_id")
    return table.set_column(at, "episode_id", names.take(seg.as_array(column)))


class _Positions:
    """Episode rows for step batches whose episodes come in the episodes table's order.

    A writer stores steps grouped by episode and, as a rule, in the order of the
    episodes, so each run of equal episode_id in the scan is the next episode (or the
    previous one continued across a batch boundary). While that holds, `rows(batch)`
    replaces the batch's episode_id with the episode's row number: partials then merge
    and align on integers, with no hash of the ids. The first batch that does not
    follow the order (a step-less episode, another order, ungrouped steps) ends it:
    `rows` returns None and the caller turns the rows it holds back into ids.
    """

    def __init__(self, episode_ids: pa.ChunkedArray):
        self.ids = seg.as_array(episode_ids)
        self.next = 0

    def rows(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        ids = batch.column("episode_id")
        n = batch.num_rows
        starts = seg.run_starts(ids)
        run_ids = enc.decoded(ids.take(pa.array(starts)))
        if len(starts) > 1:  # a dictionary that repeats a value splits a run: join it again
            same = pc.equal(run_ids.slice(1), run_ids.slice(0, len(starts) - 1))
            keep = np.concatenate([[True], ~np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)])
            if not keep.all():
                starts, run_ids = starts[keep], run_ids.filter(pa.array(keep))
        first, m = self.next, len(starts)
        if first and run_ids[0].as_py() == self.ids[first - 1].as_py():
            first -= 1
        if first + m > len(self.ids) or not pc.all(pc.equal(run_ids, self.ids.slice(first, m))).as_py():
            return None
        self.next = first + m
        lengths = np.diff(np.append(starts, n))
        rows = np.repeat(np.arange(first, first + m, dtype=np.int64), lengths)
        at = batch.schema.get_field_index("episode_id")
        return batch.set_column(at, "episode_id", pa.array(rows))


def _list_rows(
    feature: CompiledFeature, table: pa.Table, *, grouped: bool = False, names: pa.Array | None = None
) -> tuple[pa.Array, pa.Array] | None:
    """(episode ids, lists in seq order) from the kept (episode_id, seq, v) rows.

    With `grouped`, None unless seq ascends within every run of equal ids (whether an id
    comes back in a later run is then for the caller to check, see `_align`)."""
    ids = table.column("episode_id").combine_chunks()
    seq = table.column("seq").combine_chunks()
    values = table.column("v").combine_chunks()
    n = len(ids)
    starts = seg.run_starts(ids)
    seq_np = seq.to_numpy(zero_copy_only=False)
    inner = np.ones(n, dtype=bool)
    inner[starts] = False
    ascending = n == 0 or bool(np.all(np.diff(seq_np)[inner[1:]] > 0))
    if grouped and not ascending:
        return None
    if grouped:
        pass
    elif not ascending or pc.count_distinct(ids.take(pa.array(starts))).as_py() != len(starts):
        order = pc.sort_indices(
            pa.table({"e": ids, "s": seq}), sort_keys=[("e", "ascending"), ("s", "ascending")]
        )
        ids, values = ids.take(order), values.take(order)
        starts = seg.run_starts(ids)
    lengths = np.diff(np.append(starts, n))
    if lengths.max(initial=0) > MAX_LIST_ITEMS:
        raise _too_many(feature, _longest(ids, starts, lengths, names))
    return ids.take(pa.array(starts)), seg.lists_from_runs(values, starts, n)


def _finish(
    feature: CompiledFeature, table: pa.Table, *, grouped: bool = False, names: pa.Array | None = None
) -> pa.Table | None:
    """Final per-episode values from merged partial state: (episode_id, <name>); with
    `grouped` (rows of an episode adjacent, see `_list_rows`) None if they are not."""
    agg, name = feature.agg, feature.name
    ids = table.column("episode_id")
    if agg is FeatureAgg.COUNT:
        column = table.column("n")
    elif agg is FeatureAgg.MEAN:
        s, c = table.column("s").cast(pa.float64()), table.column("c")
        column = pc.if_else(pc.equal(c, 0), pa.scalar(None, pa.float64()), pc.divide(s, c))
    elif agg in _LISTS:
        found = _list_rows(feature, table, grouped=grouped, names=names)
        if found is None:
            return None
        ids, column = found
        if agg is FeatureAgg.SET:
            column = seg.sort_lists(column, distinct=True)
    else:
        column = table.column("v")
    if agg is FeatureAgg.SUM:
        column = pc.coalesce(column, pa.scalar(0, column.type))
    return pa.table({"episode_id": ids, name: column.cast(feature.type)})


# ------------------------------------------------------------------------ scanning


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


def step_columns(features: Sequence[CompiledFeature]) -> list[str]:
    """The steps columns one pass computing `features` reads."""
    return sorted({"episode_id"} | set().union(*(f.columns for f in features)))


class FeatureStream:
    """The features of a stream of step batches, in three pieces every engine calls:

        stream = FeatureStream(features, episodes)
        stream.add(stream.partials(batch))      # per batch, in the table's order
        stream.result()                         # {feature: (episode_id, value)}

    `partials(batch)` is the kernel (mask, per-run partial state); `add` keeps them and
    compacts; `result` merges and aligns. An engine that runs `partials` elsewhere
    (rollout_cards.scale) makes a stream with `numbered=False` on each side (episode ids,
    not the episode rows of `_Positions`) and adds the partials in the table's order, so
    that float sums are added in the order the local engine adds them.
    """

    def __init__(self, features: Sequence[CompiledFeature], episodes: pa.Table | None = None,
                 *, numbered: bool = True):
        self.features = list(features)
        visible: dict[str, str] = {}
        for f in self.features:
            visible.update(f.episode_columns)
        self.joiner = None
        if visible:
            if episodes is None:
                raise ValueError("a feature reads episode columns: pass the episodes table")
            self.joiner = _EpisodeColumns(episodes, visible)
        self.parts: list[list[pa.Table]] = [[] for _ in self.features]
        self.rows = [0] * len(self.features)
        self.limits = [_COMPACT_ROWS] * len(self.features)
        self.positions = _Positions(episodes.column("episode_id")) if episodes is not None and numbered else None
        self.names = self.positions.ids if self.positions is not None else None
        self.episode_ids = episodes.column("episode_id") if episodes is not None else None

    def partials(self, batch: pa.RecordBatch) -> list[pa.Table | None]:
        """Each feature's partial state per run of the batch (None: no step selected)."""
        if batch.num_rows == 0:
            return [None] * len(self.features)
        if self.joiner is not None:
            batch = self.joiner.add(batch)
        if self.positions is not None:
            numbered = self.positions.rows(batch)
            if numbered is None:  # not in the episodes' order: back to ids
                self.positions = None
                self.parts = [[_with_ids(part, self.names) for part in parts] for parts in self.parts]
            else:
                batch = numbered
        out: list[pa.Table | None] = []
        selections: dict[Expression | None, _Selection] = {}
        for feature in self.features:
            selection = selections.get(feature.where)
            if selection is None:
                mask = None if feature.where is None else enc.evaluate_mask(feature.where, batch)
                selection = _Selection(batch, None if mask is not None and mask.all() else mask)
                selections[feature.where] = selection
            if selection.empty:
                out.append(None)
                continue
            try:
                out.append(_selected_partial(feature, selection, self.names))
            except ExpressionError:
                raise
            except pa.ArrowException as exc:
                raise RuleError(
                    f"cannot compute feature {feature.name!r}: {str(exc).splitlines()[0]}",
                    file=feature.file,
                    key=f"features.{feature.name}",
                ) from None
        return out

    def add(self, partials: Sequence[pa.Table | None]) -> None:
        """Keep one batch's partials (compacting past _COMPACT_ROWS rows)."""
        for i, (feature, part) in enumerate(zip(self.features, partials, strict=True)):
            if part is None:
                continue
            self.parts[i].append(part)
            self.rows[i] += part.num_rows
            if self.rows[i] > self.limits[i] and feature.agg not in _LISTS:
                self.parts[i] = [_compact(feature, self.parts[i])]
                self.rows[i] = self.parts[i][0].num_rows
                # Grouped steps leave one partial per episode, which no merge reduces:
                # compact again only once that many more partials came.
                self.limits[i] = max(_COMPACT_ROWS, 2 * self.rows[i])

    def result(self) -> dict[str, pa.Table]:
        """Per feature, a table (episode_id, value) of episodes with a selected step."""
        out: dict[str, pa.Table] = {}
        for feature, feature_parts in zip(self.features, self.parts, strict=True):
            if feature_parts:
                out[feature.name] = _final(feature, feature_parts, self.episode_ids)
            else:
                out[feature.name] = pa.table(
                    {"episode_id": pa.array([], pa.string()), feature.name: pa.array([], feature.type)}
                )
        return out


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
    stream = FeatureStream(features, episodes)
    if batches is None:
        if card is None:
            raise ValueError("compute_features needs batches or a card")
        # Strings stay dictionary-encoded: `where` and `value` are evaluated per distinct
        # value (`_encoded`) and only the values a feature keeps are decoded.
        batches = card.iter_steps(  # type: ignore[attr-defined]
            columns=step_columns(features), batch_size=batch_size, encoded=True
        )
    for batch in batches:
        stream.add(stream.partials(batch))
    return stream.result()


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
        if table.num_rows == len(ids) and table.column("episode_id").equals(ids):
            column = table.column(feature.name)  # aligned by compute_features already
        else:
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
