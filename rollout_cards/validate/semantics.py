"""Table semantics, streamed in chunks with pyarrow compute: required values, enums, finite
numbers, unique episode ids, episode times, and per step its episode, seq, time and tool call.

Memory: tables are read one chunk (CHUNK_ROWS rows of the checked columns) at a
time. The episodes table contributes its ids as one Arrow array, a sorted hash
index (`episode_index`) and a few numbers per episode (about 50 bytes per episode
beyond the ids), which is what checking unique ids and referential integrity needs
without sorting to disk. Steps that
are not stored grouped by episode in seq order are rescanned in partitions of
episodes, each sorted in memory (`SORT_PASS_ROWS` rows per pass); see `episode_scan`.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DecodeLimitError
from ..io.decode import DecodeBudget, variable_width
from ..numpy_arrow import int64_array
from ..tables import EPISODE_COLUMNS, STEP_COLUMNS, StepKind, TerminalStatus
from .context import CheckContext, TableState
from .episode_index import EpisodeIndex
from .episode_scan import EpisodeScan, report_rows
from .parquet import open_parquet, read_errors
from .report import Findings, excerpt

__all__ = ["CHUNK_ROWS", "SORT_PASS_ROWS", "EpisodeCodes", "EpisodeFacts", "check_episodes", "check_steps", "iter_chunks"]

#: Rows read and checked at a time.
CHUNK_ROWS = 1 << 18
#: Rows of steps sorted in memory per pass when steps are not grouped by episode in seq order.
SORT_PASS_ROWS = 4 << 20

_COLUMNS = {"episodes": {c.name: c for c in EPISODE_COLUMNS}, "steps": {c.name: c for c in STEP_COLUMNS}}
_ALLOWED = {
    "status": pa.array([s.value for s in TerminalStatus]),
    "kind": pa.array([k.value for k in StepKind]),
}


@dataclass
class EpisodeFacts:
    """What the episodes check leaves for the steps check."""

    index: EpisodeIndex
    """episode_id -> row (of its first occurrence)."""
    n_steps: np.ndarray | None
    """n_steps by row (-1 where null), when the column is present."""

    @property
    def count(self) -> int:
        return len(self.index)

    def name_of(self, code: int) -> str:
        return self.index.name_of(code)


def _next_checked(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    """The next batch, fully validated: a flipped bit can decode into out-of-range
    dictionary indices or offsets that pyarrow does not check on its own."""
    batch = next(batches, None)
    if batch is not None:
        batch.validate(full=True)
    return batch


def iter_chunks(ctx: CheckContext, state: TableState, columns: list[str], chunk_rows: int | None = None,
                dictionary: tuple[str, ...] = ()) -> Iterator[tuple[int, pa.Table]]:
    """(first row index, table of `columns`) over every part, in chunks of at most `chunk_rows`
    (default CHUNK_ROWS) rows — batches of small row groups are merged to at least half of
    that; the `dictionary` columns are read dictionary-encoded.

    A page that cannot be decoded is reported once per table (`parquet-unreadable`) and
    stops the check that met it, and every later check of that table, with a note.
    """
    if state.damaged:
        ctx.skip(f"the {state.name} table has data that cannot be decoded")
    chunk_rows = chunk_rows or CHUNK_ROWS
    start, pending, n = 0, [], 0
    # Strings are read dictionary-encoded and expanded only within the decode budget (io.decode).
    schema = state.schema
    assert schema is not None
    expand = {c for c in columns if variable_width(schema.field(c).type)} - set(dictionary)
    encoded = sorted(expand | {c for c in dictionary if c in columns})
    budget = DecodeBudget(f"the {state.name} table", sum(ctx.entries[rel].size for rel in state.parts))
    for rel in state.parts:
        pf = open_parquet(ctx, rel, read_dictionary=encoded)
        # One row group at a time: iterating the whole file keeps every pre-buffered column
        # chunk alive until the end, so memory would grow with the file.
        batches = (batch for group in range(pf.metadata.num_row_groups)
                   for batch in pf.iter_batches(batch_size=chunk_rows, columns=columns, row_groups=[group]))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rcard-read") as reader:
            # The next batch is decoded (pyarrow releases the GIL) while this one is checked.
            ahead = reader.submit(_next_checked, batches)
            while True:
                try:
                    batch = ahead.result()
                except read_errors as exc:
                    state.damaged = True
                    ctx.findings.add("parquet-unreadable", f"data cannot be decoded ({str(exc)[:100]}); the file "
                                     "is corrupt: regenerate it", file=rel)
                    ctx.skip(f"the {state.name} table has data that cannot be decoded")
                if batch is None:
                    break
                ahead = reader.submit(_next_checked, batches)
                try:
                    pieces = list(budget.decode(batch.replace_schema_metadata(None), schema, expand))
                except DecodeLimitError as exc:
                    state.damaged = True
                    ctx.findings.add("parquet-decode-limit", str(exc), file=rel)
                    ctx.skip(f"the {state.name} table decodes beyond its budget")
                for piece in pieces:
                    pending.append(piece)
                    n += piece.num_rows
                    # A batch of a large row group goes as it is, uncopied; a sliced one slice by slice.
                    if n >= chunk_rows // 2 or len(pieces) > 1:
                        yield start, _table(pending)
                        start, pending, n = start + n, [], 0
    if pending:
        yield start, _table(pending)


def _table(batches: list[pa.RecordBatch]) -> pa.Table:
    table = pa.Table.from_batches(batches)
    return table if len(batches) == 1 else table.combine_chunks()


def _array(chunk: pa.Table, name: str) -> pa.Array:
    column = chunk.column(name)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _mask(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def kind_mask(kind: pa.Array, value: str) -> np.ndarray:
    """Rows whose enum column (plain or dictionary-encoded) equals `value`."""
    if pa.types.is_dictionary(kind.type):
        return _mask(pc.equal(kind.dictionary, value).take(kind.indices))
    return _mask(pc.equal(kind, value))


def _checked_columns(state: TableState, table: str, wanted: tuple[str, ...]) -> list[str]:
    schema = state.schema
    assert schema is not None
    names = [c for c in wanted if state.has(c)]
    standard = _COLUMNS[table]
    checked = [fld.name for fld in schema if fld.name not in state.bad_columns and (
        pa.types.is_floating(fld.type) or (fld.name in standard and standard[fld.name].minimum is not None))]
    return names + [c for c in checked if c not in names]


def _row_checks(f: Findings, state: TableState, table: str, offset: int, chunk: pa.Table) -> None:
    """Checks that look at one row at a time: required values, enums, finite numbers."""
    standard = _COLUMNS[table]
    for name in chunk.column_names:
        arr = _array(chunk, name)
        col = standard.get(name)
        if col is not None and not col.nullable and arr.null_count:
            rows = offset + np.flatnonzero(_mask(arr.is_null()))
            report_rows(f, "value-null", state, rows, name,
                        lambda i, name=name: f"{name} is null; every {table} row needs one")
        if name in _ALLOWED:
            _enum_rows(f, state, table, offset, name, arr)
        if col is not None and col.minimum is not None:
            low = np.flatnonzero(_mask(pc.less(arr, col.minimum)))
            if len(low):
                values = arr.take(int64_array(low[: f.room("value-negative")])).to_pylist()
                report_rows(f, "value-negative", state, offset + low, name,
                            lambda i, name=name, values=values: f"{name} is {values[i]}; it counts something and "
                            "is never negative: fix the value, or use null when it is unknown")
        if pa.types.is_floating(arr.type):
            bad = np.flatnonzero(_mask(pc.invert(pc.is_finite(arr))))
            if len(bad):
                values = arr.take(int64_array(bad[: f.room("value-not-finite")])).to_pylist()
                report_rows(f, "value-not-finite", state, offset + bad, name,
                            lambda i, name=name, values=values: f"{name} is {values[i]}; numbers must be "
                            "finite: use null for a missing value and record why in drops")


def _nesting_checks(f: Findings, state: TableState, offset: int, chunk: pa.Table) -> None:
    """parent_seq names an earlier step (0 <= parent_seq < seq); depth is >= 0, and >= 1 with a parent."""
    names = chunk.column_names
    if "parent_seq" not in names and "depth" not in names:
        return
    n = chunk.num_rows
    seq = _array(chunk, "seq") if "seq" in names else pa.nulls(n, pa.int64())
    parent = _array(chunk, "parent_seq") if "parent_seq" in names else pa.nulls(n, pa.int64())
    depth = _array(chunk, "depth") if "depth" in names else pa.nulls(n, pa.int64())
    if parent.null_count == n and depth.null_count == n:
        return
    bad_parent = pc.or_(pc.less(parent, 0), pc.greater_equal(parent, seq))
    bad_depth = pc.or_(pc.less(depth, 0), pc.and_(parent.is_valid(), pc.less(depth, 1)))
    rows = np.flatnonzero(_mask(pc.or_kleene(bad_parent, bad_depth)))
    if len(rows):
        shown = rows[: f.room("step-parent-invalid")]
        seqs, parents, depths = (a.take(int64_array(shown)).to_pylist() for a in (seq, parent, depth))
        report_rows(f, "step-parent-invalid", state, offset + rows, "parent_seq",
                    lambda i: f"step {seqs[i]} has parent_seq {parents[i]} and depth {depths[i]}; parent_seq "
                    "must be the seq of an earlier step of the episode and a sub-agent's depth at least 1")


def _enum_rows(f: Findings, state: TableState, table: str, offset: int, name: str, arr: pa.Array) -> None:
    allowed = _ALLOWED[name]
    if pa.types.is_dictionary(arr.type):
        ok_dict = pc.is_in(arr.dictionary, value_set=allowed)
        if ok_dict.false_count == 0:
            return
        ok = ok_dict.take(arr.indices)
    else:
        ok = pc.is_in(arr, value_set=allowed)
    bad = np.flatnonzero(_mask(pc.and_(pc.invert(ok), arr.is_valid())))
    if len(bad):
        values = arr.take(int64_array(bad[: f.room("enum-invalid")])).to_pylist()
        report_rows(f, "enum-invalid", state, offset + bad, name,
                    lambda i: f"{name} {excerpt(values[i])} is not one of {', '.join(allowed.to_pylist())}")


def check_episodes(ctx: CheckContext) -> None:
    """Episodes: required values, status enum, finite numbers, unique ids, ended_at >= started_at."""
    state = ctx.table_state.get("episodes")
    if state is None or not state.readable:
        ctx.skip("the episodes table could not be read")
    f = ctx.findings
    columns = _checked_columns(state, "episodes", ("episode_id", "task_id", "status", "started_at", "ended_at",
                                                   "n_steps"))
    ids: list[pa.Array] = []
    n_steps: list[np.ndarray] = []
    for offset, chunk in iter_chunks(ctx, state, columns):
        _row_checks(f, state, "episodes", offset, chunk)
        if "episode_id" in columns:
            ids.append(_array(chunk, "episode_id"))
        if "started_at" in columns and "ended_at" in columns:
            reversed_ = np.flatnonzero(_mask(pc.less(_array(chunk, "ended_at"), _array(chunk, "started_at"))))
            report_rows(f, "episode-time-reversed", state, offset + reversed_, "ended_at",
                        lambda i: "ended_at is earlier than started_at; fix the episode's timestamps")
        if "n_steps" in columns:
            n_steps.append(pc.fill_null(_array(chunk, "n_steps"), -1).to_numpy(zero_copy_only=False))
    if "episode_id" not in columns:
        return
    index = EpisodeIndex(pa.concat_arrays(ids) if ids else pa.array([], pa.string()))
    duplicates, first = index.duplicate_rows, index.first_rows
    report_rows(f, "episode-id-duplicate", state, duplicates, "episode_id",
                lambda i: f"episode_id {excerpt(index.name_of(int(duplicates[i])))} already appears in row "
                f"{state.locate(int(first[i]))[1]}; episode ids must be unique")
    ctx.facts["episodes"] = EpisodeFacts(index, np.concatenate(n_steps) if n_steps else None)


class EpisodeCodes:
    """Maps chunks of step episode ids to episode rows, looking up each distinct id once; the
    chunks of one row group share their dictionary, which is looked up once for all of them."""

    def __init__(self, index: EpisodeIndex):
        self.index = index
        self._dictionary: pa.Array | None = None
        self._table = np.zeros(0, dtype=np.int64)

    def __call__(self, ids: pa.Array) -> np.ndarray:
        """Row of each id's episode (-1 for null or unknown ids)."""
        encoded = ids if pa.types.is_dictionary(ids.type) else ids.dictionary_encode()
        if self._dictionary is None or not encoded.dictionary.equals(self._dictionary):
            self._dictionary, self._table = encoded.dictionary, self.index.lookup(encoded.dictionary)
        indices = encoded.indices
        if not len(self._table):
            return np.full(len(ids), -1, dtype=np.int64)
        codes = self._table[pc.fill_null(indices, 0).to_numpy(zero_copy_only=False)]
        if indices.null_count:
            codes[~_mask(indices.is_valid())] = -1
        return codes


