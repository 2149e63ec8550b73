"""OpenHands evaluation `output.jsonl` (V0 event history and V1 SDK events) to a rollout card.

One line (`EvalOutput`: `instance_id`, `instruction`, `instance`, `metadata`, `history`,
`metrics`, `error`, `test_result`) is one episode `<instance_id>`. Terminal state: no
`error` → completed; an error saying the agent reached its maximum iteration or budget →
limit; any other error → error (`error_type` = the text before the first colon).

History, V0 (events with `action` / `observation`): `message` and `system` actions →
`message` (role user / assistant / system from `source`); every other action (`run`,
`read`, `edit`, `think`, `finish`, `browse`, `delegate`, …) → `tool_call` (`name` = the
action, `args` = `args`, `call_id` = the event id); an observation whose `cause` is an
earlier action → its `tool_result` (`is_error` for `error` observations), else
`observation`. V1 SDK (events with `kind`): `ActionEvent` → `tool_call` (`tool_name`,
`tool_call.arguments`, `tool_call_id`; its `thought` text as the call's `content`);
`ObservationEvent` / `UserRejectObservation` / `AgentErrorEvent` with a known
`tool_call_id` → `tool_result`; `MessageEvent` → `message`; `SystemPromptEvent` → system
`message`; other kinds → `annotation` (`name` = kind). Every event's other fields are
the step's `payload`. OpenHands writes event times without a zone, so `t` is null and
the source's text is kept in `payload.timestamp`.

Delegation (V0 `AgentDelegateAction`): the parent's `delegate` action is its `tool_call`,
followed by a `span_begin` (`name` = the delegate agent, `payload.inputs`); the events up to
the matching `delegate` observation are the sub-agent's (the parent waits while the
delegate runs on the shared event stream): `parent_seq` = the span, `depth` + 1, `agent` =
the delegate; then `span_end` and the observation as the call's `tool_result`. Delegations
nest. A history that ends inside a delegation closes its spans (`payload.unclosed`).
V1 SDK sub-agents (DelegateTool, TaskTool) run in conversations of their own, so their
events are not in the line: a drop counts the sub-agent runs (`_v1_sub_agent_runs`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .base import ImportRequest
from .json_stream import iter_jsonl
from .openai_chat import content_text
from .session import ImportSession
from .steps import StepBuffer, json_text

__all__ = ["OpenHandsImporter", "terminal_state"]

_LIMIT = re.compile(r"maximum (iteration|budget)|max(imum)? iterations?|budget .*exceeded|exceeded .*budget", re.I)
_ROLES = {"user": "user", "agent": "assistant", "environment": "tool"}
_KNOWN = frozenset(("instance_id", "instruction", "instance", "metadata", "history", "metrics", "error",
                    "test_result"))


def terminal_state(error: Any) -> tuple[str, str | None]:
    """(status, error_type) of an output line from its `error`."""
    if error in (None, ""):
        return "completed", None
    text = error if isinstance(error, str) else json_text(error)
    kind = text.split(":", 1)[0].strip() if ":" in text else None
    kind = kind if kind and re.fullmatch(r"[A-Za-z_][\w.]*", kind) else None
    return ("limit" if _LIMIT.search(text) else "error"), kind


class OpenHandsImporter:
    """OpenHands evaluation output.jsonl (V0 agent events or V1 SDK events)."""

    name = "openhands"
    summary = "OpenHands evaluation output.jsonl (V0 event history or V1 SDK ActionEvent/ObservationEvent)"
    options: dict[str, str] = {}

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every line of every source."""
        request.check_options(self.name, self.options)
        stats = {"unpriced": 0, "no_usage": 0, "delegations": 0, "empty_delegations": 0, "v1_sub_agents": 0}
        for index, path in enumerate(request.sources):
            session.add_source(path, self.name, request.url(index))
            with open(path, "rb") as fh:
                for number, record in session.guard(iter_jsonl(fh, str(path))):
                    with session.record():
                        row, steps = _episode(record, f"line {number}", str(path), request.agent, session, stats)
                        session.add_episode(row, steps)
        n = session.episodes_written
        session.declare_missing("steps.t", "OpenHands writes event timestamps without a time zone; the text is kept "
                                "in payload.timestamp")
        session.declare_missing("episodes.started_at", "output.jsonl records no zoned start time", count=n)
        session.declare_missing("episodes.ended_at", "output.jsonl records no zoned end time", count=n)
        for column in ("input_tokens", "output_tokens", "cost_usd"):
            session.declare_missing(f"steps.{column}", "OpenHands keeps per-call usage in metrics.token_usages "
                                    "(kept in meta.metrics), not per event")
        if stats["unpriced"]:
            session.declare_missing("episodes.cost_usd", "accumulated_cost is 0.0 although tokens were used: the "
                                    "model had no price in OpenHands, so the cost is unknown, not zero",
                                    count=stats["unpriced"])
        if stats["no_usage"]:
            for column in ("input_tokens", "output_tokens", "total_tokens", "cost_usd"):
                session.declare_missing(f"episodes.{column}", "the line has no metrics", count=stats["no_usage"])
        if stats["delegations"]:
            session.note(f"{stats['delegations']} delegation(s) (AgentDelegateAction) nested as spans under their "
                         "delegate call; the sub-agent's steps have parent_seq = the span_begin and depth + 1")
        if stats["empty_delegations"]:
            session.declare_missing("steps", "the history of these lines keeps only the parent agent's events around "
                                    "a delegation (the delegate call and its observation): the sub-agent's own "
                                    "events are not in output.jsonl", count=stats["empty_delegations"])
        if stats["v1_sub_agents"]:
            session.declare_missing("steps", "V1 SDK sub-agents (DelegateTool `delegate`, TaskTool `task` calls) run "
                                    "in conversations of their own (persisted under the parent's subagents/ "
                                    "directory), so output.jsonl's history holds only the parent's call and its "
                                    "observation with the sub-agents' final answers: the sub-agents' own events are "
                                    "not in the card (count = sub-agent runs)", count=stats["v1_sub_agents"])
        session.note("OpenHands output.jsonl carries no aggregate score (test_result is filled by a separate "
                     "evaluation step); numeric test_result fields are score.* columns, no rule is declared")


