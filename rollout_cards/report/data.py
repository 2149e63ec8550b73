"""What the HTML report shows, gathered from the library's own report objects.

`gather(...)` runs the same `rules.rescore` as `rcard rescore` (so every number in the
page is the one the text output prints), the `info` summary, and the validator (for the
integrity panel), and adds what only a page needs: terminal states per group, attempt
curves for reducing rules, and a deterministic sample of episodes with their steps.
Everything returned is plain data; `page.py` turns it into HTML.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._threads import Background
from ..errors import RuleError
from ..io.reader import Card, open_card
from ..model.rule import Reduce, ReduceWith, Rule
from ..numpy_arrow import dictionary_codes
from ..rules.engine import apply_rule
from ..rules.loader import declared_rules, load_rule
from ..rules.rescore import RuleSource, rescore
from ..rules.results import RescoreReport
from ..summary import summarize
from ..tables import TerminalStatus

__all__ = ["EpisodeSample", "ReportData", "SampleLimits", "gather"]

_STATUSES = [s.value for s in TerminalStatus]
#: Episode columns shown in the browser besides score./cond./task. columns.
_EPISODE_COLUMNS = (
    "episode_id", "task_id", "agent", "trial", "run_id", "status", "n_steps",
    "input_tokens", "output_tokens", "cost_usd", "error_type", "error_message",
)
_STEP_COLUMNS = (
    "seq", "kind", "role", "agent", "name", "call_id", "content", "args", "is_error",
    "input_tokens", "output_tokens", "cost_usd", "parent_seq", "depth",
)


@dataclass(frozen=True)
class SampleLimits:
    """How much of the record the episode browser embeds (the aggregates are always exact)."""

    episodes: int = 120
    steps_per_episode: int = 200
    chars_per_field: int = 2000
    #: Hard cap of embedded text over all sampled steps; past it, later episodes show no steps.
    total_chars: int = 8_000_000


@dataclass
class EpisodeSample:
    """The episodes the browser offers, and the rule that chose them."""

    total: int
    rule: str
    columns: list[str]
    rows: list[dict[str, Any]]
    steps: dict[str, list[dict[str, Any]]]
    truncated_steps: dict[str, int]
    notes: list[str] = field(default_factory=list)

    @property
    def sampled(self) -> bool:
        """Whether the browser holds fewer episodes than the card."""
        return len(self.rows) < self.total


@dataclass
class ReportData:
    """Everything the page renders."""

    rescore: RescoreReport
    summary: dict[str, Any]
    validation: dict[str, Any] | None
    status_by_group: dict[tuple[str, ...], dict[str, dict[str, int]]]
    attempts: list[dict[str, Any]]
    episodes: EpisodeSample
    signature_checked: bool = False


def gather(
    card: str | os.PathLike[str],
    rules: Iterable[RuleSource] = (),
    *,
    seed: int | None = None,
    limits: SampleLimits | None = None,
    check: bool = True,
    public_key: str | os.PathLike[str] | None = None,
    signature: str | os.PathLike[str] | None = None,
) -> ReportData:
    """Collect the report of `card` under its declared rules and the alternative `rules`.

    `check` runs the validator (without replay: the rescore already replays the rules)
    for the integrity panel; `public_key` also checks the detached signature."""
    limits = limits or SampleLimits()
    opened = open_card(card)
    # The validator reads its own copy of the card: it runs beside the rescore and the
    # sample, whose scans spend most of their time in Arrow with the GIL released.
    validation = Background(_validation, card, public_key, signature, name="rcard-report-validate") if check else None
    report = rescore(opened, list(rules), seed=seed)  # a bad rule raises here, without waiting
    data = ReportData(
        rescore=report,
        summary=summarize(opened),
        validation=None,
        status_by_group=_status_by_group(opened, report),
        attempts=_attempt_curves(opened, report, list(rules), seed),
        episodes=_sample_episodes(opened, limits, seed or 0),
        signature_checked=public_key is not None,
    )
    data.validation = validation.result() if validation is not None else None
    return data


def _validation(card: str | os.PathLike[str], public_key: str | os.PathLike[str] | None,
                signature: str | os.PathLike[str] | None) -> dict[str, Any]:
    from ..validate import validate

    return validate(card, replay=False, max_findings=20, public_key=public_key, signature=signature).to_json_dict()


def _status_by_group(card: Card, report: RescoreReport) -> dict[tuple[str, ...], dict[str, dict[str, int]]]:
    """Terminal-state counts per group, for every distinct group_by of the report's rules."""
    out: dict[tuple[str, ...], dict[str, dict[str, int]]] = {}
    for run in report.runs:
        keys = tuple(run.group_by)
        if keys in out:
            continue
        table = card.episodes(columns=[*keys, "status"])
        columns = {}
        for name in [*keys, "status"]:
            col = table.column(name)
            if pa.types.is_dictionary(col.type):
                col = col.cast(pa.string())
            columns[name] = pc.cast(col, pa.string()).fill_null("(null)")
        flat = pa.table(columns)
        counts = flat.group_by([*keys, "status"]).aggregate([([], "count_all")]).to_pylist()
        groups: dict[str, dict[str, int]] = {}
        for row in counts:
            label = ", ".join(f"{k}={row[k]}" for k in keys) or "(all)"
            groups.setdefault(label, {s: 0 for s in _STATUSES})[row["status"]] = row["count_all"]
        out[keys] = dict(sorted(groups.items()))
    return out


