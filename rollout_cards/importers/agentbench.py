"""AgentBench `runs.jsonl` (and `error.jsonl`) to a rollout card.

AgentBench's assigner writes one line per finished sample to
`<output>/<agent>/<task>/runs.jsonl` — `{index, error, info, output: {index, status,
result, history}, time: {timestamp, str}}` — and samples whose worker failed to
`error.jsonl` in the same shape. One line is one episode `<agent>/<task>/<index>`; the
agent and task are `--agent` / `--option task=NAME`, else the grandparent and parent
directory names, as AgentBench lays them out.

`output.status` is AgentBench's `SampleStatus`; it is kept verbatim in `meta.status` and
mapped to a terminal state:

| SampleStatus | status |
|---|---|
| `completed` | completed |
| `agent context limit`, `task limit reached` | limit |
| `agent invalid action`, `agent validation failed` | error (`error_type` = the SampleStatus) |
| `task error`, `unknown`, a line with `error` set | error |
| `cancelled`, `running` (never finished) | cancelled |

The numbers AgentBench itself computes from these lines (`overall.json` `validation`:
the share of samples per status, `calculate_overall` in src/client/task.py) are declared
as rules over the runs.jsonl lines (the assigner's completions; error.jsonl lines are not
among them); the task's own score (`overall.json` `custom`) needs the task server and is
not in the lines (an `overall.json` beside runs.jsonl is kept as an artifact), except
where `custom.raw_results` lists the graded outputs (MedAgentBench): each sample's grade
is then `score.correct` and `custom.accuracy` the reported value of
`agentbench.custom.accuracy`.

AgentBench v0.1's task output (`runs.jsonl` of `{index, input, output, target}` lines, with
`generation.jsonl` and `results.json` beside it) is read by `agentbench_v01`.

A source may be a task directory (`runs.jsonl`, `error.jsonl`, `overall.json`), an agent
directory or the output directory above them. The assigner retries a sample whose worker
failed (`auto_retry`, on by default): its error.jsonl line is then an earlier attempt of a
sample that has a later line — declared as omitted, not a second episode.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .agentbench_v01 import V01Counts, add_history, is_v01_line, read_v01
from .base import ImportRequest
from .json_stream import iter_jsonl, read_document
from .openai_chat import ChatMapping
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
from .source_dir import children
from .steps import StepBuffer, json_text

__all__ = ["AgentBenchImporter", "STATUS_MAP"]

#: SampleStatus value -> terminal state.
STATUS_MAP: dict[str, str] = {
    "completed": "completed",
    "agent context limit": "limit",
    "task limit reached": "limit",
    "agent invalid action": "error",
    "agent validation failed": "error",
    "task error": "error",
    "unknown": "error",
    "cancelled": "cancelled",
    "running": "cancelled",
}
_KNOWN = frozenset(("index", "error", "info", "output", "time"))
_OUTPUT = frozenset(("index", "status", "result", "history"))


class AgentBenchImporter:
    """AgentBench v0.2 task-server output: `runs.jsonl` / `error.jsonl`, one sample per line."""

    name = "agentbench"
    summary = ("AgentBench runs.jsonl / error.jsonl (one finished sample per line; v0.1 with generation.jsonl), or "
               "their output directories")
    options = {"task": "the AgentBench task name (default: the file's parent directory name)"}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every line of every source (runs.jsonl lines first, then error.jsonl's)."""
        request.check_options(self.name, self.options)
        chat = ChatMapping()
        counts: dict[tuple[str, str], Counter[str]] = {}
        groups: dict[tuple[str, str], list[tuple[Path, str | None]]] = {}
        for index, path in enumerate(request.sources):
            if not path.is_dir() and path.name == "overall.json":
                _check_overall_source(path, request.sources)
                continue  # read beside its runs.jsonl, which another source imports
            found = _task_files(path, 0) if path.is_dir() else [path]
            if not found:
                raise SourceFormatError("holds no AgentBench runs.jsonl or error.jsonl (the assigner writes "
                                        "<output>/<agent>/<task>/runs.jsonl)", file=str(path))
            for file in found:
                agent = request.agent or file.resolve().parent.parent.name or file.stem
                task = str(request.options.get("task") or file.resolve().parent.name or file.stem)
                groups.setdefault((agent, task), []).append((file, request.url(index)))
        retried: Counter[tuple[str, str]] = Counter()
        v01 = V01Counts()
        accuracy: dict[tuple[str, str], float] = {}
        for (agent, task), files in groups.items():
            tally = counts.setdefault((agent, task), Counter())
            files.sort(key=lambda f: f[0].name == "error.jsonl")  # runs.jsonl first
            done: set[Any] = set()
            overall = files[0][0].parent / "overall.json"
            summary = None
            if any(f.name == "runs.jsonl" for f, _u in files) and os.path.lexists(overall):
                summary = _read_overall(session, overall)
            grades = _grades(summary, overall)
            for path, url in files:
                session.add_source(path, self.name, url)
                if path.name == "runs.jsonl" and _first_is_v01(path):
                    read_v01(session, path, agent, task, chat, v01)
                    continue
                is_error = path.name == "error.jsonl"
                records = list(_lines(session, path)) if is_error else _lines(session, path)
                last = {_index(r): i for i, (_n, r) in enumerate(records)} if is_error else {}
                for i, (number, record) in enumerate(records):
                    with session.record():
                        key = _index(record)
                        if is_error and key is not None and (key in done or last.get(key, i) != i):
                            retried[(agent, task)] += 1  # an attempt the assigner retried (auto_retry)
                            continue
                        row, steps = _episode(record, f"line {number}", path, agent, task, chat)
                        row["meta.file"] = "error" if is_error else "runs"
                        if not is_error and str(_index(record)) in grades:
                            row["score.correct"] = grades.pop(str(_index(record)))
                        session.add_episode(row, steps)
                        done.add(_index(record))
                        if not is_error:
                            tally[row["meta.status"]] += 1
            if summary is not None:
                graded = _overall(session, overall, summary, agent, task, tally, grades)
                if graded is not None:
                    accuracy[(agent, task)] = graded
        for note in chat.notes():
            session.note(note)
        if retried:
            session.add_drop(target="episodes", action="omitted", declaration="author_declared",
                             loss_class="retried_attempt",
                             reason="error.jsonl lines of samples that have a later line (runs.jsonl, or a later "
                             "error.jsonl line): attempts whose worker failed and that the assigner retried "
                             "(auto_retry); the sample is the later line: " + ", ".join(
                                 f"{a}/{t}: {n}" for (a, t), n in sorted(retried.items())),
                             count=sum(retried.values()))
        v01.declare(session)
        _declare_rules(session, {k: c for k, c in counts.items() if c})
        if accuracy:
            _declare_accuracy(session, accuracy)
        _declare_missing(session)


