"""The checks that need every row of an episode: unique episode ids, each step's episode, n_steps
against the steps, and the per-episode scan (`episode_scan`) over steps sorted by (episode, seq).

They run over a *group* of episodes with all their steps: the local validator's group is the
whole table (or, for steps not stored in episode order, one sorting pass of it); the Ray
engine's groups are the partitions of the episode ids by hash (`validate.ray_tables`), each
checked by `check_group` on a worker. Episodes are known by *code*, their position in the
group's `EpisodeIndex`; `EpisodeFacts.rows` maps positions to rows of the episodes table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..numpy_arrow import bool_array, int64_array
from .context import TableState
from .episode_index import EpisodeIndex
from .episode_scan import EpisodeScan, report_rows
from .report import excerpt
from .row_checks import array, kind_mask, mask
from .row_findings import RowFindings

__all__ = ["SCAN_COLUMNS", "EpisodeCodes", "EpisodeFacts", "check_group", "report_duplicates", "report_missing",
           "report_step_counts", "scan_inputs", "scan_piece", "scan_sorted"]

#: The steps columns the per-episode checks read.
SCAN_COLUMNS = ("episode_id", "seq", "kind", "t", "call_id", "parent_seq", "depth")
#: Rows fed to the sorted scan at a time.
FEED_ROWS = 1 << 18


@dataclass
class EpisodeFacts:
    """The episodes of a group: their ids indexed, n_steps, and their rows in the episodes table."""

    index: EpisodeIndex
    """episode_id -> code (the position of its first occurrence in the group)."""
    n_steps: np.ndarray | None
    """n_steps by code (-1 where null), when the column is present."""
    rows: np.ndarray | None = None
    """Row of the episodes table of each code (None: the code is the row, the group is the table)."""

    @property
    def count(self) -> int:
        return len(self.index)

    def name_of(self, code: int) -> str:
        return self.index.name_of(code)

    def table_rows(self, codes: np.ndarray) -> np.ndarray:
        return codes if self.rows is None else self.rows[codes]


class EpisodeCodes:
    """Maps chunks of step episode ids to episode codes, looking up each distinct id once; the
    chunks of one row group share their dictionary, which is looked up once for all of them."""

    def __init__(self, index: EpisodeIndex):
        self.index = index
        self._dictionary: pa.Array | None = None
        self._table = np.zeros(0, dtype=np.int64)

    def __call__(self, ids: pa.Array) -> np.ndarray:
        """Code of each id's episode (-1 for null or unknown ids)."""
        encoded = ids if pa.types.is_dictionary(ids.type) else ac.dictionary_encode(ids)
        if self._dictionary is None or not encoded.dictionary.equals(self._dictionary):
            self._dictionary, self._table = encoded.dictionary, self.index.lookup(encoded.dictionary)
        indices = encoded.indices
        if not len(self._table):
            return np.full(len(ids), -1, dtype=np.int64)
        codes = self._table[ac.fill_null(indices, 0).to_numpy(zero_copy_only=False)]
        if indices.null_count:
            codes[~mask(ac.is_valid(indices))] = -1
        return codes


def report_duplicates(f: RowFindings, state: TableState, facts: EpisodeFacts) -> None:
    """episode-id-duplicate for every row whose id an earlier row of the group holds."""
    index = facts.index
    duplicates, first = facts.table_rows(index.duplicate_rows), facts.table_rows(index.first_rows)
    report_rows(f, "episode-id-duplicate", state, duplicates, "episode_id",
                lambda i: f"episode_id {excerpt(index.name_of(int(index.duplicate_rows[i])))} already appears in row "
                f"{state.locate(int(first[i]))[1]}; episode ids must be unique")


def report_missing(f: RowFindings, state: TableState, rows: np.ndarray, ids: pa.Array) -> None:
    """step-episode-missing for the steps at `rows` (global, ascending), whose episode ids are `ids`."""
    if len(rows):
        shown = ac.take(ids, int64_array(np.arange(min(len(rows), f.room("step-episode-missing"))))).to_pylist()
        report_rows(f, "step-episode-missing", state, rows, "episode_id",
                    lambda i: f"step belongs to episode {excerpt(shown[i])}, which is not in "
                    "the episodes table; add the episode or remove its steps")


def report_step_counts(f: RowFindings, state: TableState, facts: EpisodeFacts, counts: np.ndarray) -> None:
    """episode-step-count-mismatch where an episode's n_steps differs from its rows in steps
    (the first row of a repeated id only)."""
    n_steps = facts.n_steps
    assert n_steps is not None
    first = np.ones(len(n_steps), dtype=bool)
    first[facts.index.duplicate_rows] = False
    bad = np.flatnonzero((n_steps >= 0) & (n_steps != counts) & first)
    report_rows(f, "episode-step-count-mismatch", state, facts.table_rows(bad), "n_steps",
                lambda i: f"n_steps is {n_steps[bad[i]]} but the steps table has {counts[bad[i]]} rows of episode "
                f"{excerpt(facts.name_of(int(bad[i])))}; set n_steps to the number of its steps")


