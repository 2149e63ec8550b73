"""Chat JSONL (OpenAI-style `messages`, one trajectory per line) and ATIF trajectories.

Sources are JSON Lines, a JSON array, or one JSON document. `chat-jsonl` reads
either kind of record (an object whose `schema_version` starts with "ATIF-v1" is
read as ATIF); `atif` accepts ATIF only. Which record fields hold the episode id,
task, agent, trial, status and scores is named by `--field KEY=PATH` (PATH is a
dotted path into the record, e.g. `metadata.task_id`) or a mapping file (YAML or
JSON object of the same keys, plus `status_values` to translate status strings):

| key               | default                         | becomes            |
|-------------------|---------------------------------|--------------------|
| `id`              | `id` (chat), `session_id` else `trajectory_id` (ATIF); else `<file stem>/<record>` | `episode_id` |
| `task`            | `task_id` (required)            | `task_id`          |
| `agent`           | `--agent`, else `agent` (chat) / `agent.name` (ATIF), else the file stem | `agent` |
| `trial`, `run_id`, `seed` | `trial`, `run_id`, `seed` when present | the same columns |
| `status`          | `status` when present, else every episode `completed` (declared in drops) | `status` |
| `messages`        | `messages` (chat)               | steps (see `openai_chat`) |
| `score.<name>`, `task.<name>`, `cond.<name>`, `meta.<name>` | none | that column |

ATIF steps: each step's `message` → `message` (role system / user / assistant for
source system / user / agent; tokens and cost from `metrics`; `reasoning_content`,
`model_name`, `extra`, other metrics in payload); `tool_calls` → `tool_call`;
`observation.results` → `tool_result` (by `source_call_id`) or `observation`.
Episode tokens come from `final_metrics`, else the sum of the steps' metrics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ImporterError
from ..numbers import parse_decimal
from ..regular_files import open_regular
from ..tables import TerminalStatus
from ..yamldoc import load_strict_yaml
from .atif_steps import AtifCounts, add_trajectory, declare_counts, is_atif
from .base import ImportRequest
from .json_stream import iter_records
from .nemo_eval import SAMPLES_FILE, EvalScores, sample_columns, unwrap_sample
from .openai_chat import ChatMapping, add_chat_messages
from .session import ImportSession
from .steps import StepBuffer, json_text

__all__ = ["ChatJsonlImporter", "FieldMapping"]

#: Mapping files larger than this are refused before they are parsed.
MAX_MAPPING_BYTES = 1024 * 1024
_STANDARD_KEYS = ("id", "task", "agent", "trial", "status", "run_id", "seed", "messages")
_PREFIXES = ("score.", "task.", "cond.", "meta.")
_STATUSES = frozenset(s.value for s in TerminalStatus)
_MISSING = object()


class FieldMapping:
    """Where each episode field is found in a record (see the module table)."""

    def __init__(self, fields: Mapping[str, str], status_values: Mapping[str, str]):
        for key, path in fields.items():
            if key not in _STANDARD_KEYS and not (key.startswith(_PREFIXES) and key not in _PREFIXES):
                raise ImporterError(
                    f"unknown field key {key!r}; use {', '.join(_STANDARD_KEYS)} or score.<name>, task.<name>, "
                    "cond.<name>, meta.<name>"
                )
            if not isinstance(path, str) or not path:
                raise ImporterError(f"field {key!r} needs a dotted path into the record")
        for source, status in status_values.items():
            if status not in _STATUSES:
                raise ImporterError(f"status_values maps {source!r} to {status!r}, not one of {', '.join(sorted(_STATUSES))}")
        self.fields = dict(fields)
        self.status_values = {str(k): v for k, v in status_values.items()}

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> FieldMapping:
        """Merge a mapping file (`mapping`) with `fields` given on the command line (which win)."""
        fields: dict[str, str] = {}
        status_values: dict[str, str] = {}
        if options.get("mapping"):
            doc = _load_mapping(Path(options["mapping"]))
            status_values = doc.pop("status_values", None) or {}
            if not isinstance(status_values, dict):
                raise ImporterError(f"{options['mapping']}: status_values must be a mapping")
            fields.update(doc)
        fields.update(options.get("fields") or {})
        return cls(fields, status_values)


def _load_mapping(path: Path) -> dict[str, Any]:
    # A regular file only (a FIFO blocked the import forever, /dev/zero ran it out of memory), capped.
    try:
        with open_regular(path) as fh:
            data = fh.read(MAX_MAPPING_BYTES + 1)
        if len(data) > MAX_MAPPING_BYTES:
            raise ImporterError(f"{path}: the mapping file is larger than {MAX_MAPPING_BYTES // 1024} KiB; a mapping "
                                "names a few fields")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImporterError(f"{path}: cannot read the mapping file: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = load_strict_yaml(text)[0]
    except yaml.YAMLError as exc:
        raise ImporterError(f"{path}: the mapping file is not valid YAML or JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ImporterError(f"{path}: the mapping file must be an object of KEY: PATH entries")
    return dict(doc)


def lookup(record: Any, path: str) -> Any:
    """The value at a dotted path (`a.b.0.c`), or `_MISSING`."""
    value = record
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and (i := parse_decimal(part)) is not None and i < len(value):
            value = value[i]  # ASCII digits: '²'.isdigit() is true, int('²') raises
        else:
            return _MISSING
    return value


class _Context:
    """Per-import state: the mapping, counts of unobserved values, mapping notes."""

    def __init__(self, mapping: FieldMapping, request: ImportRequest, atif_only: bool):
        self.mapping = mapping
        self.request = request
        self.atif_only = atif_only
        self.chat = ChatMapping()
        self.default_status = 0
        self.steps_without_time = 0
        self.chat_records = 0
        self.model_steps_without_tokens = 0
        self.episodes_without_tokens = 0
        self.subagents = 0
        self.continued = 0
        self.totals = AtifCounts()  # what every record's mapping met, for the drops
        self.samples = 0
        self.scores: EvalScores | None = None
        self.task_from_file = 0


class ChatJsonlImporter:
    """One trajectory per record: OpenAI-style `messages`, or ATIF trajectories."""

    name = "chat-jsonl"
    summary = "chat JSONL (one OpenAI-style `messages` trajectory per line) or ATIF trajectories"
    options = {
        "fields": "KEY=PATH pairs naming the id, task, agent, trial, status, messages and score./task./cond./meta. fields",
        "mapping": "YAML or JSON file with the same keys (and status_values: {source value: status})",
    }
    atif_only = False

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every record of every source."""
        request.check_options(self.name, self.options)
        ctx = _Context(FieldMapping.from_options(request.options), request, self.atif_only)
        for index, path in enumerate(request.sources):
            session.add_source(path, self.name, request.url(index))
            ctx.scores = EvalScores(path, session) if path.name == SAMPLES_FILE else None
            for label, record in session.guard(iter_records(path)):
                with session.record():
                    row, steps = _episode(record, label, path, ctx, session)
                    session.add_episode(row, steps)
            if ctx.scores is not None:
                ctx.scores.declare()
        _declare(session, ctx)


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    return json_text(value)


