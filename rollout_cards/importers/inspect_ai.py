"""Inspect AI logs (`.eval` zip archives and the `.json` form) to a rollout card.

Parses the documented log JSON; does not depend on `inspect_ai`. A `.eval` archive
is read member by member through `SafeZip` (caps checked before anything is
decompressed, nothing extracted to disk); a `.json` log is streamed, one sample at
a time. One episode per sample and epoch:

| log                                   | card                                                   |
|---------------------------------------|--------------------------------------------------------|
| `eval.task`, `sample.id`              | `task_id` = `<task>/<sample id>`                       |
| (task, `eval.task_id`, id, epoch)     | `episode_id` = `<task>/<eval task_id>/<id>/<epoch>`    |
| `eval.model` (or `--agent`)           | `agent`                                                |
| `sample.epoch`                        | `trial` = epoch − 1 (0-based), `meta.epoch` = epoch    |
| `eval.run_id` / `eval.task_id`        | `run_id` / `meta.eval_task_id`                         |
| `sample.error`                        | status `error`, `error_message`, `error_traceback`, `error_type` (from the traceback) |
| `sample.limit`                        | status `limit`, `error_message` = "<type> limit of <limit>" |
| otherwise                             | status `completed`                                     |
| `sample.scores[s].value`              | `score.<s>` (Inspect's value_to_float: C 1, P 0.5, I/N 0, yes/true 1, no/false 0, numbers as they are; a dict value gives `score.<s>.<key>`); the Score objects as JSON in `meta.scores` |
| `sample.model_usage`                  | `input_tokens`, `output_tokens`, `total_tokens` (summed over models) |
| `sample.input`, `target`, `choices`, `metadata` | `task.input`, `task.target`, `task.choices`, `task.metadata` (JSON text unless text) |
| `sample.events` (or `messages` without events) | steps (see `inspect_events`)                  |
| `sample.attachments`, `messages` (with events), other fields | `meta.attachments`, `meta.messages`, `meta.sample` (JSON) |
| `eval.task/version/revision`, `packages`, `model` | provenance environment, packages, agents |
| `results.scores[].metrics` accuracy/mean | rule `inspect.<task>.<score>.<metric>` with the log's value as `reported` |
"""

from __future__ import annotations

import re
from typing import Any

from ..model.card import Software
from .base import ImportRequest
from .inspect_events import add_events, add_messages, resolve_attachment
from .inspect_log import InspectLog, open_log
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
from .steps import StepBuffer, json_text, parse_timestamp

__all__ = ["InspectImporter", "value_to_float"]

#: Inspect's value_to_float, as declared in the card.
VALUE_MAP = {
    "C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0,
    "yes / true (any case)": 1.0, "no / false (any case)": 0.0,
    "numbers, booleans and numeric strings": "their value",
    "anything else": "null (the rule's on_missing decides; Inspect itself uses 0)",
}
_MAPPED = frozenset((
    "id", "epoch", "input", "target", "choices", "metadata", "scores", "model_usage", "error", "limit",
    "events", "messages", "attachments", "uuid", "total_time", "working_time", "started_at", "completed_at",
    "transcript",
))
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
_REDUCERS = {"mean": "mean", "median": "median", "max": "max"}


