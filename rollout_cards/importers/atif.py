"""ATIF trajectories and Harbor trial / job directories to a rollout card.

Files are read as by `chat_jsonl` (ATIF records only; sub-agent files resolve beside
them, see `atif_steps`). A directory is a Harbor trial (`result.json` with `trial_name`,
`agent/trajectory.json`) or a job (`result.json` with `n_total_trials` and `stats`, one
trial directory per trial). A trial is one episode:

| Harbor `result.json` | card |
|---|---|
| `trial_name` | `episode_id` |
| `task_name` | `task_id` |
| `agent_info.name`, `agent_info.model_info.name` | `agent` = `<name>` or `<name>/<model>` |
| `source` (dataset; `adhoc` when absent) | `task.dataset` |
| `exception_info` | none → completed; `*TimeoutError` → timeout; `CancelledError` → cancelled; other → error (`error_type`, `error_message`, `error_traceback`) |
| `verifier_result.rewards.<key>` | `score.<key>` |
| `agent_result.n_input_tokens`, `n_output_tokens`, `cost_usd` | `input_tokens`, `output_tokens`, `cost_usd` |
| `started_at`, `finished_at`, phase timings | `meta.started_at`, `meta.finished_at`, `meta.timing` (Harbor writes local times without a zone) |
| `config`, `task_id`, `task_checksum`, `agent_result.metadata`, `n_cache_tokens` | `meta.config`, `meta.task_ref`, `meta.task_checksum`, `meta.agent_result` |
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .atif_steps import AtifCounts, add_trajectory, is_atif
from .base import ImportRequest
from .chat_jsonl import ChatJsonlImporter
from .json_stream import read_document
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
from .steps import StepBuffer, json_text

__all__ = ["AtifImporter", "trial_status"]

_MAX_RESULT_CHARS = 256 << 20


def trial_status(exception: Any) -> tuple[str, str | None]:
    """(status, error_type) of a Harbor trial from its exception_info."""
    if exception is None:
        return "completed", None
    kind = exception.get("exception_type") if isinstance(exception, dict) else None
    kind = kind if isinstance(kind, str) else "Exception"
    if kind.endswith("TimeoutError"):
        return "timeout", kind
    if kind == "CancelledError":
        return "cancelled", kind
    return "error", kind


def _read_json(path: Path, record: str | None = "document") -> Any:
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
        raise SourceFormatError("is a link or not a regular file; links are not followed", file=str(path))
    return read_document(path, max_value_chars=_MAX_RESULT_CHARS, record=record)


class AtifImporter(ChatJsonlImporter):
    """ATIF trajectories (schema_version ATIF-v1.x) and Harbor trial / job directories."""

    name = "atif"
    summary = "ATIF trajectories (ATIF-v1.0 to v1.7, sub-agents nested) or Harbor trial / job directories"
    atif_only = True
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import files as ATIF records and directories as Harbor trials or jobs."""
        files = [p for p in request.sources if not p.is_dir()]
        if files:
            super().read(ImportRequest(sources=tuple(files), urls=tuple(
                request.url(i) for i, p in enumerate(request.sources) if not p.is_dir()),
                agent=request.agent, options=request.options), session)
        harbor = _Harbor(request, session)
        for index, path in enumerate(request.sources):
            if path.is_dir():
                harbor.directory(path, request.url(index))
        harbor.finish()


