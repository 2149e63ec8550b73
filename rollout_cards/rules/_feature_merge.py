"""Merging the partial states of step features: the runs of an episode split across
batches reduced again (`_merge_adjacent`, no hashing), placed in episode order
(`_align`), or merged by a group-by when the steps are not grouped by episode (`merge`);
then the final per-episode values (`_finish`). See `features` for the whole design.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import RuleError
from ..expr import segments as seg
from ..model.rule import FeatureAgg

if TYPE_CHECKING:
    from .features import CompiledFeature

#: Items a list or set feature may hold for one episode; more is a rule error.
MAX_LIST_ITEMS = 100_000

ORDERED = (FeatureAgg.FIRST, FeatureAgg.LAST, FeatureAgg.LIST)
LISTS = (FeatureAgg.LIST, FeatureAgg.SET)


def longest_episode(ids: pa.Array, starts: np.ndarray, lengths: np.ndarray, names: pa.Array | None) -> object:
    """The episode of the longest run (its id; `ids` may hold episode rows into `names`)."""
    episode = ids[int(starts[int(np.argmax(lengths))])].as_py()
    return names[episode].as_py() if names is not None and isinstance(episode, int) else episode


def too_many(feature: CompiledFeature, episode: object) -> RuleError:
    who = f"rule {feature.rule!r}, " if feature.rule else ""
    return RuleError(
        f"{who}feature {feature.name!r}: episode {episode!r} has more than {MAX_LIST_ITEMS:,} "
        f"items in its {feature.agg.value} (the cap of a list or set feature); narrow `where`, "
        "or use count / any instead of a list",
        file=feature.file,
        key=f"features.{feature.name}",
    )


def numpy_values(values: pa.Array, fill: object) -> np.ndarray:
    return pc.fill_null(values, pa.scalar(fill, values.type)).to_numpy(zero_copy_only=False)


def valid_counts(values: pa.Array, starts: np.ndarray) -> np.ndarray:
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.add.reduceat(valid, starts)


def merge_plain(agg: FeatureAgg, table: pa.Table, *, first: bool) -> pa.Table:
    """Group partial (or raw, when `first`) rows by episode_id with the merge operation."""
    grouped = table.group_by("episode_id")
    if agg is FeatureAgg.MEAN:
        if first:
            out = grouped.aggregate([("v", "sum"), ("v", "count")])
            return renamed(out, episode_id="episode_id", s="v_sum", c="v_count")
        out = grouped.aggregate([("s", "sum"), ("c", "sum")])
        return renamed(out, episode_id="episode_id", s="s_sum", c="c_sum")
    function = {
        FeatureAgg.SUM: "sum",
        FeatureAgg.MIN: "min",
        FeatureAgg.MAX: "max",
        FeatureAgg.ANY: "any",
        FeatureAgg.ALL: "all",
    }[agg]
    out = grouped.aggregate([("v", function)])
    return renamed(out, episode_id="episode_id", v=f"v_{function}")


def renamed(table: pa.Table, **columns: str) -> pa.Table:
    """A table of `table`'s columns picked by their generated names and renamed."""
    return pa.table({new: table.column(old) for new, old in columns.items()})


def compact(feature: CompiledFeature, parts: list[pa.Table]) -> pa.Table:
    """Partials merged into one table to bound memory: adjacent runs first (no hashing),
    the group-by when that leaves more than half of them (steps not grouped)."""
    table = pa.concat_tables(parts, promote_options="permissive")
    merged = _merge_adjacent(feature, table)
    if merged is not None and (_ascending_rows(merged) or 2 * merged.num_rows <= table.num_rows + 1):
        return merged
    return merge(feature, [table if merged is None else merged])


def _ascending_rows(table: pa.Table) -> bool:
    """Whether the ids are episode rows (`Positions`) in ascending order: one partial per
    episode, which no group-by would merge further."""
    ids = table.column("episode_id")
    if not pa.types.is_integer(ids.type):
        return False
    rows = seg.as_array(ids).to_numpy(zero_copy_only=False)
    return bool(np.all(np.diff(rows) > 0))


