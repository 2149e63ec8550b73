"""lm-evaluation-harness `--log_samples` output to a rollout card.

A source is an output directory (or its files): `results_<time>.json` and one
`samples_<task>_<time>.jsonl` per task of that run (lm-eval >= 0.4.3, written into
`<output_path>/<model_name_sanitized>/`, so a directory's subdirectories are read too;
`--output_path x.json` names the results `x_<time>.json`); lm-eval 0.4.0-0.4.2 wrote
`results.json` and one `<model_args>_<task>.jsonl` (a JSON array) per task. Several runs
of one model on one task in the sources are trials (`meta.run` = the run's time, rules
per run; with several models the rule ids name the model). Before 0.4.7 a sample line does not name its filter and a task with several
filters writes one line per filter in filter order: the n-th line of a doc takes the
task's n-th filter as the results file lists them. One episode per sample line (a
document of a task under one filter): `episode_id` = `<model>/<task>/<doc_id>` (plus
`/<filter>` for a filter other than `none`), `task_id` = `<task>/<doc_id>`,
`task.name` = the task. lm-eval writes `NaN` and `Infinity` literals and numbers as
strings; both files are read with those constants allowed (they are never written
into the card: a non-finite score is null and counted), and a numeric string in a
metric is read as its number.

Each metric a task reports (`results[<task>]["<metric>,<filter>"]`) becomes a rule
when it replays as a mean of the per-sample values (accuracy, exact match, …); a
metric aggregated otherwise (corpus F1, BLEU, perplexity), or whose reported value is
not finite, is noted and not declared. Group metrics (`groups`, `group_subtasks`)
are declared the same way over the samples of the group's tasks.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from ..model.card import Software
from .base import ImportRequest
from .compression import HEAD_BYTES, lfs_pointer_error
from .json_stream import JsonStream, parse_json
from .lm_eval_runs import Run, find_runs, open_runs, write_out_sample
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
from .steps import StepBuffer, json_text

__all__ = ["LmEvalImporter", "metric_value"]

_MAX_GROUP_DEPTH = 32
_MAX_LINE = 256 * 1024 * 1024
_SAMPLE_KEYS = frozenset(("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                          "doc_hash", "prompt_hash", "target_hash"))
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


def metric_value(value: Any) -> tuple[float | None, bool]:
    """(number, was_non_finite) of a per-sample metric: numbers, numeric strings and
    booleans read as numbers; NaN / infinities are None (and flagged); anything else None."""
    if isinstance(value, bool):
        return float(value), False
    if isinstance(value, str) and _NUMBER.match(value):
        value = float(value)
    if isinstance(value, (int, float)):
        number = float(value) if abs(value) < 1e308 or isinstance(value, float) else math.inf
        if not math.isfinite(number):
            return None, True
        return number, False
    return None, False


class LmEvalImporter:
    """lm-evaluation-harness output: results_<time>.json + samples_<task>_<time>.jsonl."""

    name = "lm-eval"
    summary = ("lm-evaluation-harness --log_samples output: results_<time>.json and samples_<task>_<time>.jsonl "
               "(0.3: results + <task>_write_out_info.json)")
    options: dict[str, str] = {}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every run (a results file and its samples files) found among the sources."""
        request.check_options(self.name, self.options)
        runs = find_runs(request)
        state = _State()
        opened = open_runs(session, runs, request.agent)
        for this, run, results in opened:
            _import_run(session, state, this, run, results)
        if not session.episodes_written and not any(run["samples"] for _t, run, _r in opened):
            name = next((run["results"][0] for _t, run, _r in opened if "results" in run), request.sources[0])
            if any(run.get("v03") for _t, run, _r in opened):
                raise SourceFormatError(
                    "is an lm-eval 0.3 results file (results, versions, config): it holds each task's aggregate "
                    "metrics only, and a card is made of per-sample results; lm-eval 0.3 wrote those only when "
                    "run with --write_out (<task>_write_out_info.json in --output_base_path): import them with "
                    "it, or re-run with lm-eval >= 0.4 and --log_samples", file=str(name))
            raise SourceFormatError("is an lm-eval results file without samples files: lm-eval writes the per-sample "
                                    "results (samples_<task>_<time>.jsonl) only when run with --log_samples, and a "
                                    "card is made of the samples; re-run with --log_samples and import the output "
                                    "directory", file=str(name))
        if session.episodes_written:
            state.finish(session)