def _field(record: dict[str, Any], ctx: _Context, key: str, default: str | None, consumed: set[str]) -> Any:
    """The value of `key` (its mapped path, else `default`); a whole top-level field that
    becomes a column is added to `consumed` so meta.record does not repeat it."""
    path = ctx.mapping.fields.get(key, default)
    value = _MISSING if path is None else lookup(record, path)
    if value is not _MISSING and path is not None and "." not in path:
        consumed.add(path)
    return value


def _episode(
    record: Any, label: str, path: Path, ctx: _Context, session: ImportSession
) -> tuple[dict[str, Any], StepBuffer]:
    probe = StepBuffer("", file=str(path), record=label)
    if not isinstance(record, dict):
        raise probe.error("is not a JSON object")
    sample = None
    if not is_atif(record) and (unwrapped := unwrap_sample(record, is_atif)) is not None:
        record, sample = unwrapped  # a NeMo `nat eval` AtifEvalSample: its trajectory is the record
        ctx.samples += 1
    atif = is_atif(record)
    if ctx.atif_only and not atif:
        raise probe.error("is not an ATIF trajectory (its schema_version does not start with 'ATIF-v1')")
    consumed: set[str] = set()
    raw_id = _field(record, ctx, "id", "session_id" if atif else "id", consumed)
    if atif and raw_id in (_MISSING, None, "") and "id" not in ctx.mapping.fields:
        raw_id = _field(record, ctx, "id", "trajectory_id", consumed)  # v1.7: session_id is optional
    episode_id = str(raw_id) if raw_id not in (_MISSING, None, "") else f"{path.stem}/{label}"
    steps = StepBuffer(episode_id, file=str(path), record=f"{label} ({episode_id})")
    task = _field(record, ctx, "task", "task_id", consumed)
    if sample is not None and "task" not in ctx.mapping.fields:
        item = sample["item_id"]
        task = item if isinstance(item, str) else json_text(item)
    elif task in (_MISSING, None, "") and atif and "task" not in ctx.mapping.fields:
        task = path.name.removesuffix(".json").removesuffix(".trajectory")  # ATIF has no task field
        ctx.task_from_file += 1
    if task in (_MISSING, None, ""):
        where = ctx.mapping.fields.get("task", "task_id")
        raise steps.error(f"has no task id at {where!r}; name the field with --field task=PATH or a mapping file")
    agent = ctx.request.agent
    if agent is None:
        found = _field(record, ctx, "agent", "agent.name" if atif else "agent", consumed)
        agent = str(found) if found not in (_MISSING, None, "") and not isinstance(found, (dict, list)) else path.stem
    row: dict[str, Any] = {"episode_id": episode_id, "task_id": str(task), "agent": agent}
    for key in ("trial", "seed"):
        value = _field(record, ctx, key, key, consumed)
        if value is not _MISSING and value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise steps.error(f"{key} {value!r} is not an integer")
            row[key] = value
    run_id = _field(record, ctx, "run_id", "run_id", consumed)
    if run_id not in (_MISSING, None):
        row["run_id"] = str(run_id)
    status = _field(record, ctx, "status", "status", consumed)
    if status in (_MISSING, None):
        row["status"] = "completed"
        ctx.default_status += 1
    else:
        mapped = ctx.mapping.status_values.get(str(status), status)
        if mapped not in _STATUSES:
            raise steps.error(f"status {status!r} is not a terminal state; map it with status_values in a mapping file")
        row["status"] = mapped
    for key in ctx.mapping.fields:
        if key.startswith(_PREFIXES):
            value = _field(record, ctx, key, None, consumed)
            row[key] = None if value is _MISSING else _scalar(value)
    if sample is not None:
        row.update(sample_columns(sample))
        if "run_id" not in row:
            row["run_id"] = path.parent.name or "."
        if ctx.scores is not None:
            row.update(ctx.scores.columns(sample["item_id"]))
    if atif:
        _atif(record, steps, row, ctx, session, path.parent)
        consumed |= {"schema_version", "steps", "final_metrics", "notes", "extra", "subagent_trajectories",
                     "continued_trajectory_ref"}
    else:
        messages_path = ctx.mapping.fields.get("messages", "messages")
        messages = lookup(record, messages_path)
        if messages is _MISSING:
            raise steps.error(f"has no messages at {messages_path!r}")
        add_chat_messages(steps, messages, ctx.chat, field=messages_path)
        consumed.add(messages_path)
        ctx.chat_records += 1
    ctx.steps_without_time += sum(1 for r in steps.rows if r[3] is None)
    rest = {k: v for k, v in record.items() if k not in consumed}
    if rest:
        row["meta.record"] = json_text(rest)
    return row, steps