def _check_overall_source(path: Path, sources: tuple[Path, ...]) -> None:
    """An overall.json given as a source: fine when its runs.jsonl (or a directory above it) is
    also a source, since it is read beside runs.jsonl; alone it holds no sample lines to import."""
    here = path.resolve().parent
    for other in sources:
        target = other.resolve()
        if target == here / "runs.jsonl" or (other.is_dir() and here.is_relative_to(target)):
            return
    raise SourceFormatError(
        "is AgentBench's run summary (overall.json: shares of each status and the task's grading), not its "
        "sample lines; import the task directory or the runs.jsonl beside it (overall.json is then read too)",
        file=str(path))


def _first_is_v01(path: Path) -> bool:
    """Whether the first line of a runs.jsonl is AgentBench v0.1's (read again by read_v01)."""
    with open(path, "rb") as fh:
        for _number, record in iter_jsonl(fh, str(path)):
            return is_v01_line(record)
    return False


def _task_files(directory: Path, depth: int) -> list[Path]:
    """runs.jsonl / error.jsonl of a task directory, or of the task (agent) directories below."""
    entries = list(children(directory))
    here = [p for name, p, is_dir in entries if not is_dir and name in ("runs.jsonl", "error.jsonl")]
    if here or depth >= 2:
        return here
    return [f for _name, p, is_dir in entries if is_dir for f in _task_files(p, depth + 1)]


def _lines(session: ImportSession, path: Path):
    with open(path, "rb") as fh:
        yield from session.guard(iter_jsonl(fh, str(path)))


def _index(record: Any) -> Any:
    index = record.get("index") if isinstance(record, dict) else None
    return index if isinstance(index, (int, str)) and not isinstance(index, bool) else None


def _read_overall(session: ImportSession, path: Path) -> Any:
    if not os.path.isfile(path) or os.path.islink(path):
        raise SourceFormatError("is a link or not a regular file; links are not followed", file=str(path))
    session.add_source(path, "agentbench-overall")
    return read_document(path, max_value_chars=64 << 20, constants=True)  # json.dumps writes NaN / Infinity


