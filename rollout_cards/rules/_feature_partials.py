"""The kernel of step features: per record batch, each feature's partial state per run
of an episode's selected steps (`selected_partial`), and the episode rows that replace
the ids while the runs follow the episodes table's order (`Positions`). See `features`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import RuleError
from ..expr import segments as seg
from ..model.rule import FeatureAgg
from ..numpy_arrow import dictionary_codes, int64_array
from . import _encoded as enc
from . import _feature_merge as merging
from ._feature_merge import (
    LISTS,
    ORDERED,
    longest_episode,
    merge,
    merge_plain,
    numpy_values,
    renamed,
    too_many,
    valid_counts,
)

if TYPE_CHECKING:
    from .features import CompiledFeature


def _value_column(feature: CompiledFeature, batch: pa.RecordBatch, evaluator: enc.PerValue | None) -> pa.Array:
    if feature.value is None:
        return pa.repeat(pa.scalar(True), batch.num_rows)  # any: "a selected step exists"
    evaluator = evaluator or enc.PerValue(feature.value)
    values = enc.decoded(evaluator.values(batch))
    if feature.agg in (FeatureAgg.SUM, FeatureAgg.MEAN) and pa.types.is_boolean(values.type):
        values = values.cast(pa.int64())
    return values


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
        hits = np.asarray(numpy_values(values, not wanted), dtype=bool) == wanted
        found = np.add.reduceat(hits.astype(np.int64), starts) > 0
        return pa.table({"episode_id": run_ids, "v": found if wanted else ~found})
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    if agg is FeatureAgg.SUM or agg is FeatureAgg.MEAN:
        data = numpy_values(values, 0)
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
        counts = valid_counts(values, starts)
        return pa.table({"episode_id": run_ids, "s": sums, "c": counts})
    if agg in (FeatureAgg.MIN, FeatureAgg.MAX):
        is_min = agg is FeatureAgg.MIN
        if pa.types.is_floating(t):
            fill = np.inf if is_min else -np.inf
        else:
            info = np.iinfo(np.int64)
            fill = info.max if is_min else info.min
        data = numpy_values(values, fill)
        if pa.types.is_floating(t) and np.isnan(data).any():
            return None  # NaN ordering: leave it to Arrow's kernels
        reduced = (np.minimum if is_min else np.maximum).reduceat(data, starts)
        counts = valid_counts(values, starts)
        return pa.table(
            {"episode_id": run_ids, "v": pa.array(reduced, t, mask=counts == 0)}
        )
    return None


class Selection:
    """The rows of a batch one `where` selects: a mask, and the filtered batch on demand
    (count, first and last read the mask and the run starts of the whole batch instead).
    `starts` and `run_rows` come from `Positions.rows` when it numbered the batch; `batch`
    may then be a Numbered, whose batch is built only if something reads it."""

    def __init__(self, batch: pa.RecordBatch | Numbered, mask: np.ndarray | None,
                 starts: np.ndarray | None = None, run_rows: np.ndarray | None = None):
        self._batch, self.mask = batch, mask
        self._filtered: pa.RecordBatch | None = None
        self._starts = starts
        self.run_rows = run_rows

    @property
    def batch(self) -> pa.RecordBatch:
        return self._batch.batch if isinstance(self._batch, Numbered) else self._batch

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


def _seq_ascends(batch: pa.RecordBatch, starts: np.ndarray) -> bool:
    """Whether seq ascends within each run (a run may start lower than the last one ended)."""
    seq = batch.column("seq").to_numpy(zero_copy_only=False)
    ascends = np.diff(seq) > 0
    ascends[starts[1:] - 1] = True
    return bool(ascends.all())


def picked_rows(mask: np.ndarray, starts: np.ndarray, *, first: bool) -> np.ndarray:
    """The first (or last) selected row of each run that has one, in order: one reduction
    per run over the row numbers, the unselected ones out of reach."""
    n = len(mask)
    position = np.arange(n, dtype=np.int64)
    if first:
        at = np.minimum.reduceat(np.where(mask, position, n), starts)
        return at[at < n]
    at = np.maximum.reduceat(np.where(mask, position, -1), starts)
    return at[at >= 0]


def run_counts(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The selected rows of each run (int64)."""
    return np.add.reduceat(mask, starts, dtype=np.int64)


