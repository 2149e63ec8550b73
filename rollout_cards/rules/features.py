"""Step features: per-episode values aggregated from the steps table, by streaming.

The steps table is never held in memory. It is read in record batches with only the
columns the features need (projection), strings still dictionary-encoded: `where` and
`value` are evaluated once per distinct value (`_encoded`), so `kind == 'tool_call'`
compares two strings per batch, not millions. One pass serves every feature. Steps are
stored grouped by episode, so within a batch the selected steps of an episode form a
run: each batch is reduced per run with numpy `reduceat` over the run starts
(`expr.segments`), without hashing. While the runs follow the episodes table's order (as a
writer stores them), each is numbered with its episode's row (`Positions`), and a count is
then added up per episode row as the batches come. Partials
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

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExpressionError, RuleError
from ..expr import Expression, parse_expression
from ..expr import segments as seg
from ..model.rule import Feature, FeatureAgg
from ..numpy_arrow import int64_array, validity
from . import _encoded as enc
from ._feature_merge import LISTS, MAX_LIST_ITEMS, ORDERED, compact, final_values, with_ids
from ._feature_partials import Numbered, Positions, Selection, run_counts, selected_partial

__all__ = [
    "MAX_LIST_ITEMS",
    "CompiledFeature",
    "FeatureStream",
    "attach_features",
    "compile_features",
    "compute_features",
    "feature_schema",
    "step_batches",
    "step_columns",
]

#: Partial rows kept before they are merged into one table (bounds memory per feature).
_COMPACT_ROWS = 1_000_000

#: Prefix under which an episode column shadowed by a step column is visible.
EPISODE_PREFIX = "episode."


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
        if self.agg in ORDERED:
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
    if agg in LISTS:
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


class RunCounts(NamedTuple):
    """A count's partial of a numbered batch as FeatureStream adds it up: `n[k]` selected steps
    in run k, which is episode row `first` + k (no table: a slice of the per-row counts)."""

    first: int
    n: np.ndarray


class FeatureStream:
    """The features of a stream of step batches, in three pieces every engine calls:

        stream = FeatureStream(features, episodes)
        stream.add(stream.partials(batch))      # per batch, in the table's order
        stream.result()                         # {feature: (episode_id, value)}

    `partials(batch)` is the kernel (mask, per-run partial state); `add` keeps them and
    compacts; `result` merges and aligns. An engine that runs `partials` elsewhere
    (rollout_cards.scale) makes a stream with `numbered=False` on each side (episode ids,
    not the episode rows of `Positions`) and adds the partials in the table's order, so
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
        self.positions = Positions(episodes.column("episode_id")) if episodes is not None and numbered else None
        self.names = self.positions.ids if self.positions is not None else None
        self.episode_ids = episodes.column("episode_id") if episodes is not None else None
        # While the batches are numbered, a count is added up per episode row as the partials
        # come (a scatter of each batch's few thousand runs) instead of keeping them: the
        # ~1M partials of 20M grouped steps were concatenated, merged across batches and
        # aligned in the serial tail of a rule run (~45 ms). None: not (or no longer) so.
        self.counts: list[np.ndarray | None] = [
            np.zeros(len(self.episode_ids), dtype=np.int64)
            if self.positions is not None and f.agg is FeatureAgg.COUNT else None
            for f in self.features
        ]
        # one evaluator per expression: each remembers the values it computed for the
        # dictionaries of recent batches
        self.wheres = {f.where: enc.PerValue(f.where) for f in self.features if f.where is not None}
        self.values = [enc.PerValue(f.value) if f.value is not None else None for f in self.features]

    def partials(self, batch: pa.RecordBatch) -> list[pa.Table | RunCounts | None]:
        """Each feature's partial state per run of the batch (None: no step selected)."""
        if batch.num_rows == 0:
            return [None] * len(self.features)
        if self.joiner is not None:
            batch = self.joiner.add(batch)
        starts = run_rows = None
        source: pa.RecordBatch | Numbered = batch
        numbered = None
        if self.positions is not None:
            numbered = self.positions.rows(batch)
            if numbered is None:  # not in the episodes' order: back to ids
                self.positions = None
                self._counted_as_parts()
                self.parts = [[with_ids(part, self.names) for part in parts] for parts in self.parts]
            else:
                source, starts, run_rows = numbered, numbered.starts, numbered.run_rows
        out: list[pa.Table | RunCounts | None] = []
        selections: dict[Expression | None, Selection] = {}
        for i, (feature, evaluator) in enumerate(zip(self.features, self.values, strict=True)):
            selection = selections.get(feature.where)
            if selection is None:
                mask = None
                if feature.where is not None:
                    # the numbered batch differs from the batch as read in episode_id only
                    reads_ids = numbered is not None and "episode_id" in feature.where.names
                    mask = self.wheres[feature.where].mask(numbered.batch if reads_ids else batch)
                selection = Selection(source, None if mask is not None and mask.all() else mask, starts, run_rows)
                selections[feature.where] = selection
            if selection.empty:
                out.append(None)
                continue
            if numbered is not None and selection.mask is not None and self.counts[i] is not None:
                out.append(RunCounts(numbered.first, run_counts(selection.mask, numbered.starts)))
                continue
            try:
                out.append(selected_partial(feature, selection, self.names, evaluator))
            except ExpressionError:
                raise
            except pa.ArrowException as exc:
                raise RuleError(
                    f"cannot compute feature {feature.name!r}: {str(exc).splitlines()[0]}",
                    file=feature.file,
                    key=f"features.{feature.name}",
                ) from None
        return out

    def add(self, partials: Sequence[pa.Table | RunCounts | None]) -> None:
        """Keep one batch's partials (compacting past _COMPACT_ROWS rows)."""
        for i, (feature, part) in enumerate(zip(self.features, partials, strict=True)):
            if part is None:
                continue
            counts = self.counts[i]
            if isinstance(part, RunCounts):
                assert counts is not None
                counts[part.first : part.first + len(part.n)] += part.n
                continue
            if counts is not None:  # (episode rows, each at most once per batch: add.at all the same)
                np.add.at(counts, seg.as_array(part.column("episode_id")).to_numpy(),
                          seg.as_array(part.column("n")).to_numpy())
                continue
            self.parts[i].append(part)
            self.rows[i] += part.num_rows
            if self.rows[i] > self.limits[i] and feature.agg not in LISTS:
                self.parts[i] = [compact(feature, self.parts[i])]
                self.rows[i] = self.parts[i][0].num_rows
                # Grouped steps leave one partial per episode, which no merge reduces:
                # compact again only once that many more partials came.
                self.limits[i] = max(_COMPACT_ROWS, 2 * self.rows[i])

    def _counted_as_parts(self) -> None:
        """The counts added up so far as one partial (episode rows, n) of each count feature."""
        for i, counts in enumerate(self.counts):
            if counts is not None:
                rows = np.flatnonzero(counts)
                if rows.size:
                    self.parts[i].insert(0, pa.table({"episode_id": int64_array(rows), "n": int64_array(counts[rows])}))
                self.counts[i] = None

    def result(self) -> dict[str, pa.Table]:
        """Per feature, a table (episode_id, value) of episodes with a selected step (or, for
        a count added up per episode row, one row per episode, null where none was selected)."""
        out: dict[str, pa.Table] = {}
        for feature, feature_parts, counts in zip(self.features, self.parts, self.counts, strict=True):
            if counts is not None:
                # (a count partial is never 0: an episode without a selected step has none)
                column = int64_array(counts, valid=counts > 0)
                out[feature.name] = pa.table({"episode_id": self.episode_ids, feature.name: column.cast(feature.type)})
            elif feature_parts:
                out[feature.name] = final_values(feature, feature_parts, self.episode_ids)
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
        batches = step_batches(card, features, batch_size)
    for batch in batches:
        stream.add(stream.partials(batch))
    return stream.result()