def _grades(doc: Any, path: Path) -> dict[str, bool]:
    """Per-sample grades of an overall.json whose `custom.raw_results` lists the graded outputs
    (MedAgentBench's calculate_overall appends `Correct` / `Incorrect` to the SampleStatus of
    every output with a result): sample index (as text) -> correct. Other tasks' `custom`
    (a figure, no raw_results) grade nothing."""
    custom = doc.get("custom") if isinstance(doc, dict) else None
    raw = custom.get("raw_results") if isinstance(custom, dict) else None
    if not isinstance(raw, list):
        return {}
    grades: dict[str, bool] = {}
    for number, item in enumerate(raw):
        status = item.get("status") if isinstance(item, dict) else None
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(status, str) or isinstance(index, bool) or not isinstance(index, (int, str)):
            raise SourceFormatError("is not a graded output (an object with index and status)", file=str(path),
                                    record=f"custom.raw_results[{number}]")
        for suffix, correct in (("Correct", True), ("Incorrect", False)):
            if status.endswith(suffix) and status[:-len(suffix)] in STATUS_MAP:
                if grades.get(str(index), correct) != correct:
                    raise SourceFormatError(f"grades sample {index!r} both correct and incorrect", file=str(path),
                                            record=f"custom.raw_results[{number}]")
                grades[str(index)] = correct
                break
    return grades


def _overall(session: ImportSession, path: Path, doc: Any, agent: str, task: str, tally: Counter[str],
             unmatched: dict[str, bool]) -> float | None:
    """overall.json is AgentBench's own summary: kept whole; its shares are checked against the lines'.
    Returns its `custom.accuracy` when its raw_results graded the lines (the rule's reported value)."""
    artifact = session.add_artifact(path.read_bytes())
    validation = doc.get("validation") if isinstance(doc, dict) else None
    n = sum(tally.values())
    if isinstance(validation, dict) and n:
        off = [s for s, v in validation.items() if s in STATUS_MAP and isinstance(v, (int, float))
               and abs(v - tally[s] / n) > 1e-9]
        if off or doc.get("total") != n:
            session.note(f"{agent}/{task}: overall.json (total {doc.get('total')!r}) differs from the "
                         f"{n} runs.jsonl lines for {', '.join(off) or 'the total'}: the rules replay the lines "
                         "(overall.json is written once, when the run first completed every sample)")
    custom = doc.get("custom") if isinstance(doc, dict) else None
    raw = custom.get("raw_results") if isinstance(custom, dict) else None
    if not isinstance(raw, list):
        session.note(f"{agent}/{task}: overall.json kept as artifact {artifact} (its `custom` figures are the task "
                     "server's grading, not computed from the lines)")
        return None
    session.note(f"{agent}/{task}: overall.json kept as artifact {artifact}; score.correct of each runs.jsonl "
                 "sample is the task server's grade from its custom.raw_results (status + Correct / Incorrect; "
                 "a sample with no result is not graded)")
    if unmatched:
        session.note(f"{agent}/{task}: overall.json grades sample(s) {', '.join(sorted(unmatched)[:20])} that "
                     "runs.jsonl does not hold; those grades are not kept")
    value = custom.get("accuracy")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        session.note(f"{agent}/{task}: overall.json custom.accuracy is {value!r}, not a finite number: "
                     "agentbench.custom.accuracy is not declared (the grades are kept in score.correct)")
        return None
    return float(value)


