"""Per-episode checks over the steps stream: `seq` contiguous from 0, step times non-decreasing,
every tool_result answering an earlier tool_call of its episode, a nested step's depth one
more than the depth of the step its `parent_seq` names.

The scan consumes rows in (episode, seq) order, chunk by chunk, carrying only the
state of the episode still open at a chunk's end (its code, last seq, last time, the
call ids it issued and, when the card nests agents, its steps' depths), so memory is
bounded by the chunk and the longest episode, not the table.

Rows of a card usually come grouped by episode and in seq order (that is how the
writer stores them). `EpisodeScan(order_known=False)` scans them in file order and
stops at the first sign that they are not (an episode starting twice, or a seq
that is not the previous one plus one); `semantics` then rescans in passes over
episode partitions, each sorted, with `order_known=True`, which reports exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..numpy_arrow import int64_array
from .context import TableState
from .report import Findings, excerpt
from .row_findings import RowFindings

__all__ = ["EpisodeScan", "report_rows"]


def report_rows(
    f: Findings | RowFindings,
    code: str,
    state: TableState,
    rows: np.ndarray,
    column: str | None,
    describe: Callable[[int], str],
) -> None:
    """Findings for the table rows `rows` (global indexes): the first ones listed, the rest counted.

    `describe(i)` gives the message of the i-th row of `rows`. A `RowFindings` collector lists
    the first ones in table order, whatever the order of `rows`.
    """
    if isinstance(f, RowFindings):
        f.add_rows(code, state, rows, column, describe)
        return
    n = len(rows)
    k = min(n, f.room(code))
    for i in range(k):
        file, row = state.locate(int(rows[i]))
        f.add(code, describe(i), file=file, row=row, column=column)
    f.omit(code, n - k)


def _shifted(values: np.ndarray, first: int) -> np.ndarray:
    out = np.empty_like(values)
    out[0] = first
    out[1:] = values[:-1]
    return out


def _unique_dictionary(values: pa.Array) -> pa.DictionaryArray:
    """`values` dictionary-encoded with each value once in the dictionary."""
    if pa.types.is_dictionary(values.type):
        if len(ac.unique(values.dictionary)) == len(values.dictionary):
            return values
        values = ac.cast(values, values.type.value_type)
    return ac.dictionary_encode(values)


def _names(dictionary: pa.Array, indices: np.ndarray) -> list[str | None]:
    """The dictionary values at `indices` (None for -1)."""
    if not len(dictionary):
        return [None] * len(indices)
    values = ac.take(dictionary, int64_array(np.maximum(indices, 0))).to_pylist()
    return [v if i >= 0 else None for v, i in zip(values, indices, strict=True)]


class EpisodeScan:
    """Streaming per-episode checks; feed chunks of rows in order with `feed`."""

    def __init__(self, findings: Findings, state: TableState, name_of: Callable[[int], str], *,
                 order_known: bool, n_episodes: int):
        self.f = findings
        self.state = state
        self.name_of = name_of
        self.order_known = order_known
        #: False once rows were seen out of (episode, seq) order (only when order is not known).
        self.in_order = True
        self._started = np.zeros(n_episodes, dtype=bool)
        self._n_started = 0
        self._code = -1
        self._seq = -1
        self._t: int | None = None
        self._calls: set[str] = set()
        # seq and depth (-1 for null) of the open episode's steps so far, for parents in earlier chunks
        self._nest_seq = np.zeros(0, dtype=np.int64)
        self._nest_depth = np.zeros(0, dtype=np.int64)

    @property
    def active(self) -> bool:
        """Whether the scan still checks (it stops once file order proves unusable)."""
        return self.in_order

    def feed(
        self,
        code: np.ndarray,
        seq: np.ndarray,
        rows: np.ndarray,
        is_call: np.ndarray,
        is_result: np.ndarray,
        t: pa.Array | None,
        call_id: pa.Array | None,
        parent_seq: np.ndarray | None = None,
        depth: np.ndarray | None = None,
    ) -> None:
        """Check the next rows: episode codes, seq values, global row indexes, tool-call and
        tool-result masks, times (int64 microseconds, nullable), call ids, and parent_seq and
        depth (int64, -1 for null; None when the card has no such column)."""
        if not self.active or len(code) == 0:
            return
        start = code != _shifted(code, self._code)
        if not self.order_known:
            starts = code[start]
            if self._started[starts].any():
                self.in_order = False
                return
            self._started[starts] = True
            self._n_started += len(starts)
            if np.count_nonzero(self._started) != self._n_started:  # an episode started twice in this chunk
                self.in_order = False
                return
        expected = np.where(start, 0, _shifted(seq, self._seq) + 1)
        bad = np.flatnonzero(seq != expected)
        if len(bad):
            if not self.order_known:
                self.in_order = False
                return
            self._report_seq(code, seq, rows, start, bad)
        block = np.cumsum(start)  # 0 for rows continuing the episode open at the previous chunk's end
        self._check_times(block, rows, code, t)
        self._check_tools(block, rows, code, is_call, is_result, call_id)
        self._check_depths(block, start, rows, code, seq, parent_seq, depth)
        self._code, self._seq = int(code[-1]), int(seq[-1])

    def _check_depths(self, block: np.ndarray, start: np.ndarray, rows: np.ndarray, code: np.ndarray,
                      seq: np.ndarray, parent: np.ndarray | None, depth: np.ndarray | None) -> None:
        """A step with a parent_seq has depth = the parent step's depth + 1 (a null parent depth
        counts as 0, the top level). Rows that fail the row-local parent check (parent_seq not
        below seq, depth below 1) or whose episode's seq has gaps (reported as such) are not judged here."""
        if parent is None or depth is None:
            self._nest_seq = self._nest_depth = np.zeros(0, dtype=np.int64)
            return
        # Positions in "extended" coordinates: the open episode's earlier steps, then this chunk.
        carried = len(self._nest_seq) if block[0] == 0 else 0
        ext_seq = np.concatenate([self._nest_seq[:carried], seq])
        ext_depth = np.concatenate([self._nest_depth[:carried], depth])
        starts = np.flatnonzero(start)
        base = np.concatenate([[0], carried + starts])[block]  # where each row's episode begins
        cand = np.flatnonzero((parent >= 0) & (depth >= 1) & (parent < seq))  # else step-parent-invalid
        if len(cand):
            own = carried + cand
            pos = base[cand] + parent[cand]
            found = (pos < own) & (ext_seq[np.minimum(pos, own)] == parent[cand])
            cand, pos = cand[found], pos[found]
            expected = np.maximum(ext_depth[pos], 0) + 1
            bad = np.flatnonzero(depth[cand] != expected)
            if len(bad):
                at, want = cand[bad], expected[bad]
                report_rows(
                    self.f, "step-depth-mismatch", self.state, rows[at], "depth",
                    lambda i: f"step {seq[at[i]]} of episode {excerpt(self.name_of(int(code[at[i]])))} has depth "
                    f"{depth[at[i]]}, but its parent step {parent[at[i]]} has depth {want[i] - 1}: a sub-agent's "
                    f"step is one level below the step that launched it (depth {want[i]})",
                )
        last = block[-1]
        first = carried + (starts[-1] if last != 0 else -carried)  # the last episode's first position
        self._nest_seq, self._nest_depth = ext_seq[first:], ext_depth[first:]

    def _report_seq(self, code: np.ndarray, seq: np.ndarray, rows: np.ndarray, start: np.ndarray,
                    bad: np.ndarray) -> None:
        prev = _shifted(seq, self._seq)

        def describe(i: int) -> str:
            j = bad[i]
            episode = excerpt(self.name_of(int(code[j])))
            if start[j]:
                return (f"the first step of episode {episode} has seq {seq[j]}; seq must start at 0 and count "
                        "1, 2, ... without gaps or repeats")
            what = "repeats" if seq[j] == prev[j] else "skips ahead of"
            return (f"seq {seq[j]} {what} seq {prev[j]} in episode {episode}; seq must count 0, 1, 2, ... "
                    "without gaps or repeats")

        report_rows(self.f, "step-seq-not-contiguous", self.state, rows[bad], "seq", describe)

    def _check_times(self, block: np.ndarray, rows: np.ndarray, code: np.ndarray, t: pa.Array | None) -> None:
        if t is None:
            return
        last_block = block[-1]
        # idx: the rows that have a time (None: all of them)
        idx = np.flatnonzero(ac.is_valid(t).to_numpy(zero_copy_only=False)) if t.null_count else None
        if idx is None or len(idx):
            times = ac.fill_null(t, 0).to_numpy(zero_copy_only=False)
            times, blocks = (times, block) if idx is None else (times[idx], block[idx])
            at = rows if idx is None else rows[idx]
            carried = self._t is not None and blocks[0] == 0
            prev_t = _shifted(times, self._t if carried else 0)
            same = _shifted(blocks, -1) == blocks
            same[0] = carried
            bad = np.flatnonzero(same & (times < prev_t))
            if len(bad):
                codes = code if idx is None else code[idx]
                report_rows(
                    self.f, "step-time-decreasing", self.state, at[bad], "t",
                    lambda i: f"step time is earlier than the step before it in episode "
                    f"{excerpt(self.name_of(int(codes[bad[i]])))}; times must not decrease with seq",
                )
            in_last = blocks == last_block
            if in_last.any():
                self._t = int(times[in_last][-1])
                return
        if last_block != 0:
            self._t = None

    def _check_tools(self, block: np.ndarray, rows: np.ndarray, code: np.ndarray, is_call: np.ndarray,
                     is_result: np.ndarray, call_id: pa.Array | None) -> None:
        res_idx = np.flatnonzero(is_result)
        if call_id is None:
            if len(res_idx):
                self._report_orphans(rows, code, res_idx, lambda i: None)
            self._calls = set()
            return
        # Call ids as integers: their index in the chunk's dictionary (-1 for null).
        encoded = _unique_dictionary(call_id)
        cid = ac.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        call_idx = np.flatnonzero(is_call & (cid >= 0))
        if len(call_idx):
            self._duplicate_calls(block, rows, code, call_idx, cid, encoded.dictionary)
        if len(res_idx):
            self._orphans(block, rows, code, res_idx, call_idx, cid, encoded.dictionary)
        last_block = block[-1]
        in_last = call_idx[block[call_idx] == last_block]
        issued = set(_names(encoded.dictionary, cid[in_last]))
        self._calls = (self._calls | issued) if last_block == 0 else issued

    def _duplicate_calls(self, block: np.ndarray, rows: np.ndarray, code: np.ndarray, call_idx: np.ndarray,
                         cid: np.ndarray, dictionary: pa.Array) -> None:
        """tool_calls whose stored call_id an earlier tool_call of the same episode already used:
        a result could not say which call it answers (the writer and importers store `id#2`)."""
        width = len(dictionary) + 1
        keys = code[call_idx] * width + cid[call_idx] + 1
        order = np.argsort(keys, kind="stable")  # stable: the first use of a key stays first
        repeat = np.zeros(len(keys), dtype=bool)
        repeat[order[1:]] = keys[order[1:]] == keys[order[:-1]]
        carried = np.flatnonzero((block[call_idx] == 0) & ~repeat)  # continuing the episode open before
        if len(carried) and self._calls:
            values = _names(dictionary, cid[call_idx[carried]])
            repeat[carried[[i for i, v in enumerate(values) if v in self._calls]]] = True
        dup = call_idx[repeat]
        if not len(dup):
            return
        # messages are made for the first rows in table order, which need not be the first of `dup`
        report_rows(
            self.f, "tool-call-id-duplicate", self.state, rows[dup], "call_id",
            lambda i: f"tool_call reuses call_id {excerpt(_names(dictionary, cid[dup[i:i + 1]])[0])}, already used by an earlier tool_call of episode "
            f"{excerpt(self.name_of(int(code[dup[i]])))}; store unique ids (keep the source id in meta, e.g. as "
            "the writer does: id, id#2, id#3)",
        )

    def _orphans(self, block: np.ndarray, rows: np.ndarray, code: np.ndarray, res_idx: np.ndarray,
                 call_idx: np.ndarray, cid: np.ndarray, dictionary: pa.Array) -> None:
        # Keys (episode code, call id index): matching results to first calls is a sort and a
        # binary search, not a string join. A null id gets the key c*(width+1), never a call's.
        width = len(dictionary) + 1
        call_keys = code[call_idx] * width + cid[call_idx] + 1
        res_keys = code[res_idx] * width + cid[res_idx] + 1
        unique, first = np.unique(call_keys, return_index=True)  # first call position per key
        if len(unique):
            at = np.minimum(np.searchsorted(unique, res_keys), len(unique) - 1)
            answered = (unique[at] == res_keys) & (call_idx[first[at]] < res_idx) & (cid[res_idx] >= 0)
        else:
            answered = np.zeros(len(res_idx), dtype=bool)
        orphan = res_idx[~answered]
        # A result may answer a call made in the part of its episode fed in an earlier chunk.
        carried = np.flatnonzero(block[orphan] == 0)
        if len(carried) and self._calls:
            values = _names(dictionary, cid[orphan[carried]])
            orphan = np.delete(orphan, carried[[i for i, v in enumerate(values) if v in self._calls]])
        self._report_orphans(rows, code, orphan, lambda i: _names(dictionary, cid[orphan[i:i + 1]])[0])

    def _report_orphans(self, rows: np.ndarray, code: np.ndarray, orphan: np.ndarray,
                        id_of: Callable[[int], str | None]) -> None:
        if len(orphan):
            report_rows(
                self.f, "tool-result-orphan", self.state, rows[orphan], "call_id",
                lambda i: f"tool_result refers to call_id {excerpt(v) if (v := id_of(i)) is not None else 'null'}, which "
                f"no earlier tool_call of episode {excerpt(self.name_of(int(code[orphan[i]])))} issued; fix the "
                "call_id or record the call",
            )