def _atif(record: dict[str, Any], steps: StepBuffer, row: dict[str, Any], ctx: _Context, session: ImportSession,
          directory: Path | None) -> None:
    agent = record.get("agent") if isinstance(record.get("agent"), dict) else {}
    if isinstance(agent.get("name"), str) and agent["name"]:
        session.add_agent({"name": row["agent"], "model": _str(agent.get("model_name")),
                           "version": _str(agent.get("version"))})
    if agent.get("model_name") is not None:
        row["meta.model"] = _str(agent["model_name"])
    rest_agent = {k: v for k, v in agent.items() if k not in ("name", "model_name", "version")}
    if rest_agent:
        row["meta.agent"] = json_text(rest_agent)
    for key in ("notes", "extra"):
        if record.get(key) not in (None, "", {}):
            row[f"meta.{key}"] = _scalar(record[key])
    counts = AtifCounts()
    add_trajectory(record, steps, counts, directory=directory, agent=None)
    ctx.model_steps_without_tokens += counts.model_steps_without_tokens
    ctx.subagents += counts.subagents
    final = record.get("final_metrics") if isinstance(record.get("final_metrics"), dict) else {}
    if counts.last_final_metrics is not None:
        final = counts.last_final_metrics  # a continued trajectory's last file counts the whole run (Harbor)
        ctx.continued += 1
    ctx.totals.copied_context += counts.copied_context
    ctx.totals.subagents_not_in_source += counts.subagents_not_in_source
    tin, tout, cost = final.get("total_prompt_tokens"), final.get("total_completion_tokens"), final.get("total_cost_usd")
    totals, seen = counts.step_tokens, counts.step_tokens_seen
    tin = tin if tin is not None else (totals[0] if seen[0] else None)
    tout = tout if tout is not None else (totals[1] if seen[1] else None)
    cost = cost if cost is not None else (totals[2] if seen[2] else None)
    for label, value in (("total_prompt_tokens", tin), ("total_completion_tokens", tout)):
        if value is not None and (type(value) is not int or not 0 <= value < 1 << 63):
            raise steps.error(f"final_metrics.{label} is {value!r}, not a non-negative 64-bit integer")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
        raise steps.error(f"final_metrics.total_cost_usd is {cost!r}, not a number")
    if tin is None and tout is None:
        ctx.episodes_without_tokens += 1
    row.update(input_tokens=tin, output_tokens=tout, cost_usd=None if cost is None else float(cost),
               total_tokens=tin + tout if tin is not None and tout is not None else None)
    rest = {k: v for k, v in final.items() if k not in ("total_prompt_tokens", "total_completion_tokens", "total_cost_usd")}
    if rest:
        row["meta.final_metrics"] = json_text(rest)