def value_to_float(value: Any) -> float | None:
    """Inspect's mapping of a score value to a number; None when it has none."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    fixed = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
    if value in fixed:
        return fixed[value]
    low = value.lower()
    if low in ("yes", "true"):
        return 1.0
    if low in ("no", "false"):
        return 0.0
    if low.replace(".", "").isnumeric():
        try:
            return float(low)
        except ValueError:
            return None
    return None


class InspectImporter:
    """Inspect AI logs: `.eval` archives and `.json` logs."""

    name = "inspect"
    summary = "Inspect AI logs: .eval archives and .json logs (one episode per sample and epoch)"
    options: dict[str, str] = {}

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every log; each log's reported metrics become declared rules."""
        request.check_options(self.name, self.options)
        session.set_meta("inspect", {"value_to_float": VALUE_MAP, "logs": []})
        logs_meta: list[dict[str, Any]] = []
        rule_ids: set[str] = set()
        expected: int | None = 0
        environments: dict[str, Software] = {}
        untimed = [0, 0, 0]  # episodes without start, without end; steps without time
        reordered = 0
        for index, path in enumerate(request.sources):
            log = open_log(path, session)
            try:
                session.add_source(path, log.format, request.url(index))
                agent = request.agent or log.spec["model"]
                _provenance(session, log, agent)
                environments.setdefault(log.task, _environment(log))
                for label, load in session.guard(log.samples):
                    with session.record():
                        row, steps, moved = _episode(load(), log, agent, label)
                        reordered += moved
                        session.add_episode(row, steps)
                        log.found += 1
                        untimed[0] += row["started_at"] is None
                        untimed[1] += row["ended_at"] is None
                        untimed[2] += sum(1 for step in steps.rows if step[3] is None)
            finally:
                log.close()
            ids = (log.spec.get("dataset") or {}).get("sample_ids")
            planned = len(ids) * log.epochs if isinstance(ids, list) else None
            expected = None if expected is None or planned is None else expected + planned
            _missing_samples(session, log, planned)
            _declare_rules(session, log, agent, rule_ids)
            logs_meta.append(_log_meta(log))
        session.set_meta("inspect", {"value_to_float": VALUE_MAP, "logs": logs_meta})
        if reordered:
            session.note(f"{reordered} event(s) were written to the log out of time order; the steps follow the "
                         "events' timestamps (a tool event comes before the span it opened; a tool result at the "
                         "tool's completion time), ties keep the log's order")
        if len(environments) == 1:
            session.set_software("environment", next(iter(environments.values())))
        else:
            session.note(f"the logs are of {len(environments)} tasks ({', '.join(sorted(environments))}); "
                         "provenance.environment names none of them, meta.inspect.logs lists each")
        if expected:
            session.set_plan({"expected_episodes": expected,
                              "description": "dataset.sample_ids x epochs of each Inspect log"})
        for count, target, why in (
            (untimed[0], "episodes.started_at", "the samples record no start time (older Inspect logs)"),
            (untimed[1], "episodes.ended_at", "the samples record no completion time (older Inspect logs)"),
            (untimed[2], "steps.t", "samples without events have only messages, which carry no timestamps"),
        ):
            if count:
                session.declare_missing(target, why, count=count)
        session.declare_missing("steps.cost_usd", "Inspect logs record tokens, not costs")
        session.declare_missing("episodes.cost_usd", "Inspect logs record tokens, not costs")


def _provenance(session: ImportSession, log: InspectLog, agent: str) -> None:
    spec = log.spec
    packages = spec.get("packages") if isinstance(spec.get("packages"), dict) else {}
    session.add_packages({k: str(v) for k, v in packages.items()})
    session.set_software("harness", Software(name="inspect_ai", version=packages.get("inspect_ai")))
    parameters = {k: spec[k] for k in ("model_args", "model_generate_config", "model_roles", "config") if spec.get(k)}
    session.add_agent({"name": agent, "model": spec["model"], "parameters": parameters})


def _environment(log: InspectLog) -> Software:
    spec = log.spec
    revision = spec.get("revision") if isinstance(spec.get("revision"), dict) else {}
    return Software(
        name=log.task,
        version=None if spec.get("task_version") is None else str(spec["task_version"]),
        url=revision.get("origin"),
        revision=revision.get("commit"),
    )


def _log_meta(log: InspectLog) -> dict[str, Any]:
    spec = log.spec
    keep = ("task", "task_id", "eval_id", "run_id", "created", "task_version", "task_file", "task_args",
            "dataset", "model", "revision", "config")
    out: dict[str, Any] = {"file": log.path.name, "status": log.header.get("status"), "samples": log.found}
    out.update({k: spec[k] for k in keep if k in spec})
    for key in ("results", "stats", "error"):
        if log.header.get(key) is not None:
            out[key] = log.header[key]
    return out