def selected_partial(
    feature: CompiledFeature, selection: Selection, names: pa.Array | None = None,
    evaluator: enc.PerValue | None = None,
) -> pa.Table:
    """`_partial` of the selected rows; count and first / last (when seq ascends within
    the runs) straight from the mask, without filtering the batch. `evaluator` evaluates
    the feature's value (one per stream remembers the values it has computed)."""
    agg, mask = feature.agg, selection.mask
    if mask is None or agg not in (FeatureAgg.COUNT, FeatureAgg.FIRST, FeatureAgg.LAST):
        return _partial(feature, selection.filtered(), names, evaluator)
    starts = selection.starts()
    if agg is FeatureAgg.COUNT:  # (the numbered batch is not read: run_rows number the runs)
        counts = run_counts(mask, starts)
        keep = counts > 0
        if selection.run_rows is not None:
            run_ids = int64_array(selection.run_rows[keep])
        else:
            run_ids = enc.decoded(selection.batch.column("episode_id").take(int64_array(starts[keep])))
        return pa.table({"episode_id": run_ids, "n": counts[keep]})
    batch = selection.batch
    if not _seq_ascends(batch, starts):
        return _partial(feature, selection.filtered(), names, evaluator)
    at = picked_rows(mask, starts, first=agg is FeatureAgg.FIRST)
    picked = batch.take(int64_array(at))
    return pa.table(
        {
            "episode_id": enc.decoded(picked.column("episode_id")),
            "seq": picked.column("seq"),
            "v": _value_column(feature, picked, evaluator),
        }
    )


def _partial(
    feature: CompiledFeature, batch: pa.RecordBatch, names: pa.Array | None = None,
    evaluator: enc.PerValue | None = None,
) -> pa.Table:
    """One batch of selected steps reduced to partial state per run of episode_id (the
    ids, or episode rows into `names`)."""
    agg = feature.agg
    ids = batch.column("episode_id")
    n = batch.num_rows
    starts = seg.run_starts(ids)
    if agg is FeatureAgg.COUNT:
        return _segment_partial(feature, ids, None, starts, n)  # type: ignore[return-value]
    if agg in (FeatureAgg.FIRST, FeatureAgg.LAST) and n and _seq_ascends(batch, starts):
        # seq ascends within each run: first / last are at the run's ends, and the value
        # (a function of its row) is computed for those rows only
        at = pa.array(starts if agg is FeatureAgg.FIRST else np.append(starts[1:], n) - 1)
        picked = batch.take(at)
        return pa.table(
            {
                "episode_id": enc.decoded(picked.column("episode_id")),
                "seq": picked.column("seq"),
                "v": _value_column(feature, picked, evaluator),
            }
        )
    values = _value_column(feature, batch, evaluator)
    partial = _segment_partial(feature, ids, values, starts, n)
    if partial is not None:
        return partial
    ids = enc.decoded(ids)
    if agg in LISTS:
        lengths = np.diff(np.append(starts, n))
        if lengths.max(initial=0) > merging.MAX_LIST_ITEMS:
            raise too_many(feature, longest_episode(ids, starts, lengths, names))
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        if agg is FeatureAgg.SET:
            rows = rows.filter(pc.is_valid(values)).group_by(["episode_id", "v"]).aggregate(
                [("seq", "min")]
            )
            rows = renamed(rows, episode_id="episode_id", seq="seq_min", v="v")
        return rows
    if agg in ORDERED:
        rows = pa.table({"episode_id": ids, "seq": batch.column("seq"), "v": values})
        return merge(feature, [rows])
    return merge_plain(agg, pa.table({"episode_id": ids, "v": values}), first=True)


def _plain_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t)


def _same_text(a: pa.Array, b: pa.Array) -> bool:
    """`a == b` value by value for two text arrays of one type without nulls, from their
    buffers: the same lengths and the same bytes (one pass over a few kilobytes, where
    `pc.equal` compares string by string)."""
    width = np.int64 if pa.types.is_large_string(a.type) or pa.types.is_large_binary(a.type) else np.int32

    def parts(x: pa.Array) -> tuple[np.ndarray, bytes | memoryview]:
        buffers = x.buffers()
        offsets = np.frombuffer(buffers[1], dtype=width)[x.offset : x.offset + len(x) + 1]
        data = memoryview(buffers[2])[int(offsets[0]) : int(offsets[-1])] if buffers[2] is not None else b""
        return offsets - offsets[0], data

    (ao, ad), (bo, bd) = parts(a), parts(b)
    return len(a) == len(b) and np.array_equal(ao, bo) and bytes(ad) == bytes(bd)