def merge(feature: CompiledFeature, parts: list[pa.Table]) -> pa.Table:
    """Merge partial tables into one (associative: the order of parts does not matter)."""
    table = pa.concat_tables(parts, promote_options="permissive")
    agg = feature.agg
    if agg is FeatureAgg.COUNT:
        out = table.group_by("episode_id").aggregate([("n", "sum")])
        return renamed(out, episode_id="episode_id", n="n_sum")
    if agg in LISTS:
        return table  # lists keep every selected item; they are ordered at the end
    if agg in ORDERED:
        table = table.sort_by([("episode_id", "ascending"), ("seq", "ascending")])
        which = "first" if agg is FeatureAgg.FIRST else "last"
        out = table.group_by("episode_id", use_threads=False).aggregate(
            [("seq", which), ("v", which, pc.ScalarAggregateOptions(skip_nulls=False))]
        )
        return renamed(out, episode_id="episode_id", seq=f"seq_{which}", v=f"v_{which}")
    return merge_plain(agg, table, first=False)


def _merge_adjacent(feature: CompiledFeature, table: pa.Table) -> pa.Table | None:
    """Partials of an episode that follow each other (an episode split across batches)
    merged by reductions over the runs of equal ids, without hashing. An id that comes
    back after another one is not merged (`_align` finds it); None for the states that
    need the group-by (lists, min/max of non-numbers, first/last whose seq does not
    ascend within the runs)."""
    agg = feature.agg
    if agg in LISTS:
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
        return np.add.reduceat(numpy_values(column(name), 0), starts)

    if agg is FeatureAgg.COUNT:
        out["n"] = pa.array(add("n"), pa.int64())
    elif agg is FeatureAgg.MEAN:
        out["s"], out["c"] = pa.array(add("s")), pa.array(add("c"), pa.int64())
    elif agg is FeatureAgg.SUM:
        v = column("v")
        if pa.types.is_integer(v.type):
            approx = np.add.reduceat(numpy_values(v, 0).astype(np.float64), starts)
            if np.any(np.abs(approx) > 2.0**62):
                return None  # the group-by's checked sum reports the overflow
        out["v"] = pa.array(add("v"), v.type)
    elif agg in (FeatureAgg.ANY, FeatureAgg.ALL):
        wanted = agg is FeatureAgg.ANY  # a null partial (no value) is the identity
        hits = np.asarray(numpy_values(column("v"), not wanted), dtype=bool) == wanted
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
        data = numpy_values(v, fill)
        if pa.types.is_floating(v.type) and np.isnan(data).any():
            return None
        reduced = (np.minimum if is_min else np.maximum).reduceat(data, starts)
        out["v"] = pa.array(reduced, v.type, mask=valid_counts(v, starts) == 0)
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
    (int64, see `Positions`): then they must ascend. Without episodes: the table itself
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


def final_values(
    feature: CompiledFeature, parts: list[pa.Table], episode_ids: pa.ChunkedArray | None
) -> pa.Table:
    """The per-episode values of a feature from all its partials: without hashing when the
    steps were grouped by episode, else by the group-by merge."""
    table = pa.concat_tables(parts, promote_options="permissive")
    names = seg.as_array(episode_ids) if episode_ids is not None else None
    if feature.agg in LISTS:
        fast = _finish(feature, table, grouped=True, names=names)
    else:
        merged = _merge_adjacent(feature, table)
        fast = None if merged is None else _finish(feature, merged)
    if fast is not None:
        aligned = _align(fast, episode_ids)
        if aligned is not None:
            return aligned
    table = with_ids(table, names)
    return _finish(feature, merge(feature, [table]))  # type: ignore[return-value]


def with_ids(table: pa.Table, names: pa.Array | None) -> pa.Table:
    """`table` with episode rows (int64, `Positions`) turned back into episode ids."""
    column = table.column("episode_id")
    if names is None or not pa.types.is_integer(column.type):
        return table
    at = table.schema.get_field_index("episode_id")
    return table.set_column(at, "episode_id", names.take(seg.as_array(column)))


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
        raise too_many(feature, longest_episode(ids, starts, lengths, names))
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
    elif agg in LISTS:
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


