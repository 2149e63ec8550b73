"""ATIF trajectories and Harbor trial / job directories to a rollout card.

Files are read as by `chat_jsonl` (ATIF records only; sub-agent files resolve beside
them, see `atif_steps`). A directory is a Harbor trial (`result.json` with `trial_name`,
`agent/trajectory.json`) or a job (`result.json` with `n_total_trials` and `stats`, one
trial directory per trial). A trial is one episode:

| Harbor `result.json` | card |
|---|---|
| `trial_name` | `episode_id` |
| `task_name` | `task_id` |
| `agent_info.name`, `agent_info.model_info.name` | `agent` = `<name>` or `<name>/<model>`; the rest `meta.agent_info` |
| `source` (dataset; `adhoc` when absent) | `task.dataset` |
| `config.job_id` (else the job directory's id) | `run_id` |
| `exception_info` | see `trial_status`; `error_type`, `error_message`, `error_traceback` |
| `verifier_result.rewards.<key>` | `score.<key>` |
| `agent_result.n_input_tokens`, `n_output_tokens`, `cost_usd` | `input_tokens`, `output_tokens`, `cost_usd` |
| `started_at`, `finished_at` | `started_at`, `ended_at` when zoned (newer Harbor writes UTC), else `meta.*` text |
| `config`, `task_id`, `task_checksum`, `trial_uri`, phase timings, other fields | `meta.*` (docs/importers.md) |

`harbor.mean_<key>` is declared per agent, dataset and job; its `reported` value is the job's
own Mean (result.json `stats.evals`), only where the trials imported are the ones it counts.
Read from Harbor as vendored at refreshdotdev/harbor-trajectories @22dafa68 (job.py,
models/job/result.py, models/trial/result.py, metrics/mean.py).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .atif_steps import AtifCounts, add_trajectory, declare_counts, is_atif
from .base import ImportRequest
from .chat_jsonl import ChatJsonlImporter
from .json_stream import read_document
from .rule_files import TOLERANCE, rule_document, rule_id_part
from .session import ImportSession
from .steps import StepBuffer, json_text, parse_timestamp

__all__ = ["AtifImporter", "trial_status"]

_MAX_RESULT_CHARS = 256 << 20


#: Harbor exceptions that end a trial before its agent ran (harbor/environments, agents/base): an error of
#: the harness, not the agent running out of time.
_SETUP_TIMEOUTS = frozenset({"EnvironmentStartTimeoutError", "AgentSetupTimeoutError"})
#: Raised by harbor.llms when the model's context or output limit is hit (terminus-2 with summarization off).
_LIMITS = frozenset({"ContextLengthExceededError", "OutputLengthExceededError"})
_EVERY_STATUS = {"completed": "score", "error": "score", "timeout": "score", "limit": "score", "cancelled": "score",
                 "skipped": "exclude"}


def trial_status(exception: Any) -> tuple[str, str | None]:
    """(status, error_type) of a Harbor trial from its exception_info."""
    if exception is None:
        return "completed", None
    kind = exception.get("exception_type") if isinstance(exception, dict) else None
    kind = kind if isinstance(kind, str) else "Exception"
    if kind in _LIMITS:
        return "limit", kind
    if kind.endswith("TimeoutError") and kind not in _SETUP_TIMEOUTS:
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
    summary = ("ATIF trajectories (ATIF-v1.0 to v1.7, sub-agents nested), Harbor trial / job directories, or a "
               "NeMo Agent Toolkit nat eval workflow_output_atif.json")
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


#: TrialResult keys the trial mapping reads; any other key is kept in meta.record.
_TRIAL_KEYS = frozenset({
    "id", "task_name", "trial_name", "trial_uri", "task_id", "source", "task_checksum", "config", "agent_info",
    "agent_result", "verifier_result", "exception_info", "started_at", "finished_at", "environment_setup",
    "agent_setup", "agent_execution", "verifier"})
_JOB_KEYS = ("id", "started_at", "finished_at", "n_total_trials", "stats")


def evals_key(agent_name: str, model_name: str | None, dataset: str) -> str:
    """The key of Harbor's JobStats.evals for a trial (as harbor.models.job.result formats it)."""
    key = f"{agent_name}__{model_name}__{dataset}" if model_name else f"{agent_name}__{dataset}"
    return key.replace("/", "-")