def step_batches(card: object, features: Sequence[CompiledFeature],
                 batch_size: int = 262_144) -> Iterator[pa.RecordBatch]:
    """The scan of the steps table `compute_features` reads: only the columns the features
    read (projection), strings still dictionary-encoded (`where` and `value` are evaluated per
    distinct value, `_encoded`, and only the values a feature keeps are decoded)."""
    return card.iter_steps(  # type: ignore[attr-defined]
        columns=step_columns(features), batch_size=batch_size, encoded=True
    )


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
    if agg in LISTS:
        return pa.scalar([], feature.type)
    return pa.scalar(None, feature.type)


def _nulls_as_empty(column: pa.ChunkedArray | pa.Array, default: pa.Scalar) -> pa.ChunkedArray:
    """A list column with its null lists made empty: the same offsets and items without the
    validity bitmap, when every null list's slot is empty (as Arrow builds them); otherwise
    if_else with a column of empty lists (pa.repeat of [] over a million rows: ~0.4 s)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = []
    for chunk in chunks:
        if chunk.null_count:
            offsets = chunk.offsets.to_numpy(zero_copy_only=False)
            if np.all((offsets[1:] == offsets[:-1]) | validity(chunk)):
                chunk = pa.ListArray.from_arrays(chunk.offsets, chunk.values, type=chunk.type)
            else:
                chunk = pc.if_else(pc.is_null(chunk), pa.repeat(default, len(chunk)), chunk)
        out.append(chunk)
    return pa.chunked_array(out, column.type)


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
                column = _nulls_as_empty(column, default)
            else:
                column = pc.coalesce(column, default)
        episodes = episodes.append_column(pa.field(feature.name, feature.type), column)
    return episodes
