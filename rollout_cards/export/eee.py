"""A card's rule results in the Every Eval Ever (EEE) format, schema 0.3.0.

    rcard export eee CARD -o DIR

EEE (evaleval/every_eval_ever) stores one aggregate JSON per model (`eval.schema.json`)
and, beside it, one JSON Lines file of instance records (`instance_level_eval.schema.json`),
in its datastore layout `data/<collection>/<developer>/<model>/<uuid>.json` and
`<uuid>_samples.jsonl`. This writes that layout under DIR: one aggregate per agent of the
card, holding every headline of the exported rules for that agent (one
`evaluation_results` entry per group and stratum), and one instance record per rule
observation (an episode, or a reduced value when the rule reduces), linked to its
headline by `evaluation_result_id`.

EEE's typed fields get what they mean there (`score`, the interval as
`confidence_interval` with its level and method, `standard_error` with the method it
came from, `num_samples` = the observations the statistic is over, bootstrap resamples);
every count EEE has no field for goes into `score_details.details` under a name that
says what it counts (`n_observations`, `n_episodes`, `n_excluded`, `excluded_by_status`,
`independent_unit`, `n_independent_units`, ...), as EEE wants: strings. A headline that
is undefined (no observations) has no number to give EEE's required `score`: it is left
out and listed in `EeeExport.skipped`, as is a headline whose group names no single agent
while the card holds several.

The schemas themselves are not shipped (they are EEE's, MIT-licensed, and move with
EEE); `validate_eee(DIR, SCHEMA_DIR)` checks the output against copies the caller
passes, with jsonschema (`rcard export eee ... --schemas DIR`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExportError
from ..io.targets import directory_target, local_paths
from ..rules.engine import apply_rule
from ..rules.loader import declared_rules, read_rule
from ..rules.results import GroupResult, RuleRun
from ..stats import zero_event_upper_bound
from ..version import __version__

__all__ = ["SCHEMA_VERSION", "EeeExport", "export_eee", "validate_eee"]

#: The EEE schema version written (eval.schema.json / instance_level_eval.schema.json "version").
SCHEMA_VERSION = "0.3.0"
RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
_EPISODE_COLUMNS = ("episode_id", "task_id", "trial", "agent", "status", "input_tokens", "output_tokens",
                    "total_tokens", "started_at", "ended_at", "error_type", "error_message")
_STEP_COLUMNS = ("episode_id", "seq", "kind", "role", "name", "call_id", "content", "args")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class EeeExport:
    """What `export_eee` wrote: the aggregate files, the instance files, and what it left out."""

    logs: list[Path] = field(default_factory=list)
    samples: list[Path] = field(default_factory=list)
    results: int = 0
    instances: int = 0
    skipped: list[str] = field(default_factory=list)


def _component(value: str) -> str:
    """One safe directory name (EEE's datastore flattens `/` and refuses `.`, `..`, `data`)."""
    text = _UNSAFE.sub("_", value).strip("._") or "_"
    return f"_{text}" if text == "data" else text


def _text(value: Any) -> str:
    """EEE's `additional_details` / `details` hold strings only: numbers and objects as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _texts(mapping: dict[str, Any]) -> dict[str, str]:
    return {k: _text(v) for k, v in mapping.items() if v is not None}


def _uuid4(seed: str) -> str:
    """A UUID of version 4 form (EEE's file names require one), derived from `seed` so a
    re-export of the same card writes the same names."""
    return str(uuid.UUID(bytes=hashlib.sha256(seed.encode()).digest()[:16], version=4))


def _label(mapping: dict[str, Any] | None, skip: str | None = None) -> str:
    return ",".join(f"{k}={v}" for k, v in (mapping or {}).items() if k != skip)


def _result_id(result: GroupResult) -> str:
    parts = [result.rule]
    group = _label(result.group, "agent")
    if group:
        parts.append(group)
    if result.stratum is not None:
        parts.append(_label(result.stratum))
    elif result.pooled is not None:
        parts.append(f"pooled:{result.pooled.get('weights')}")
    return "/".join(parts)


def _rules(card: Any, rules: Sequence[str] | None) -> list[tuple[Any, str | None]]:
    declared = declared_rules(card)
    if not rules:
        return declared
    by_id = {r.rule: (r, f) for r, f in declared}
    return [by_id[r] if r in by_id else read_rule(r) for r in rules]


def _metric_config(rule: Any, run: RuleRun, binary: bool) -> dict[str, Any]:
    agg = rule.aggregate
    config: dict[str, Any] = {
        "metric_id": rule.rule,
        "metric_name": f"{agg.statistic.value} of {rule.score}",
        "metric_kind": agg.statistic.value,
        "lower_is_better": not agg.higher_is_better,
        "metric_parameters": {"rule_version": rule.version},
    }
    if rule.description:
        config["evaluation_description"] = rule.description
    if binary:
        config.update(score_type="binary", metric_unit="proportion", min_score=0, max_score=1)
    else:  # bounds EEE requires for continuous scores: not known from a rule, so null ("not provided")
        config.update(score_type="continuous", min_score=None, max_score=None)
    config["additional_details"] = _texts({
        "rule_kind": rule.kind.value,
        "score": rule.score,
        "select": rule.select,
        "on_status": rule.on_status.model_dump(mode="json"),
        "on_missing": rule.on_missing,
        "reduce": rule.reduce.model_dump(mode="json") if rule.reduce is not None else None,
        "group_by": list(run.group_by),
        "source": "rollout-cards rule (rules/*.yaml of the card or the file given)",
    })
    return config


def _score_details(result: GroupResult) -> dict[str, Any]:
    iv = result.interval
    by = ", ".join(str(b) for b in (result.reduce or {}).get("by") or [])
    observation = "episode" if result.reduce is None else f"reduced value (one per {by})"
    details = _texts({
        "n_observations": result.n,
        "observation": observation,
        "n_episodes": result.n_episodes,
        "n_excluded": result.n_excluded,
        "excluded_by_status": result.excluded_by_status,
        "n_missing_scores": result.n_missing,
        "n_missing_excluded": result.n_missing_excluded,
        "n_selected_out": result.n_selected_out,
        "successes": result.successes,
        "independent_unit": result.unit,
        "n_independent_units": iv.n_units,
        "interval_method": result.method_label,
        "interval_level": iv.level,
        "interval_defined": iv.defined,
        "interval_undefined_reason": iv.reason,
        "group": result.group,
        "stratum": result.stratum,
        "pooled": result.pooled,
        "display": result.display,
        "warnings": list(result.warnings) or None,
    })
    uncertainty: dict[str, Any] = {"num_samples": result.n}
    if result.zero_events:  # reported as the exact one-sided bound over the units, as `display` says
        bound = zero_event_upper_bound(iv.n_units or result.n, iv.level)
        low, high = (0.0, bound) if result.successes == 0 else (1.0 - bound, 1.0)
        uncertainty["confidence_interval"] = {"lower": low, "upper": high, "confidence_level": iv.level,
                                              "method": f"{result.method_label} (no {'successes' if result.successes == 0 else 'failures'}: exact bound)"}
    else:
        if iv.se is not None and math.isfinite(iv.se):
            uncertainty["standard_error"] = {"value": iv.se, "method": iv.method}
        if iv.defined and iv.low is not None and iv.high is not None:
            uncertainty["confidence_interval"] = {"lower": iv.low, "upper": iv.high, "confidence_level": iv.level,
                                                  "method": result.method_label}
    resamples = (iv.details or {}).get("resamples")
    if isinstance(resamples, int):
        uncertainty["num_bootstrap_samples"] = resamples
    return {"score": result.value, "details": details, "uncertainty": uncertainty}


@dataclass
class _Log:
    agent: str
    path: Path
    file_id: str
    collection: str
    developer: str
    model: str
    doc: dict[str, Any]
    rows: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    fh: Any = None

    @property
    def samples_rel(self) -> str:
        return f"data/{self.collection}/{self.developer}/{self.model}/{self.file_id}_samples.jsonl"


def export_eee(
    card: Any,
    out: str | os.PathLike[str],
    *,
    rules: Sequence[str] | None = None,
    organization: str | None = None,
    relationship: str = "other",
    developer: str | None = None,
    collection: str | None = None,
    instances: bool = True,
    retrieved_at: float | None = None,
) -> EeeExport:
    """Write `card`'s headlines of `rules` (declared rule ids or rule files; default: every
    declared rule) in EEE's datastore layout under `out`; returns what was written.

    `organization` is EEE's `source_organization_name` (default: the card's first author,
    else "unknown"); `relationship` its `evaluator_relationship`; `developer` the model
    developer for agents whose name has no `developer/` prefix; `collection` the datastore
    collection (default: the harness name, else the card id); `instances=False` writes
    the aggregates only; `retrieved_at` (epoch seconds) EEE's `retrieved_timestamp`
    (default: now)."""
    if relationship not in RELATIONSHIPS:
        raise ExportError(f"evaluator relationship {relationship!r} is not one of {', '.join(RELATIONSHIPS)}")
    directory_target(out, inputs=local_paths(card.source), what="the export")
    manifest = card.manifest
    names = set(card.schema("episodes").names)
    keep = [c for c in _EPISODE_COLUMNS if c in names]
    runs = [(rule, apply_rule(card, rule, file=file, keep_columns=keep)) for rule, file in _rules(card, rules)]
    if not runs:
        raise ExportError(f"{card.path}: the card declares no rules and none were given: nothing to export (pass --rule)")
    agents = sorted({a for a in card.episodes(columns=["agent"]).column("agent").to_pylist() if a is not None})
    harness = (manifest.provenance.harness if manifest.provenance else None)
    collection = _component(collection or (harness.name if harness and harness.name else manifest.id))
    report = EeeExport()
    logs: dict[str, _Log] = {}
    root = Path(out)
    retrieved = str(retrieved_at if retrieved_at is not None else time.time())
    created = manifest.created.isoformat().replace("+00:00", "Z")

    def log_of(agent: str) -> _Log:
        if agent not in logs:
            dev, _, model = agent.partition("/") if "/" in agent else (developer or "unknown", "", agent)
            evaluation_id = f"{manifest.id}/{agent}/{created}"
            file_id = _uuid4(evaluation_id)
            model_info: dict[str, Any] = {
                "name": agent, "id": agent if "/" in agent or developer is None else f"{developer}/{agent}",
                "additional_details": {"deployment_type": "unknown", "model_availability": "unknown",
                                       "rollout_card_agent": agent},
            }
            if "/" in agent or developer is not None:
                model_info["developer"] = dev
            first_author = manifest.authors[0].name if manifest.authors else None
            doc = {
                "schema_version": SCHEMA_VERSION,
                "evaluation_id": evaluation_id,
                "evaluation_timestamp": created,
                "retrieved_timestamp": retrieved,
                "source_metadata": {
                    "source_name": manifest.title,
                    "source_type": "evaluation_run",
                    "source_organization_name": organization or first_author or "unknown",
                    "evaluator_relationship": relationship,
                    "additional_details": _texts({"rollout_card_id": manifest.id, "rollout_card_format": manifest.format,
                                                  "rollout_card_created": created,
                                                  "exported_by": f"rollout-cards {__version__}"}),
                },
                "model_info": model_info,
                "eval_library": {
                    "name": harness.name if harness and harness.name else "unknown",
                    "version": (harness.version or harness.revision or "unknown") if harness else "unknown",
                    "additional_details": _texts({"import_format": (manifest.meta or {}).get("import", {}).get("format"),
                                                  "url": harness.url if harness else None}),
                },
                "evaluation_results": [],
            }
            logs[agent] = _Log(agent, root / "data" / collection / _component(dev) / _component(model) / f"{file_id}.json",
                               file_id, collection, _component(dev), _component(model), doc)
        return logs[agent]

    # Headlines -> evaluation_results; remember which headline each observation belongs to.
    links: list[tuple[Any, RuleRun, dict[int, tuple[_Log, str]]]] = []
    for rule, run in runs:
        binary = all(r.successes is not None for r in run.results if r.n)
        by_group: dict[int, tuple[_Log, str]] = {}
        labels = run.observations.groups.labels if run.observations is not None else []
        for result in run.results:
            agent = result.group.get("agent") if "agent" in result.group else (agents[0] if len(agents) == 1 else None)
            where = f"rule {result.rule} group {result.label}"
            if agent is None:
                report.skipped.append(f"{where}: its group names no single agent and the card holds {len(agents)} "
                                      "agents; EEE keeps one model per aggregate (group the rule by agent)")
                continue
            if result.value is None or not math.isfinite(result.value):
                report.skipped.append(f"{where}: undefined ({result.display}); EEE's score must be a number")
                continue
            log = log_of(str(agent))
            result_id = _result_id(result)
            log.doc["evaluation_results"].append({
                "evaluation_result_id": result_id,
                "evaluation_name": result.rule + (f"[{_label(result.group, 'agent')}]" if _label(result.group, "agent")
                                                  else ""),
                "source_data": {"dataset_name": collection, "source_type": "other",
                                "additional_details": {"rollout_card_id": manifest.id}},
                "metric_config": _metric_config(rule, run, binary),
                "score_details": _score_details(result),
            })
            report.results += 1
            if result.stratum is None:  # observations link to their group's headline (pooled if stratified)
                key = tuple(result.group.get(g) for g in run.group_by)
                for code, label in enumerate(labels):
                    if tuple(label) == key:
                        by_group[code] = (log, result_id)
        links.append((rule, run, by_group))

    root.mkdir(parents=True, exist_ok=True)
    try:
        if instances:
            _write_instances(card, links, binary_of={id(run): all(r.successes is not None for r in run.results if r.n)
                                                      for _, run, _ in links}, report=report)
        for log in logs.values():
            if log.fh is not None:
                log.fh.close()
                os.replace(log.path.with_name(f".{log.file_id}_samples.jsonl.tmp"),
                           log.path.with_name(f"{log.file_id}_samples.jsonl"))
                report.samples.append(log.path.with_name(f"{log.file_id}_samples.jsonl"))
                log.doc["detailed_evaluation_results"] = {
                    "format": "jsonl", "file_path": log.samples_rel, "hash_algorithm": "sha256",
                    "checksum": log.digest.hexdigest(), "total_rows": log.rows,
                }
            log.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = log.path.with_name(f".{log.path.name}.tmp")
            tmp.write_text(json.dumps(log.doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
            os.replace(tmp, log.path)
            report.logs.append(log.path)
    finally:
        for log in logs.values():
            if log.fh is not None and not log.fh.closed:
                log.fh.close()
    return report


def _messages(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, int, str]:
    """EEE messages of one episode's steps; (messages, tool calls, steps left out, first user text)."""
    messages: list[dict[str, Any]] = []
    calls = skipped = 0
    first_user = None
    for step in rows:
        kind, role = step["kind"], step.get("role")
        message: dict[str, Any] = {"turn_idx": len(messages)}
        if kind == "message":
            message.update(role=role or "unknown", content=step.get("content"))
            if role == "user" and first_user is None:
                first_user = step.get("content")
        elif kind == "tool_call":
            calls += 1
            try:
                args = json.loads(step["args"]) if step.get("args") else {}
            except ValueError:
                args = {"arguments": step["args"]}
            if not isinstance(args, dict):
                args = {"arguments": step["args"]}
            message.update(role=role or "assistant", content=None, tool_calls=[{
                "id": step.get("call_id") or f"seq-{step['seq']}", "name": step.get("name") or "unknown",
                "arguments": {str(k): _text(v) for k, v in args.items()}}])
        elif kind == "tool_result":
            message.update(role=role or "tool", content=step.get("content"),
                           tool_call_id=[step["call_id"]] if step.get("call_id") else None)
        elif kind == "observation":
            message.update(role=role or "environment", content=step.get("content"))
        else:
            skipped += 1
            continue
        messages.append(message)
    return messages, calls, skipped, first_user or ""


