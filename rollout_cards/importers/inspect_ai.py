"""Inspect AI logs (`.eval` zip archives and the `.json` form) to a rollout card.

Parses the documented log JSON; does not depend on `inspect_ai`. A `.eval` archive
is read member by member through `SafeZip` (caps checked before anything is
decompressed, nothing extracted to disk); a `.json` log is streamed, one sample at
a time. One episode per sample and epoch:

| log                                   | card                                                   |
|---------------------------------------|--------------------------------------------------------|
| `eval.task`, `sample.id`              | `task_id` = `<task>/<sample id>`                       |
| (task, `eval.task_id`, id, epoch)     | `episode_id` = `<task>/<log key>/<id>/<epoch>`; the log key (`meta.inspect_log`) is the task_id, `<task_id>.<scoring digest>` for a later log of the same eval (a re-score) |
| `eval.model` (or `--agent`)           | `agent`                                                |
| `sample.epoch`                        | `trial` = epoch − 1 (0-based), `meta.epoch` = epoch    |
| `eval.run_id` / `eval.task_id`        | `run_id` / `meta.eval_task_id`                         |
| `sample.error`                        | status `error`, `error_message`, `error_traceback`, `error_type` (from the traceback) |
| `sample.limit`                        | status `limit`, `error_message` = "<type> limit of <limit>" |
| otherwise                             | status `completed`                                     |
| `sample.scores[s].value`              | `score.<s>` (Inspect's value_to_float: C 1, P 0.5, I/N 0, yes/true 1, no/false 0, numbers and numeric strings as they are, NaN null = unscored, anything else 0; a dict value gives `score.<s>.<key>`); the Score objects as JSON in `meta.scores` |
| `sample.model_usage`                  | `input_tokens`, `output_tokens`, `total_tokens` (summed over models), `cost_usd` (total_cost), cache/reasoning tokens in `meta.*` |
| `events_data` / `message_pool`, `error_retries` | `meta.message_pool`, `meta.call_pool`; `error` steps |
| `sample.input`, `target`, `choices`, `metadata` | `task.input`, `task.target`, `task.choices`, `task.metadata` (JSON text unless text) |
| `sample.events` (or `messages` without events) | steps (see `inspect_events`)                  |
| `sample.attachments`, `messages` (with events), other fields | `meta.attachments`, `meta.messages`, `meta.sample` (JSON) |
| `eval.task/version/revision`, `packages`, `model` | provenance environment, packages, agents |
| `results.scores[].metrics` accuracy/mean/std/var/stderr | rule `inspect.<task>.<score>.<metric>[.<reducer>]`, counting as Inspect counts (see `_declare_rules`), the log's value and scored_samples as `reported` where the imported samples replay them (`inspect_replay`; otherwise a warning with both numbers); any other metric, one with parameters, or a spread of < 2 samples: a note that it is not replayed |

The full table, with every field kept or declared, is in docs/importers.md.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

from ..errors import SourceFormatError
from ..jsondoc import fast_texts
from ..model.card import Software
from ..tables import STEP_COLUMNS
from .base import ImportRequest
from .inspect_events import add_events, add_messages, resolve_attachment
from .inspect_log import InspectLog, open_log, plain, text
from .inspect_replay import ImportedScores, Replayed, replay
from .json_stream import parse_json
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
from .steps import StepBuffer, parse_timestamp

__all__ = ["InspectImporter", "value_to_float"]

#: Inspect's value_to_float, as declared in the card.
VALUE_MAP = {
    "C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0,
    "yes / true (any case)": 1.0, "no / false (any case)": 0.0,
    "numbers, booleans and strings that parse as a finite float (' 2', '-1', '1e-1')": "their value",
    "NaN": "null: unscored (Inspect leaves the sample out of its metrics; the rules exclude it, counted)",
    "anything else (other strings, null, lists, objects)": 0.0,
}
_MAPPED = frozenset((
    "id", "epoch", "input", "target", "choices", "metadata", "scores", "model_usage", "error", "limit",
    "events", "messages", "attachments", "uuid", "total_time", "working_time", "started_at", "completed_at",
    "transcript", "events_data", "message_pool", "error_retries",
))
_T, _TOKENS, _COST = ([c.name for c in STEP_COLUMNS].index(n) for n in ("t", "input_tokens", "cost_usd"))
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
_REDUCERS = {"mean": "mean", "median": "median", "max": "max", "mode": "mode"}
#: Inspect metrics a rule replays, and the rule's statistic (Inspect's std/var/stderr use n − 1).
_STATISTICS = {"accuracy": "mean", "mean": "mean", "std": "std", "var": "var", "stderr": "stderr"}
#: The published number of a spread metric is its point value; its (auto: bootstrap) interval is
#: secondary, so 1,000 resamples (not the default 10,000) keep `rcard rescore` of a large log fast.
#: auto, not bootstrap: constant scores (Inspect's stderr 0.0) give an undefined interval, not a failed rule.
_INTERVALS = {True: {"method": "auto", "level": 0.95}, False: {"method": "auto", "level": 0.95, "resamples": 1000}}
_STATISTIC_TEXT = {"mean": "mean of", "std": "sample standard deviation (n − 1) of",
                   "var": "sample variance (n − 1) of", "stderr": "standard error of the mean (std / √n) of"}


def value_to_float(value: Any) -> float | None:
    """Inspect's mapping of a score value to a number (scorer/_metric.py value_to_float);
    None for NaN, Inspect's unscored sentinel. Inspect maps what it cannot read to 0."""
    if isinstance(value, str):
        fixed = _FIXED.get(value)
        if fixed is not None:
            return fixed
        low = value.lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            number = float(low)
        except ValueError:
            return 0.0
        return number if math.isfinite(number) else 0.0
    if isinstance(value, (bool, int, float)):
        number = float(value)
        return None if math.isnan(number) else number
    return 0.0