@dataclass
class _Job:
    """What a job's result.json says about its trials, to check against the trials imported."""

    job_id: str
    path: Path
    planned: int | None
    evals: dict[str, Any]
    found: int = 0


@dataclass
class _Trial:
    """One imported trial, as the job statistics see it."""

    name: str
    group: tuple[str, str, str | None]  # agent, task.dataset, run_id (the job id)
    key: str  # Harbor's evals key
    rewards: dict[str, Any] | None


class _Harbor:
    def __init__(self, request: ImportRequest, session: ImportSession):
        self.request, self.session = request, session
        self.trials: list[_Trial] = []
        self.jobs: dict[str, _Job] = {}
        self.foreign: dict[str, int] = {}  # trials inside a job directory that name another job
        self.counts = AtifCounts()
        self.no_trajectory = 0
        self.unzoned = [0, 0]
        self.unfinished_dirs = 0
        self.job_meta: dict[str, Any] = {}
        self.unread: Counter[str] = Counter()  # names of trial-directory files not read, by count

    def directory(self, path: Path, url: str | None) -> None:
        result_path = path / "result.json"
        if not os.path.lexists(result_path):
            entries = _entries(path)
            for entry in entries:
                if entry.is_symlink():
                    raise SourceFormatError("is a symbolic link; links are not followed", file=entry.path)
            jobs = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)
                    and os.path.lexists(os.path.join(e.path, "result.json"))]
            if not jobs:
                raise SourceFormatError("is not a Harbor trial or job directory, nor a jobs directory holding them "
                                        "(no result.json in it or in its subdirectories)", file=str(path))
            for job in jobs:  # Harbor's jobs_dir (default `jobs/`): one directory per job
                self.directory(job, url)
            return
        result = _read_json(result_path)
        if not isinstance(result, dict):
            raise SourceFormatError("is not a JSON object", file=str(result_path))
        if "trial_name" in result:
            self.session.add_source(result_path, "harbor-trial", url)
            self.trial(path, result_path, result, None)
        elif "n_total_trials" in result:
            self.session.add_source(result_path, "harbor-job", url)
            self.job(path, result_path, result)
        else:
            raise SourceFormatError("is neither a Harbor TrialResult (trial_name) nor a JobResult (n_total_trials)",
                                    file=str(result_path))

    def job(self, path: Path, result_path: Path, result: dict[str, Any]) -> None:
        job_id = result.get("id")
        if not isinstance(job_id, str) or not job_id:
            raise SourceFormatError("JobResult has no id", file=str(result_path), record="document")
        if job_id in self.jobs:
            raise SourceFormatError(f"job {job_id} is also {self.jobs[job_id].path}; a job is imported once",
                                    file=str(result_path), record="document")
        total = result.get("n_total_trials")
        stats = result.get("stats") if isinstance(result.get("stats"), dict) else {}
        evals = stats.get("evals") if isinstance(stats.get("evals"), dict) else {}
        job = _Job(job_id, path, total if type(total) is int and total >= 0 else None, evals)
        self.jobs[job_id] = job
        for child in sorted(path.iterdir()):
            if child.is_symlink():
                raise SourceFormatError("is a symbolic link; links are not followed", file=str(child))
            if not child.is_dir():
                continue
            if not (child / "result.json").is_file():
                self.unfinished_dirs += 1  # Harbor deletes such a directory and reruns the trial on resume
                continue
            trial_result = _read_json(child / "result.json")
            self.session.add_source(child / "result.json", "harbor-trial", None)
            with self.session.record():
                self.trial(child, child / "result.json", trial_result, job)
        rest = {k: v for k, v in result.items() if k not in _JOB_KEYS and not (k == "trial_results" and v == [])}
        self.job_meta[job_id] = {**{k: result.get(k) for k in _JOB_KEYS if k != "id"}, "directory": path.name,
                                 **({"record": rest} if rest else {})}

    def trial(self, path: Path, result_path: Path, result: Any, job: _Job | None) -> None:
        steps0 = StepBuffer("", file=str(result_path), record="document")
        if not isinstance(result, dict) or not isinstance(result.get("trial_name"), str):
            raise steps0.error("is not a Harbor TrialResult (no trial_name)")
        name = result["trial_name"]
        steps = StepBuffer(name, file=str(result_path), record=f"trial {name}")
        info = result.get("agent_info") if isinstance(result.get("agent_info"), dict) else {}
        model_info = info.get("model_info") if isinstance(info.get("model_info"), dict) else {}
        model = model_info.get("name")
        agent = self.request.agent or "/".join(str(x) for x in (info.get("name") or "agent", model) if x)
        dataset = str(result.get("source") or "adhoc")
        config = result.get("config") if isinstance(result.get("config"), dict) else {}
        run_id = config.get("job_id") if isinstance(config.get("job_id"), str) else None
        status, error_type = trial_status(result.get("exception_info"))
        row: dict[str, Any] = {"episode_id": name, "task_id": str(result.get("task_name") or name), "agent": agent,
                               "status": status, "task.dataset": dataset, "run_id": run_id}
        if isinstance(info.get("name"), str) and info["name"]:
            self.session.add_agent({"name": agent, "model": _text(model), "version": _text(info.get("version"))})
        agent_rest = {k: v for k, v in info.items() if k not in ("name", "model_info")}
        model_rest = {k: v for k, v in model_info.items() if k != "name"}
        if model_rest:
            agent_rest["model_info"] = model_rest
        if agent_rest:
            row["meta.agent_info"] = json_text(agent_rest)
        exc = result.get("exception_info")
        if isinstance(exc, dict):
            row.update(error_type=error_type, error_message=_text(exc.get("exception_message")),
                       error_traceback=_text(exc.get("exception_traceback")))
            exc_rest = {k: v for k, v in exc.items()
                        if k not in ("exception_type", "exception_message", "exception_traceback")}
            if exc_rest:
                row["meta.exception_info"] = json_text(exc_rest)  # occurred_at (a local time, no zone)
        verifier = result.get("verifier_result")
        rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
        if rewards is not None and not isinstance(rewards, dict):
            raise steps.error("verifier_result.rewards is not an object")
        for key, value in (rewards or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise steps.error(f"verifier_result.rewards.{key} is {value!r}, not a number")
            row[f"score.{key}"] = float(value)
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
        self._times(result, row, steps)
        timing = {k: result[k] for k in ("environment_setup", "agent_setup", "agent_execution", "verifier")
                  if result.get(k) is not None}
        if timing:
            row["meta.timing"] = json_text(timing)
        for key, column in (("config", "meta.config"), ("task_id", "meta.task_ref"), ("trial_uri", "meta.trial_uri"),
                            ("task_checksum", "meta.task_checksum"), ("id", "meta.trial_id")):
            if result.get(key) is not None:
                row[column] = result[key] if isinstance(result[key], str) else json_text(result[key])
        rest = {k: v for k, v in result.items() if k not in _TRIAL_KEYS}
        if rest:
            row["meta.record"] = json_text(rest)  # fields of a newer TrialResult, kept as written
        trajectory = path / "agent" / "trajectory.json"
        if os.path.lexists(trajectory):
            record = _read_json(trajectory)  # a link, FIFO or directory is refused, not taken for no trajectory
            if not is_atif(record):
                raise SourceFormatError("is not an ATIF trajectory", file=str(trajectory))
            self.session.add_source(trajectory, "atif", None)
            steps.file = str(trajectory)
            add_trajectory(record, steps, self.counts, directory=trajectory.parent)
            if isinstance(record.get("agent"), dict) and record["agent"].get("model_name") is not None:
                row["meta.model"] = _text(record["agent"]["model_name"])
        else:
            self.no_trajectory += 1
        if job is not None:
            if run_id is None or run_id == job.job_id:
                job.found += 1
                row["run_id"] = job.job_id  # older Harbor wrote no config.job_id
            else:
                self.foreign[run_id] = self.foreign.get(run_id, 0) + 1
        self.session.add_episode(row, steps)
        self._unread(path)
        key = evals_key(str(info.get("name") or ""), None if model is None else str(model), dataset)
        self.trials.append(_Trial(name, (agent, dataset, row["run_id"]), key, rewards))

    def _unread(self, trial: Path) -> None:
        """Count the trial directory's other files (trial.log, exception.txt, verifier/ output, agent
        logs), two levels down without following links, for the note that says they are not read."""
        read = {"result.json", "config.json"}
        for top in _entries(trial):
            if top.is_dir(follow_symlinks=False):
                for inner in _entries(Path(top.path)):
                    if top.name == "agent" and inner.name.startswith("trajectory"):
                        continue  # the trajectory and the files it references
                    slash = "/" if inner.is_dir(follow_symlinks=False) else ""
                    self.unread[f"{top.name}/{inner.name}{slash}"] += 1
            elif top.name not in read:
                self.unread[top.name] += 1

    def _times(self, result: dict[str, Any], row: dict[str, Any], steps: StepBuffer) -> None:
        """started_at / finished_at: the episode's times when Harbor wrote them with a zone (UTC, newer
        versions), else the text in meta (older versions wrote the machine's local time)."""
        for i, (key, column) in enumerate((("started_at", "started_at"), ("finished_at", "ended_at"))):
            value = result.get(key)
            if value is None:
                self.unzoned[i] += 1
                continue
            if not isinstance(value, str):
                raise steps.error(f"{key} is {value!r}, not a timestamp")
            try:
                zoned = datetime.fromisoformat(value).tzinfo is not None
            except ValueError:
                raise steps.error(f"{key} {value[:60]!r} is not an ISO 8601 timestamp") from None
            if zoned:
                row[column] = parse_timestamp(value, file=steps.file, record=steps.record)
            else:
                row[f"meta.{key}"] = value
                self.unzoned[i] += 1
        if row.get("started_at") is not None and row.get("ended_at") is not None and row["ended_at"] < row["started_at"]:
            raise steps.error(f"finished_at {result['finished_at']!r} is before started_at {result['started_at']!r}")

    def finish(self) -> None:
        if not self.trials:
            return
        session = self.session
        self._rules()
        if self.job_meta:
            session.set_meta("harbor_jobs", self.job_meta)
        for job in self.jobs.values():
            if job.planned is not None and job.planned > job.found:
                session.add_drop(target="episodes", action="omitted", declaration="source_missing",
                                 loss_class="interrupted_run", count=job.planned - job.found,
                                 reason=f"job {job.job_id}'s result.json counts {job.planned} trials "
                                 f"(n_total_trials); {job.found} of its trial directories have a result.json")
        if self.unfinished_dirs:
            session.note(f"{self.unfinished_dirs} trial directories in the job directories have no result.json "
                         "(trials that had not finished; Harbor reruns them on resume)")
        for other, count in sorted(self.foreign.items()):
            session.warn(f"{count} trial directories inside a job directory name another job in config.job_id "
                         f"({other}): they are imported with run_id {other}, and that job's result.json was not "
                         "read, so no number of it is reported")
        for i, (column, key) in enumerate((("started_at", "started_at"), ("ended_at", "finished_at"))):
            if self.unzoned[i]:
                session.declare_missing(f"episodes.{column}", f"Harbor wrote {key} without a time zone (older "
                                        f"versions wrote the machine's local time) or not at all; the text is "
                                        f"kept in meta.{key}", count=self.unzoned[i])
        if self.no_trajectory:
            session.declare_missing("steps", "trial directories without agent/trajectory.json",
                                    count=self.no_trajectory)
        declare_counts(session, self.counts)
        if self.unread:
            shown = ", ".join(f"{name} ({n})" for name, n in self.unread.most_common(6))
            session.note(f"{sum(self.unread.values())} other files of the trial directories are not read (logs, "
                         f"verifier output, the agent's own files; no card field comes from them): {shown}")
        if self.counts.subagents:
            session.note(f"{self.counts.subagents} sub-agent trajectories are nested in their trial's episode "
                         "(span_begin/span_end, parent_seq, depth)")

    def _rules(self) -> None:
        """harbor.mean_<key> per agent, dataset and job; `reported` = the job's own Mean, where the job's
        result.json gives one over exactly the imported trials of that group (else warned)."""
        groups: dict[tuple[str, str, str | None], list[_Trial]] = {}
        for trial in self.trials:
            groups.setdefault(trial.group, []).append(trial)
        rules: dict[str, list[dict[str, Any]]] = {}
        for group, trials in sorted(groups.items(), key=lambda kv: tuple(x or "" for x in kv[0])):
            keys = {k for t in trials if t.rewards for k in t.rewards}
            if len(keys) != 1:
                continue  # Harbor's Mean refuses rewards with other than one key
            (key,) = keys
            reported = rules.setdefault(key, [])
            job = self.jobs.get(group[2] or "")
            if job is None:
                continue
            value = self._job_mean(job, group, trials)
            if value is not None:
                reported.append({"group": {"agent": group[0], "task.dataset": group[1], "run_id": group[2]},
                                 "value": value})
        for key, reported in sorted(rules.items()):
            self.session.add_rule(rule_document(
                rule=f"harbor.mean_{rule_id_part(key)}",
                kind="original",
                description=(f"Harbor's Mean metric: the mean of the verifier's {key!r} reward over every trial "
                             "of an agent, dataset and job, a trial the verifier did not score counting 0 (as "
                             "harbor.metrics.mean does); timed-out and failed trials keep the reward they were "
                             "given. Reported: the job's result.json (stats.evals.<key>.metrics)."),
                score=f"score.{key}", on_status=_EVERY_STATUS, on_missing=0,
                aggregate={"group_by": ["agent", "task.dataset", "run_id"]},
                reported=reported,
            ))

    def _job_mean(self, job: _Job, group: tuple[str, str, str | None], trials: list[_Trial]) -> float | None:
        key = trials[0].key
        stats = job.evals.get(key)
        label = f"job {job.job_id} ({job.path.name}), {key}"
        if not isinstance(stats, dict):
            self.session.warn(f"{label}: the job's result.json has no statistics for these {len(trials)} trials; "
                              "no number of Harbor's is reported for them")
            return None
        means = [m["mean"] for m in stats.get("metrics") or [] if isinstance(m, dict) and "mean" in m]
        others = [m for m in stats.get("metrics") or [] if not (isinstance(m, dict) and "mean" in m)]
        if others:
            self.session.note(f"{label}: metrics other than Mean ({json_text(others)[:200]}) are kept in "
                              "meta.harbor_jobs, not declared as rules")
        if len(means) != 1 or isinstance(means[0], bool) or not isinstance(means[0], (int, float)):
            self.session.warn(f"{label}: the job's result.json gives no single Mean ({json_text(means)[:200]}); "
                              "none is reported")
            return None
        listed = _listed_trials(stats)
        names = {t.name for t in trials}
        values = [0.0 if not t.rewards else float(next(iter(t.rewards.values()))) for t in trials]
        recomputed = sum(values) / len(values)
        if not listed <= names or abs(recomputed - means[0]) > TOLERANCE:
            missing = sorted(listed - names)
            self.session.warn(f"{label}: the job's Mean {means[0]!r} is not the mean over the {len(trials)} trials "
                              f"imported ({recomputed!r})" + (f"; its statistics list trials not found: "
                                                               f"{', '.join(missing[:5])}" if missing else "")
                              + "; it is not reported (the rule recomputes from the trials)")
            return None
        return float(means[0])


def _listed_trials(stats: dict[str, Any]) -> set[str]:
    """Trial names Harbor's AgentDatasetStats.reward_stats lists (the trials its verifier scored). Its
    exception_stats is not used: the live updates leave there trials whose directories a resume removed."""
    names: set[str] = set()
    table = stats.get("reward_stats")
    for by_value in table.values() if isinstance(table, dict) else ():
        for trials in by_value.values() if isinstance(by_value, dict) else ():
            if isinstance(trials, list):
                names.update(t for t in trials if isinstance(t, str))
    return names


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda e: e.name)[:10_000]
    except OSError:
        return []


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)
