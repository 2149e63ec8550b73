"""OpenHands evaluation `output.jsonl` (V0 event history and V1 SDK events) to a rollout card.

One line (`EvalOutput`: `instance_id`, `instruction`, `instance`, `metadata`, `history`,
`metrics`, `error`, `test_result`) is one episode `<instance_id>`. Terminal state: no
`error` → completed; an error saying the agent reached its maximum iteration or budget →
limit; the harness's per-instance time limit ("Timeout after N seconds", V1 "Instance did
not complete within Ns timeout") → timeout; any other error → error (`error_type` = the
text before the first colon, or the `STATUS$…` code). V1 `attempt` n (iterative runs) is
trial n-1, episode `<instance_id>/attempt-<n>` for n > 1. The 2024 history of
[action, observation] pairs is read as its event sequence. A V1
line without `error` whose history ends on a `ConversationErrorEvent` (the SDK's run
loop stopped) takes its terminal state from it (`openhands_v1.run_end_state`).

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
V1 SDK sub-agents (DelegateTool, TaskTool) run in conversations of their own, which the
benchmarks harness archives as `conversations/<instance_id>.tar.gz` beside output.jsonl:
when a line launches sub-agents and that archive is there, their runs are nested under the
launching call (`openhands_v1`, `openhands_archive`); what cannot be nested is declared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .base import ImportRequest
from .json_stream import iter_jsonl
from .openhands_archive import ConversationArchive, archive_path
from .openhands_report import Reports, run_files
from .openhands_resolver import is_resolver_line, resolver_episode
from .openhands_v1 import SubAgentCounts, V1Events, launches, run_end_state, v1_step
from .session import ImportSession
from .source_values import text as source_text
from .steps import StepBuffer, json_text

__all__ = ["OpenHandsImporter", "terminal_state"]

_LIMIT = re.compile(r"maximum (iteration|budget)|max(imum)? iterations?|budget .*exceeded|exceeded .*budget", re.I)
_ROLES = {"user": "user", "agent": "assistant", "environment": "tool"}
# the harness's own per-instance time limit: V0 evaluation/utils/shared.py (EvalTimeoutException) and the V1
# benchmarks' evaluation.py ("Instance did not complete within {n}s timeout", inside "Instance failed after ...")
_TIMEOUT = re.compile(r"^Timeout after \d+ seconds|Instance did not complete within \d+s timeout")
_STATUS_CODE = re.compile(r"(?:STATUS|CHAT_INTERFACE)\$\w+")  # V0 RuntimeStatus values set as last_error
_OPENDEVIN_ID_KEYS = ("id", "task_id", "question_id")  # 2024 per-benchmark output dicts (_opendevin_id_key)
_KNOWN = frozenset(("instance_id", "instruction", "instance", "metadata", "history", "metrics", "error",
                    "test_result", "attempt"))


def terminal_state(error: Any) -> tuple[str, str | None]:
    """(status, error_type) of an output line from its `error`."""
    if error in (None, ""):
        return "completed", None
    text = error if isinstance(error, str) else json_text(error)
    if _STATUS_CODE.fullmatch(text.strip()):
        return "error", text.strip()
    kind = text.split(":", 1)[0].strip() if ":" in text else None
    kind = kind if kind and re.fullmatch(r"[A-Za-z_][\w.]*", kind) else None
    if _TIMEOUT.search(text):
        return "timeout", kind
    return ("limit" if _LIMIT.search(text) else "error"), kind


class OpenHandsImporter:
    """OpenHands evaluation output.jsonl (V0 agent events or V1 SDK events)."""

    name = "openhands"
    summary = ("OpenHands evaluation output.jsonl (V0 event history or V1 SDK ActionEvent/ObservationEvent), its "
               "output directory (with output_errors.jsonl and the report), or resolver output.jsonl")
    options: dict[str, str] = {}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every line of every source."""
        request.check_options(self.name, self.options)
        stats = {"unpriced": 0, "no_usage": 0, "delegations": 0, "empty_delegations": 0, "ended_on_event": 0,
                 "pair_lines": 0, "resolver_lines": 0, "resolver_roles": 0, "no_tokens": 0}
        subs = SubAgentCounts()
        reports = Reports(session)
        for index, source in enumerate(request.sources):
            for path in run_files(source) if source.is_dir() else [source]:
                session.add_source(path, self.name, request.url(index))
                report = reports.for_file(path)
                with open(path, "rb") as fh:
                    for number, record in session.guard(iter_jsonl(fh, str(path))):
                        with session.record():
                            row, steps = _episode(record, f"line {number}", path, request.agent, session, stats,
                                                  subs)
                            reports.mark(report, row)
                            session.add_episode(row, steps)
        reports.declare()
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
        if stats["no_tokens"]:
            for column in ("input_tokens", "output_tokens", "total_tokens"):
                session.declare_missing(f"episodes.{column}", "the line's metrics has no accumulated_token_usage "
                                        "(OpenHands versions before it kept only costs)", count=stats["no_tokens"])
        if stats["delegations"]:
            session.note(f"{stats['delegations']} delegation(s) (AgentDelegateAction) nested as spans under their "
                         "delegate call; the sub-agent's steps have parent_seq = the span_begin and depth + 1")
        if stats["empty_delegations"]:
            session.declare_missing("steps", "the history of these lines keeps only the parent agent's events around "
                                    "a delegation (the delegate call and its observation): the sub-agent's own "
                                    "events are not in output.jsonl", count=stats["empty_delegations"])
        _sub_agent_drops(subs, session)
        if stats["pair_lines"]:
            session.note(f"{stats['pair_lines']} line(s) have the 2024 (OpenDevin) history of [action, observation] "
                         "pairs: read as the action, observation, ... sequence (a placeholder NullObservation "
                         "'No observation' is kept as an observation step)")
        for key in _OPENDEVIN_ID_KEYS:
            if stats.get(f"id_key:{key}"):
                session.note(f"{stats[f'id_key:{key}']} line(s) are a 2024 OpenDevin benchmark's own output dict, "
                             f"written before EvalOutput: their id field `{key}` is the episode and task id")
        if stats["ended_on_event"]:
            session.note(f"{stats['ended_on_event']} line(s) have no `error` but their V1 history ends on a "
                         "ConversationErrorEvent (MaxIterationsReached / MaxBudgetReached → limit, any other code → "
                         "error) or a stuck execution status: that is their terminal state")
        if stats["resolver_lines"]:
            session.note(f"{stats['resolver_lines']} line(s) are OpenHands resolver output (ResolverOutput: one issue "
                         "or PR each, episode <owner>/<repo>#<number>, score.success = the resolver's own LLM "
                         "judgement guess_success); their history is dataclasses.asdict(event), without event ids: a "
                         "call and its observation are linked by order (call_id history[<i>])")
        if stats["resolver_roles"]:
            session.declare_missing("steps.role", "resolver output keeps dataclasses.asdict(event), which leaves out "
                                    "the event's source: the role of a message after the first (the user's "
                                    "instruction) is unknown", count=stats["resolver_roles"])
        session.note("OpenHands output.jsonl carries no aggregate score (test_result is filled by a separate "
                     "evaluation step); numeric test_result fields are score.* columns; a rule is declared only from "
                     "an evaluation report beside the file (output.report.json, or the harness's report.json)")