_FIXED = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}


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
        unpriced = [0, 0]  # episodes without a total cost; model calls (steps with usage) without one
        reordered: Counter[str] = Counter()  # add_events counts: moved, sub_agents, unnested
        keys: dict[tuple[str, str], str] = {}  # (task, log key) -> file of the log that has it
        scores = ImportedScores()  # the rule columns of every episode, to replay the rules on
        declare: list[tuple[InspectLog, str]] = []
        for index, path in enumerate(request.sources):
            log = open_log(path, session)
            try:
                _log_key(session, log, keys)
                session.add_source(path, log.format, request.url(index))
                agent = request.agent or log.spec["model"]
                _provenance(session, log, agent)
                environments.setdefault(log.task, _environment(log))
                for label, load in session.guard(log.samples):
                    with session.record():
                        sample, raw_events, finite, marked = load()
                        row, steps, moved = _episode(sample, log, agent, label, raw_events, finite=finite,
                                                     marked=marked)
                        reordered.update(moved)
                        session.add_episode(row, steps)
                        scores.add(row)
                        log.found += 1
                        for column, value in row.items():
                            if value is not None and column.startswith("score."):
                                log.scored.setdefault(column, set()).add(row["task_id"])
                        untimed[0] += row["started_at"] is None
                        untimed[1] += row["ended_at"] is None
                        columns = steps.columns()
                        untimed[2] += columns[_T].count(None)
                        unpriced[0] += row.get("cost_usd") is None
                        unpriced[1] += sum(1 for tokens, cost in zip(columns[_TOKENS], columns[_COST], strict=True)
                                           if tokens is not None and cost is None)
            finally:
                log.close()
            ids = (log.spec.get("dataset") or {}).get("sample_ids")
            planned = len(ids) * log.epochs if isinstance(ids, list) else None
            expected = None if expected is None or planned is None else expected + planned
            _missing_samples(session, log, planned)
            if planned is None and log.found == 0 and not any(b.file == str(log.path) for b in session.malformed):
                _header_only(session, log)
            declare.append((log, agent))
            logs_meta.append(_log_meta(log, _reductions(log, session)))
        for log, agent in declare:  # replayed on every episode of the card, as `rcard validate` replays them
            _declare_rules(session, log, agent, rule_ids, scores)
        session.set_meta("inspect", {"value_to_float": VALUE_MAP, "logs": logs_meta})
        if reordered["sub_agents"]:
            session.note(f"{reordered['sub_agents']} sub-agent(s) (Inspect agent and subtask spans, tool spans that "
                         "call a model) nested: their steps have parent_seq = the sub-agent's span_begin and depth + 1")
        if reordered["unnested"]:
            session.note(f"{reordered['unnested']} step(s) are timed before the span_begin of the sub-agent they "
                         "belong to (a clock that ran back); they are nested under the enclosing agent instead")
        if reordered["moved"]:
            session.note(f"{reordered['moved']} event(s) were written to the log out of time order; the steps follow "
                         "the events' timestamps (a tool event comes before the span it opened; a tool result at the "
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
        if unpriced[0]:
            session.declare_missing("episodes.cost_usd", "the sample's model_usage holds no total_cost (no "
                                    "model call was made, or Inspect had no price for the model, or an older log)",
                                    count=unpriced[0])
        session.declare_missing("steps.cost_usd", "Inspect prices model calls only (output.usage.total_cost); other "
                                "steps have no cost" + (f", and {unpriced[1]} model call(s) have no price"
                                                        if unpriced[1] else ""))


def _log_key(session: ImportSession, log: InspectLog, keys: dict[tuple[str, str], str]) -> None:
    """Keep the episode ids of logs of the same eval apart: `inspect score` writes a log with the
    original's task_id, so a later log of a (task, task_id) already imported gets the key
    `<task_id>.<digest of its scoring>`; the first keeps the plain task_id. The same log given twice
    has the same digest and stops the import with the duplicate-episode error, which is the truth."""
    first = keys.get((log.task, log.key))
    if first is not None:
        log.key = f"{log.task_run}.{log.scoring_digest()}"
        session.note(f"{log.path.name} is a log of the same eval as {first} (task_id {log.task_run}; a re-score "
                     f"with `inspect score` keeps it): its episode ids and rules use the key {log.key}")
    keys.setdefault((log.task, log.key), log.path.name)


def _provenance(session: ImportSession, log: InspectLog, agent: str) -> None:
    spec = log.spec
    packages = spec.get("packages") if isinstance(spec.get("packages"), dict) else {}
    session.add_packages({k: str(v) for k, v in packages.items()})
    version = packages.get("inspect_ai")
    session.set_software("harness", Software(name="inspect_ai", version=None if version is None else str(version)))
    parameters = {k: spec[k] for k in ("model_args", "model_generate_config", "model_roles", "config") if spec.get(k)}
    session.add_agent({"name": agent, "model": spec["model"], "parameters": parameters})


def _environment(log: InspectLog) -> Software:
    spec = log.spec
    revision = spec.get("revision") if isinstance(spec.get("revision"), dict) else {}
    return Software(
        name=log.task,
        version=None if spec.get("task_version") is None else str(spec["task_version"]),
        url=_text(revision.get("origin")),
        revision=_text(revision.get("commit")),
    )


def _log_meta(log: InspectLog, reductions: dict[str, Any] | None = None) -> dict[str, Any]:
    """The log's header as meta.inspect.logs[] keeps it; `reductions`, the reference to the artifact
    that holds the log's sample reductions (`_reductions`)."""
    spec = log.spec
    keep = ("task", "task_id", "eval_id", "run_id", "created", "task_version", "task_file", "task_args",
            "dataset", "model", "revision", "config", "scorers", "metrics", "solver", "solver_args", "tags",
            "model_roles", "model_base_url", "sandbox", "metadata", "eval_set_id", "task_display_name")
    out: dict[str, Any] = {"file": log.path.name, "status": log.header.get("status"), "samples": log.found}
    out.update({k: spec[k] for k in keep if k in spec})
    for key in ("plan", "results", "stats", "error", "invalidated", "log_updates", "config_updates", "tags",
                "metadata", "version"):
        if log.header.get(key) not in (None, [], {}):
            out[key if key not in ("tags", "metadata") else f"log_{key}"] = log.header[key]
    if reductions is not None:
        out["reductions"] = reductions
    return plain(out)  # NaN metric values (no scored sample) kept as "NaN"


def _reductions(log: InspectLog, session: ImportSession) -> dict[str, Any] | None:
    """The log's per-sample reduced scores (one set per scorer x reducer) kept whole as an artifact,
    referenced from the log's meta with what each set holds. They are as large as the samples'
    scores (1,000 samples x 4 scorers: 0.7 MB), so card.json — read by every command — keeps the
    reference, not the values. A .eval log stores them in reductions.json (kept byte for byte), a
    .json log in its header (kept as JSON text in the log's key order, NaN as Inspect writes it)."""
    data = log.reductions_member
    if data is not None:
        value = _reductions_value(data, log, session)
    else:
        value = log.header.get("reductions")
        if value in (None, [], {}):
            return None
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode()
    sets = [{"scorer": r.get("scorer"), "reducer": r.get("reducer"),
             "samples": len(r["samples"]) if isinstance(r.get("samples"), list) else None}
            for r in (value if isinstance(value, list) else []) if isinstance(r, dict)]
    return {"artifact": session.add_artifact(data), "bytes": len(data), "sets": sets}


def _reductions_value(data: bytes, log: InspectLog, session: ImportSession) -> Any:
    """reductions.json decoded for its summary; one that does not decode is kept as stored and noted."""
    try:
        return parse_json(data, str(log.path), "reductions.json", constants=True)
    except SourceFormatError as exc:
        session.note(f"{log.path.name}: reductions.json is kept as stored but could not be read: {exc}")
        return None


def _missing_samples(session: ImportSession, log: InspectLog, planned: int | None) -> None:
    """Declare planned sample-epochs the card lacks, saying truly why: never written to the log,
    or written but not read (the read stopped at a broken member or stream under --keep-going)."""
    bad = [b for b in session.malformed if b.file == str(log.path)]
    seen = log.found + len(bad)
    if planned is None or seen >= planned:
        return
    stopped = any(b.message.endswith("the rest of the file was not read") for b in bad)
    written = log.members if log.members is not None else None
    if written is not None and written > seen:  # .eval: the directory says how many samples were written
        session.add_drop(
            target="episodes", action="omitted", declaration="source_malformed", loss_class="malformed_record",
            reason=f"{log.path.name} holds {written} sample members but {written - seen} of them were not read "
            "(the read of the archive stopped at an unreadable member, imported with --keep-going)",
            count=written - seen,
        )
        seen = written
    if seen >= planned:
        return
    if stopped and written is None:  # .json: the stream broke, so what followed is unknown
        why = "; they were not read (the file breaks off; see the malformed-record drop) or were never written"
    else:
        why = "; the others were never written to the log"
    session.add_drop(
        target="episodes", action="unobserved", declaration="source_missing", loss_class="missing_records",
        reason=f"{log.path.name} (status {log.header.get('status')!r}) plans {planned} sample-epochs but logs "
        f"{seen}{why}",
        count=planned - seen,
    )


def _header_only(session: ImportSession, log: InspectLog) -> None:
    """A log that holds no sample and names no plan (logs before dataset.sample_ids, e.g.
    inspect_ai tests/log/test_eval_log/log_valid.txt, versions 1-4): its samples were not
    written (log_samples=False, or the log was saved from a header-only read)."""
    results = log.header.get("results") if isinstance(log.header.get("results"), dict) else {}
    total = results.get("total_samples")
    session.add_drop(
        target="episodes", action="unobserved", declaration="source_missing", loss_class="missing_records",
        reason=f"{log.path.name} (status {log.header.get('status')!r}, log version {log.header.get('version')!r}) "
        "holds no samples: a header-only log (written with log_samples=False, or saved from a header-only "
        "read); its results are the header's own, with no sample to replay them on",
        count=total if type(total) is int and total >= 0 else None,
    )


def _episode(
    sample: Any, log: InspectLog, agent: str, label: str, raw_events: list[str] | None = None, *,
    finite: bool = False, marked: bool = False,
) -> tuple[dict[str, Any], StepBuffer, int]:
    """One episode row and its steps; `raw_events` is the source JSON text of `sample["events"]`;
    `finite`: the sample is known to hold no NaN or Infinity float; `marked`: its floats that msgspec
    writes unlike repr are `jsondoc.ReprFloat`s (see `jsondoc.fast_texts`)."""
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
    episode_id = f"{log.task}/{log.key}/{sid}/{epoch}"
    steps = StepBuffer(episode_id, file=file, record=label)
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}
    events = sample.get("events")
    if events is None and isinstance(sample.get("transcript"), dict):
        events, raw_events = sample["transcript"].get("events"), None
    messages = sample.get("messages")
    events_data = sample.get("events_data") if isinstance(sample.get("events_data"), dict) else {}
    pool = events_data.get("messages") if "messages" in events_data else sample.get("message_pool")
    if pool is not None and not isinstance(pool, list):
        raise steps.error("the message pool (events_data.messages / message_pool) is not a list")
    _retries(steps, sample.get("error_retries"))
    moved: Counter[str] = Counter()
    if events:
        if not isinstance(events, list):
            raise steps.error("events is not a list")
        moved = add_events(steps, events, attachments, pool, raw_events, finite=finite, marked=marked)
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
        "meta.inspect_log": log.key,
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
    # columns holding the JSON text of a source value: the values first, all encoded in one call at the end
    deferred: list[str] = []
    if _scores(row, sample.get("scores"), steps):
        deferred.append("meta.scores")
    _usage(row, sample.get("model_usage"), steps)
    for key in ("input", "target", "choices", "metadata"):
        value = sample.get(key)
        if value not in (None, {}, []):
            if isinstance(value, str):
                row[f"task.{key}"] = resolve_attachment(value, attachments)
            else:
                row[f"task.{key}"] = value
                deferred.append(f"task.{key}")
    for key in ("total_time", "working_time"):
        if isinstance(sample.get(key), (int, float)) and not isinstance(sample.get(key), bool):
            row[f"meta.{key}"] = float(sample[key])
    if isinstance(sample.get("uuid"), str):
        row["meta.uuid"] = sample["uuid"]
    for column, value, present in (("meta.attachments", attachments, attachments),
                                   ("meta.messages", messages, events and messages),
                                   ("meta.message_pool", pool, pool),
                                   ("meta.call_pool", events_data.get("calls"), events_data.get("calls"))):
        if present:
            row[column] = value
            deferred.append(column)
    rest = {k: v for k, v in sample.items() if k not in _MAPPED and v not in (None, {}, [])}
    if rest:
        row["meta.sample"] = rest
        deferred.append("meta.sample")
    if deferred:
        values = [row[column] for column in deferred]
        for column, value, got in zip(deferred, values, fast_texts(values, finite=finite, marked=marked) or [None] * len(values), strict=True):
            row[column] = text(value) if got is None else got  # fast_texts gives `text`'s text, or None
    return row, steps, moved


