"""The table scans of `validate(card, engine="ray")` on Ray workers, with the local findings.

    episodes row groups ─(task per run)─► row checks ─► findings, and (episode_id, row,
                                          n_steps) routed by a hash of the id to P partitions
    steps row groups ───(task per run)─► row checks ─► findings, and each step's scan columns
                                          routed by the hash of its episode_id to P partitions
    partition p ─(task)─► `episode_groups.check_group`: unique ids, each step's episode,
                          n_steps, the per-episode scan over its steps sorted by (episode, seq)
    driver ◄── per run: findings (capped per code) and per batch its rows, decoded bytes and
               counts per code; per partition: findings (capped per code)

The checks are the local validator's (`row_checks`, `episode_groups`, `episode_scan`); a
block is read in the batches the local scan reads (one row group, `CHUNK_ROWS` rows at a
time), decoded under the same budget. Every step of an episode reaches the partition of its
episode's id, whichever blocks hold it, so steps that span blocks (or are stored in any
order) are checked as one sorted sequence, as the local sorting passes do: nothing at a
block boundary is missed or counted twice. Findings are listed in table order by both
engines (`row_findings`), so the reports are equal field for field.

What travels to the driver is bounded: per run of blocks at most `cap` findings per code
plus a few numbers per batch; per partition at most `cap` findings per code. The routed
rows go from worker to worker through Ray's object store, never through the driver.

Damage (a page that cannot be decoded, the decode budget exceeded) is judged on the driver
in table order, as locally: findings of the rows before it are kept, those after it dropped;
a damaged episodes table leaves the steps unchecked against it; a damaged steps table is
checked against the episodes only for the rows before the damage (step-episode-missing).
A task whose worker dies is re-run by Ray; a job that still fails raises EngineError
(`validate` raises it: never a partial verdict).
"""

from __future__ import annotations

import pickle  # only to measure what the driver received (benchmarks, tests)
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import DecodeLimitError
from ..io.decode import DecodeBudget, variable_width
from ..numpy_arrow import int64_array
from .context import CheckContext, TableState
from .episode_groups import check_group, scan_piece
from .episode_index import string_hashes
from .parquet import read_errors
from .row_checks import array, episode_row_checks, mask, step_row_checks
from .row_findings import RowFindings
from .semantics import CHUNK_ROWS, SORT_PASS_ROWS, read_ahead, scan_plan, unreadable_message

__all__ = ["check_episodes", "check_steps"]

#: Tasks per CPU of the cluster reading a table (each a run of consecutive row groups).
TASKS_PER_CPU = 4
#: Partitions of the episode ids per CPU (at least one per SORT_PASS_ROWS steps).
PARTITIONS_PER_CPU = 2
#: The key of the routing hash: fixed, so every task sends an id to the same partition.
ROUTE_KEY = 0x5EED_CA2D

UNREADABLE = "the {} table has data that cannot be decoded"
OVER_BUDGET = "the {} table decodes beyond its budget"


# ----------------------------------------------------------------------------- worker side


@dataclass(frozen=True)
class _Scan:
    """What every block task of one table needs; pickled into the task arguments."""

    state: TableState
    filesystem: pafs.FileSystem
    base: str
    columns: list[str]
    encoded: list[str]
    expand: frozenset[str]
    stored: int
    cap: int
    tables: tuple[str, ...]
    partitions: int  # 0: nothing routed
    per_episode: bool = False


def _route(ids: pa.Array, partitions: int) -> np.ndarray:
    """The partition of each id (-1 for null), from a hash of the string."""
    if pa.types.is_dictionary(ids.type):
        parts = (string_hashes(ids.dictionary, ROUTE_KEY) % np.uint64(partitions)).astype(np.int64)
        out = parts[np.asarray(ids.indices.fill_null(0))] if len(parts) else np.zeros(len(ids), np.int64)
    else:
        out = (string_hashes(ids, ROUTE_KEY) % np.uint64(partitions)).astype(np.int64)
    out[~mask(ids.is_valid())] = -1
    return out