class _State:
    def __init__(self) -> None:
        self.expected = 0
        self.non_finite = 0
        self.non_numeric: dict[str, int] = defaultdict(int)
        self.missing_tasks: list[tuple[str, int]] = []
        self.runs: list[dict[str, Any]] = []
        self.agents: set[str] = set()
        self.filters_by_order = 0

    def finish(self, session: ImportSession) -> None:
        session.set_plan({"expected_episodes": self.expected,
                          "description": "n-samples.effective of every task of each results file (x its filters)"})
        unread = self.expected - session.episodes_written - len(session.malformed) - sum(
            n for _, n in self.missing_tasks)
        if unread > 0:
            broke = sorted({Path(b.file).name for b in session.malformed
                            if b.message.endswith("the rest of the file was not read")})
            why = (f"{', '.join(broke)} break(s) off (imported with --keep-going; see the malformed-record drop) and "
                   "the samples after the break were not read, or were never written" if broke else
                   "the samples files hold fewer lines than the results report")
            session.add_drop(target="episodes", action="unobserved", declaration="source_missing",
                             loss_class="missing_records",
                             reason=f"{unread} sample(s) of n-samples.effective are not in the card: {why}",
                             count=unread)
        if self.missing_tasks:
            session.add_drop(target="episodes", action="unobserved", declaration="source_missing",
                             loss_class="missing_samples_file",
                             reason="the results file reports task(s) whose samples file is absent: "
                             + "; ".join(f"{t} ({n} samples)" for t, n in self.missing_tasks[:10]),
                             count=sum(n for _, n in self.missing_tasks))
        if self.non_finite:
            session.add_drop(target="episodes.score", action="unobserved", declaration="source_malformed",
                             loss_class="non_finite_value",
                             reason=f"{self.non_finite} per-sample metric value(s) are NaN or Infinity in the "
                             "source; they are null in score.<metric> (a card holds finite numbers only)",
                             count=self.non_finite)
        if self.filters_by_order:
            session.note(f"{self.filters_by_order} sample line(s) do not name their filter (lm-eval before 0.4.7) in "
                         "a task with several filters: the n-th line of a doc took the n-th filter of the task's "
                         "results (lm-eval writes the lines filter by filter, in that order)")
        for metric, n in sorted(self.non_numeric.items()):
            session.note(f"{n} sample(s) hold a non-numeric value for metric {metric} (e.g. the (gold, prediction) "
                         f"pair a corpus-level metric aggregates); kept as JSON text in meta.metric.{metric}, "
                         f"score.{metric} is null")
        n_ep, n_steps = session.episodes_written, session.steps_written
        session.declare_missing("steps.t", "lm-eval samples record no times", count=n_steps)
        for column in ("started_at", "ended_at"):
            session.declare_missing(f"episodes.{column}", "lm-eval samples record no times", count=n_ep)
        for table, n in (("episodes", n_ep), ("steps", n_steps)):
            for column in ("input_tokens", "output_tokens", "cost_usd"):
                session.declare_missing(f"{table}.{column}", "lm-eval samples record no token counts or costs",
                                        count=n)
        session.set_meta("lm_eval", {"runs": self.runs})