def _retries(steps: StepBuffer, retries: Any) -> None:
    """Earlier attempts of the whole sample that errored (Inspect's retry_on_error): one
    `error` step each, before the attempt that the sample records (they carry no time)."""
    if not retries:
        return
    if not isinstance(retries, list):
        raise steps.error("error_retries is not a list")
    for i, error in enumerate(retries):
        if not isinstance(error, dict):
            raise steps.error(f"error_retries[{i}] is not an Inspect EvalError")
        steps.add("error", name="error_retry", content=_text(error.get("message")), is_error=True,
                  payload=text(error))


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else text(value)


def _scores(row: dict[str, Any], scores: Any, steps: StepBuffer) -> bool:
    """`score.<s>` (or `score.<s>.<key>` of a dict value) = value_to_float of the current value
    (an edited score's `history` stays in meta.scores: the Score objects, to be encoded by the
    caller); NaN is null (unscored). Whether there were scores."""
    if not scores:
        return False
    if not isinstance(scores, dict):
        raise steps.error("scores is not an object")
    for name, score in scores.items():
        if not isinstance(score, dict):
            raise steps.error(f"scores[{name!r}] is not an Inspect Score object")
        value = score.get("value")
        parts = value.items() if isinstance(value, dict) else [] if isinstance(value, list) else [(None, value)]
        for key, part in parts:
            number = value_to_float(part)
            if number is not None and not math.isfinite(number):
                field = f"scores[{name!r}].value" + ("" if key is None else f"[{key!r}]")
                raise steps.error(f"{field} is {part!r}, not a finite number (Inspect's unscored marker is NaN)")
            row[f"score.{name}" if key is None else f"score.{name}.{key}"] = number
    row["meta.scores"] = scores
    return True