_SCAN_COLUMNS = ("episode_id", "seq", "kind", "t", "call_id", "parent_seq", "depth")


def _scan_inputs(chunk: pa.Table, idx: np.ndarray | None) -> dict:
    """The arrays EpisodeScan.feed takes, for rows `idx` of `chunk` (all rows when None)."""
    def pick(name: str) -> pa.Array | None:
        if name not in chunk.column_names:
            return None
        arr = _array(chunk, name)
        return arr if idx is None else arr.take(int64_array(idx))

    def ints(name: str) -> np.ndarray | None:
        arr = pick(name)
        return None if arr is None else pc.fill_null(arr.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)

    kind = pick("kind")
    t = pick("t")
    call_id = pick("call_id")
    return {
        "is_call": kind_mask(kind, "tool_call"),
        "is_result": kind_mask(kind, "tool_result"),
        "t": t.cast(pa.int64()) if t is not None else None,
        "call_id": call_id,
        "parent_seq": ints("parent_seq"),
        "depth": ints("depth"),
    }


def check_steps(ctx: CheckContext) -> None:
    """Steps: required values, kind enum, finite numbers; with the episodes table, each step's
    episode exists, seq is contiguous from 0, times do not decrease, tool results answer a call,
    and every episode's n_steps matches its rows."""
    state = ctx.table_state.get("steps")
    if state is None or not state.readable:
        ctx.skip("the steps table could not be read")
    f = ctx.findings
    episodes: EpisodeFacts | None = ctx.facts.get("episodes")
    linked = episodes is not None and state.has("episode_id")
    per_episode = linked and state.has("seq", "kind")
    columns = _checked_columns(state, "steps", _SCAN_COLUMNS)
    pending = Findings(f.cap)
    scan = (EpisodeScan(pending, state, episodes.name_of, order_known=False, n_episodes=episodes.count)
            if per_episode else None)
    counts = np.zeros(episodes.count if episodes else 0, dtype=np.int64)
    episode_codes = EpisodeCodes(episodes.index) if episodes else None
    for offset, chunk in iter_chunks(ctx, state, columns, dictionary=("episode_id", "call_id")):
        _row_checks(f, state, "steps", offset, chunk)
        _nesting_checks(f, state, offset, chunk)
        if not linked:
            continue
        ids = _array(chunk, "episode_id")
        codes = episode_codes(ids)
        known = codes >= 0
        orphans = np.flatnonzero(~known & _mask(ids.is_valid()))
        if len(orphans):
            shown = ids.take(int64_array(orphans[: f.room("step-episode-missing")])).to_pylist()
            report_rows(f, "step-episode-missing", state, offset + orphans, "episode_id",
                        lambda i, shown=shown: f"step belongs to episode {excerpt(shown[i])}, which is not in "
                        "the episodes table; add the episode or remove its steps")
        counts += np.bincount(codes[known], minlength=len(counts))
        if scan is not None and scan.active:
            seq = _array(chunk, "seq")
            usable = known & _mask(seq.is_valid())
            idx = None if usable.all() else np.flatnonzero(usable)
            rows = offset + (np.arange(len(codes)) if idx is None else idx)
            seqs = pc.fill_null(seq, -1).to_numpy(zero_copy_only=False)
            scan.feed(codes if idx is None else codes[idx], seqs if idx is None else seqs[idx], rows,
                      **_scan_inputs(chunk, idx))
    if scan is not None:
        if scan.in_order:
            f.merge(pending)
        else:
            _sorted_passes(ctx, state, episodes)
    if linked and episodes.n_steps is not None:
        _check_step_counts(ctx, episodes, counts)