def _str(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def _declare(session: ImportSession, ctx: _Context) -> None:
    for note in ctx.chat.notes():
        session.note(note)
    n = session.episodes_written
    if ctx.samples:
        session.note(f"{ctx.samples} records are NeMo Agent Toolkit eval samples (item_id + trajectory): the "
                     "trajectory is the episode, task_id the item_id, run_id the output directory")
    if ctx.task_from_file:
        session.note(f"{ctx.task_from_file} ATIF trajectories name no task (ATIF has no task field): their task_id "
                     "is the file name without .trajectory.json; name one with --field task=PATH")
    if ctx.subagents:
        session.note(f"{ctx.subagents} sub-agent trajectories are nested in the episode that launched them "
                     "(span_begin/span_end steps, parent_seq, depth)")
    if ctx.continued:
        session.note(f"{ctx.continued} ATIF trajectories continue in other files (continued_trajectory_ref): "
                     "their tokens are the last file's final_metrics, which Harbor's terminus-2 keeps cumulative")
    declare_counts(session, ctx.totals)
    if ctx.default_status:
        session.add_drop(
            target="episodes.status", action="unobserved", declaration="source_missing",
            loss_class="unavailable_source_field",
            reason="the records give no terminal state (no status field was named); every such episode is "
            "recorded as completed, which the source neither confirms nor denies",
            count=ctx.default_status,
        )
    if ctx.steps_without_time:
        session.declare_missing("steps.t", "the records give no timestamp for these steps", count=ctx.steps_without_time)
    session.declare_missing("episodes.started_at", "the records give no start time", count=n)
    session.declare_missing("episodes.ended_at", "the records give no end time", count=n)
    if ctx.model_steps_without_tokens or ctx.chat_records:
        why = "chat messages carry no token counts, nor do ATIF agent steps without metrics"
        session.declare_missing("steps.input_tokens", why)
        session.declare_missing("steps.output_tokens", why)
    if ctx.episodes_without_tokens + ctx.chat_records:
        why = "the records give no token totals"
        for column in ("input_tokens", "output_tokens", "total_tokens"):
            session.declare_missing(f"episodes.{column}", why, count=ctx.episodes_without_tokens + ctx.chat_records)