def _pieces(scan: _Scan, offset: int, chunk: pa.Table) -> list[pa.Table | None]:
    """The rows of `chunk` each partition checks: episodes (episode_id, row, n_steps), null ids
    to partition 0 (an episode row without an id still has an n_steps to check); steps (the
    scan columns keyed by episode_id, null seq kept), null ids to none (they belong to none)."""
    ids = array(chunk, "episode_id")
    part = _route(ids, scan.partitions)
    out: list[pa.Table | None] = []
    for p in range(scan.partitions):
        idx = np.flatnonzero((part == p) | ((part < 0) & (p == 0) & (scan.state.name == "episodes")))
        if not len(idx):
            out.append(None)
            continue
        rows = offset + idx
        taken = int64_array(idx)
        key = {"episode_id": ids.take(taken).cast(pa.string())}
        if scan.state.name == "episodes":
            piece = {**key, "row": int64_array(rows)}
            if "n_steps" in chunk.column_names:
                piece["n_steps"] = array(chunk, "n_steps").take(taken)
            out.append(pa.table(piece))
        elif scan.per_episode:
            out.append(scan_piece(chunk, idx, rows, key))
        else:
            out.append(pa.table({**key, "row": int64_array(rows)}))
    return out


def _scan_blocks(scan: _Scan, blocks: list[tuple[int, int, int]]) -> list[Any]:
    """Ray task over blocks (part, row group, first row): [summary, piece per partition...] (the
    summary alone when nothing is routed). The
    summary: per batch (first row, rows, decoded sizes, findings per code), the findings
    (capped per code), and the error that stopped the run (kind, part, first row, detail)."""
    state = scan.state
    rf = RowFindings(scan.cap, scan.tables)
    check = episode_row_checks if state.name == "episodes" else step_row_checks
    budget = DecodeBudget(state.name, scan.stored)  # this run's share: refuses no later than the table's
    batches: list[tuple[int, int, dict[str, int], dict[str, int]]] = []
    routed: list[list[pa.Table]] = [[] for _ in range(scan.partitions)]
    error = None
    files: dict[int, pq.ParquetFile] = {}
    for part, group, offset in blocks:
        if part not in files:
            fh = scan.filesystem.open_input_file(f"{scan.base}/{state.parts[part]}")
            files[part] = pq.ParquetFile(fh, read_dictionary=scan.encoded or None)
        reader = read_ahead(files[part], scan.columns, range(group, group + 1), CHUNK_ROWS)
        start = offset
        while error is None:
            sizes: dict[str, int] = {}
            try:
                batch = next(reader, None)
                if batch is None:
                    break
                batch = batch.replace_schema_metadata(None)
                sizes = budget.sizes(batch, set(scan.expand))
                pieces = list(budget.decode(batch, state.schema, set(scan.expand)))
            except DecodeLimitError:
                error = ("decode", part, start, (sizes, batch.num_rows))
            except read_errors as exc:
                error = ("unreadable", part, start, unreadable_message(exc))
            if error is not None:
                break
            before, at = rf.totals(), start
            for piece in pieces:
                chunk = pa.Table.from_batches([piece])
                check(rf, state, at, chunk)
                if scan.partitions:
                    for p, table in enumerate(_pieces(scan, at, chunk)):
                        if table is not None:
                            routed[p].append(table)
                at += piece.num_rows
            counts = {code: n - before.get(code, 0) for code, n in rf.totals().items() if n != before.get(code, 0)}
            batches.append((start, batch.num_rows, sizes, counts))
            start += batch.num_rows
        if error is not None:
            break
    for pf in files.values():
        pf.close()
    summary = {"batches": batches, "findings": rf.entries(), "error": error}
    if not scan.partitions:
        return summary  # one return value
    return [summary, *(pa.concat_tables(t) if t else None for t in routed)]