def _sorted_passes(ctx: CheckContext, state: TableState, episodes: EpisodeFacts) -> None:
    """Per-episode checks for steps not stored in (episode, seq) order: one pass per partition of
    the episodes (row % passes), each partition's steps sorted in memory."""
    total = sum(r or 0 for r in state.part_rows)
    passes = max(1, -(-total // SORT_PASS_ROWS))
    columns = [c for c in _SCAN_COLUMNS if state.has(c)]
    episode_codes = EpisodeCodes(episodes.index)
    for part in range(passes):
        pieces = []
        for offset, chunk in iter_chunks(ctx, state, columns, dictionary=("episode_id", "call_id")):
            codes = episode_codes(_array(chunk, "episode_id"))
            seq = _array(chunk, "seq")
            idx = np.flatnonzero((codes >= 0) & (codes % passes == part) & _mask(seq.is_valid()))
            if not len(idx):
                continue
            inputs = _scan_inputs(chunk, idx)
            piece = {
                "code": codes[idx],
                "seq": seq.take(int64_array(idx)),
                "row": offset + idx,
                "is_call": inputs["is_call"],
                "is_result": inputs["is_result"],
            }
            if inputs["t"] is not None:
                piece["t"] = inputs["t"]
            if inputs["call_id"] is not None:
                piece["call_id"] = inputs["call_id"].cast(pa.string())
            for name in ("parent_seq", "depth"):
                if inputs[name] is not None:
                    piece[name] = inputs[name]
            pieces.append(pa.table(piece))
        if not pieces:
            continue
        table = pa.concat_tables(pieces).sort_by([("code", "ascending"), ("seq", "ascending"),
                                                  ("row", "ascending")])
        scan = EpisodeScan(ctx.findings, state, episodes.name_of, order_known=True, n_episodes=episodes.count)
        for start in range(0, table.num_rows, CHUNK_ROWS):
            sl = table.slice(start, CHUNK_ROWS).combine_chunks()
            scan.feed(
                sl.column("code").to_numpy(),
                sl.column("seq").to_numpy(),
                sl.column("row").to_numpy(),
                sl.column("is_call").to_numpy(zero_copy_only=False),
                sl.column("is_result").to_numpy(zero_copy_only=False),
                _array(sl, "t") if "t" in sl.column_names else None,
                _array(sl, "call_id") if "call_id" in sl.column_names else None,
                *(sl.column(c).to_numpy() if c in sl.column_names else None for c in ("parent_seq", "depth")),
            )


def _check_step_counts(ctx: CheckContext, episodes: EpisodeFacts, counts: np.ndarray) -> None:
    n_steps = episodes.n_steps
    assert n_steps is not None
    first = np.ones(len(n_steps), dtype=bool)
    first[episodes.index.duplicate_rows] = False
    bad = np.flatnonzero((n_steps >= 0) & (n_steps != counts) & first)
    report_rows(ctx.findings, "episode-step-count-mismatch", ctx.table_state["episodes"], bad, "n_steps",
                lambda i: f"n_steps is {n_steps[bad[i]]} but the steps table has {counts[bad[i]]} rows of episode "
                f"{excerpt(episodes.name_of(int(bad[i])))}; set n_steps to the number of its steps")