def _usage(row: dict[str, Any], usage: Any, steps: StepBuffer) -> None:
    if not isinstance(usage, dict) or not usage:
        return
    totals = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    extra = dict.fromkeys(("input_tokens_cache_read", "input_tokens_cache_write", "reasoning_tokens"), 0)
    seen: set[str] = set()
    cost: float | None = None
    for model, counts in usage.items():
        if not isinstance(counts, dict):
            raise steps.error(f"model_usage[{model!r}] is not an object")
        for key in (*totals, *extra):
            value = counts.get(key)
            if value is None and key in extra:
                continue
            value = 0 if value is None else value
            if type(value) is not int or value < 0:
                raise steps.error(f"model_usage[{model!r}].{key} is {value!r}, not a non-negative integer")
            (totals if key in totals else extra)[key] += value
            seen.add(key)
        price = counts.get("total_cost")
        if price is not None:
            if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price < math.inf:
                raise steps.error(f"model_usage[{model!r}].total_cost is {price!r}, not a non-negative number")
            cost = (cost or 0.0) + float(price)
    row.update(totals)
    row.update({f"meta.{k}": v for k, v in extra.items() if k in seen})
    if cost is not None:
        row["cost_usd"] = cost


def _declare_rules(
    session: ImportSession, log: InspectLog, agent: str, taken: set[str], replayed: ImportedScores | None
) -> None:
    """One rule per scorer x reducer x replayable metric of the log's results, `reported` its value
    and scored-sample count (see docs/importers.md for how Inspect's counting is replayed). Each rule
    is first replayed on the imported episodes (`replayed`): Inspect's number is declared `reported`
    only where the samples give it; otherwise the rule is declared without it and the import warns."""
    table = None
    results = log.header.get("results")
    scores = results.get("scores") if isinstance(results, dict) else None
    if not scores:
        session.note(f"{log.path.name} reports no scores; no rule was declared for it")
        return
    entries = [e for e in scores if isinstance(e, dict) and isinstance(e.get("metrics"), dict)]
    reducers: dict[tuple[str, str], set[str]] = {}
    for entry in entries:
        name = str(entry.get("name"))
        reducers.setdefault((str(entry.get("scorer") or name), name), set()).add(_reducer_name(entry, log))
    for entry in entries:
        name = str(entry.get("name"))
        scorer = str(entry.get("scorer") or name)
        reducer = _reducer_name(entry, log)
        column = f"score.{scorer}.{name}" if scorer != name else f"score.{name}"
        for key, info in entry["metrics"].items():
            metric = str(info.get("name") or key) if isinstance(info, dict) else str(key)
            value = info.get("value") if isinstance(info, dict) else None
            where = f"{log.path.name}: {name}/{key}" + (f" ({reducer})" if reducer else "")
            statistic = _STATISTICS.get(metric.split("/")[-1])
            params = info.get("params") if isinstance(info, dict) else None
            if statistic is None:
                session.note(f"{where} is not replayed: no rule was declared for metric {metric!r} (accuracy, "
                             "mean, std, var and stderr replay as rules; the value is kept in "
                             "meta.inspect.logs[].results)")
                continue
            if params:
                session.note(f"{where} is not replayed: the metric has parameters {text(params)} (e.g. a "
                             "clustered stderr), which the declared rules do not reproduce; the value is kept in "
                             "meta.inspect.logs[].results")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                session.note(f"{where} is not replayed: it reports {value!r}, not a number")
                continue
            scored = entry.get("scored_samples") if type(entry.get("scored_samples")) is int else None
            over = len(log.scored.get(column, ())) if scored is None else scored
            if statistic != "mean" and over < 2:
                session.note(f"{where} is not replayed: Inspect reports {value!r} for its {over} scored "
                             f"sample(s), a convention (the {metric} of fewer than 2 values divides by 0), which "
                             "a rule leaves undefined")
                continue
            reduce, score = _reduce(reducer, column, log.epochs)
            if reduce is False:
                session.note(f"{where} reduces epochs with {reducer!r}, which no rule reducer reproduces; no rule "
                             "was declared for it")
                continue
            parts = ["inspect", log.task, name, key] + ([reducer] if len(reducers[(scorer, name)]) > 1 else [])
            rule_id = ".".join(rule_id_part(p) for p in parts)
            if rule_id in taken:  # another log of the same task in this card
                rule_id = f"{rule_id}.{rule_id_part(log.key)}"
            n = 2
            while rule_id in taken:
                rule_id, n = f"{rule_id.rsplit('.log', 1)[0]}.log{n}", n + 1
            taken.add(rule_id)
            reported: dict[str, Any] = {"group": {"agent": agent}, "value": float(value),
                                        "tolerance": 1e-9 * max(1.0, abs(float(value)))}
            if scored is not None:
                reported["n"] = scored
            doc = rule_document(
                rule=rule_id,
                kind="original",
                description=(
                    f"Inspect's reported {key} of {name} for {log.task} ({log.path.name}"
                    + (f", epochs reduced with {reducer}" if reduce else "") + "): "
                    f"the {_STATISTIC_TEXT[statistic]} {column}, Inspect's value_to_float of each sample's score (see "
                    "meta.inspect.value_to_float). As Inspect counts: every sample-epoch that carries this score "
                    "is scored whatever its status (errored samples carry none unless score_on_error or a "
                    "re-score gave them one); NaN, Inspect's unscored marker, is null and excluded (counted)"
                    + ("; pass@k counts an epoch as a success when its value is >= 1 and leaves out samples "
                       "with fewer than k scored epochs" if reduce and reduce["with"].startswith("pass") else "")
                    + "."
                ),
                select=f"meta.inspect_log == {_quote(log.key)}",
                score=score,
                on_status={s: "score" for s in ("completed", "error", "timeout", "limit", "cancelled", "skipped")},
                on_missing="exclude",
                reduce=reduce,
                aggregate={"statistic": statistic, "group_by": ["agent"], "unit": "task_id",
                           "interval": _INTERVALS[statistic == "mean"]},
                reported=[reported],
            )
            if replayed is not None:
                if table is None:
                    table = replayed.table()
                if column not in table.column_names:
                    session.warn(f"{where}: no rule was declared: the header reports {key} {value!r}, but no "
                                 f"sample in the card carries the score {column} (the header names a scorer "
                                 "whose scores are not in the samples as read)")
                    continue
                verdict = replay(replayed, doc, table)
                if verdict.problem is not None:
                    session.warn(f"{where}: no rule was declared: the header reports {key} {value!r}, but the rule "
                                 f"that replays it cannot be applied to the imported samples: {verdict.problem}")
                    continue
                if not verdict.ok:
                    why = _disagreement(log, key, float(value), scored, verdict)
                    del doc["reported"]
                    doc["description"] += " Not replayed: " + why.split(": ", 1)[1]
                    session.warn(f"{where}: {why}")
            session.add_rule(doc)


