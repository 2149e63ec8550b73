"""The table checks that look at one row at a time: required values, enums, finite numbers,
non-negative counts, episode times, a step's parent and depth.

Each function checks one decoded chunk of a table whose first row is `offset` (counted over
all parts) and reports into a findings collector; they need nothing but the chunk, so the
local validator runs them chunk by chunk and the Ray engine block by block on its workers
(`validate.ray_tables`), with the same findings.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..numpy_arrow import int64_array
from ..tables import EPISODE_COLUMNS, STEP_COLUMNS, StepKind, TerminalStatus
from .context import TableState
from .episode_scan import report_rows
from .report import excerpt
from .row_findings import RowFindings

__all__ = ["array", "checked_columns", "episode_row_checks", "kind_mask", "mask", "step_row_checks"]

_COLUMNS = {"episodes": {c.name: c for c in EPISODE_COLUMNS}, "steps": {c.name: c for c in STEP_COLUMNS}}
_ALLOWED = {
    "status": pa.array([s.value for s in TerminalStatus]),
    "kind": pa.array([k.value for k in StepKind]),
}


def array(chunk: pa.Table, name: str) -> pa.Array:
    """Column `name` of `chunk` as one array."""
    column = chunk.column(name)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def mask(values: pa.Array) -> np.ndarray:
    """A boolean array as numpy, null as False."""
    return np.asarray(ac.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def kind_mask(kind: pa.Array, value: str) -> np.ndarray:
    """Rows whose enum column (plain or dictionary-encoded) equals `value`."""
    if pa.types.is_dictionary(kind.type):
        return mask(ac.take(ac.equal(kind.dictionary, value), kind.indices))
    return mask(ac.equal(kind, value))


def checked_columns(state: TableState, table: str, wanted: tuple[str, ...]) -> list[str]:
    """The columns a scan of `table` reads: `wanted` (those present), then every float column
    and every standard column with a minimum."""
    schema = state.schema
    assert schema is not None
    names = [c for c in wanted if state.has(c)]
    standard = _COLUMNS[table]
    checked = [fld.name for fld in schema if fld.name not in state.bad_columns and (
        pa.types.is_floating(fld.type) or (fld.name in standard and standard[fld.name].minimum is not None))]
    return names + [c for c in checked if c not in names]


def _row_checks(f: RowFindings, state: TableState, table: str, offset: int, chunk: pa.Table) -> None:
    """Required values, enums, finite numbers, non-negative counts."""
    standard = _COLUMNS[table]
    for name in chunk.column_names:
        arr = array(chunk, name)
        col = standard.get(name)
        if col is not None and not col.nullable and arr.null_count:
            rows = offset + np.flatnonzero(mask(ac.is_null(arr)))
            report_rows(f, "value-null", state, rows, name,
                        lambda i, name=name: f"{name} is null; every {table} row needs one")
        if name in _ALLOWED:
            _enum_rows(f, state, offset, name, arr)
        if col is not None and col.minimum is not None:
            low = np.flatnonzero(mask(ac.less(arr, col.minimum)))
            if len(low):
                values = ac.take(arr, int64_array(low[: f.room("value-negative")])).to_pylist()
                report_rows(f, "value-negative", state, offset + low, name,
                            lambda i, name=name, values=values: f"{name} is {values[i]}; it counts something and "
                            "is never negative: fix the value, or use null when it is unknown")
        if pa.types.is_floating(arr.type):
            bad = np.flatnonzero(mask(ac.invert(ac.is_finite(arr))))
            if len(bad):
                values = ac.take(arr, int64_array(bad[: f.room("value-not-finite")])).to_pylist()
                report_rows(f, "value-not-finite", state, offset + bad, name,
                            lambda i, name=name, values=values: f"{name} is {values[i]}; numbers must be "
                            "finite: use null for a missing value and record why in drops")


def _enum_rows(f: RowFindings, state: TableState, offset: int, name: str, arr: pa.Array) -> None:
    allowed = _ALLOWED[name]
    if pa.types.is_dictionary(arr.type):
        ok_dict = ac.is_in(arr.dictionary, value_set=allowed)
        if ok_dict.false_count == 0:
            return
        ok = ac.take(ok_dict, arr.indices)
    else:
        ok = ac.is_in(arr, value_set=allowed)
    bad = np.flatnonzero(mask(ac.and_(ac.invert(ok), ac.is_valid(arr))))
    if len(bad):
        values = ac.take(arr, int64_array(bad[: f.room("enum-invalid")])).to_pylist()
        report_rows(f, "enum-invalid", state, offset + bad, name,
                    lambda i: f"{name} {excerpt(values[i])} is not one of {', '.join(allowed.to_pylist())}")


def _nesting_checks(f: RowFindings, state: TableState, offset: int, chunk: pa.Table) -> None:
    """parent_seq names an earlier step (0 <= parent_seq < seq); depth is >= 0, and >= 1 with a parent."""
    names = chunk.column_names
    if "parent_seq" not in names and "depth" not in names:
        return
    n = chunk.num_rows
    seq = array(chunk, "seq") if "seq" in names else pa.nulls(n, pa.int64())
    parent = array(chunk, "parent_seq") if "parent_seq" in names else pa.nulls(n, pa.int64())
    depth = array(chunk, "depth") if "depth" in names else pa.nulls(n, pa.int64())
    if parent.null_count == n and depth.null_count == n:
        return
    bad_parent = ac.or_(ac.less(parent, 0), ac.greater_equal(parent, seq))
    bad_depth = ac.or_(ac.less(depth, 0), ac.and_(ac.is_valid(parent), ac.less(depth, 1)))
    rows = np.flatnonzero(mask(ac.or_kleene(bad_parent, bad_depth)))
    if len(rows):
        shown = rows[: f.room("step-parent-invalid")]
        seqs, parents, depths = (ac.take(a, int64_array(shown)).to_pylist() for a in (seq, parent, depth))
        report_rows(f, "step-parent-invalid", state, offset + rows, "parent_seq",
                    lambda i: f"step {seqs[i]} has parent_seq {parents[i]} and depth {depths[i]}; parent_seq "
                    "must be the seq of an earlier step of the episode and a sub-agent's depth at least 1")


def episode_row_checks(f: RowFindings, state: TableState, offset: int, chunk: pa.Table) -> None:
    """The row-local checks of a chunk of the episodes table (ended_at >= started_at included)."""
    _row_checks(f, state, "episodes", offset, chunk)
    if "started_at" in chunk.column_names and "ended_at" in chunk.column_names:
        reversed_ = np.flatnonzero(mask(ac.less(array(chunk, "ended_at"), array(chunk, "started_at"))))
        report_rows(f, "episode-time-reversed", state, offset + reversed_, "ended_at",
                    lambda i: "ended_at is earlier than started_at; fix the episode's timestamps")


def step_row_checks(f: RowFindings, state: TableState, offset: int, chunk: pa.Table) -> None:
    """The row-local checks of a chunk of the steps table (parent_seq and depth included)."""
    _row_checks(f, state, "steps", offset, chunk)
    _nesting_checks(f, state, offset, chunk)