def _attempt_rules(card: Card, alternatives: Sequence[RuleSource]) -> list[Rule]:
    rules = [r for r, _ in declared_rules(card)]
    rules += [s if isinstance(s, Rule) else load_rule(s) for s in alternatives]
    return [
        r for r in rules
        if r.reduce is not None and r.reduce.with_ in (ReduceWith.PASS_AT_K, ReduceWith.PASS_HAT_K)
    ]


def _attempt_curves(
    card: Card, report: RescoreReport, alternatives: Sequence[RuleSource], seed: int | None
) -> list[dict[str, Any]]:
    """pass@k / pass^k for k = 1..K of every rule that reduces with them (K = the rule's k,
    at least the most attempts any key has, at most 10), each k run by the engine."""
    curves = []
    for rule in _attempt_rules(card, alternatives):
        assert rule.reduce is not None  # noqa: S101 - filtered above
        top = max(rule.reduce.k or 1, _max_attempts(card, rule.reduce.by))
        top = min(top, 10)
        by_group: dict[str, list[tuple[int, float | None]]] = {}
        stopped = None
        for k in range(1, top + 1):
            reduce = Reduce.model_validate({"by": list(rule.reduce.by), "with": rule.reduce.with_.value, "k": k})
            variant = rule.model_copy(update={"rule": f"{rule.rule}.k{k}", "reduce": reduce, "reported": []})
            try:
                run = apply_rule(card, variant, seed=seed)
            except RuleError as exc:
                # pass@k needs k attempts of every key: the curve ends where the data does.
                stopped = f"k = {k} and beyond not shown: {exc}"
                break
            for head in run.headlines().values():
                by_group.setdefault(head.label, []).append((k, head.value))
        curves.append({
            "rule": rule.rule,
            "estimator": rule.reduce.with_.value,
            "by": list(rule.reduce.by),
            "k_max": max((len(v) for v in by_group.values()), default=0),
            "curves": by_group,
            "stopped": stopped,
        })
    return curves


def _max_attempts(card: Card, by: Sequence[str]) -> int:
    table = card.episodes(columns=list(by))
    if table.num_rows == 0:
        return 1
    counts = table.group_by(list(by)).aggregate([([], "count_all")])
    return int(pc.max(counts.column("count_all")).as_py() or 1)


def _priorities(ids: pa.Array, seed: int) -> np.ndarray:
    """A seeded random priority per episode: numpy's PCG64 permutation laid over the episode
    ids in sorted order, so it depends only on the set of ids and the seed (not on storage order)."""
    order = pc.sort_indices(ids).to_numpy()
    priority = np.empty(len(order), dtype=np.int64)
    priority[order] = np.random.default_rng(seed).permutation(len(order))
    return priority