def _missing_samples(session: ImportSession, log: InspectLog, planned: int | None) -> None:
    bad = sum(1 for b in session.malformed if b.file == str(log.path))
    if planned is not None and log.found + bad < planned:
        session.add_drop(
            target="episodes", action="unobserved", declaration="source_missing", loss_class="missing_records",
            reason=f"{log.path.name} (status {log.header.get('status')!r}) plans {planned} sample-epochs but logs "
            f"{log.found + bad}; the others were never written to the log",
            count=planned - log.found - bad,
        )


def _episode(sample: Any, log: InspectLog, agent: str, label: str) -> tuple[dict[str, Any], StepBuffer, int]:
    file = str(log.path)
    probe = StepBuffer("", file=file, record=label)
    if not isinstance(sample, dict):
        raise probe.error("is not a JSON object")
    sid, epoch = sample.get("id"), sample.get("epoch")
    if isinstance(sid, bool) or not isinstance(sid, (int, str)) or sid == "":
        raise probe.error("has no sample id")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise probe.error(f"sample {sid!r} has no epoch (a positive integer)")
    label = f"{label} (sample {sid!r}, epoch {epoch})"
    episode_id = f"{log.task}/{log.task_run}/{sid}/{epoch}"
    steps = StepBuffer(episode_id, file=file, record=label)
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}
    events = sample.get("events")
    if events is None and isinstance(sample.get("transcript"), dict):
        events = sample["transcript"].get("events")
    messages = sample.get("messages")
    moved = 0
    if events:
        if not isinstance(events, list):
            raise steps.error("events is not a list")
        moved = add_events(steps, events, attachments)
    elif messages:
        if not isinstance(messages, list):
            raise steps.error("messages is not a list")
        add_messages(steps, messages, attachments)

    row: dict[str, Any] = {
        "episode_id": episode_id,
        "task_id": f"{log.task}/{sid}",
        "agent": agent,
        "trial": epoch - 1,
        "run_id": _text(log.spec.get("run_id")),
        "status": "completed",
        "meta.epoch": epoch,
        "meta.eval_task_id": log.task_run,
        "started_at": parse_timestamp(sample.get("started_at"), file=file, record=label),
        "ended_at": parse_timestamp(sample.get("completed_at"), file=file, record=label),
    }
    error, limit = sample.get("error"), sample.get("limit")
    if error:
        error = error if isinstance(error, dict) else {"message": str(error)}
        traceback = error.get("traceback") if isinstance(error.get("traceback"), str) else None
        last = traceback.strip().splitlines()[-1] if traceback and traceback.strip() else ""
        match = _ERROR_TYPE.match(last)
        row.update(status="error", error_message=_text(error.get("message")), error_traceback=traceback,
                   error_type=match.group(1) if match else None)
    elif limit:
        limit = limit if isinstance(limit, dict) else {"type": str(limit)}
        row.update(status="limit", error_message=f"{limit.get('type')} limit of {limit.get('limit')} reached")
    _scores(row, sample.get("scores"), steps)
    _usage(row, sample.get("model_usage"), steps)
    for key in ("input", "target", "choices", "metadata"):
        value = sample.get(key)
        if value not in (None, {}, []):
            row[f"task.{key}"] = resolve_attachment(value, attachments) if isinstance(value, str) else json_text(value)
    for key in ("total_time", "working_time"):
        if isinstance(sample.get(key), (int, float)) and not isinstance(sample.get(key), bool):
            row[f"meta.{key}"] = float(sample[key])
    if isinstance(sample.get("uuid"), str):
        row["meta.uuid"] = sample["uuid"]
    if attachments:
        row["meta.attachments"] = json_text(attachments)
    if events and messages:
        row["meta.messages"] = json_text(messages)
    rest = {k: v for k, v in sample.items() if k not in _MAPPED and v not in (None, {}, [])}
    if rest:
        row["meta.sample"] = json_text(rest)
    return row, steps, moved


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)


