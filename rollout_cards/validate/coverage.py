"""Plan coverage and the drops manifest checked against the data.

Plan coverage: with a full grid (tasks x agents x trials) every (task_id, agent,
trial) is in the episodes table or covered by a drop on `episodes` whose action
says it is absent (omitted, filtered, sampled, unobserved): a drop with a
selector covers the missing keys the selector matches (evaluated over a table of
the missing keys), a drop without one covers as many as its `count`. With only
`expected_episodes`, the present episodes plus the drops' counts must reach it.

The grid is never built: the missing keys are counted (grid size minus the distinct
planned keys present), and enumerated — in chunks, pair by pair, never more than
`KEY_CHUNK` at a time — only as far as selectors must be evaluated over them or
findings listed. A 3 KB card.json declaring 270,000 trials took 56 s and 9.6 GB
when the grid was materialised.

Drops: the target exists, the selector is a boolean expression over the target
table, `affects` names rules of the card, a filtered drop's selector matches no
row still present, and a redacted or hashed column holds only markers or nulls
with a sha256 digest per value in `meta.digest.<column>` (docs/validation.md).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..errors import ExpressionError
from ..model.card import Drop, DropAction
from ..numpy_arrow import bool_array, int64_array
from .context import CheckContext, TableState
from .episode_scan import report_rows
from .layout import MANIFEST
from .redaction import check_copies_elsewhere, check_redaction
from .report import Findings, excerpt
from .semantics import iter_chunks

if TYPE_CHECKING:
    from ..expr import Expression

__all__ = ["COVERING", "MAX_PLAN_GRID", "REDACTED_MARKER", "check_drops", "check_plan", "drop_column"]

#: Drop actions on `episodes` that account for planned episodes absent from the table.
COVERING = frozenset({DropAction.OMITTED, DropAction.FILTERED, DropAction.SAMPLED, DropAction.UNOBSERVED})
#: What a redacted cell holds (or a keyed digest starting with HMAC_PREFIX, or null).
REDACTED_MARKER = "[redacted]"
HMAC_PREFIX = "hmac-sha256:"
#: Missing keys beyond this are not enumerated to evaluate drop selectors over them (skipped with a note).
MAX_PLAN_GRID = 20_000_000
#: Missing keys enumerated at a time.
KEY_CHUNK = 1 << 20

_KEYS = ("task_id", "agent", "trial")
_HEX64 = "^[0-9a-f]{64}$"


def _missing_chunks(keys: pa.Table, tasks: list[str], agents: list[str], trials: int):
    """The planned keys absent from `keys`, as tables of at most KEY_CHUNK rows, in task, agent,
    trial order (task and agent in the plan's order); memory is bounded by the chunk."""
    present: dict[tuple[str, str], np.ndarray] = {}
    grouped = keys.group_by(["task_id", "agent"]).aggregate([("trial", "distinct")])
    for task, agent, found in zip(*(grouped.column(c).to_pylist() for c in ("task_id", "agent", "trial_distinct")),
                                  strict=True):
        present[(task, agent)] = np.unique(np.array([t for t in found if t is not None], dtype=np.int64))
    pending: list[tuple[str, str, np.ndarray]] = []
    n = 0
    for task in tasks:
        for agent in agents:
            have = present.get((task, agent), np.zeros(0, dtype=np.int64))
            for start in range(0, trials, KEY_CHUNK):
                stop = min(trials, start + KEY_CHUNK)
                span = np.arange(start, stop, dtype=np.int64)
                inside = have[(have >= start) & (have < stop)]
                missing = np.setdiff1d(span, inside, assume_unique=True) if len(inside) else span
                if len(missing):
                    pending.append((task, agent, missing))
                    n += len(missing)
                if n >= KEY_CHUNK:
                    yield _key_table(pending)
                    pending, n = [], 0
    if pending:
        yield _key_table(pending)


def _key_table(pieces: list[tuple[str, str, np.ndarray]]) -> pa.Table:
    sizes = [len(t) for _, _, t in pieces]
    return pa.table({
        "task_id": pa.array(np.repeat(np.array([p[0] for p in pieces], dtype=object), sizes), pa.string()),
        "agent": pa.array(np.repeat(np.array([p[1] for p in pieces], dtype=object), sizes), pa.string()),
        "trial": int64_array(np.concatenate([t for _, _, t in pieces])),
    })


def _episode_keys(ctx: CheckContext, state: TableState, with_trial: bool) -> pa.Table:
    columns = ["task_id", "agent"] + (["trial"] if with_trial else [])
    pieces = [chunk for _, chunk in iter_chunks(ctx, state, columns)]
    table = pa.concat_tables(pieces) if pieces else pa.table({c: pa.array([], pa.string()) for c in columns})
    if not with_trial:
        table = table.append_column("trial", pa.array(np.zeros(table.num_rows, dtype=np.int64)))
    return table.select(list(_KEYS)).cast(pa.schema([("task_id", pa.string()), ("agent", pa.string()),
                                                     ("trial", pa.int64())]))


def _selector(drop: Drop) -> Expression | None:
    return _parsed(drop.selector) if drop.selector else None


@functools.lru_cache(maxsize=1 << 16)
def _parsed(selector: str) -> Expression | None:
    # Parsed once per text: the plan check evaluates selectors over every chunk of missing keys.
    from ..expr import parse_expression  # only cards with selectors pay for the parser

    try:
        return parse_expression(selector)
    except ExpressionError:
        return None  # reported by check_drops


def _covered(missing: pa.Table, drops: list[Drop]) -> np.ndarray:
    covered = np.zeros(missing.num_rows, dtype=bool)
    for drop in drops:
        expr = _selector(drop)
        if expr is None:
            continue
        try:
            expr.typecheck(missing.schema, expect="boolean")
        except ExpressionError:
            continue  # selects by columns the missing keys do not have: it cannot cover them
        covered |= np.asarray(ac.fill_null(expr.evaluate(missing), False).to_numpy(zero_copy_only=False), dtype=bool)
    return covered


def check_plan(ctx: CheckContext) -> None:
    """Every planned episode is present or covered by a drop; episodes outside the plan are flagged."""
    m = ctx.manifest
    if m is None:
        ctx.skip("card.json does not validate")
    if m.plan is None:
        ctx.skip("the card declares no plan")
    state = ctx.table_state.get("episodes")
    plan = m.plan
    f = ctx.findings
    drops = [d for d in m.drops if d.target == "episodes" and d.action in COVERING]
    budget = sum(d.count or 0 for d in drops if d.selector is None)
    grid = plan.grid_size()
    if grid is None:
        if state is None or not state.readable:
            ctx.skip("the episodes table could not be read")
        present = sum(state.part_rows)  # type: ignore[arg-type]
        expected = plan.expected_episodes or 0
        counted = sum(d.count or 0 for d in drops)
        if present + counted < expected:
            f.add("plan-episode-missing", f"the plan expects {expected:,} episodes; {present:,} are present and "
                  f"drops account for {counted:,}; add the missing episodes or a drops entry with their count",
                  file=MANIFEST, pointer="/plan/expected_episodes")
        elif present > expected:
            f.add("episode-unplanned", f"the table has {present:,} episodes, more than the {expected:,} the plan "
                  "expects; correct the plan", file=MANIFEST, pointer="/plan/expected_episodes")
        return
    with_trial = plan.trials is not None
    needed = ("task_id", "agent") + (("trial",) if with_trial else ())
    if state is None or not state.has(*needed):
        ctx.skip(f"the episodes table lacks readable {', '.join(needed)} columns")
    keys = _episode_keys(ctx, state, with_trial)
    tasks, agents, trials = plan.tasks or [], plan.agents or [], plan.trials or 1
    inside = _unplanned(f, state, keys, tasks, agents, trials)
    planned = keys.filter(bool_array(inside)).group_by(list(_KEYS)).aggregate([])
    missing = grid - planned.num_rows  # counted, never enumerated to be counted
    selected = [d for d in drops if _selector(d) is not None]
    if missing == 0 or (missing <= budget and not selected):
        return
    if selected and missing > MAX_PLAN_GRID:
        ctx.skip(f"{missing:,} planned episodes are absent, more than {MAX_PLAN_GRID:,}: the drops' selectors "
                 "are not evaluated over them")
    room = f.room("plan-episode-missing")
    shown: list[dict] = []
    uncovered = missing
    if selected:
        uncovered = 0
        for chunk in _missing_chunks(planned, tasks, agents, trials):
            left = chunk.filter(bool_array(~_covered(chunk, selected)))
            uncovered += left.num_rows
            if len(shown) < room:
                shown += left.slice(0, room - len(shown)).to_pylist()
    if uncovered <= budget:
        return
    if not shown:
        for chunk in _missing_chunks(planned, tasks, agents, trials):
            shown += chunk.slice(0, room - len(shown)).to_pylist()
            if len(shown) >= room:
                break
    note = f" (drops without a selector account for {budget:,} of {uncovered:,})" if budget else ""
    for row in shown:
        trial = f", trial {row['trial']}" if with_trial else ""
        f.add("plan-episode-missing", f"planned episode (task {excerpt(row['task_id'])}, agent "
              f"{excerpt(row['agent'])}{trial}) is not in the episodes table and no drop covers it{note}; add it "
              "(a failed run is an episode with its status) or declare it in drops", file=MANIFEST, pointer="/plan")
    f.omit("plan-episode-missing", uncovered - len(shown))


def _unplanned(f: Findings, state: TableState, keys: pa.Table, tasks: list[str], agents: list[str],
               trials: int) -> np.ndarray:
    """Report episodes outside the grid; returns the mask of those inside it."""
    inside = ac.and_(
        ac.and_(ac.is_in(keys.column("task_id"), value_set=pa.array(tasks, pa.string())),
                ac.is_in(keys.column("agent"), value_set=pa.array(agents, pa.string()))),
        ac.and_(ac.greater_equal(keys.column("trial"), 0), ac.less(keys.column("trial"), trials)),
    )
    outside = np.flatnonzero(~np.asarray(ac.fill_null(inside, False).to_numpy(), dtype=bool))
    shown = keys.take(int64_array(outside[: f.room("episode-unplanned")])).to_pylist()
    report_rows(f, "episode-unplanned", state, outside, "task_id",
                lambda i: f"episode (task {excerpt(shown[i]['task_id'])}, agent {excerpt(shown[i]['agent'])}, "
                f"trial {shown[i]['trial']}) is outside the plan's grid; correct the plan or the episode")
    inside_mask = np.ones(keys.num_rows, dtype=bool)
    inside_mask[outside] = False
    return inside_mask


def drop_column(drop: Drop) -> tuple[str | None, str | None] | None:
    """(table, column) a drop targets — (None, None) for artifacts and streams — or None when the
    target is not one of episodes, steps, <table>.<column>, artifacts, stream:<name>."""
    target = drop.target
    if target in ("episodes", "steps"):
        return target, None
    for table in ("episodes", "steps"):
        if target.startswith(table + ".") and len(target) > len(table) + 1:
            return table, target[len(table) + 1:]
    if target == "artifacts" or (target.startswith("stream:") and len(target) > len("stream:")):
        return None, None
    return None


def check_drops(ctx: CheckContext) -> None:
    """Each drop: known target, valid selector, known rules, consistent with the rows present."""
    m = ctx.manifest
    if m is None:
        ctx.skip("card.json does not validate")
    f = ctx.findings
    rule_ids = {r.id for r in m.rules}
    filtered: dict[str, list[tuple[int, Drop, Expression]]] = {}
    for k, drop in enumerate(m.drops):
        pointer = f"/drops/{k}"
        for i, rule_id in enumerate(drop.affects):
            if rule_id not in rule_ids:
                f.add("drop-rule-unknown", f"affects rule {excerpt(rule_id)}, which the card does not have; name "
                      "a rule listed in card.json's rules", file=MANIFEST, pointer=f"{pointer}/affects/{i}")
        target = drop_column(drop)
        if target is None:
            f.add("drop-target-unknown", f"target {excerpt(drop.target)} is not episodes, steps, "
                  "<table>.<column>, artifacts or stream:<name>", file=MANIFEST, pointer=f"{pointer}/target")
            continue
        table, column = target
        state = ctx.table_state.get(table) if table else None
        schema = state.schema if state is not None and state.readable else None
        expr = _drop_selector(f, drop, pointer, schema)
        if schema is None or (drop.selector and expr is None):
            continue
        if column is not None and drop.action in (DropAction.REDACTED, DropAction.HASHED):
            if column not in schema.names:
                f.add("drop-target-unknown", f"target column {excerpt(column)} is not in the {table} table; "
                      "name a column that exists", file=MANIFEST, pointer=f"{pointer}/target")
            else:
                check_redaction(ctx, state, drop, pointer, table, column, expr)
        if drop.action is DropAction.FILTERED and drop.count is not None and expr is not None:
            filtered.setdefault(table, []).append((k, drop, expr))
    for table, pending in filtered.items():
        _check_filtered(ctx, ctx.table_state[table], pending)
    check_copies_elsewhere(ctx)


def _check_filtered(ctx: CheckContext, state: TableState, pending: list[tuple[int, Drop, Expression]]) -> None:
    """Filtered drops' selectors match no row present: every selector of a table over one scan
    (20,000 drops took 58 s when each scanned the table on its own)."""
    columns = sorted(set().union(*(expr.names for _, _, expr in pending)))
    present = np.zeros(len(pending), dtype=np.int64)
    for _, chunk in iter_chunks(ctx, state, columns):
        for i, (_, _, expr) in enumerate(pending):
            present[i] += int(ac.sum(ac.cast(expr.evaluate(chunk), pa.int64())).as_py() or 0)
    for (k, drop, _), n in zip(pending, present.tolist(), strict=True):
        if n:
            ctx.findings.add("drop-filtered-inconsistent", f"declares {drop.count:,} filtered row(s), but its "
                             f"selector matches {n:,} row(s) still in the {state.name} table; remove them or fix "
                             "the selector", file=MANIFEST, pointer=f"/drops/{k}/selector")


def _drop_selector(f: Findings, drop: Drop, pointer: str, schema: pa.Schema | None) -> Expression | None:
    if not drop.selector:
        return None
    from ..expr import parse_expression

    try:
        # Parsed once per text (the plan check shares the cache); only a failure is parsed again,
        # with its key, for the message.
        expr = _parsed(drop.selector) or parse_expression(drop.selector,
                                                          key=f"drops[{pointer.rsplit('/', 1)[1]}].selector")
        if schema is not None:
            expr.typecheck(schema, expect="boolean")
        return expr
    except ExpressionError as exc:
        f.add("drop-selector-invalid", f"selector is not a boolean expression over the target table: "
              f"{exc.reason[:120]}" + (f" (column {exc.column})" if exc.column else ""),
              file=MANIFEST, pointer=f"{pointer}/selector")
        return None
