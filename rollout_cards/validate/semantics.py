"""Table semantics, streamed in chunks with pyarrow compute: required values, enums, finite
numbers, unique episode ids, episode times, and per step its episode, seq, time and tool call.

The checks themselves are in `row_checks` (one row at a time), `episode_groups` (unique ids,
each step's episode, n_steps, and the per-episode scan over a group of episodes) and
`episode_scan`; this module reads the tables and runs them over the whole card in this
process. With another engine (`CheckContext.engine`) the same checks run on its workers
(`ray_tables`). Findings are listed in table order (`row_findings`), whatever the chunking.

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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import arrow_compute as ac
from ..errors import DecodeLimitError
from ..io.decode import DecodeBudget, variable_width
from ..io.read_ahead import read_ahead as background
from ..numpy_arrow import check_batch, int64_array
from .context import CheckContext, TableState
from .episode_groups import (
    SCAN_COLUMNS,
    EpisodeCodes,
    EpisodeFacts,
    report_duplicates,
    report_missing,
    report_step_counts,
    scan_inputs,
    scan_piece,
    scan_sorted,
)
from .episode_index import EpisodeIndex
from .episode_scan import EpisodeScan
from .parquet import open_parquet, read_errors
from .row_checks import array, checked_columns, episode_row_checks, mask, step_row_checks
from .row_findings import RowFindings

__all__ = ["CHUNK_ROWS", "SORT_PASS_ROWS", "EpisodeCodes", "EpisodeFacts", "check_episodes", "check_steps",
           "iter_chunks", "read_ahead", "scan_plan"]

#: Rows read and checked at a time.
CHUNK_ROWS = 1 << 18
#: Rows of steps sorted in memory per pass when steps are not grouped by episode in seq order.
SORT_PASS_ROWS = 4 << 20

#: Columns of each table the scans read first (then every float column and count column).
EPISODE_SCAN = ("episode_id", "task_id", "status", "started_at", "ended_at", "n_steps")


def _checked(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch`, fully validated: a flipped bit can decode into out-of-range dictionary
    indices or offsets that pyarrow does not check on its own."""
    check_batch(batch)  # validate(full=True), dictionary indices by NumPy (~10x cheaper)
    return batch


def unreadable_message(exc: BaseException) -> str:
    """The parquet-unreadable message of a page that cannot be decoded."""
    return f"data cannot be decoded ({str(exc)[:100]}); the file is corrupt: regenerate it"