class Numbered:
    """A step batch numbered by `Positions.rows`: its run starts, each run's episode row (run k
    is episode row `first` + k), and
    `batch`, the batch with episode_id replaced by episode rows, built when first read (a
    count over a mask reads only the starts and the run rows: building the int64 column per
    65,536-row batch was ~0.1 ms of the 20M-step count rule's ~2.5 ms). `source` is the batch
    as read (the same columns, episode_id still the ids)."""

    def __init__(self, source: pa.RecordBatch, starts: np.ndarray, run_rows: np.ndarray,
                 rows: Callable[[], np.ndarray]):
        self.source, self.starts, self.run_rows = source, starts, run_rows
        self._rows: Callable[[], np.ndarray] | None = rows
        self._batch: pa.RecordBatch | None = None

    @property
    def first(self) -> int:
        return int(self.run_rows[0])

    @property
    def batch(self) -> pa.RecordBatch:
        if self._batch is None:
            assert self._rows is not None
            at = self.source.schema.get_field_index("episode_id")
            self._batch = self.source.set_column(at, "episode_id", int64_array(self._rows()))
            self._rows = None
        return self._batch


class Positions:
    """Episode rows for step batches whose episodes come in the episodes table's order.

    A writer stores steps grouped by episode and, as a rule, in the order of the
    episodes, so each run of equal episode_id in the scan is the next episode (or the
    previous one continued across a batch boundary). While that holds, `rows(batch)`
    replaces the batch's episode_id with the episode's row number: partials then merge
    and align on integers, with no hash of the ids. The first batch that does not
    follow the order (a step-less episode, another order, ungrouped steps) ends it:
    `rows` returns None and the caller turns the rows it holds back into ids.
    The numbered batch (a Numbered) comes with its run starts and each run's episode row.
    """

    def __init__(self, episode_ids: pa.ChunkedArray):
        self.ids = seg.as_array(episode_ids)
        self.next = 0
        self._repeats: np.ndarray | None = None

    def _repeat_within(self, first: int, m: int) -> bool:
        """Whether two neighbours of ids[first:first + m] are equal (the positions of equal
        neighbours are found once, over the whole column: per batch this is a lookup)."""
        if self._repeats is None:
            n = len(self.ids)
            same = pc.equal(self.ids.slice(1), self.ids.slice(0, n - 1)) if n > 1 else pa.array([], pa.bool_())
            self._repeats = np.flatnonzero(np.asarray(pc.fill_null(same, False).to_numpy(zero_copy_only=False),
                                                      dtype=bool))
        i = int(np.searchsorted(self._repeats, first))
        return i < len(self._repeats) and int(self._repeats[i]) < first + m - 1

    def _matches(self, run_ids: pa.Array, first: int) -> bool:
        """Whether the runs' ids (no nulls) are the episodes' ids from row `first` on."""
        m = len(run_ids)
        if first + m > len(self.ids):
            return False
        ids = self.ids.slice(first, m)
        if ids.null_count == 0 and run_ids.type == ids.type and _plain_text(ids.type):
            return _same_text(run_ids, ids)
        return bool(pc.all(pc.equal(run_ids, ids)).as_py())

    def rows(self, batch: pa.RecordBatch) -> Numbered | None:
        ids = batch.column("episode_id")
        n = batch.num_rows
        starts = seg.run_starts(ids)
        fast = self._in_dictionary_order(batch, ids, starts)
        if fast is not None:
            return fast
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
        run_rows = np.arange(first, first + m, dtype=np.int64)
        return Numbered(batch, starts, run_rows, lambda: np.repeat(run_rows, lengths))

    def _in_dictionary_order(self, batch: pa.RecordBatch, ids: pa.Array, starts: np.ndarray) -> Numbered | None:
        """`rows` for the usual Parquet batch: a dictionary listing each run's id once, in
        run order (code k = run k), so the runs' ids are the dictionary and each row's episode
        row is its code plus the first run's row: no take, no decode, no repeat. None when the
        batch is not so (`rows` then does the general work, with the same result)."""
        if not pa.types.is_dictionary(ids.type) or ids.null_count or len(ids.dictionary) != len(starts):
            return None
        codes = dictionary_codes(ids)
        m = len(starts)
        if not np.array_equal(codes[starts], np.arange(m, dtype=codes.dtype)):
            return None
        run_ids = ids.dictionary
        if run_ids.null_count:
            return None
        first = self.next
        if first and run_ids[0].as_py() == self.ids[first - 1].as_py():
            first -= 1
        if not self._matches(run_ids, first):
            return None
        if m > 1 and self._repeat_within(first, m):
            return None  # a repeated id splits a run (the ids matched): the general path joins it
        self.next = first + m
        return Numbered(batch, starts, np.arange(first, first + m, dtype=np.int64),
                        lambda: np.add(codes, first, dtype=np.int64))