def _import_run(session: ImportSession, state: _State, this: Run, run: dict[str, Any],
                results: dict[str, Any]) -> None:
    model = this.model
    name = results.get("model_name") if isinstance(results.get("model_name"), str) else None
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    version = results.get("lm_eval_version")
    session.set_software("harness", Software(
        name="lm-evaluation-harness", version=version if isinstance(version, str) else None,
        revision=results.get("git_hash") if isinstance(results.get("git_hash"), str) else None,
        url="https://github.com/EleutherAI/lm-evaluation-harness"))
    session.add_agent({"name": model, "model": name,
                       "parameters": {k: config[k] for k in ("model", "model_args") if k in config}})
    state.agents.add(model)
    # per (task, filter, metric): the values seen, for the replay check of the results' number
    values: dict[tuple[str, str, str], list[float | None]] = defaultdict(list)
    reported = dict(results.get("results", {}))
    groups = results.get("groups") if isinstance(results.get("groups"), dict) else {}
    for group, metrics in groups.items():  # 0.5: groups only here; 0.4.x: in both
        reported.setdefault(group, metrics)
    for task, (path, url) in sorted(run["samples"].items()):
        session.add_source(path, "lm-eval-samples", url)
        _import_samples(session, state, path, task, this, values, _filters(reported.get(task)))
    n_samples = results.get("n-samples") if isinstance(results.get("n-samples"), dict) else {}
    filters_of: dict[str, set[str]] = defaultdict(set)
    for task, flt, _ in values:
        filters_of[task].add(flt)
    for task in filters_of:  # the filters the results report (a sample's odd filter is not one more run)
        filters_of[task] = set(_filters(reported.get(task))) or filters_of[task]
    for task, counts in n_samples.items():
        effective = counts.get("effective") if isinstance(counts, dict) else None
        if type(effective) is not int or effective < 0:
            continue
        if task in run["samples"]:
            state.expected += effective * max(1, len(filters_of.get(task, ())))
        else:
            state.expected += effective
            state.missing_tasks.append((task, effective))
    if not n_samples:  # no plan in the results: what the samples files hold, read or left out (--keep-going)
        files = {str(path) for path, _ in run["samples"].values()}
        state.expected += sum(len(v) for (t, f, m), v in values.items() if m == _first_metric(values, t, f))
        state.expected += sum(1 for bad in session.malformed if bad.file in files)
    artifact = None
    if "results" in run:
        artifact = session.add_artifact(run["results"][0].read_bytes())
    subtasks = results.get("group_subtasks") if isinstance(results.get("group_subtasks"), dict) else {}
    _declare_rules(session, this, reported, subtasks, values)
    state.runs.append({"results": run["results"][0].name if "results" in run else None, "results_artifact": artifact,
                       "model": model, "tasks": sorted(run["samples"]), "date": results.get("date"),
                       "run": this.label})


def _filters(metrics: Any) -> list[str]:
    """The filters of a task's results in the order lm-eval ran them (its `<metric>,<filter>` keys
    are written filter by filter)."""
    out: list[str] = []
    for key in metrics if isinstance(metrics, dict) else ():
        if "," in key and "_stderr," not in key and (flt := key.split(",", 1)[1]) not in out:
            out.append(flt)
    return out


def _leaves(name: str, subtasks: dict[str, Any], depth: int = 0) -> list[str]:
    """The tasks under a group (groups nest: mmlu -> mmlu_stem -> mmlu_anatomy), else [name]."""
    kids = subtasks.get(name)
    if not isinstance(kids, list) or not kids or depth > _MAX_GROUP_DEPTH:  # 0.4.x lists a task as {task: []}
        return [name]
    out: list[str] = []
    for kid in kids:
        for leaf in _leaves(kid, subtasks, depth + 1) if isinstance(kid, str) and kid != name else ():
            if leaf not in out:
                out.append(leaf)
    return out


def _first_metric(values: dict[tuple[str, str, str], list[Any]], task: str, flt: str) -> str | None:
    return next((m for t, f, m in values if t == task and f == flt), None)