def _sample_episodes(card: Card, limits: SampleLimits, seed: int) -> EpisodeSample:
    """Up to `limits.episodes` episodes: first one of every (agent, status) combination,
    then the rest in a seeded random order — deterministic, unbiased by storage order."""
    schema = card.schema("episodes")
    names = [c for c in _EPISODE_COLUMNS if c in schema.names]
    names += [c for c in schema.names if c.split(".", 1)[0] in ("score", "cond", "task")]
    ids = card.episodes(columns=["episode_id", "agent", "status"])
    total = ids.num_rows
    status = ids.column("status")
    if pa.types.is_dictionary(status.type):
        status = status.cast(pa.string())
    episode_ids = ids.column("episode_id").combine_chunks()
    priority = _priorities(episode_ids, seed)
    cells = pa.table({"agent": ids.column("agent"), "status": status, "priority": priority})
    firsts = cells.group_by(["agent", "status"]).aggregate([("priority", "min")]).column("priority_min")
    # Priorities are a permutation of 0..n-1: the episode with priority p is by_priority[p].
    by_priority = np.argsort(priority)
    wanted = [*np.sort(firsts.to_numpy()).tolist(), *range(min(total, limits.episodes + len(firsts)))]
    chosen_pos = list(dict.fromkeys(wanted))[: max(limits.episodes, 0)]
    chosen = episode_ids.take(pa.array(by_priority[chosen_pos] if chosen_pos else [], pa.int64())).to_pylist()
    rows = _rows_of(card.iter_episodes(columns=names, encoded=True), chosen).to_pylist()
    order = {eid: i for i, eid in enumerate(chosen)}
    rows.sort(key=lambda r: order[r["episode_id"]])
    rows = [{k: _cell(v, limits.chars_per_field) for k, v in r.items()} for r in rows]
    steps, truncated, notes = _sample_steps(card, chosen, limits)
    rule = (
        f"all {total} episodes" if len(rows) >= total else
        f"{len(rows)} of {total} episodes: one of every (agent, status) combination first, then the "
        f"rest in a seeded random order (numpy PCG64 permutation over the sorted episode ids, "
        f"seed {seed}); aggregates above use every episode"
    )
    return EpisodeSample(total=total, rule=rule, columns=names, rows=rows, steps=steps,
                         truncated_steps=truncated, notes=notes)


def _rows_of(batches: Iterable[pa.RecordBatch], chosen: Sequence[str]) -> pa.Table:
    """The rows of the chosen episodes, in one projected pass over dictionary-encoded
    batches: the ids are looked up in each batch's dictionary (a few thousand values, not
    every row) and only the matching rows are decoded."""
    wanted = pa.array(list(chosen), pa.string())
    pieces = []
    for batch in batches:
        ids = batch.column("episode_id")
        if pa.types.is_dictionary(ids.type):
            hit = pc.is_in(ids.dictionary, value_set=wanted).to_numpy(zero_copy_only=False)
            mask = np.append(hit, False)[dictionary_codes(ids, len(ids.dictionary))]
        else:
            mask = pc.fill_null(pc.is_in(ids, value_set=wanted), False).to_numpy(zero_copy_only=False)
        if mask.any() or not pieces:  # an empty first piece keeps the schema
            rows = batch.filter(pa.array(mask))
            columns = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in rows.columns]
            pieces.append(pa.record_batch(columns, names=rows.schema.names))
    return pa.Table.from_batches(pieces) if pieces else pa.table({"episode_id": pa.array([], pa.string())})


def _sample_steps(
    card: Card, chosen: Sequence[str], limits: SampleLimits
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int], list[str]]:
    if not chosen:
        return {}, {}, []
    schema = card.schema("steps")
    names = ["episode_id", *(c for c in _STEP_COLUMNS if c in schema.names)]
    table = _rows_of(card.iter_steps(columns=names, encoded=True, episodes=chosen), chosen)
    if table.num_rows:
        table = table.sort_by([("episode_id", "ascending"), ("seq", "ascending")])
    by_episode: dict[str, list[dict[str, Any]]] = {}
    truncated: dict[str, int] = {}
    budget = limits.total_chars
    notes: list[str] = []
    for row in table.to_pylist():
        eid = row.pop("episode_id")
        rows = by_episode.setdefault(eid, [])
        if len(rows) >= limits.steps_per_episode or budget <= 0:
            truncated[eid] = truncated.get(eid, 0) + 1
            continue
        cells = {k: _cell(v, limits.chars_per_field) for k, v in row.items() if v is not None}
        budget -= sum(len(v) for v in cells.values() if isinstance(v, str))
        rows.append(cells)
    if truncated:
        notes.append(
            f"steps beyond {limits.steps_per_episode} per episode (or past the report's "
            f"{limits.total_chars:,}-character budget) are not embedded; "
            "`rc.open(card).episode_steps(id)` reads them all"
        )
    notes.append(f"text fields are cut at {limits.chars_per_field} characters in the browser")
    return by_episode, truncated, notes


def _cell(value: Any, limit: int) -> Any:
    """A JSON-safe cell: text cut to `limit` characters, times as ISO text, NaN as None, bytes
    as a note of their length, lists and structs cell by cell, anything else as its text (a card
    may store a column in a type the validator flags; the page still shows what is there)."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if value != value:
            return None
        return str(value) if value in (float("inf"), float("-inf")) else value
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"… [{len(value) - limit} more characters]"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"[{len(value):,} bytes of binary data, not shown]"
    if isinstance(value, dict):
        return {str(k): _cell(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cell(v, limit) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return _cell(str(value), limit)