def scan_inputs(chunk: pa.Table, idx: np.ndarray | None) -> dict:
    """The arrays EpisodeScan.feed takes, for rows `idx` of `chunk` (all rows when None)."""
    def pick(name: str) -> pa.Array | None:
        if name not in chunk.column_names:
            return None
        arr = array(chunk, name)
        return arr if idx is None else ac.take(arr, int64_array(idx))

    def ints(name: str) -> np.ndarray | None:
        arr = pick(name)
        return None if arr is None else ac.fill_null(ac.cast(arr, pa.int64()), -1).to_numpy(zero_copy_only=False)

    kind = pick("kind")
    t = pick("t")
    call_id = pick("call_id")
    return {
        "is_call": kind_mask(kind, "tool_call"),
        "is_result": kind_mask(kind, "tool_result"),
        "t": ac.cast(t, pa.int64()) if t is not None else None,
        "call_id": call_id,
        "parent_seq": ints("parent_seq"),
        "depth": ints("depth"),
    }


def scan_piece(chunk: pa.Table, idx: np.ndarray, rows: np.ndarray, key: dict[str, pa.Array | np.ndarray]) -> pa.Table:
    """Rows `idx` of a chunk of steps as the sorted scan reads them: `key` (the episode: its code,
    or its id), seq, the global row, tool flags, and t, call_id, parent_seq, depth when present."""
    inputs = scan_inputs(chunk, idx)
    piece = {**key, "seq": ac.take(array(chunk, "seq"), int64_array(idx)), "row": int64_array(rows),
             "is_call": bool_array(inputs["is_call"]), "is_result": bool_array(inputs["is_result"])}
    if inputs["t"] is not None:
        piece["t"] = inputs["t"]
    if inputs["call_id"] is not None:
        piece["call_id"] = ac.cast(inputs["call_id"], pa.string())
    for name in ("parent_seq", "depth"):
        if inputs[name] is not None:
            piece[name] = int64_array(inputs[name])
    return pa.table(piece)


def _grouped(code: np.ndarray, seq: np.ndarray, row: np.ndarray) -> bool:
    """Whether the rows already come as each episode's rows together, in (seq, row) order: then
    the scan needs no sort (the order of the episodes does not change what it finds)."""
    if len(code) < 2:
        return True
    same = code[1:] == code[:-1]
    if not (row[1:] > row[:-1]).all() or (seq[1:][same] < seq[:-1][same]).any():
        return False
    starts = code[np.r_[True, ~same]]
    return len(np.unique(starts)) == len(starts)


def scan_sorted(f: RowFindings, state: TableState, facts: EpisodeFacts, table: pa.Table) -> None:
    """The per-episode checks over pieces (`scan_piece`, keyed by "code", no null seq), sorted here
    by (episode, seq, row) unless already grouped that way."""
    columns = [table.column(c).to_numpy() for c in ("code", "seq", "row")]
    if not _grouped(*columns):
        table = table.sort_by([("code", "ascending"), ("seq", "ascending"), ("row", "ascending")])
    scan = EpisodeScan(f, state, facts.name_of, order_known=True, n_episodes=0)
    names = table.column_names
    for start in range(0, table.num_rows, FEED_ROWS):
        sl = table.slice(start, FEED_ROWS).combine_chunks()
        scan.feed(
            sl.column("code").to_numpy(),
            sl.column("seq").to_numpy(),
            sl.column("row").to_numpy(),
            sl.column("is_call").to_numpy(zero_copy_only=False),
            sl.column("is_result").to_numpy(zero_copy_only=False),
            array(sl, "t") if "t" in names else None,
            array(sl, "call_id") if "call_id" in names else None,
            *(sl.column(c).to_numpy() if c in names else None for c in ("parent_seq", "depth")),
        )


def check_group(episodes_findings: RowFindings, steps_findings: RowFindings, episodes_state: TableState,
                steps_state: TableState | None, episodes: pa.Table, steps: pa.Table | None, *,
                per_episode: bool, counts: bool = True) -> None:
    """Every check of one group: `episodes` (episode_id, row, and n_steps when present) in table
    order; `steps` (pieces keyed by "episode_id", null seq kept; None: no steps) when
    `steps_state` is given (the steps are checked against the episodes); `counts`: n_steps
    is checked (every step of the group is in `steps`)."""
    has_counts = counts and "n_steps" in episodes.column_names
    facts = EpisodeFacts(EpisodeIndex(array(episodes, "episode_id")),
                         ac.fill_null(array(episodes, "n_steps"), -1).to_numpy(zero_copy_only=False)
                         if has_counts else None,
                         episodes.column("row").to_numpy())
    report_duplicates(episodes_findings, episodes_state, facts)
    if steps_state is None:
        return
    found = np.zeros(facts.count, dtype=np.int64)
    if steps is not None and steps.num_rows:
        steps = steps.combine_chunks()
        ids = array(steps, "episode_id")
        codes = EpisodeCodes(facts.index)(ids)
        known = codes >= 0
        rows = steps.column("row").to_numpy()
        orphans = np.flatnonzero(~known & mask(ac.is_valid(ids)))
        report_missing(steps_findings, steps_state, rows[orphans], ac.take(ids, int64_array(orphans)))
        if per_episode:
            usable = known & mask(ac.is_valid(array(steps, "seq")))
            table = steps.drop_columns(["episode_id"])
            if not usable.all():
                table = ac.take(table, int64_array(np.flatnonzero(usable)))
            scan_sorted(steps_findings, steps_state, facts, table.append_column("code", int64_array(codes[usable])))
        found = np.bincount(codes[known], minlength=facts.count)
    if has_counts:
        report_step_counts(steps_findings, episodes_state, facts, found)