def _episode_steps(card: Any, wanted: set[str]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(episode_id, its steps in seq order) for the episodes in `wanted`, streamed; the card's
    steps must be grouped by episode (the writer and every importer store them so)."""
    names = set(card.schema("steps").names)
    columns = [c for c in _STEP_COLUMNS if c in names]
    done: set[str] = set()
    current, rows = None, []
    for batch in card.iter_steps(columns=columns):
        for step in batch.to_pylist():
            episode = step["episode_id"]
            if episode != current:
                if current is not None and current in wanted:
                    yield current, sorted(rows, key=lambda s: s["seq"])
                if episode in done:
                    raise ExportError(f"the steps of episode {episode!r} are not stored together; the instance "
                                      "export streams episodes in storage order (rewrite the card with rcard "
                                      "import or CardWriter, or export with instances off)")
                if current is not None:
                    done.add(current)
                current, rows = episode, []
            if episode in wanted:
                rows.append(step)
    if current is not None and current in wanted:
        yield current, sorted(rows, key=lambda s: s["seq"])


_MS_PER_UNIT = {"s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}


def _rows(identity: pa.Table) -> list[dict[str, Any]]:
    """The observations' episode columns as Python values, timestamps as float milliseconds
    since the epoch: Arrow stores any int64 as a timestamp, Python's datetime stops at year
    9999 (an ended_at in year 20000 was an internal error, OverflowError)."""
    for i, f in enumerate(identity.schema):
        if pa.types.is_timestamp(f.type):
            ticks = pc.cast(identity.column(i), pa.int64())
            ms = pc.multiply(pc.cast(ticks, pa.float64(), safe=False), _MS_PER_UNIT[f.type.unit])
            identity = identity.set_column(i, pa.field(f.name, pa.float64()), ms)
    return identity.to_pylist()


def _write_instances(card: Any, links: list, *, binary_of: dict[int, bool], report: EeeExport) -> None:
    # Per episode: the (rule, run, log, result id, value) of every observation that is that episode.
    per_episode: dict[str, list[tuple[Any, RuleRun, _Log, str, float, dict[str, Any]]]] = {}
    reduced: list[tuple[Any, RuleRun, _Log, str, float, dict[str, Any]]] = []
    for rule, run, by_group in links:
        obs = run.observations
        if obs is None:
            continue
        rows = _rows(obs.identity)
        for i, (code, value) in enumerate(zip(obs.codes.tolist(), np.asarray(obs.values, dtype=float).tolist(),
                                              strict=True)):
            target = by_group.get(code)
            if target is None or not math.isfinite(value):
                continue
            entry = (rule, run, target[0], target[1], value, rows[i])
            episode = rows[i].get("episode_id") if rule.reduce is None else None
            (per_episode.setdefault(episode, []) if episode is not None else reduced).append(entry)

    def emit(entry: tuple, messages: list[dict[str, Any]], calls: int, left_out: int, prompt: str) -> None:
        rule, run, log, result_id, value, row = entry
        binary = binary_of[id(run)]
        record: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": log.doc["evaluation_id"],
            "model_id": log.doc["model_info"]["id"],
            "evaluation_name": rule.rule,
            "evaluation_result_id": result_id,
            "sample_id": str(row.get("task_id") if row.get("task_id") is not None else row.get("episode_id")),
            "interaction_type": "agentic" if calls else "multi_turn",
            "input": {"raw": prompt if isinstance(prompt, str) else "", "reference": []},
            "output": None,
            "messages": messages,
            "answer_attribution": [],
            "evaluation": {"score": value, "is_correct": value == 1.0 if binary else value > 0,
                           "num_turns": len(messages) or None, "tool_calls_count": calls},
        }
        t_in, t_out = row.get("input_tokens"), row.get("output_tokens")
        if t_in is not None and t_out is not None:
            total = row.get("total_tokens")
            record["token_usage"] = {"input_tokens": t_in, "output_tokens": t_out,
                                     "total_tokens": total if total is not None else t_in + t_out}
        start, end = row.get("started_at"), row.get("ended_at")
        if isinstance(start, float) and isinstance(end, float):  # timestamps (_rows), not another type
            record["performance"] = {"latency_ms": max(end - start, 0.0)}
        status = row.get("status")
        if status is not None and status != "completed":
            record["error"] = ": ".join(str(x) for x in (status, row.get("error_type"), row.get("error_message"))
                                        if x is not None)
        record["metadata"] = _texts({
            "episode_id": row.get("episode_id"), "trial": row.get("trial"), "status": status,
            "rule_version": rule.version,
            "score": f"the rule's value for this {'episode' if rule.reduce is None else 'reduced key'} "
                     "(after on_status / on_missing)",
            "is_correct": "score == 1 (a 0/1 rule)" if binary else "score > 0 (the rule's scores are not 0/1)",
            "steps_not_messages": left_out or None,
            "reduce_key": _label({k: row.get(k) for k in (rule.reduce.by if rule.reduce else [])}) or None,
        })
        line = json.dumps(record, ensure_ascii=False, allow_nan=False, default=str) + "\n"
        if log.fh is None:
            log.path.parent.mkdir(parents=True, exist_ok=True)
            log.fh = open(log.path.with_name(f".{log.file_id}_samples.jsonl.tmp"), "w", encoding="utf-8")  # noqa: SIM115 - closed by export_eee
        log.fh.write(line)
        log.digest.update(line.encode("utf-8"))
        log.rows += 1
        report.instances += 1

    for episode, steps in _episode_steps(card, set(per_episode)):
        messages, calls, left_out, prompt = _messages(steps)
        for entry in per_episode.pop(episode):
            emit(entry, messages, calls, left_out, prompt)
    for entries in per_episode.values():  # episodes without steps
        for entry in entries:
            emit(entry, [], 0, 0, "")
    for entry in reduced:
        emit(entry, [], 0, 0, "")


def validate_eee(out: str | os.PathLike[str], schemas: str | os.PathLike[str]) -> list[str]:
    """Problems of the files `export_eee` wrote under `out` against EEE's `eval.schema.json`
    and `instance_level_eval.schema.json` in `schemas` (each problem names the file, the
    line for instance records, and the JSON pointer); [] when all validate."""
    import jsonschema

    schema_dir = Path(schemas)
    validators = {}
    for name in ("eval.schema.json", "instance_level_eval.schema.json"):
        path = schema_dir / name
        if not path.is_file():
            raise ExportError(f"{path} is missing; pass the directory holding EEE's {name}")
        schema = json.loads(path.read_text(encoding="utf-8"))
        validators[name] = jsonschema.Draft7Validator(schema)

    def problems(validator: Any, doc: Any, where: str) -> Iterator[str]:
        for error in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            pointer = "/" + "/".join(str(p) for p in error.absolute_path)
            yield f"{where} {pointer}: {error.message[:300]}"

    found: list[str] = []
    root = Path(out)
    for path in sorted(root.rglob("*.json")):
        found.extend(problems(validators["eval.schema.json"], json.loads(path.read_text(encoding="utf-8")), str(path)))
    for path in sorted(root.rglob("*_samples.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                found.extend(problems(validators["instance_level_eval.schema.json"], json.loads(line),
                                      f"{path} line {number}"))
    return found