def _scores(row: dict[str, Any], scores: Any, steps: StepBuffer) -> None:
    if not scores:
        return
    if not isinstance(scores, dict):
        raise steps.error("scores is not an object")
    for name, score in scores.items():
        value = score.get("value") if isinstance(score, dict) else None
        if isinstance(value, dict):
            for key, part in value.items():
                row[f"score.{name}.{key}"] = value_to_float(part)
        elif not isinstance(value, list):
            row[f"score.{name}"] = value_to_float(value)
    row["meta.scores"] = json_text(scores)


def _usage(row: dict[str, Any], usage: Any, steps: StepBuffer) -> None:
    if not isinstance(usage, dict) or not usage:
        return
    totals = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for model, counts in usage.items():
        if not isinstance(counts, dict):
            raise steps.error(f"model_usage[{model!r}] is not an object")
        for key in totals:
            value = counts.get(key, 0)
            if type(value) is not int or value < 0:
                raise steps.error(f"model_usage[{model!r}].{key} is not a non-negative integer")
            totals[key] += value
    row.update(totals)


def _declare_rules(session: ImportSession, log: InspectLog, agent: str, taken: set[str]) -> None:
    results = log.header.get("results")
    scores = results.get("scores") if isinstance(results, dict) else None
    if not scores:
        session.note(f"{log.path.name} reports no scores; no rule was declared for it")
        return
    for entry in scores:
        if not isinstance(entry, dict) or not isinstance(entry.get("metrics"), dict):
            continue
        name = str(entry.get("name"))
        scorer = str(entry.get("scorer") or name)
        column = f"score.{scorer}.{name}" if scorer != name else f"score.{name}"
        for metric, info in sorted(entry["metrics"].items()):
            value = info.get("value") if isinstance(info, dict) else None
            if metric not in ("accuracy", "mean"):
                session.note(f"{log.path.name}: metric {name}/{metric} has no declared rule (only accuracy and "
                             "mean are replayable as rules)")
                continue
            reducer = str(entry.get("reducer") or log.reducers[0])
            reduce = None
            if log.epochs > 1:
                reduce = _reduce(reducer)
                if reduce is None:
                    session.note(f"{log.path.name}: {name}/{metric} reduces epochs with {reducer!r}, which no rule "
                                 "reducer reproduces; no rule was declared for it")
                    continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            rule_id = f"inspect.{rule_id_part(log.task)}.{rule_id_part(name)}.{rule_id_part(metric)}"
            if rule_id in taken:
                rule_id = f"{rule_id}.{rule_id_part(log.task_run)}"
            taken.add(rule_id)
            session.add_rule(rule_document(
                rule=rule_id,
                kind="original",
                description=(
                    f"Inspect's reported {metric} of {name} for {log.task} ({log.path.name}): the mean of "
                    f"{column}, Inspect's value_to_float of each sample's score (C=1, P=0.5, I=0, N=0; "
                    "see meta.inspect.value_to_float), over samples that did not error; samples that hit a "
                    "limit are scored as Inspect scored them."
                ),
                select=f"meta.eval_task_id == {_quote(log.task_run)}",
                score=_column_ref(column),
                on_status={"completed": "score", "limit": "score", "error": "exclude", "timeout": "exclude",
                           "cancelled": "exclude", "skipped": "exclude"},
                on_missing=0,
                reduce=reduce,
                aggregate={"statistic": "mean", "group_by": ["agent"], "unit": "task_id",
                           "interval": {"method": "auto", "level": 0.95}},
                reported=[{"group": {"agent": agent}, "value": float(value)}],
            ))


def _reduce(reducer: str) -> dict[str, Any] | None:
    if reducer in _REDUCERS:
        return {"by": ["task_id"], "with": _REDUCERS[reducer]}
    m = re.match(r"^pass_at_(\d+)$", reducer)
    if m:
        return {"by": ["task_id"], "with": "pass_at_k", "k": int(m.group(1))}
    return None


def _column_ref(column: str) -> str:
    return column if re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", column) else f"`{column}`"


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