def _episode(record: Any, label: str, file: str, agent_override: str | None, session: ImportSession,
             stats: dict[str, int]) -> tuple[dict[str, Any], StepBuffer]:
    probe = StepBuffer("", file=file, record=label)
    if not isinstance(record, dict):
        raise probe.error("is not a JSON object (an OpenHands EvalOutput line)")
    instance = record.get("instance_id")
    if isinstance(instance, bool) or not isinstance(instance, (str, int)) or instance == "":
        raise probe.error(f"instance_id {instance!r} is not an id")
    steps = StepBuffer(str(instance), file=file, record=f"{label} (instance {instance})")
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    llm = metadata.get("llm_config") or metadata.get("llm") or {}
    model = llm.get("model") if isinstance(llm, dict) else None
    agent = agent_override or model or metadata.get("agent_class") or "openhands"
    if model:
        session.add_agent({"name": str(agent), "model": str(model)})
    status, error_type = terminal_state(record.get("error"))
    row: dict[str, Any] = {"episode_id": str(instance), "task_id": str(instance), "agent": str(agent),
                           "status": status, "trial": 0}
    if status != "completed":
        error = record["error"]
        row["error_message"] = error if isinstance(error, str) else json_text(error)
        row["error_type"] = error_type
    if isinstance(record.get("instruction"), str):
        row["task.instruction"] = record["instruction"]
    if record.get("instance") is not None:
        row["task.instance"] = json_text(record["instance"])
    if metadata:
        row["meta.metadata"] = json_text(metadata)
        if metadata.get("agent_class"):
            row["meta.agent_class"] = str(metadata["agent_class"])
    _metrics(record.get("metrics"), row, steps, stats)
    _test_result(record.get("test_result"), row, steps, session)
    history = record.get("history")
    if history is not None:
        if not isinstance(history, list):
            raise steps.error(f"history is {type(history).__name__}, expected a list of events")
        _history(history, steps, stats)
    rest = {k: v for k, v in record.items() if k not in _KNOWN}
    if rest:
        row["meta.record"] = json_text(rest)
    return row, steps