def _records(path: Path):
    """(label, record) of a samples file: JSON Lines, or (0.4.0-0.4.2) one JSON array."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    if (pointer := lfs_pointer_error(str(path), head)) is not None:
        raise pointer  # its lines are read one by one, and a pointer is known by its whole text
    if head.lstrip().startswith(b"["):
        with open(path, "rb") as fh:
            stream = JsonStream(fh, str(path), max_value_chars=_MAX_LINE, constants=True)
            for index, value in stream.document_items():
                yield f"element {index}", value
        return
    for number, raw in _lines(path):
        yield f"line {number}", raw


def _lines(path: Path):
    with open(path, "rb") as fh:
        number = 0
        while True:
            number += 1
            raw = fh.readline(_MAX_LINE + 1)
            if not raw:
                return
            if len(raw) > _MAX_LINE:
                raise SourceFormatError(f"is longer than {_MAX_LINE} bytes; refusing to buffer it",
                                        file=str(path), record=f"line {number}")
            if raw.strip():
                yield number, raw


def _import_samples(session: ImportSession, state: _State, path: Path, task: str, this: Run,
                    values: dict[tuple[str, str, str], list[float | None]], filters: list[str]) -> None:
    model = this.model
    seen: dict[Any, int] = defaultdict(int)
    for label, raw in session.guard(_records(path)):
        with session.record():
            sample = parse_json(raw, str(path), label, constants=True) if isinstance(raw, bytes) else raw
            if this.write_out:
                sample = write_out_sample(sample)
            probe = StepBuffer("", file=str(path), record=label)
            if not isinstance(sample, dict):
                raise probe.error("is not a JSON object")
            doc_id = sample.get("doc_id")
            if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)) or doc_id == "":
                raise probe.error("doc_id is missing or not an integer or string")
            nth = seen[doc_id]
            seen[doc_id] += 1
            if "filter" in sample:
                flt = sample["filter"]
            elif nth < max(1, len(filters)):  # before 0.4.7: one unnamed line per filter, in filter order
                flt = filters[nth] if filters else "none"
                state.filters_by_order += len(filters) > 1
            else:
                raise probe.error(f"doc_id {doc_id!r} occurs {nth + 1} times, but the results file names "
                                  f"{len(filters) or 'no'} filter(s) of task {task} (lm-eval before 0.4.7 writes one "
                                  "line per filter without naming it); import each run's own results file with it")
            if not isinstance(flt, str):
                raise probe.error("filter is not a string")
            metrics = sample.get("metrics")
            if metrics is None:
                metrics = [k for k in sample if k not in _SAMPLE_KEYS]
            if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
                raise probe.error("metrics is not a list of metric names")
            if "" in metrics or "" in sample:
                # Keys become score.<metric> / meta.<key> columns, which need a name; lm-eval never
                # writes an empty one, so the file was edited.
                raise probe.error('a key or metric name is empty (""); name it, or remove it from the sample')
            episode_id = (f"{model}/" + (f"{this.label}/" if this.several else "") + f"{task}/{doc_id}"
                          + ("" if flt == "none" else f"/{flt}"))
            steps = StepBuffer(episode_id, file=str(path), record=f"{label} (doc_id {doc_id!r})")
            row: dict[str, Any] = {"episode_id": episode_id, "task_id": f"{task}/{doc_id}", "agent": model,
                                   "trial": this.trial.get(task, 0), "status": "completed", "task.name": task,
                                   "meta.filter": flt, "meta.doc_id": str(doc_id), "meta.run": this.label}
            scored: list[tuple[str, float | None, bool]] = []  # counted once the record is imported
            for metric in metrics:
                if metric not in sample:
                    raise steps.error(f"metric {metric!r} is listed in metrics but has no value")
                value, non_finite = metric_value(sample[metric])
                if value is None and not non_finite:
                    row[f"meta.metric.{metric}"] = _json(steps, sample[metric], metric)
                row[f"score.{metric}"] = value
                scored.append((metric, value, non_finite))
            target = sample.get("target")
            row["task.target"] = target if isinstance(target, str) else (None if target is None else _json(steps, target, "target"))
            if sample.get("doc") is not None:
                row["task.doc"] = _json(steps, sample["doc"], "doc")
            for key in ("doc_hash", "prompt_hash", "target_hash"):
                if isinstance(sample.get(key), str):
                    row[f"meta.{key}"] = sample[key]
            for key in ("resps", "filtered_resps"):
                if sample.get(key) is not None:
                    row[f"meta.{key}"] = _json(steps, sample[key], key)
            for key, value in sample.items():
                if key not in _SAMPLE_KEYS and key not in metrics and value is not None:
                    row[f"meta.{key}"] = value if isinstance(value, str) else _json(steps, value, key)
            _steps(steps, sample)
            session.add_episode(row, steps)
            # A record left out (--keep-going) adds no value: the reported mean is checked against
            # the values the card holds.
            for metric, value, non_finite in scored:
                state.non_finite += non_finite
                if value is None and not non_finite:
                    state.non_numeric[metric] += 1
                values[(task, flt, metric)].append(value)


def _json(steps: StepBuffer, value: Any, field: str) -> str:
    try:
        return json_text(value)
    except ValueError:  # a NaN / Infinity inside: its text is not JSON, keep the structure with nulls
        return json_text(_finite(value))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _steps(steps: StepBuffer, sample: dict[str, Any]) -> None:
    """One request per `arguments.gen_args_<i>`: the prompt (`arg_0`) as a user message, its
    other arguments in the payload, then the model's response `resps[i]`."""
    arguments = sample.get("arguments")
    resps = sample.get("resps")
    if arguments is None:
        return
    if isinstance(arguments, list) and all(isinstance(a, list) for a in arguments):
        # 0.4.0-0.4.2 kept each request's args as a list: the gen_args_<i>.arg_<j> the tracker writes since
        arguments = {f"gen_args_{i}": {f"arg_{j}": v for j, v in enumerate(a)} for i, a in enumerate(arguments)}
    if not isinstance(arguments, dict):
        raise steps.error("arguments is not an object")
    for i, (key, args) in enumerate(arguments.items()):
        if not isinstance(args, dict):
            raise steps.error(f"arguments.{key} is not an object")
        prompt = args.get("arg_0")
        rest = {k: v for k, v in args.items() if k != "arg_0"}
        steps.add("message", role="user", name=key, content=prompt if isinstance(prompt, str) else None,
                  payload=_finite({**rest, **({} if isinstance(prompt, str) or prompt is None else {"arg_0": prompt})})
                  or None)
        resp = resps[i] if isinstance(resps, list) and i < len(resps) else None
        if resp is None:
            continue
        texts = resp if isinstance(resp, list) else [resp]
        if all(isinstance(t, str) for t in texts):
            steps.add("message", role="assistant", name=key, content="\n".join(texts),
                      payload={"responses": texts} if len(texts) > 1 else None)
        else:  # loglikelihood: [logprob, is_greedy] pairs (often as strings)
            steps.add("observation", role="assistant", name=key, content=None, payload={"response": _finite(resp)})