def _check_partition(cap: int, episodes_state: TableState, steps_state: TableState | None, per_episode: bool,
                     cut: int | None, n_episode_runs: int, *pieces: pa.Table | None) -> tuple:
    """Ray task: `check_group` over one partition's rows (episodes runs' pieces, then steps runs');
    steps at rows >= `cut` (a damaged steps table) are left out, and then only their episodes
    are checked. Returns the findings of each table (capped per code)."""
    episodes = [p for p in pieces[:n_episode_runs] if p is not None]
    steps = [p for p in pieces[n_episode_runs:] if p is not None]
    ep_findings, st_findings = RowFindings(cap, ("episodes",)), RowFindings(cap, ("steps", "episodes"))
    if not episodes and not steps:
        return ep_findings.entries(), st_findings.entries()
    episode_table = pa.concat_tables(episodes) if episodes else pa.table(
        {"episode_id": pa.array([], pa.string()), "row": pa.array([], pa.int64())})
    step_table = pa.concat_tables(steps) if steps else None
    if step_table is not None and cut is not None:
        step_table = step_table.filter(pc.less(step_table.column("row"), cut))
    check_group(ep_findings, st_findings, episodes_state, steps_state, episode_table, step_table, per_episode=per_episode and cut is None, counts=cut is None)
    return ep_findings.entries(), st_findings.entries()


# ----------------------------------------------------------------------------- driver side


@dataclass
class _TableResult:
    """One table's scan, judged on the driver: its findings, the damage that stopped it."""

    findings: RowFindings
    damage: tuple[str, str, str] | None = None  # (code, message, file)
    skip: str | None = None
    cut: int | None = None  # the first row not checked
    refs: list[list[Any]] = field(default_factory=list)  # per run, its pieces per partition


def _blocks(ctx: CheckContext, state: TableState) -> list[tuple[int, int, int]]:
    """(part, row group, first row) of every row group, in table order, from the footers."""
    out, offset = [], 0
    for part, rel in enumerate(state.parts):
        with ctx.open_table_file(rel) as fh:
            md = pq.read_metadata(fh)
        for group in range(md.num_row_groups):
            out.append((part, group, offset))
            offset += md.row_group(group).num_rows
    return out


