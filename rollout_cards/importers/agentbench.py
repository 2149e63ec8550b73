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
as rules; the task's own score (`overall.json` `custom`) needs the task server and is not
in the lines.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .base import ImportRequest
from .json_stream import iter_jsonl
from .openai_chat import ChatMapping, add_chat_messages
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
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
    summary = "AgentBench runs.jsonl / error.jsonl (one finished sample per line)"
    options = {"task": "the AgentBench task name (default: the file's parent directory name)"}

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every line of every source."""
        request.check_options(self.name, self.options)
        chat = ChatMapping()
        counts: dict[tuple[str, str], Counter[str]] = {}
        for index, path in enumerate(request.sources):
            session.add_source(path, self.name, request.url(index))
            agent = request.agent or path.resolve().parent.parent.name or path.stem
            task = str(request.options.get("task") or path.resolve().parent.name or path.stem)
            tally = counts.setdefault((agent, task), Counter())
            with open(path, "rb") as fh:
                for number, record in session.guard(iter_jsonl(fh, str(path))):
                    with session.record():
                        row, steps = _episode(record, f"line {number}", path, agent, task, chat)
                        session.add_episode(row, steps)
                        tally[row["meta.status"]] += 1
        for note in chat.notes():
            session.note(note)
        _declare_rules(session, counts)
        _declare_missing(session)


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
    history = output.get("history")
    if history is not None:
        if not isinstance(history, list):
            raise steps.error(f"output.history is {type(history).__name__}, expected a list")
        messages = []
        for i, item in enumerate(history):
            if not isinstance(item, dict):
                raise steps.error(f"output.history[{i}] is not an object")
            # v0.2 ChatHistoryItem has role user / agent; later versions use OpenAI messages
            messages.append({**item, "role": "assistant"} if item.get("role") == "agent" else item)
        add_chat_messages(steps, messages, chat, field="output.history")
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
        session.add_rule(rule_document(
            rule=f"agentbench.validation.{rule_id_part(status)}",
            kind="original" if status == "completed" else "diagnostic",
            description=(
                f"AgentBench's own overall.json `validation` figure for {status!r}: the share of the "
                "task's finished samples (every line of runs.jsonl) whose SampleStatus is that status."
            ),
            score=f"meta.status == '{status}'",
            on_status=every,
            on_missing=0,
            aggregate={"group_by": ["agent", "task.name"]},
            reported=reported,
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