def _declare_rules(session: ImportSession, this: Run, reported: dict[str, Any], subtasks: dict[str, Any],
                   values: dict[tuple[str, str, str], list[float | None]]) -> None:
    model = this.model
    aggregate = {"statistic": "mean", "group_by": ["agent"], "unit": "task_id",
                 "interval": {"method": "auto", "level": 0.95}}
    on_status = {"completed": "score", "error": 0, "timeout": 0, "limit": 0, "cancelled": "exclude",
                 "skipped": "exclude"}
    for task, metrics in sorted(reported.items()):
        if not isinstance(metrics, dict):
            continue
        members = _leaves(task, subtasks)
        for key, value in sorted(metrics.items()):
            if "," not in key or "_stderr," in key:
                continue
            metric, flt = key.split(",", 1)
            number, non_finite = metric_value(value)
            scored = [t for t in members if values.get((t, flt, metric))]  # a group's tasks with this metric
            samples = [v for t in scored for v in values[(t, flt, metric)]]
            if not samples:
                continue
            where = f"{task} {key}"
            if number is None:
                session.note(f"{where}: the reported value {value!r} is not a finite number; no rule declared")
                continue
            if any(v is None for v in samples) or abs(math.fsum(samples) / len(samples) - number) > 1e-6:
                cause = (f"{len(session.malformed)} record(s) left out by --keep-going, or a corpus-level or other "
                         "aggregation" if session.malformed else "a corpus-level or other aggregation")
                session.note(f"{where}: the reported {number:.6g} is not the mean of the {len(samples)} per-sample "
                             f"values ({cause}); no rule declared")
                continue
            stderr = metrics.get(f"{metric}_stderr,{flt}")
            names = ", ".join("'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'" for t in scored)
            run = (f" and meta.run == '{this.label}'" if this.several else "")
            session.add_rule(rule_document(
                rule=f"lm_eval.{rule_id_part(task)}.{rule_id_part(metric)}"
                + ("" if flt == "none" else f".{rule_id_part(flt)}")
                + (f".{rule_id_part(model)}" if this.models > 1 else "")
                + (f".{rule_id_part(this.label)}" if this.several else ""),
                kind="original",
                description=f"lm-evaluation-harness's {metric} of {task}"
                + ("" if scored == [task] else f" (the mean over the samples of {', '.join(scored)})")
                + f" under filter {flt}: the mean of the per-sample values. The source's stderr: {stderr!r}.",
                select=f"task.name in [{names}] and meta.filter == '{flt}'" + run,
                score=f"score.{metric}", on_status=on_status, on_missing="error", aggregate=aggregate,
                reported=[{"group": {"agent": model}, "value": number}],
            ))