def _runs(blocks: list[Any], n: int) -> list[list[Any]]:
    """`blocks` cut into at most `n` runs of consecutive blocks."""
    n = max(1, min(n, len(blocks)))
    bounds = np.linspace(0, len(blocks), n + 1).astype(int)
    return [blocks[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def _submit(ctx: CheckContext, state: TableState, columns: list[str], dictionary: tuple[str, ...],
            partitions: int, per_episode: bool, tables: tuple[str, ...]) -> tuple[list[Any], _TableResult]:
    engine = ctx.engine
    schema = state.schema
    assert schema is not None
    expand = {c for c in columns if variable_width(schema.field(c).type)} - set(dictionary)
    encoded = sorted(expand | {c for c in dictionary if c in columns})
    fs, base = engine.files(list(state.parts))
    scan = _Scan(state, fs, base, columns, encoded, frozenset(expand), sum(ctx.entries[r].size for r in state.parts),
                 ctx.findings.cap, tables, partitions, per_episode)
    task = engine.remote(_scan_blocks, num_returns=1 + partitions)
    result = _TableResult(RowFindings(ctx.findings.cap, tables))
    summaries = []
    for run in _runs(_blocks(ctx, state), TASKS_PER_CPU * engine.cpus()):
        refs = task.remote(scan, run)
        refs = refs if partitions else [refs]
        summaries.append(refs[0])
        result.refs.append(refs[1:])
    return summaries, result


def _judge(state: TableState, stored: int, summaries: list[dict], result: _TableResult) -> None:
    """Damage in table order, as the local scan meets it; the findings of the rows before it."""
    budget = DecodeBudget(f"the {state.name} table", stored)
    for summary in summaries:
        for start, rows, sizes, _ in summary["batches"]:
            try:
                budget.spend(sizes, rows)
            except DecodeLimitError as exc:
                result.cut, result.damage = start, ("parquet-decode-limit", str(exc), state.locate(start)[0])
                break
        error = summary["error"]
        if result.cut is None and error is not None:
            kind, part, start, detail = error
            result.cut = start
            if kind == "decode":
                try:
                    budget.spend(*detail)
                except DecodeLimitError as exc:
                    result.damage = ("parquet-decode-limit", str(exc), state.parts[part])
                else:  # a run's share refused: the table's budget was spent before (judged above)
                    raise AssertionError("a run exceeded the decode budget that its table did not")
            else:
                result.damage = ("parquet-unreadable", detail, state.parts[part])
        if result.cut is not None:
            result.skip = (OVER_BUDGET if result.damage[0] == "parquet-decode-limit" else UNREADABLE).format(state.name)
            entries, _ = summary["findings"]
            kept = [e for e in entries if e[1] < result.cut]
            counts: dict[str, int] = {}
            for start, _, _, per_code in summary["batches"]:
                if start < result.cut:
                    for code, n in per_code.items():
                        counts[code] = counts.get(code, 0) + n
            result.findings.merge((kept, counts))
            return
        result.findings.merge(summary["findings"])


def _scan_tables(ctx: CheckContext) -> dict[str, _TableResult | None]:
    """Both tables' scans on the workers (once per validation), judged as locally."""
    if "ray_tables" in ctx.facts:
        return ctx.facts["ray_tables"]
    engine = ctx.engine
    plan = scan_plan(ctx)
    episodes, steps = ctx.table_state.get("episodes"), ctx.table_state.get("steps")
    run_episodes = plan["episodes"] is not None and not episodes.damaged
    run_steps = plan["steps"] is not None and not steps.damaged
    grouped = run_episodes and "episode_id" in plan["episodes"]
    linked = grouped and run_steps and plan["linked"]
    rows = sum(r or 0 for r in steps.part_rows) if linked else 0
    partitions = max(PARTITIONS_PER_CPU * engine.cpus(), -(-rows // SORT_PASS_ROWS)) if grouped else 0
    out: dict[str, _TableResult | None] = {"episodes": None, "steps": None}
    jobs = []
    if run_episodes:
        jobs.append(("episodes", episodes, _submit(ctx, episodes, plan["episodes"], (), partitions, False,
                                                   ("episodes",))))
    if run_steps:
        jobs.append(("steps", steps, _submit(ctx, steps, plan["steps"], ("episode_id", "call_id"),
                                             partitions if linked else 0, plan["per_episode"], ("steps", "episodes"))))
    stats = {"runs": 0, "partitions": 0, "bytes_to_driver": 0}
    for name, state, (summaries, result) in jobs:
        got = engine.get(summaries)
        stats["runs"] += len(got)
        stats["bytes_to_driver"] += len(pickle.dumps(got))
        _judge(state, sum(ctx.entries[r].size for r in state.parts), got, result)
        out[name] = result
    ep = out["episodes"]
    if grouped and ep is not None and ep.cut is None:
        st = out["steps"] if linked else None
        task = engine.remote(_check_partition)
        calls = []
        for p in range(partitions):
            pieces = [refs[p] for refs in ep.refs] + ([refs[p] for refs in st.refs] if st is not None else [])
            calls.append(task.remote(ctx.findings.cap, episodes, steps if st is not None else None,
                                     plan["per_episode"], st.cut if st is not None else None, len(ep.refs), *pieces))
        got = engine.get(calls)
        stats["partitions"], stats["bytes_to_driver"] = partitions, stats["bytes_to_driver"] + len(pickle.dumps(got))
        for ep_entries, st_entries in got:
            ep.findings.merge(ep_entries)
            if st is not None:
                st.findings.merge(st_entries)
    for result in out.values():
        if result is not None:
            result.refs = []  # the routed rows may leave the object store
    ctx.facts["ray_tables"], ctx.facts["ray_tables_stats"] = out, stats
    return out


def _finish(ctx: CheckContext, state: TableState, result: _TableResult | None) -> None:
    if state.damaged and result is None:
        ctx.skip(UNREADABLE.format(state.name))
    assert result is not None
    if result.damage is not None:
        code, message, file = result.damage
        ctx.findings.add(code, message, file=file)
    result.findings.flush(ctx.findings)
    if result.skip is not None:
        state.damaged = True
        ctx.skip(result.skip)


def check_episodes(ctx: CheckContext) -> None:
    """`semantics.check_episodes` on the engine's workers."""
    _finish(ctx, ctx.table_state["episodes"], _scan_tables(ctx)["episodes"])


def check_steps(ctx: CheckContext) -> None:
    """`semantics.check_steps` on the engine's workers."""
    _finish(ctx, ctx.table_state["steps"], _scan_tables(ctx)["steps"])