def _episode(record: Any, label: str, path: Path, agent_override: str | None, session: ImportSession,
             stats: dict[str, int], subs: SubAgentCounts) -> tuple[dict[str, Any], StepBuffer]:
    file = str(path)
    probe = StepBuffer("", file=file, record=label)
    if not isinstance(record, dict):
        raise probe.error("is not a JSON object (an OpenHands EvalOutput line)")
    if is_resolver_line(record):
        return _resolver(record, label, file, agent_override, session, stats)
    id_key = "instance_id" if "instance_id" in record else _opendevin_id_key(record, probe)
    instance = record.get(id_key)
    if isinstance(instance, bool) or not isinstance(instance, (str, int)) or instance == "":
        raise probe.error(f"{id_key} {instance!r} is not an id")
    if id_key != "instance_id":
        stats[f"id_key:{id_key}"] = stats.get(f"id_key:{id_key}", 0) + 1
    attempt = record.get("attempt", 1)
    if type(attempt) is not int or not 1 <= attempt < 1 << 31:
        raise probe.error(f"attempt {attempt!r} is not a positive integer (the V1 harness counts attempts from 1)")
    # V1 iterative runs write one file per attempt (output.critic_attempt_<n>.jsonl): attempt n is trial n-1
    episode_id = str(instance) if attempt == 1 else f"{instance}/attempt-{attempt}"
    steps = StepBuffer(episode_id, file=file, record=f"{label} (instance {instance})")
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    llm = metadata.get("llm_config") or metadata.get("llm") or {}
    model = llm.get("model") if isinstance(llm, dict) else None
    agent = agent_override or model or metadata.get("agent_class") or "openhands"
    if model:
        session.add_agent({"name": str(agent), "model": str(model)})
    status, error_type = terminal_state(record.get("error"))
    row: dict[str, Any] = {"episode_id": episode_id, "task_id": str(instance), "agent": str(agent),
                           "status": status, "trial": attempt - 1}
    if "attempt" in record:
        row["meta.attempt"] = attempt
    if status != "completed":
        error = record["error"]
        row["error_message"] = error if isinstance(error, str) else json_text(error)
        row["error_type"] = error_type
    elif isinstance(record.get("history"), list) and (end := run_end_state(record["history"])) is not None:
        # the V1 harness writes error None when the SDK's run loop stopped on a run limit or an exception
        row["status"], row["error_type"], row["error_message"] = end
        stats["ended_on_event"] += 1
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
    patch = record.get("git_patch")  # OpenDevin 2024: the patch beside test_result, not in it
    if isinstance(patch, str) and patch and "meta.patch_artifact" not in row:
        row["meta.patch_artifact"] = session.add_artifact(patch.encode("utf-8", "surrogatepass"))
    history = record.get("history")
    if history is not None:
        if not isinstance(history, list):
            raise steps.error(f"history is {type(history).__name__}, expected a list of events")
        if history and all(isinstance(p, list) and len(p) == 2 for p in history):
            # OpenDevin 2024 wrote `[(event_to_dict(action), event_to_dict(obs)) for action, obs in
            # state.history]`: each action with its observation; read as the event sequence they are
            history = [e for pair in history for e in pair]
            stats["pair_lines"] += 1
        if history and all(isinstance(e, dict) and "kind" in e for e in history):
            _v1_history(history, steps, path, str(instance), session, subs)
        else:
            _history(history, steps, stats, subs)
    rest = {k: v for k, v in record.items() if k not in _KNOWN and k != id_key}
    if rest:
        row["meta.record"] = json_text(rest)
    return row, steps