def _disagreement(log: InspectLog, metric: str, value: float, scored: int | None, verdict: Replayed) -> str:
    """Why Inspect's number is not declared `reported`: both numbers and what the log shows."""
    counted = "" if scored is None else f" over {scored} scored sample(s)"
    got = (f"no value over {verdict.n} scored sample(s) (the statistic is undefined there)" if verdict.value is None
           else f"{verdict.value:.10g} over {verdict.n} scored sample(s)")
    if scored is not None and verdict.n != scored:
        cause = ("samples the header's results counted are not in the log as read (see the drops), or the samples "
                 "were changed after the results were written")
    else:
        cause = "the samples' scores are not those the results were computed from (the log was re-scored or edited " \
                "after its results were written)"
    return (f"not declared as reported: the header of {log.path.name} reports {metric} {value!r}{counted}, but "
            f"its samples give {got}: {cause}. The rule is declared without a reported number; the header's value "
            "is kept in meta.inspect.logs[].results.")


def _reducer_name(entry: dict[str, Any], log: InspectLog) -> str:
    reducer = entry.get("reducer")
    return str(reducer) if reducer else str(log.reducers[0]) if log.reducers else "mean"


def _reduce(reducer: str, column: str, epochs: int) -> tuple[dict[str, Any] | None | bool, str]:
    """The rule's reduce and score for an Inspect reducer; (False, _) when none reproduces it."""
    ref = _column_ref(column)
    if epochs <= 1 and reducer in _REDUCERS:
        return None, ref  # one epoch: every reducer returns the value itself
    if reducer in _REDUCERS:
        return {"by": ["task_id"], "with": _REDUCERS[reducer]}, ref
    # ASCII digits, bounded: int() reads '٣' and raises past 4,300 digits; a k of 0 is no reducer
    m = re.match(r"^(pass_at|pass_k)_([1-9][0-9]{0,8})$", reducer)
    if m:
        how = "pass_at_k" if m.group(1) == "pass_at" else "pass_hat_k"
        return {"by": ["task_id"], "with": how, "k": int(m.group(2)), "short": "exclude"}, f"{ref} >= 1"
    return False, ref


def _column_ref(column: str) -> str:
    return column if re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", column) else f"`{column}`"


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
