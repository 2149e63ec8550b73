"""AgentBench v0.1 task output (branch v0.1 @873b35a, src/task.py `Task`).

v0.1 ran each task in-process and wrote `outputs/<time>/<task>/` (or the configured
output directory):

- `runs.jsonl`: `save_runs_all`, one line per sample after the whole task ran —
  `{index, input, output, target}` (`output` None when the prediction raised: `predict_all`
  keeps None); a second evaluation appends a second set;
- `generation.jsonl`: `save_single`, one line per sample as it finished — `{index, input,
  output, history: [{role: user|agent, content}], exception_raised}`;
- `results.json`: the task's own metrics (`Task.metrics`, e.g. `EM` = outputs equal to the
  targets over the samples), each task computing its own.

One runs.jsonl line is one episode, its steps the history of the sample's generation.jsonl
line (the last one of its index). The path names no agent: `--agent`, else the directory
above the task directory (`<time>`), noted. No rule is declared: the metrics are each
task's own code over outputs and targets; results.json is kept in card meta.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .json_stream import iter_jsonl, read_document
from .openai_chat import ChatMapping, add_chat_messages
from .session import ImportSession
from .source_dir import regular_file
from .source_values import literals
from .steps import StepBuffer, json_text

__all__ = ["V01Counts", "add_history", "is_v01_line", "read_v01"]

_RUN_KEYS = frozenset(("index", "input", "output", "target"))
_GEN_KEYS = frozenset(("index", "input", "output", "history", "exception_raised"))
_MAX_RESULTS = 64 << 20


def is_v01_line(record: Any) -> bool:
    """Whether a runs.jsonl record is v0.1's `{index, input, output, target}` (no time, no error)."""
    return (isinstance(record, dict) and "target" in record and "input" in record and "time" not in record
            and "error" not in record)


class V01Counts:
    """What the v0.1 files held, for the importer's drops and notes."""

    def __init__(self) -> None:
        self.episodes = 0
        self.without_history = 0
        self.rewritten = 0  # runs.jsonl lines of an index a later line of the same file rewrote
        self.generation_repeats = 0
        self.tasks: list[str] = []
        self.results: dict[str, Any] = {}  # <agent>/<task> -> its results.json

    def declare(self, session: ImportSession) -> None:
        if not self.episodes:
            return
        if self.results:
            session.set_meta("agentbench_v01", {"results": self.results})
        session.note(f"{len(self.tasks)} AgentBench v0.1 task output(s) ({', '.join(self.tasks[:5])}): v0.1 paths "
                     "name no agent (outputs/<time>/<task>), so the agent is --agent, else the directory above the "
                     "task; no rule is declared (each task computes its own metrics, kept in meta.agentbench_v01)")
        session.add_drop(target="episodes.status", action="unobserved", declaration="source_missing",
                         loss_class="unavailable_source_field", count=self.episodes,
                         reason="AgentBench v0.1 records no sample status: a sample is completed when it has an "
                         "output and its generation line raised no exception, else error")
        session.declare_missing("episodes.ended_at", "AgentBench v0.1 lines record no time", count=self.episodes)
        if self.without_history:
            session.declare_missing("steps", "AgentBench v0.1 samples without a generation.jsonl line (the "
                                    "history is only there)", count=self.without_history)
        if self.rewritten:
            session.add_drop(target="episodes", action="omitted", declaration="author_declared",
                             loss_class="retried_attempt", count=self.rewritten,
                             reason="runs.jsonl lines of an index that a later line of the same file gives again "
                             "(a second evaluation appends a whole second set): the later line is the episode")
        if self.generation_repeats:
            session.note(f"{self.generation_repeats} generation.jsonl line(s) repeat an index: the last one's "
                         "history is used")