def _opendevin_id_key(record: dict[str, Any], probe: StepBuffer) -> str:
    """The id field of a 2024 OpenDevin benchmark line, written before EvalOutput named it instance_id.

    Each run_infer.py built its own dict (OpenHands @a9823491, 2024-05): logic_reasoning and mint
    `id`, humanevalfix `task_id`, gorilla `question_id`; all with a history of [action, observation]
    pairs. Only that shape is read so, and only when exactly one of those fields is there.
    """
    history = record.get("history")
    pairs = isinstance(history, list) and all(isinstance(p, list) and len(p) == 2 for p in history)
    keys = [k for k in _OPENDEVIN_ID_KEYS if k in record]
    if not pairs or len(keys) != 1:
        found = f" (it has {', '.join(keys)}: more than one 2024 id field)" if len(keys) > 1 else ""
        raise probe.error("has no instance_id: not an OpenHands EvalOutput line (nor a resolver line: no issue "
                          "object and issue_type; nor a 2024 OpenDevin benchmark line: a history of [action, "
                          f"observation] pairs and one of {', '.join(_OPENDEVIN_ID_KEYS)}){found}")
    return keys[0]


def _resolver(record: dict[str, Any], label: str, file: str, agent_override: str | None, session: ImportSession,
              stats: dict[str, int]) -> tuple[dict[str, Any], StepBuffer]:
    """A resolver line: its own fields (openhands_resolver), then error, metrics and patch as an EvalOutput's."""
    def steps_for(episode_id: str, issue: str | None) -> StepBuffer:
        return StepBuffer(episode_id, file=file, record=label if issue is None else f"{label} (issue {issue})")
    row, steps = resolver_episode(record, steps_for, stats)
    row["agent"] = agent_override or "openhands-resolver"
    row["status"], error_type = terminal_state(record.get("error"))
    if row["status"] != "completed":
        error = record["error"]
        row["error_message"] = error if isinstance(error, str) else json_text(error)
        row["error_type"] = error_type
    _metrics(record.get("metrics"), row, steps, stats)
    patch = record.get("git_patch")
    if isinstance(patch, str) and patch:
        row["meta.patch_artifact"] = session.add_artifact(patch.encode("utf-8", "surrogatepass"))
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
    if not usage:
        stats["no_tokens"] += 1  # OpenHands before accumulated_token_usage (2025) kept costs only
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


def _v1_history(history: list[dict[str, Any]], steps: StepBuffer, path: Path, instance: str, session: ImportSession,
                subs: SubAgentCounts) -> None:
    """A V1 SDK history, with the sub-agent runs it launched nested from the instance's
    conversations archive when there is one (looked for only when the line launches any)."""
    n = sum(len(launches(e)) for e in history)
    archive = parent = None
    where = archive_path(path, instance) if n else None
    if where is not None:
        try:
            archive = ConversationArchive(where, str(where))
            parent, _why = archive.parent_of({e["id"] for e in history if isinstance(e.get("id"), str)})
            if parent is not None:
                archive.load_tree(parent)  # every event read now, so a bad one refuses the archive here
        except SourceFormatError as exc:
            if not session.keep_going:
                raise
            archive = parent = None
            subs.refused += n
            subs.refusals.append(str(exc))
        else:
            session.add_source(where, "openhands-conversations")
            subs.archives += 1
            if parent is None:
                subs.unmatched_archive += n
    elif n:
        subs.no_archive += n
    events = V1Events(steps, subs, archive, parent)
    events.add(history, {}, parent)
    events.finish()