class _Harbor:
    def __init__(self, request: ImportRequest, session: ImportSession):
        self.request, self.session = request, session
        self.rewards: dict[tuple[str, str], list[dict[str, Any] | None]] = {}
        self.job_metrics: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.trials = 0
        self.counts = AtifCounts()
        self.no_trajectory = 0
        self.planned = 0

    def directory(self, path: Path, url: str | None) -> None:
        result_path = path / "result.json"
        if not result_path.exists():
            raise SourceFormatError("is not a Harbor trial or job directory (no result.json)", file=str(path))
        result = _read_json(result_path)
        if not isinstance(result, dict):
            raise SourceFormatError("is not a JSON object", file=str(result_path))
        if "trial_name" in result:
            self.session.add_source(result_path, "harbor-trial", url)
            self.trial(path, result_path, result)
        elif "n_total_trials" in result:
            self.session.add_source(result_path, "harbor-job", url)
            self.job(path, result_path, result)
        else:
            raise SourceFormatError("is neither a Harbor TrialResult (trial_name) nor a JobResult (n_total_trials)",
                                    file=str(result_path))

    def job(self, path: Path, result_path: Path, result: dict[str, Any]) -> None:
        total = result.get("n_total_trials")
        if type(total) is int and total >= 0:
            self.planned += total
        evals = (result.get("stats") or {}).get("evals") if isinstance(result.get("stats"), dict) else None
        found = 0
        for child in sorted(path.iterdir()):
            if child.is_symlink():
                raise SourceFormatError("is a symbolic link; links are not followed", file=str(child))
            if child.is_dir() and (child / "result.json").is_file():
                trial_result = _read_json(child / "result.json")
                self.session.add_source(child / "result.json", "harbor-trial", None)
                with self.session.record():
                    self.trial(child, child / "result.json", trial_result)
                found += 1
        if isinstance(evals, dict):
            for key, stats in evals.items():
                if isinstance(stats, dict) and isinstance(stats.get("metrics"), list):
                    self.job_metrics.setdefault(("job", str(key)), []).extend(
                        m for m in stats["metrics"] if isinstance(m, dict))
        self.session.set_meta("harbor_job", {k: result.get(k) for k in ("id", "started_at", "finished_at",
                                                                          "n_total_trials", "stats")})

    def trial(self, path: Path, result_path: Path, result: Any) -> None:
        steps0 = StepBuffer("", file=str(result_path), record="document")
        if not isinstance(result, dict) or not isinstance(result.get("trial_name"), str):
            raise steps0.error("is not a Harbor TrialResult (no trial_name)")
        name = result["trial_name"]
        steps = StepBuffer(name, file=str(result_path), record=f"trial {name}")
        info = result.get("agent_info") if isinstance(result.get("agent_info"), dict) else {}
        model = (info.get("model_info") or {}).get("name") if isinstance(info.get("model_info"), dict) else None
        agent = self.request.agent or "/".join(str(x) for x in (info.get("name") or "agent", model) if x)
        dataset = result.get("source") or "adhoc"
        status, error_type = trial_status(result.get("exception_info"))
        row: dict[str, Any] = {"episode_id": name, "task_id": str(result.get("task_name") or name), "agent": agent,
                               "status": status, "task.dataset": str(dataset)}
        exc = result.get("exception_info")
        if isinstance(exc, dict):
            row.update(error_type=error_type, error_message=_text(exc.get("exception_message")),
                       error_traceback=_text(exc.get("exception_traceback")))
        verifier = result.get("verifier_result")
        rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
        if rewards is not None and not isinstance(rewards, dict):
            raise steps.error("verifier_result.rewards is not an object")
        for key, value in (rewards or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise steps.error(f"verifier_result.rewards.{key} is {value!r}, not a number")
            row[f"score.{key}"] = float(value)
        self.rewards.setdefault((agent, str(dataset)), []).append(rewards)
        usage = result.get("agent_result") if isinstance(result.get("agent_result"), dict) else {}
        for column, key in (("input_tokens", "n_input_tokens"), ("output_tokens", "n_output_tokens")):
            value = usage.get(key)
            if value is not None and (type(value) is not int or not 0 <= value < 1 << 63):
                raise steps.error(f"agent_result.{key} is {value!r}, not a non-negative 64-bit integer")
            row[column] = value
        if row["input_tokens"] is not None and row["output_tokens"] is not None:
            row["total_tokens"] = row["input_tokens"] + row["output_tokens"]
        cost = usage.get("cost_usd")
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
            raise steps.error(f"agent_result.cost_usd is {cost!r}, not a number")
        row["cost_usd"] = None if cost is None else float(cost)
        rest_usage = {k: v for k, v in usage.items() if k not in ("n_input_tokens", "n_output_tokens", "cost_usd")}
        if rest_usage:
            row["meta.agent_result"] = json_text(rest_usage)
        for key in ("started_at", "finished_at"):
            if result.get(key) is not None:
                row[f"meta.{key}"] = _text(result[key])
        timing = {k: result[k] for k in ("environment_setup", "agent_setup", "agent_execution", "verifier")
                  if result.get(k) is not None}
        if timing:
            row["meta.timing"] = json_text(timing)
        for key, column in (("config", "meta.config"), ("task_id", "meta.task_ref"),
                            ("task_checksum", "meta.task_checksum"), ("id", "meta.trial_id")):
            if result.get(key) is not None:
                row[column] = result[key] if isinstance(result[key], str) else json_text(result[key])
        trajectory = path / "agent" / "trajectory.json"
        if trajectory.is_file() and not trajectory.is_symlink():
            record = _read_json(trajectory)
            if not is_atif(record):
                raise SourceFormatError("is not an ATIF trajectory", file=str(trajectory))
            self.session.add_source(trajectory, "atif", None)
            steps.file = str(trajectory)
            add_trajectory(record, steps, self.counts, directory=trajectory.parent)
            if isinstance(record.get("agent"), dict) and record["agent"].get("model_name") is not None:
                row["meta.model"] = _text(record["agent"]["model_name"])
        else:
            self.no_trajectory += 1
        self.session.add_episode(row, steps)
        self.trials += 1

    def finish(self) -> None:
        if not self.trials:
            return
        session = self.session
        every = {s: "score" for s in ("completed", "error", "timeout", "limit")}
        every.update(cancelled="score", skipped="exclude")
        reported = []
        for (agent, dataset), rewards in sorted(self.rewards.items()):
            keys = {k for r in rewards if r for k in r}
            if len(keys) != 1:
                continue
            values = [0.0 if r is None else float(next(iter(r.values()))) for r in rewards]
            reported.append(({"agent": agent, "task.dataset": dataset}, sum(values) / len(values), next(iter(keys))))
        for key in sorted({k for _g, _v, k in reported}):
            session.add_rule(rule_document(
                rule=f"harbor.mean_{rule_id_part(key)}",
                kind="original",
                description=(f"Harbor's Mean metric: the mean of the verifier's {key!r} reward over every trial, "
                             "a trial the verifier did not score counting 0 (as harbor.metrics.mean does); "
                             "timed-out and failed trials keep the reward they were given."),
                score=f"score.{key}", on_status=every, on_missing=0,
                aggregate={"group_by": ["agent", "task.dataset"]},
                reported=[{"group": g, "value": v} for g, v, k in reported if k == key],
            ))
        n = self.trials
        if self.planned > n:
            session.add_drop(target="episodes", action="omitted", declaration="source_missing",
                             loss_class="interrupted_run", count=self.planned - n,
                             reason=f"the job's result.json counts {self.planned} trials (n_total_trials); "
                             f"{n} trial directories with a result.json were found")
        session.declare_missing("episodes.started_at", "Harbor writes started_at without a time zone (local "
                                "time of the machine); the text is kept in meta.started_at", count=n)
        session.declare_missing("episodes.ended_at", "Harbor writes finished_at without a time zone; the text "
                                "is kept in meta.finished_at", count=n)
        if self.no_trajectory:
            session.declare_missing("steps", "trial directories without agent/trajectory.json",
                                    count=self.no_trajectory)
        if self.counts.subagents:
            session.note(f"{self.counts.subagents} sub-agent trajectories are nested in their trial's episode "
                         "(span_begin/span_end, parent_seq, depth)")


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)