def _episode(
    record: Any, label: str, path: Path, agent: str, task: str, chat: ChatMapping
) -> tuple[dict[str, Any], StepBuffer]:
    probe = StepBuffer("", file=str(path), record=label)
    if not isinstance(record, dict):
        raise probe.error("is not a JSON object (an AgentBench run line)")
    sample = record.get("index")
    if isinstance(sample, bool) or not isinstance(sample, (int, str)) or sample == "":
        raise probe.error(f"index {sample!r} is not a sample index (an integer or a string)")
    episode_id = f"{agent}/{task}/{sample}"
    steps = StepBuffer(episode_id, file=str(path), record=f"{label} (index {sample})")
    if is_v01_line(record):  # a v0.1 line after v0.2+ lines (a v0.1 file is read by agentbench_v01)
        raise steps.error("is an AgentBench v0.1 runs.jsonl line (index, input, output, target) in a file whose "
                          "first line is v0.2+ task-server output (output.status, time)")
    output = record.get("output")
    if output is None:
        output = {}
    if not isinstance(output, dict):
        raise steps.error(f"output is {type(output).__name__}, expected an object")
    source_status = output.get("status", "unknown" if record.get("error") else None)
    if not isinstance(source_status, str) or source_status not in STATUS_MAP:
        known = ", ".join(repr(s) for s in STATUS_MAP)
        raise steps.error(f"output.status {source_status!r} is not an AgentBench SampleStatus ({known})")
    status = STATUS_MAP[source_status]
    row: dict[str, Any] = {
        "episode_id": episode_id, "task_id": f"{task}/{sample}", "agent": agent, "trial": 0,
        "status": status, "task.name": task, "task.index": str(sample), "meta.status": source_status,
    }
    error = record.get("error")
    if error is not None:
        row["status"] = "error"
        row["error_message"] = error if isinstance(error, str) else json_text(error)
    elif status == "error":
        row["error_type"] = source_status
        row["error_message"] = f"AgentBench sample status: {source_status}"
    elif status in ("limit", "cancelled"):
        row["error_message"] = f"AgentBench sample status: {source_status}"
    if output.get("index") is not None and output["index"] != sample:
        row["meta.output_index"] = str(output["index"])
    if "result" in output and output["result"] is not None:
        result = output["result"]
        row["meta.result"] = result if isinstance(result, str) else json_text(result)
    if record.get("info") is not None:
        row["meta.info"] = json_text(record["info"])
    time = record.get("time")
    if time is not None:
        if not isinstance(time, dict):
            raise steps.error(f"time is {type(time).__name__}, expected an object")
        stamp = time.get("timestamp")
        if stamp is not None:
            if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not 0 <= stamp < 1e14:
                raise steps.error(f"time.timestamp {stamp!r} is not epoch milliseconds")
            row["ended_at"] = int(stamp * 1000)  # AgentBench writes time.time() * 1000
    add_history(steps, output.get("history"), chat, "output.history")
    rest = {k: v for k, v in record.items() if k not in _KNOWN}
    rest.update({f"output.{k}": v for k, v in output.items() if k not in _OUTPUT})
    if rest:
        row["meta.record"] = json_text(rest)
    return row, steps


def _declare_rules(session: ImportSession, counts: dict[tuple[str, str], Counter[str]]) -> None:
    statuses = sorted({s for tally in counts.values() for s in tally} | {"completed"})
    every = {s: "score" for s in ("completed", "error", "timeout", "limit", "cancelled", "skipped")}
    for status in statuses:
        reported = [
            {"group": {"agent": agent, "task.name": task}, "value": tally[status] / sum(tally.values())}
            for (agent, task), tally in sorted(counts.items()) if tally
        ]
        if not reported:
            continue
        session.add_rule(rule_document(
            rule=f"agentbench.validation.{rule_id_part(status)}",
            kind="original" if status == "completed" else "diagnostic",
            description=(
                f"AgentBench's own overall.json `validation` figure for {status!r}: the share of the "
                "task's finished samples (every line of runs.jsonl) whose SampleStatus is that status."
            ),
            select="meta.file == 'runs'",
            score=f"meta.status == '{status}'",
            on_status=every,
            on_missing=0,
            aggregate={"group_by": ["agent", "task.name"]},
            reported=reported,
        ))


def _declare_accuracy(session: ImportSession, accuracy: dict[tuple[str, str], float]) -> None:
    session.add_rule(rule_document(
        rule="agentbench.custom.accuracy",
        kind="original",
        description=(
            "The task server's own overall.json `custom.accuracy` (MedAgentBench's calculate_overall): samples "
            "graded correct over every runs.jsonl sample; a sample without a result (invalid action, limit) "
            "is not graded and counts as a failure."
        ),
        select="meta.file == 'runs'",
        score="score.correct",
        on_status={"completed": "score", **{s: 0 for s in ("error", "timeout", "limit", "cancelled", "skipped")}},
        on_missing=0,
        aggregate={"group_by": ["agent", "task.name"]},
        reported=[{"group": {"agent": a, "task.name": t}, "value": v} for (a, t), v in sorted(accuracy.items())],
    ))


def _declare_missing(session: ImportSession) -> None:
    n = session.episodes_written
    why = "AgentBench run lines carry no per-message times"
    session.declare_missing("steps.t", why)
    session.declare_missing("episodes.started_at", "AgentBench records when a sample finished, not when it started",
                            count=n)
    for column in ("input_tokens", "output_tokens", "cost_usd"):
        session.declare_missing(f"steps.{column}", "AgentBench run lines carry no model usage")
    for column in ("input_tokens", "output_tokens", "total_tokens", "cost_usd"):
        session.declare_missing(f"episodes.{column}", "AgentBench run lines carry no model usage", count=n)
    session.declare_missing(
        "episodes", "runs.jsonl lists the samples that finished; how many the task has (the plan) and the task's "
        "own grading (overall.json `custom`, computed by the task server) are not in it")
    session.note("time.str (the same finishing time rendered in the run machine's local time, without a zone) "
                 "is not kept: ended_at holds time.timestamp")