def _history(history: list[Any], steps: StepBuffer, stats: dict[str, int], subs: SubAgentCounts) -> None:
    """The events of one line in order; a V0 delegation (`delegate` action ... `delegate`
    observation) nests the events between them (the sub-agent's: the parent waits while its
    delegate runs on the shared event stream) as a span under the delegate call."""
    open_: list[_Delegation] = []
    for i, event in enumerate(history):
        if not isinstance(event, dict):
            raise steps.error(f"history[{i}] is not an object")
        if "kind" in event:  # a V1 event among V0 ones: mapped, its sub-agents (if any) not looked for
            v1_step(event, f"history[{i}]", steps, {})
            subs.launched += len(launches(event))
            subs.no_archive += len(launches(event))
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
    role = _ROLES.get(source_text(steps, event.get("source"), f"history[{i}].source"))  # a list or object is not a key
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


def _str(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)


_SUB_AGENTS = ("V1 SDK sub-agents (DelegateTool `delegate` tasks, TaskTool `task` calls) run in conversations of "
               "their own, which the benchmarks harness archives as conversations/<instance_id>.tar.gz beside "
               "output.jsonl; ")


def _sub_agent_drops(subs: SubAgentCounts, session: ImportSession) -> None:
    """Say what became of every sub-agent run the lines launched (count = runs)."""
    if subs.branch_points:
        session.add_drop(target="steps", action="unobserved", declaration="source_missing",
                         loss_class="sequence_information_loss", count=subs.branch_points,
                         reason=f"{subs.branched_histories} V1 histories (or sub-agent runs) are conversation trees "
                         "(software-agent-sdk fork / navigate: an event's parent_id names an earlier event, not "
                         "the one before it): their branches are imported one after another in file order, each "
                         "step's payload keeps parent_id; count = events that start a branch. Which branch was "
                         "the conversation's final one is not in output.jsonl")
    if subs.nested:
        session.note(f"{subs.nested} of {subs.launched} V1 sub-agent run(s) nested from {subs.archives} "
                     "conversations archive(s): span_begin/span_end under the launching call, the sub-agent's "
                     "events at depth + 1 (a launch and a run are paired by task text and time, each the other's "
                     "only match)")
    if subs.no_archive:
        session.declare_missing("steps", _SUB_AGENTS + "no such archive is beside output.jsonl for these lines, so "
                                "the line's history holds only the parent's call and its observation with the "
                                "sub-agents' final answers: the sub-agents' own events are not in the card (put the "
                                "archives beside output.jsonl to nest them)", count=subs.no_archive)
    if subs.unmatched_archive:
        session.declare_missing("steps", _SUB_AGENTS + "the archive of these lines holds no conversation whose event "
                                "files carry the ids of the line's history events (or several do equally), so its "
                                "sub-agent conversations are not the line's and are not read",
                                count=subs.unmatched_archive)
    if subs.not_found:
        session.declare_missing("steps", _SUB_AGENTS + "no sub-agent conversation in the archive has a task message "
                                "with the launch's task text, sent between the launching call and its observation: "
                                "these runs' events are not in the archive", count=subs.not_found)
    if subs.ambiguous:
        session.add_drop(target="steps", action="omitted", declaration="author_declared",
                         loss_class="ambiguous_sub_agent_run",
                         reason=_SUB_AGENTS + "the parent's events do not name a sub-conversation, and for these "
                         "launches more than one archived run fits (same task text, sent between the call and its "
                         "observation) or the fitting run fits another launch too: which run is whose is "
                         "ambiguous, so none is nested (count = launches)", count=subs.ambiguous)
    if subs.unlaunched_runs:
        session.add_drop(target="steps", action="omitted", declaration="author_declared",
                         loss_class="unlinked_sub_agent_run",
                         reason="runs of sub-agent conversations in the archives that no launching call was paired "
                         "with (ambiguous, a task text no call sent, or a conversation that got no task message): "
                         "their events are not in the card (count = runs)", count=subs.unlaunched_runs)
    if subs.refused:
        shown = "; ".join(subs.refusals[:3]) + (f"; and {len(subs.refusals) - 3} more" if len(subs.refusals) > 3
                                                 else "")
        session.add_drop(target="steps", action="omitted", declaration="source_malformed",
                         loss_class="malformed_record",
                         reason=f"{len(subs.refusals)} conversations archive(s) were refused (imported with "
                         f"--keep-going; the lines are imported without their sub-agents' runs): {shown}",
                         count=subs.refused)
