"""OpenHands V1 SDK events to steps, with the sub-agent runs they launched nested under them.

Events (`kind`): `ActionEvent` → `tool_call`; `ObservationEvent` / `UserRejectObservation` /
`AgentErrorEvent` with a known `tool_call_id` → its `tool_result`; `MessageEvent` →
`message`; `SystemPromptEvent` → system `message`; `ACPToolCallEvent` (a tool call an ACP
agent server ran: Claude Code, Codex or Gemini CLI through the SDK's ACPAgent) → a
`tool_call` at its first event (name `tool_kind`, else `title`; args `raw_input`) and its
`tool_result` at the event that ends it (status `completed` / `failed`: content `raw_output`,
`is_error` when failed), an update in between → `annotation`; other kinds → `annotation`.

Sub-agents (DelegateTool `delegate` commands: one run per `tasks` entry; TaskTool calls: one
run) run in conversations of their own, read from the instance's conversations archive
(`openhands_archive`). The parent's events do not name the sub-conversation (its id is a
uuid4 the SDK keeps in memory), so a launch and a run are paired by what the format holds:

- the run's task message text equals the launch's task text (TaskAction `prompt`,
  DelegateAction `tasks[agent]`) exactly, and
- the message's time lies between the launching ActionEvent's and its observation's
  (the SDK stamps both on one clock, without a zone; compared, never stored), and
- each is the other's only match: a launch two runs fit, or a run two launches fit, is
  ambiguous and not nested (counted, with the reason, in the drops manifest).

A paired run becomes `span_begin` (name = the DelegateTool agent id or the TaskTool
`subagent_type`) right after the launching `tool_call`, the run's events with `parent_seq`
= that span and `depth` + 1, then `span_end`; the launch's observation follows as usual.
Runs of sub-agents' own sub-agents nest the same way, one level deeper.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .openai_chat import content_text
from .openhands_archive import Conversation, ConversationArchive, Run, naive_time
from .source_values import text as source_text
from .steps import StepBuffer, json_text

__all__ = ["Launch", "SubAgentCounts", "V1Events", "branch_points", "launches", "run_end_state", "v1_step"]

_ROLES = {"user": "user", "agent": "assistant", "environment": "tool"}
_RESULT_KINDS = ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")
#: ACP tool call statuses that end a call (acp_agent.py _TERMINAL_TOOL_CALL_STATUSES)
_ACP_ENDED = ("completed", "failed")


def _str(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)


def v1_step(event: dict[str, Any], where: str, steps: StepBuffer, nest: dict[str, Any]) -> int:
    """The step of one V1 SDK event (`where` names it in errors; nested as `nest` says); returns its seq."""
    kind = event.get("kind")
    payload = {k: v for k, v in event.items() if k not in ("kind", "source")}
    role = _ROLES.get(source_text(steps, event.get("source"), f"{where}.source"))  # a list or object is not a key
    call_id = event.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise steps.error(f"{where}.tool_call_id is not text")
    if kind == "ActionEvent":
        call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else {}
        args = call.get("arguments")
        if isinstance(args, str):
            args_text = args  # already JSON text as the model sent it
        else:
            args_text = json_text(args if args is not None else event.get("action"))
        thought, _parts = content_text(event.get("thought") or None)
        return steps.tool_call(_str(event.get("tool_name") or call.get("name")), args_text, call_id,
                               role="assistant", content=thought, payload=payload, **nest)
    if kind in _RESULT_KINDS:
        obs = event.get("observation") if isinstance(event.get("observation"), dict) else {}
        text = obs.get("output") if isinstance(obs.get("output"), str) else None
        if text is None:
            text, _ = content_text(obs.get("content")) if obs.get("content") is not None else (None, None)
        if text is None and isinstance(obs.get("message"), str):
            text = obs["message"]  # FinishObservation and friends
        if text is None:
            text = _str(event.get("error") or event.get("rejection_reason"))
        is_error = kind != "ObservationEvent" or obs.get("error") is True or obs.get("is_error") is True
        if call_id is not None and steps.has_call(call_id):
            return steps.tool_result(call_id, text, role="tool", is_error=is_error,
                                     name=_str(event.get("tool_name")) or kind, payload=payload, **nest)
        return steps.add("error" if kind == "AgentErrorEvent" else "observation", role="tool", name=kind,
                         content=text, is_error=is_error, payload=payload, **nest)
    if kind == "ACPToolCallEvent" and call_id is not None:
        return _acp_tool_call(event, steps, call_id, payload, nest)
    if kind == "MessageEvent":
        message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
        text, _ = content_text(message.get("content"))
        return steps.add("message", role=_str(message.get("role")) or role, content=text, payload=payload, **nest)
    if kind == "SystemPromptEvent":
        prompt = event.get("system_prompt")
        text = prompt.get("text") if isinstance(prompt, dict) else _str(prompt)
        return steps.add("message", role="system", content=_str(text), payload=payload, **nest)
    return steps.add("annotation", name=_str(kind), payload=payload, **nest)


def _acp_tool_call(event: dict[str, Any], steps: StepBuffer, call_id: str, payload: dict[str, Any],
                   nest: dict[str, Any]) -> int:
    """The steps of one ACPToolCallEvent. The SDK emits one per update of a call, reusing its
    `tool_call_id`, the last one authoritative (acp_agent.py `_emit_tool_call_event`); newer SDKs
    emit only the ending one. Returns the seq of the first step added."""
    status = event.get("status")
    ended = status in _ACP_ENDED
    name = _str(event.get("tool_kind") or event.get("title"))
    first = None
    if not steps.has_call(call_id):
        raw_input = event.get("raw_input")
        first = steps.tool_call(name, None if raw_input is None else json_text(raw_input), call_id,
                                role="assistant", payload=payload, **nest)
        if not ended:
            return first
        payload = {k: v for k, v in payload.items() if k in ("status", "is_error")}  # the rest is on the call
    elif not ended:  # an update of a running call: kept whole, the call's result comes at its end
        return steps.add("annotation", name="ACPToolCallEvent", payload=payload, **nest)
    raw_output = event.get("raw_output")
    if isinstance(raw_output, str):
        payload = {k: v for k, v in payload.items() if k != "raw_output"}  # it is the content, verbatim
    seq = steps.tool_result(call_id, _str(raw_output), role="tool", name=name,
                            is_error=status == "failed" or event.get("is_error") is True, payload=payload or None,
                            **nest)
    return seq if first is None else first


#: ConversationErrorEvent codes of the SDK's run limits (local_conversation.py `_emit_run_limit_error`)
_LIMIT_CODES = frozenset(("MaxIterationsReached", "MaxBudgetReached"))


def run_end_state(events: list[Any]) -> tuple[str, str | None, str] | None:
    """(status, error_type, error_message) of a V1 run the SDK stopped: the history ends on a
    `ConversationErrorEvent` (a run limit → limit, an exception's class name → error) or on a
    `stuck` execution status, with no agent action or message (or new user message) after it.
    None when the events show no such end (V0 events never do)."""
    for event in reversed(events):
        if not isinstance(event, dict):
            return None
        kind = event.get("kind")
        if kind == "ConversationErrorEvent":
            code = _str(event.get("code"))
            detail = _str(event.get("detail")) or code or "ConversationErrorEvent"
            return ("limit" if code in _LIMIT_CODES else "error"), code, detail
        if kind == "ConversationStateUpdateEvent" and event.get("key") == "execution_status":
            if event.get("value") == "stuck":
                return "error", "stuck", "the SDK's stuck detection stopped the run (execution_status stuck)"
            if event.get("value") == "finished":
                return None
            continue
        if kind in ("ActionEvent", "MessageEvent") or kind is None:
            return None  # the run went on (or these are not V1 events)
    return None


@dataclass(frozen=True)
class Launch:
    """One sub-agent run an ActionEvent asks for: the tool, the task text, the agent it names."""

    tool: str
    text: str | None
    agent: str | None


def launches(event: dict[str, Any]) -> list[Launch]:
    """Sub-agent runs a V1 ActionEvent launches: a DelegateTool `delegate` command runs one per
    entry of `tasks` (`spawn` only creates them), a TaskTool call runs one (openhands-tools
    delegate/impl.py, task/manager.py)."""
    if event.get("kind") != "ActionEvent":
        return []
    action = event.get("action") if isinstance(event.get("action"), dict) else {}
    kind = action.get("kind")
    if kind == "TaskAction" or (kind is None and event.get("tool_name") == "task"):
        prompt = action.get("prompt")
        return [Launch("task", prompt if isinstance(prompt, str) else None, _str(action.get("subagent_type")))]
    if (kind == "DelegateAction" or (kind is None and event.get("tool_name") == "delegate")) and \
            action.get("command") == "delegate":
        tasks = action.get("tasks")
        if isinstance(tasks, str):  # models send the tasks as JSON text at times (the SDK's issue 2216)
            try:
                tasks = json.loads(tasks)
            except ValueError:
                return [Launch("delegate", None, None)]
        if isinstance(tasks, dict) and tasks:
            return [Launch("delegate", t if isinstance(t, str) else None, str(a)) for a, t in tasks.items()]
        return [Launch("delegate", None, None)]
    return []


@dataclass
class SubAgentCounts:
    """What became of the sub-agent runs the lines launched, for the importer's drops."""

    launched: int = 0
    nested: int = 0
    no_archive: int = 0
    unmatched_archive: int = 0  # the archive has no conversation of this line
    not_found: int = 0
    ambiguous: int = 0
    unlaunched_runs: int = 0
    refused: int = 0  # launches of lines whose archive was refused (imported with --keep-going)
    refusals: list[str] = field(default_factory=list)
    archives: int = 0
    #: events whose parent (software-agent-sdk's conversation tree, 2026-07) is not the event before them
    branch_points: int = 0
    branched_histories: int = 0


#: event.types.ROOT_PARENT_ID: a parent_id naming no event, the root of a tree
_ROOT = "__root__"


def branch_points(events: list[Any]) -> int:
    """How many events do not continue the one before them in `events` (file order).

    software-agent-sdk keeps a conversation as a tree since 2026-07 (event/base.py `parent_id`,
    conversation/event_store.py `_effective_parent_id` @611629e6): an event's parent is its
    `parent_id`, the root for "__root__", else (legacy events) the event before it. A fork or a
    navigate appends events whose parent is an earlier one; the log then holds several branches
    one after another, and reading it in order joins them."""
    n = 0
    for i in range(1, len(events)):
        event, before = events[i], events[i - 1]
        if not isinstance(event, dict) or not isinstance(before, dict):
            continue
        parent = event.get("parent_id")
        if parent is None:
            continue  # legacy: the event before it
        if parent == _ROOT or parent != before.get("id"):
            n += 1
    return n


def _in(t: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if t is None:
        return True
    return (start is None or start <= t) and (end is None or t <= end)


class V1Events:
    """Maps the V1 events of one line, nesting the runs of `archive` (None: no archive read)."""

    def __init__(self, steps: StepBuffer, counts: SubAgentCounts, archive: ConversationArchive | None = None,
                 parent: Conversation | None = None):
        self.steps = steps
        self.counts = counts
        self.archive = archive
        self.parent = parent
        self._nested: set[int] = set()

    def add(self, events: list[dict[str, Any]], nest: dict[str, Any], conv: Conversation | None,
            members: list[str] | None = None) -> None:
        """Map `events` (of conversation `conv`; the line's history when `members` is None, else
        a run's events and the archive member of each)."""
        pairs = self._pairs(events, conv) if conv is not None else {}
        forks = branch_points(events)
        if forks:
            self.counts.branch_points += forks
            self.counts.branched_histories += 1
        for i, event in enumerate(events):
            where = f"history[{i}]" if members is None else f"{self.archive.name if self.archive else ''} " \
                f"member {members[i]!r}"
            if not isinstance(event, dict):
                raise self.steps.error(f"{where} is not an object")
            seq = v1_step(event, where, self.steps, nest)
            for j, launch in enumerate(launches(event)):
                self.counts.launched += 1
                run = pairs.get((i, j))
                if run is None:
                    continue
                self._nest(run, launch, seq, nest)

    def _nest(self, run: Run, launch: Launch, seq: int, nest: dict[str, Any]) -> None:
        self.counts.nested += 1
        self._nested.add(id(run))
        conv = run.conversation
        name = launch.agent or launch.tool
        depth = (nest.get("depth") or 0) + 1
        begin = self.steps.add("span_begin", name=name, payload={
            "tool": launch.tool, "launch_call_seq": seq, "conversation_id": conv.id, "run": run.index,
            "task": launch.text}, **nest)
        inner = {"parent_seq": begin, "depth": depth, "agent": name}
        self.add(run.events, inner, conv, run.members)
        state = conv.state or {}
        end: dict[str, Any] = {"conversation_id": conv.id, "run": run.index, "events": len(run.events)}
        if state.get("execution_status") is not None:
            end["conversation_execution_status"] = state["execution_status"]
        self.steps.add("span_end", name=name, payload=end, **nest)

    def _pairs(self, events: list[dict[str, Any]], conv: Conversation) -> dict[tuple[int, int], Run]:
        """(event index, launch index) -> the run each launch pairs with (module doc)."""
        assert self.archive is not None
        self.archive.load(conv)
        runs = [r for child in conv.children for r in child.runs]
        done: dict[str, datetime | None] = {}
        for event in events:  # the first observation time of each call id
            if isinstance(event, dict) and event.get("kind") in _RESULT_KINDS:
                cid = event.get("tool_call_id")
                if isinstance(cid, str) and cid not in done:
                    done[cid] = naive_time(event.get("timestamp"))
        fits: dict[tuple[int, int], list[Run]] = {}
        for i, event in enumerate(events):
            if not isinstance(event, dict):
                continue
            found = launches(event)
            if not found:
                continue
            start = naive_time(event.get("timestamp"))
            cid = event.get("tool_call_id")
            end = done.get(cid) if isinstance(cid, str) else None
            for j, launch in enumerate(found):
                fits[(i, j)] = [r for r in runs if launch.text is not None and r.text == launch.text
                                and _in(r.time, start, end)]
        claims: dict[int, int] = {}
        for options in fits.values():
            for r in options:
                claims[id(r)] = claims.get(id(r), 0) + 1
        pairs: dict[tuple[int, int], Run] = {}
        for key, options in fits.items():
            if len(options) == 1 and claims[id(options[0])] == 1:
                pairs[key] = options[0]
            elif options:
                self.counts.ambiguous += 1
            else:
                self.counts.not_found += 1
        return pairs

    def finish(self) -> None:
        """Count the archive's runs below the parent that no launch was paired with."""
        if self.parent is None or self.archive is None:
            return
        for conv in self.archive.load_tree(self.parent):
            self.counts.unlaunched_runs += sum(1 for r in conv.runs if id(r) not in self._nested)