def _count(steps: StepBuffer, value: Any, field: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value < 1 << 63:
        raise steps.error(f"{field} is {value!r}, not a non-negative 64-bit integer")
    return value


def _metrics(metrics: Any, row: dict[str, Any], steps: StepBuffer, stats: dict[str, int]) -> None:
    if metrics is None:
        stats["no_usage"] += 1
        return
    if not isinstance(metrics, dict):
        raise steps.error(f"metrics is {type(metrics).__name__}, expected an object")
    usage = metrics.get("accumulated_token_usage") if isinstance(metrics.get("accumulated_token_usage"), dict) else {}
    row["input_tokens"] = _count(steps, usage.get("prompt_tokens"), "metrics.accumulated_token_usage.prompt_tokens")
    row["output_tokens"] = _count(steps, usage.get("completion_tokens"),
                                  "metrics.accumulated_token_usage.completion_tokens")
    if row["input_tokens"] is not None and row["output_tokens"] is not None:
        row["total_tokens"] = row["input_tokens"] + row["output_tokens"]
    cost = metrics.get("accumulated_cost")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
        raise steps.error(f"metrics.accumulated_cost is {cost!r}, not a number")
    if cost == 0 and (row.get("total_tokens") or 0) > 0:
        stats["unpriced"] += 1  # OpenHands reports 0.0 for a model it has no price for
    elif cost is not None:
        row["cost_usd"] = float(cost)
    row["meta.metrics"] = json_text(metrics)


def _test_result(result: Any, row: dict[str, Any], steps: StepBuffer, session: ImportSession) -> None:
    if result is None:
        return
    if not isinstance(result, dict):
        row["meta.test_result"] = json_text(result)
        return
    patch = result.get("git_patch")
    if isinstance(patch, str) and patch:
        row["meta.patch_artifact"] = session.add_artifact(patch.encode("utf-8", "surrogatepass"))

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, (bool, int, float)):
            row[f"score.{prefix}"] = value if not isinstance(value, float) else float(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                flatten(f"{prefix}.{k}", v)
    for key, value in result.items():
        if key != "git_patch":
            flatten(key, value)
    rest = {k: v for k, v in result.items() if k != "git_patch"}
    if rest:
        row["meta.test_result"] = json_text(rest)


@dataclass
class _Delegation:
    """An open V0 delegation: the parent's delegate call, the span its sub-agent's steps hang
    under, and where the parent's own steps go once it ends."""

    call_id: str
    span: int
    agent: str | None
    outer: dict[str, Any]
    events: int = 0

    @property
    def inner(self) -> dict[str, Any]:
        return {"parent_seq": self.span, "depth": (self.outer.get("depth") or 0) + 1, "agent": self.agent}


def _history(history: list[Any], steps: StepBuffer, stats: dict[str, int]) -> None:
    """The events of one line in order; a V0 delegation (`delegate` action ... `delegate`
    observation) nests the events between them (the sub-agent's: the parent waits while its
    delegate runs on the shared event stream) as a span under the delegate call."""
    open_: list[_Delegation] = []
    for i, event in enumerate(history):
        if not isinstance(event, dict):
            raise steps.error(f"history[{i}] is not an object")
        if "kind" in event:
            _v1(event, i, steps)
            stats["v1_sub_agents"] += _v1_sub_agent_runs(event)
            continue
        nest = open_[-1].inner if open_ else {}
        if open_:
            open_[-1].events += 1
        if event.get("observation") == "delegate" and open_:
            done = open_.pop()
            done.events -= 1  # the observation is the parent's
            _end_span(done, steps, stats)
            cause = event.get("cause")
            call = str(cause) if cause is not None and steps.has_call(str(cause)) else done.call_id
            _v0({**event, "cause": call}, i, steps, done.outer)
            continue
        seq = _v0(event, i, steps, nest)
        if event.get("action") == "delegate":
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            agent = _str(args.get("agent"))
            call_id = steps.rows[seq][7]  # the stored id (a reused one is renamed)
            span = steps.add("span_begin", name=agent or "delegate", payload={"delegate_call_id": call_id,
                             "inputs": args.get("inputs")}, **nest)
            open_.append(_Delegation(call_id, span, agent, nest))
            stats["delegations"] += 1
    while open_:  # the history ends inside a delegation (the run stopped while the sub-agent ran)
        done = open_.pop()
        _end_span(done, steps, stats, unclosed=True)


def _end_span(done: _Delegation, steps: StepBuffer, stats: dict[str, int], *, unclosed: bool = False) -> None:
    payload: dict[str, Any] = {"delegate_call_id": done.call_id, "events": done.events}
    if unclosed:
        payload["unclosed"] = "the history ends before the delegate's observation"
    if done.events == 0:
        stats["empty_delegations"] += 1  # this history kept only the parent's events
    steps.add("span_end", name=done.agent or "delegate", payload=payload, **done.outer)


def _v0(event: dict[str, Any], i: int, steps: StepBuffer, nest: dict[str, Any] | None = None) -> int:
    """The step of one V0 event (nested as `nest` says); returns its seq."""
    nest = nest or {}
    role = _ROLES.get(event.get("source"))
    payload = {k: v for k, v in event.items() if k not in ("message", "action", "args", "observation", "content",
                                                          "cause", "source")}
    if "action" in event:
        action = event["action"]
        if not isinstance(action, str):
            raise steps.error(f"history[{i}].action is not text")
        args = event.get("args")
        if action in ("message", "system"):
            content = (args or {}).get("content") if isinstance(args, dict) and "content" in args else event.get("message")
            return steps.add("message", role="system" if action == "system" else (role or "assistant"),
                             content=_str(content), payload={**payload, "args": args} if args else payload or None,
                             **nest)
        return steps.tool_call(action, None if args is None else json_text(args), str(event.get("id", f"ev{i}")),
                               role=role or "assistant", content=_str(event.get("message")), payload=payload or None,
                               **nest)
    if "observation" in event:
        obs = event["observation"]
        cause = event.get("cause")
        is_error = obs == "error" or (event.get("success") is False)
        payload["observation"] = obs
        content = _str(event.get("content"))
        if cause is not None and steps.has_call(str(cause)):
            return steps.tool_result(str(cause), content, role="tool", is_error=is_error, name=_str(obs),
                                     payload=payload, **nest)
        return steps.add("observation", role="tool", name=_str(obs), content=content, is_error=is_error,
                         payload=payload, **nest)
    return steps.add("annotation", name="event", content=_str(event.get("message")), payload=payload or None, **nest)


def _v1(event: dict[str, Any], i: int, steps: StepBuffer) -> None:
    kind = event.get("kind")
    payload = {k: v for k, v in event.items() if k not in ("kind", "source")}
    role = _ROLES.get(event.get("source"))
    call_id = event.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise steps.error(f"history[{i}].tool_call_id is not text")
    if kind == "ActionEvent":
        call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else {}
        args = call.get("arguments")
        if isinstance(args, str):
            args_text = args  # already JSON text as the model sent it
        else:
            args_text = json_text(args if args is not None else event.get("action"))
        thought, _parts = content_text(event.get("thought") or None)
        steps.tool_call(_str(event.get("tool_name") or call.get("name")), args_text, call_id, role="assistant",
                        content=thought, payload=payload)
    elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
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
            steps.tool_result(call_id, text, role="tool", is_error=is_error, name=_str(event.get("tool_name")) or kind,
                              payload=payload)
        else:
            steps.add("error" if kind == "AgentErrorEvent" else "observation", role="tool", name=kind, content=text,
                      is_error=is_error, payload=payload)
    elif kind == "MessageEvent":
        message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
        text, _ = content_text(message.get("content"))
        steps.add("message", role=_str(message.get("role")) or role, content=text, payload=payload)
    elif kind == "SystemPromptEvent":
        prompt = event.get("system_prompt")
        text = prompt.get("text") if isinstance(prompt, dict) else _str(prompt)
        steps.add("message", role="system", content=_str(text), payload=payload)
    else:
        steps.add("annotation", name=_str(kind), payload=payload)


def _v1_sub_agent_runs(event: dict[str, Any]) -> int:
    """Sub-agent runs a V1 ActionEvent launches: a DelegateTool `delegate` command runs one per
    entry of `tasks` (`spawn` only creates them), a TaskTool call runs one (openhands-tools
    delegate/impl.py, task/manager.py). The sub-agents' events go to their own conversations."""
    if event.get("kind") != "ActionEvent":
        return 0
    action = event.get("action") if isinstance(event.get("action"), dict) else {}
    kind = action.get("kind")
    if kind == "TaskAction" or (kind is None and event.get("tool_name") == "task"):
        return 1
    if (kind == "DelegateAction" or (kind is None and event.get("tool_name") == "delegate")) and \
            action.get("command") == "delegate":
        tasks = action.get("tasks")
        if isinstance(tasks, str):  # models send the tasks as JSON text at times (the SDK's issue 2216)
            try:
                tasks = json.loads(tasks)
            except ValueError:
                return 1
        return len(tasks) if isinstance(tasks, dict) and tasks else 1
    return 0


def _str(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)