def read_ahead(pf: pq.ParquetFile, columns: list[str], row_groups: range, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The batches of `row_groups`, each fully validated, the next one decoded and checked on a
    thread (pyarrow releases the GIL) while the caller works on this one; read errors are raised
    where the batch is."""
    # One row group at a time: iterating the whole file keeps every pre-buffered column
    # chunk alive until the end, so memory would grow with the file.
    batches = (batch for group in row_groups
               for batch in pf.iter_batches(batch_size=batch_rows, columns=columns, row_groups=[group]))
    return background(map(_checked, batches), depth=1)


def iter_chunks(ctx: CheckContext, state: TableState, columns: list[str], chunk_rows: int | None = None,
                dictionary: tuple[str, ...] = ()) -> Iterator[tuple[int, pa.Table]]:
    """(first row index, table of `columns`) over every part, in chunks of at most `chunk_rows`
    (default CHUNK_ROWS) rows — batches of small row groups are merged to at least half of
    that; the `dictionary` columns are read dictionary-encoded.

    A page that cannot be decoded is reported once per table (`parquet-unreadable`) and
    stops the check that met it, and every later check of that table, with a note; the rows
    read before it are still yielded.
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
        batches = read_ahead(pf, columns, range(pf.metadata.num_row_groups), chunk_rows)
        while True:
            try:
                batch = next(batches, None)
                if batch is not None:
                    pieces = list(budget.decode(batch.replace_schema_metadata(None), schema, expand))
            except (DecodeLimitError, *read_errors) as exc:
                # what was read before is checked; nothing after it is
                if pending:
                    yield start, _table(pending)
                    start, pending, n = start + n, [], 0
                state.damaged = True
                if isinstance(exc, DecodeLimitError):
                    ctx.findings.add("parquet-decode-limit", str(exc), file=rel)
                    ctx.skip(f"the {state.name} table decodes beyond its budget")
                ctx.findings.add("parquet-unreadable", unreadable_message(exc), file=rel)
                ctx.skip(f"the {state.name} table has data that cannot be decoded")
            if batch is None:
                break
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




def scan_plan(ctx: CheckContext) -> dict:
    """What the table scans check, from the Parquet check's findings (the same for every engine):
    the columns read of each table, and whether the steps are checked against the episodes."""
    episodes, steps = ctx.table_state.get("episodes"), ctx.table_state.get("steps")
    plan: dict = {"episodes": None, "steps": None, "linked": False, "per_episode": False}
    if episodes is not None and episodes.readable:
        plan["episodes"] = checked_columns(episodes, "episodes", EPISODE_SCAN)
    if steps is not None and steps.readable:
        plan["steps"] = checked_columns(steps, "steps", SCAN_COLUMNS)
        plan["linked"] = plan["episodes"] is not None and "episode_id" in plan["episodes"] and steps.has("episode_id")
        plan["per_episode"] = plan["linked"] and steps.has("seq", "kind")
    return plan


def check_episodes(ctx: CheckContext) -> None:
    """Episodes: required values, status enum, finite numbers, unique ids, ended_at >= started_at."""
    state = ctx.table_state.get("episodes")
    if state is None or not state.readable:
        ctx.skip("the episodes table could not be read")
    if ctx.engine is not None:
        from .ray_tables import check_episodes as on_engine  # the optional extra, when asked for

        return on_engine(ctx)
    columns = scan_plan(ctx)["episodes"]
    rf = RowFindings(ctx.findings.cap, ("episodes",))
    ids: list[pa.Array] = []
    n_steps: list[np.ndarray] = []
    try:
        for offset, chunk in iter_chunks(ctx, state, columns):
            episode_row_checks(rf, state, offset, chunk)
            if "episode_id" in columns:
                ids.append(array(chunk, "episode_id"))
            if "n_steps" in columns:
                n_steps.append(ac.fill_null(array(chunk, "n_steps"), -1).to_numpy(zero_copy_only=False))
        if "episode_id" not in columns:
            return
        facts = EpisodeFacts(EpisodeIndex(pa.concat_arrays(ids) if ids else pa.array([], pa.string())),
                             np.concatenate(n_steps) if n_steps else None)
        report_duplicates(rf, state, facts)
        ctx.facts["episodes"] = facts
    finally:
        rf.flush(ctx.findings)


def check_steps(ctx: CheckContext) -> None:
    """Steps: required values, kind enum, finite numbers; with the episodes table, each step's
    episode exists, seq is contiguous from 0, times do not decrease, tool results answer a call,
    and every episode's n_steps matches its rows."""
    state = ctx.table_state.get("steps")
    if state is None or not state.readable:
        ctx.skip("the steps table could not be read")
    if ctx.engine is not None:
        from .ray_tables import check_steps as on_engine

        return on_engine(ctx)
    rf = RowFindings(ctx.findings.cap, ("steps", "episodes"))
    try:
        _check_steps(ctx, state, rf)
    finally:
        rf.flush(ctx.findings)


def _check_steps(ctx: CheckContext, state: TableState, rf: RowFindings) -> None:
    plan = scan_plan(ctx)
    episodes: EpisodeFacts | None = ctx.facts.get("episodes")
    linked = episodes is not None and plan["linked"]
    columns = plan["steps"]
    pending = RowFindings(rf.cap, rf.tables)
    scan = (EpisodeScan(pending, state, episodes.name_of, order_known=False, n_episodes=episodes.count)
            if linked and plan["per_episode"] else None)
    counts = np.zeros(episodes.count if episodes else 0, dtype=np.int64)
    episode_codes = EpisodeCodes(episodes.index) if episodes else None
    for offset, chunk in iter_chunks(ctx, state, columns, dictionary=("episode_id", "call_id")):
        step_row_checks(rf, state, offset, chunk)
        if not linked:
            continue
        ids = array(chunk, "episode_id")
        codes = episode_codes(ids)
        known = codes >= 0
        orphans = np.flatnonzero(~known & mask(ac.is_valid(ids)))
        report_missing(rf, state, offset + orphans, ac.take(ids, int64_array(orphans)))
        counts += np.bincount(codes[known], minlength=len(counts))
        if scan is not None and scan.active:
            seq = array(chunk, "seq")
            usable = known & mask(ac.is_valid(seq))
            idx = None if usable.all() else np.flatnonzero(usable)
            rows = offset + (np.arange(len(codes)) if idx is None else idx)
            seqs = ac.fill_null(seq, -1).to_numpy(zero_copy_only=False)
            scan.feed(codes if idx is None else codes[idx], seqs if idx is None else seqs[idx], rows,
                      **scan_inputs(chunk, idx))
    if scan is not None:
        if scan.in_order:
            rf.merge(pending)
        else:
            _sorted_passes(ctx, state, episodes, rf)
    if linked and episodes.n_steps is not None:
        report_step_counts(rf, ctx.table_state["episodes"], episodes, counts)


def _sorted_passes(ctx: CheckContext, state: TableState, episodes: EpisodeFacts, rf: RowFindings) -> None:
    """Per-episode checks for steps not stored in (episode, seq) order: one pass per partition of
    the episodes (row % passes), each partition's steps sorted in memory."""
    total = sum(r or 0 for r in state.part_rows)
    passes = max(1, -(-total // SORT_PASS_ROWS))
    columns = [c for c in SCAN_COLUMNS if state.has(c)]
    episode_codes = EpisodeCodes(episodes.index)
    for part in range(passes):
        pieces = []
        for offset, chunk in iter_chunks(ctx, state, columns, dictionary=("episode_id", "call_id")):
            codes = episode_codes(array(chunk, "episode_id"))
            seq = array(chunk, "seq")
            idx = np.flatnonzero((codes >= 0) & (codes % passes == part) & mask(ac.is_valid(seq)))
            if len(idx):
                pieces.append(scan_piece(chunk, idx, offset + idx, {"code": codes[idx]}))
        if pieces:
            scan_sorted(rf, state, episodes, pa.concat_tables(pieces))