def read_v01(session: ImportSession, path: Path, agent: str, task: str, chat: ChatMapping,
             counts: V01Counts) -> None:
    """The episodes of a v0.1 runs.jsonl (added to `session`); generation.jsonl and results.json beside it."""
    directory = path.parent
    histories = _generations(session, directory / "generation.jsonl", counts)
    results = directory / "results.json"
    if os.path.lexists(results):
        regular_file(results, what="AgentBench v0.1 results.json")  # a link, FIFO or directory is refused
        session.add_source(results, "agentbench-v0.1-results")
        metrics = read_document(results, max_value_chars=_MAX_RESULTS, constants=True)
        counts.results[f"{agent}/{task}"] = json.loads(json_text(literals(metrics)))
    lines: dict[Any, tuple[str, dict[str, Any]]] = {}
    with open(path, "rb") as fh:
        for number, record in session.guard(iter_jsonl(fh, str(path))):
            probe = StepBuffer("", file=str(path), record=f"line {number}")
            if not is_v01_line(record):
                raise probe.error("is not an AgentBench v0.1 runs.jsonl line (index, input, output, target) like "
                                  "the file's first line")
            index = record.get("index")
            if isinstance(index, bool) or not isinstance(index, (int, str)) or index == "":
                raise probe.error(f"index {index!r} is not a sample index (an integer or a string)")
            if index in lines:
                counts.rewritten += 1
                del lines[index]  # the later line is the sample's; keep the file's order of last lines
            lines[index] = (f"line {number}", record)
    for index, (label, record) in lines.items():
        with session.record():
            row, steps = _episode(record, index, label, path, agent, task, histories.get(index), chat, counts)
            session.add_episode(row, steps)
    counts.tasks.append(f"{agent}/{task}")


def _generations(session: ImportSession, path: Path, counts: V01Counts) -> dict[Any, tuple[str, dict[str, Any]]]:
    out: dict[Any, tuple[str, dict[str, Any]]] = {}
    if not os.path.lexists(path):
        return out
    regular_file(path, what="AgentBench v0.1 generation.jsonl")  # a link, FIFO or directory is refused
    session.add_source(path, "agentbench-v0.1-generation")
    with open(path, "rb") as fh:
        for number, record in session.guard(iter_jsonl(fh, str(path))):
            if not isinstance(record, dict):
                raise SourceFormatError("is not a JSON object (a generation line)", file=str(path),
                                        record=f"line {number}")
            index = record.get("index")
            if index in out:
                counts.generation_repeats += 1
            out[index] = (f"{path.name} line {number}", record)
    return out


def _episode(record: dict[str, Any], index: Any, label: str, path: Path, agent: str, task: str,
             generation: tuple[str, dict[str, Any]] | None, chat: ChatMapping,
             counts: V01Counts) -> tuple[dict[str, Any], StepBuffer]:
    episode_id = f"{agent}/{task}/{index}"
    steps = StepBuffer(episode_id, file=str(path), record=f"{label} (index {index})")
    output = record.get("output")
    row: dict[str, Any] = {"episode_id": episode_id, "task_id": f"{task}/{index}", "agent": agent, "trial": 0,
                           "status": "completed", "task.name": task, "task.index": str(index),
                           "task.input": _text(record.get("input")), "task.target": _text(record.get("target")),
                           "meta.result": _text(output), "meta.file": "runs"}
    if output is None:
        row.update(status="error", error_message="no output: the sample's prediction raised (AgentBench v0.1 "
                   "keeps None)")
    counts.episodes += 1
    if generation is None:
        counts.without_history += 1
    else:
        where, gen = generation
        if gen.get("exception_raised") is True:
            row.update(status="error", error_type="exception_raised",
                       error_message="the agent session raised an exception (generation.jsonl exception_raised)")
        add_history(steps, gen.get("history"), chat, f"{where}: history")
        rest = {k: v for k, v in gen.items() if k not in _GEN_KEYS}
        if rest:
            row["meta.generation_record"] = json_text(rest)
    rest = {k: v for k, v in record.items() if k not in _RUN_KEYS}
    if rest:
        row["meta.record"] = json_text(rest)
    return row, steps


def add_history(steps: StepBuffer, history: Any, chat: ChatMapping, field: str) -> None:
    """An AgentBench chat history as steps: v0.1 / v0.2 items have role user / agent (agent is the
    assistant), later versions OpenAI messages; None adds nothing."""
    if history is None:
        return
    if not isinstance(history, list):
        raise steps.error(f"{field} is {type(history).__name__}, expected a list")
    messages = []
    for i, item in enumerate(history):
        if not isinstance(item, dict):
            raise steps.error(f"{field}[{i}] is not an object")
        messages.append({**item, "role": "assistant"} if item.get("role") == "agent" else item)
    add_chat_messages(steps, messages, chat, field=field)


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(literals(value))
