"""ATIF trajectories (v1.0–v1.7) to steps, sub-agents nested in the same episode.

A sub-agent's trajectory — referenced from an observation result's
`subagent_trajectory_ref` (Harbor's context summarization, delegation) by
`trajectory_id` (embedded in the parent's `subagent_trajectories`, v1.7) or by
`trajectory_path` (a file beside the parent) — becomes a `span_begin` step (name = the
sub-agent, payload = the ref) followed by the sub-trajectory's steps with `parent_seq` =
that span's seq and `depth` + 1, then a `span_end`. A `continued_trajectory_ref` file is
appended at the same depth. Steps of a sub-agent or continuation file marked
`is_copied_context` (the conversation it was handed, already in the episode) are not
repeated: counted in `AtifCounts.copied_context` (a declared drop) and, for a sub-agent,
in its span_begin's `payload.copied_context_steps`. NeMo Agent Toolkit steps whose `extra.ancestry.parent_id`
names the `function_id` of an earlier step or tool call of the trajectory are nested
under that step the same way; `extra.ancestry.function_name` is the step's `agent`.

File references are resolved inside the parent's directory only: an absolute path, a
`..`, a URL or a symbolic link is refused, never followed; a missing file is a source
error naming the ref. Harbor's golden files carry a name prefix their refs lack
(`x.trajectory.summarization-1-summary.json` for `trajectory.summarization-1-summary.json`);
such a sibling is accepted when its `session_id` matches the ref's.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import SourceFormatError
from .json_stream import JsonStream, read_document
from .openai_chat import content_text
from .source_values import text as source_text
from .steps import StepBuffer, json_text, parse_timestamp

__all__ = ["AtifCounts", "add_trajectory", "declare_counts", "is_atif"]

_ROLES = {"system": "system", "user": "user", "agent": "assistant"}
_STEP_KEYS = ("timestamp", "source", "message", "tool_calls", "observation", "metrics")
_METRIC_KEYS = ("prompt_tokens", "completion_tokens", "cost_usd")
_MAX_DEPTH = 32
_MAX_SUB_CHARS = 256 << 20


def is_atif(record: Any) -> bool:
    """Whether a JSON value is an ATIF trajectory (schema_version ATIF-v1.x)."""
    version = record.get("schema_version") if isinstance(record, dict) else None
    return isinstance(version, str) and version.startswith("ATIF-v1")


@dataclass
class AtifCounts:
    """What the mapping met, for drops and notes."""

    model_steps_without_tokens: int = 0
    subagents: int = 0
    continuations: int = 0
    nested_by_ancestry: int = 0
    #: steps marked is_copied_context in a continuation or sub-agent file, not repeated (see add_trajectory)
    copied_context: int = 0
    #: sub-agent refs with only a session_id (ATIF <= v1.6): an empty span, the steps declared missing
    subagents_not_in_source: int = 0
    #: final_metrics of the last file of a continued_trajectory_ref chain (Harbor's are cumulative)
    last_final_metrics: dict[str, Any] | None = None
    step_tokens: list[int | float] = field(default_factory=lambda: [0, 0, 0.0])
    step_tokens_seen: list[bool] = field(default_factory=lambda: [False, False, False])


@dataclass
class _Scope:
    """Where the steps of one trajectory go: its directory, depth, parent step and agent."""

    directory: Path | None
    depth: int
    parent_seq: int | None
    agent: str | None
    embedded: dict[str, Any]
    chain: tuple[str, ...]


def add_trajectory(
    record: dict[str, Any], steps: StepBuffer, counts: AtifCounts, *, directory: Path | None,
    where: str = "", depth: int = 0, parent_seq: int | None = None, agent: str | None = None,
    chain: tuple[str, ...] = (),
) -> None:
    """Append the steps of ATIF trajectory `record` (and its sub-agents) to `steps`.

    `directory` is where `trajectory_path` refs resolve (None: refs to files are refused);
    `where` prefixes field paths in errors (e.g. "subagent summary: ").
    """
    raw_steps = record.get("steps")
    if not isinstance(raw_steps, list):
        raise steps.error(f"{where}ATIF trajectory has no steps list")
    embedded: dict[str, Any] = {}
    subs = record.get("subagent_trajectories")
    if subs is not None:
        if not isinstance(subs, list):
            raise steps.error(f"{where}subagent_trajectories is not a list")
        for i, sub in enumerate(subs):
            if not isinstance(sub, dict) or not isinstance(sub.get("trajectory_id"), str):
                raise steps.error(f"{where}subagent_trajectories[{i}] has no trajectory_id")
            embedded[sub["trajectory_id"]] = sub
    scope = _Scope(directory, depth, parent_seq, agent, embedded, chain)
    functions: dict[str, tuple[int, int]] = {}  # NeMo ancestry function_id -> (seq, depth)
    for i, step in enumerate(raw_steps):
        if not isinstance(step, dict):
            raise steps.error(f"{where}steps[{i}] is not an object")
        if chain and step.get("is_copied_context") is True:
            # A continuation or sub-agent file repeats the conversation it was handed (Harbor's
            # terminus-2: linear_history segments, summarization sub-agents): those steps are the
            # parent's own, already in this episode; repeating them would count them twice.
            counts.copied_context += 1
            continue
        _step(step, f"{where}steps[{i}]", steps, counts, scope, functions)
    cont = record.get("continued_trajectory_ref")
    if cont is not None:
        if not isinstance(cont, str):
            raise steps.error(f"{where}continued_trajectory_ref is not a path")
        # a continuation keeps its episode's session_id (Harbor terminus-2 golden linear-history files)
        loaded = _load_file(cont, record.get("session_id"), steps, scope, f"{where}continued_trajectory_ref")
        if loaded is None:
            raise steps.error(f"{where}continued_trajectory_ref: {cont[:200]!r} does not exist beside the "
                              "trajectory (the episode's later steps are in it)")
        sub, label = loaded
        counts.continuations += 1
        # an empty dict (no final_metrics in the last file) makes the episode sum its steps instead
        counts.last_final_metrics = sub["final_metrics"] if isinstance(sub.get("final_metrics"), dict) else {}
        add_trajectory(sub, steps, counts, directory=scope.directory, where=f"{label}: ", depth=depth,
                       parent_seq=parent_seq, agent=agent, chain=(*chain, label))


def declare_counts(session: Any, counts: AtifCounts) -> None:
    """The drops of what `add_trajectory` met and did not map to steps."""
    if counts.copied_context:
        declare_copied_context(session, counts.copied_context)
    if counts.subagents_not_in_source:
        session.add_drop(target="steps", action="unobserved", declaration="source_missing",
                         loss_class="missing_trajectory", count=counts.subagents_not_in_source,
                         reason="sub-agents whose trajectories are not in the source (a subagent_trajectory_ref "
                         "with session_id only, valid up to ATIF v1.6, or whose trajectory_path no file beside the "
                         "trajectory has): each is an empty span_begin / span_end where it was launched")


def declare_copied_context(session: Any, count: int) -> None:
    """The drop of the copied-context steps `add_trajectory` did not repeat."""
    session.add_drop(target="steps", action="omitted", declaration="author_declared", loss_class="copied_context",
                     count=count, reason="ATIF steps (the count) of sub-agent and continuation trajectories marked "
                     "is_copied_context — the conversation the file was handed, already among this episode's "
                     "steps — are not repeated; a sub-agent's span_begin payload counts its copied_context_steps")


def _nesting(step: dict[str, Any], scope: _Scope, functions: dict[str, tuple[int, int]],
             counts: AtifCounts) -> tuple[int | None, int, str | None]:
    """(parent_seq, depth, agent) of a step: the scope's, or below an ancestry parent."""
    extra = step.get("extra") if isinstance(step.get("extra"), dict) else {}
    ancestry = extra.get("ancestry") if isinstance(extra.get("ancestry"), dict) else {}
    name = ancestry.get("function_name") if isinstance(ancestry.get("function_name"), str) else None
    parent = ancestry.get("parent_id")
    if isinstance(parent, str) and parent in functions:
        seq, depth = functions[parent]
        counts.nested_by_ancestry += 1
        return seq, depth + 1, name or scope.agent
    return scope.parent_seq, scope.depth, name or scope.agent


def _step(step: dict[str, Any], where: str, steps: StepBuffer, counts: AtifCounts, scope: _Scope,
          functions: dict[str, tuple[int, int]]) -> None:
    t = parse_timestamp(step.get("timestamp"), file=steps.file, record=f"{steps.record}, {where}")
    role = _ROLES.get(source_text(steps, step.get("source"), f"{where}.source"))  # a list or object is not a key
    if role is None:
        raise steps.error(f"{where}.source is {step.get('source')!r}, not system, user or agent")
    parent_seq, depth, agent = _nesting(step, scope, functions, counts)
    nest = {"parent_seq": parent_seq, "depth": depth, "agent": agent}
    metrics = step.get("metrics")
    if metrics is not None and not isinstance(metrics, dict):
        raise steps.error(f"{where}.metrics is not an object")
    metrics = metrics or {}
    usage = {"input_tokens": metrics.get("prompt_tokens"), "output_tokens": metrics.get("completion_tokens"),
             "cost_usd": metrics.get("cost_usd")}
    for j, key in enumerate(("input_tokens", "output_tokens", "cost_usd")):
        value = usage[key]
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise steps.error(f"{where}.metrics.{_METRIC_KEYS[j]} is {value!r}, not a number")
            counts.step_tokens[j] += value
            counts.step_tokens_seen[j] = True
    if role == "assistant" and usage["input_tokens"] is None and usage["output_tokens"] is None:
        counts.model_steps_without_tokens += 1
    payload: dict[str, Any] = {k: v for k, v in step.items() if k not in _STEP_KEYS}
    rest_metrics = {k: v for k, v in metrics.items() if k not in _METRIC_KEYS}
    if rest_metrics:
        payload["metrics"] = rest_metrics
    message = step.get("message")
    if message is not None and not isinstance(message, (str, list)):
        raise steps.error(f"{where}.message is {type(message).__name__}, not text or content parts")
    text, parts = content_text(message)
    if parts is not None:
        payload["message"] = parts
    calls = step.get("tool_calls") or []
    if not isinstance(calls, list):
        raise steps.error(f"{where}.tool_calls is not a list")
    observation = step.get("observation")
    if observation is not None and not isinstance(observation, dict):
        raise steps.error(f"{where}.observation is not an object")
    first = len(steps)
    if text or not (calls or observation):
        steps.add("message", role=role, content=text, t=t, payload=payload or None, **usage, **nest)
        payload, usage = {}, dict.fromkeys(usage)
    extra = step.get("extra") if isinstance(step.get("extra"), dict) else {}
    ancestry = extra.get("ancestry") if isinstance(extra.get("ancestry"), dict) else {}
    for j, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("function_name"), str):
            raise steps.error(f"{where}.tool_calls[{j}] has no function_name")
        call_id = call.get("tool_call_id")
        if call_id is not None and not isinstance(call_id, str):
            raise steps.error(f"{where}.tool_calls[{j}].tool_call_id is not text")
        args = call.get("arguments")
        rest = {k: v for k, v in call.items() if k not in ("tool_call_id", "function_name", "arguments")}
        seq = steps.tool_call(call["function_name"], None if args is None else json_text(args), call_id,
                              role="assistant", t=t, payload={**payload, **rest} or None, **usage, **nest)
        payload, usage = {}, dict.fromkeys(usage)
        call_extra = call.get("extra") if isinstance(call.get("extra"), dict) else {}
        call_fn = (call_extra.get("ancestry") or {}).get("function_id") if isinstance(
            call_extra.get("ancestry"), dict) else None
        if isinstance(call_fn, str):
            functions[call_fn] = (seq, depth)
    results = (observation or {}).get("results") or []
    if not isinstance(results, list):
        raise steps.error(f"{where}.observation.results is not a list")
    for j, result in enumerate(results):
        if not isinstance(result, dict):
            raise steps.error(f"{where}.observation.results[{j}] is not an object")
        _result(result, f"{where}.observation.results[{j}]", t, payload, steps, counts, scope, nest)
        payload = {}
    if isinstance(ancestry.get("function_id"), str) and ancestry["function_id"] not in functions and len(steps) > first:
        functions[ancestry["function_id"]] = (first, depth)


def _result(result: dict[str, Any], where: str, t: int | None, payload: dict[str, Any], steps: StepBuffer,
            counts: AtifCounts, scope: _Scope, nest: dict[str, Any]) -> None:
    source = result.get("source_call_id")
    content = result.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise steps.error(f"{where}.content is {type(content).__name__}, not text or content parts")
    text, parts = content_text(content)
    refs = result.get("subagent_trajectory_ref")
    extra = {k: v for k, v in result.items() if k not in ("source_call_id", "content", "subagent_trajectory_ref")}
    if parts is not None:
        extra["content"] = parts
    is_error = result.get("is_error") if isinstance(result.get("is_error"), bool) else None
    if source is not None and not isinstance(source, str):
        raise steps.error(f"{where}.source_call_id is not text")
    if content is not None or not refs:
        if source is not None:
            steps.tool_result(source, text, role="tool", t=t, is_error=is_error,
                              payload={**payload, **extra} or None, **nest)
        else:
            steps.add("observation", role="tool", content=text, t=t, is_error=is_error,
                      payload={**payload, **extra} or None, **nest)
        payload = {}
    if refs is None:
        return
    if isinstance(refs, dict):
        refs = [refs]  # early producers wrote one ref, not a list
    if not isinstance(refs, list):
        raise steps.error(f"{where}.subagent_trajectory_ref is not a list of refs")
    for k, ref in enumerate(refs):
        _subagent(ref, f"{where}.subagent_trajectory_ref[{k}]", source, t, steps, counts, scope, nest)


def _subagent(ref: Any, where: str, source: str | None, t: int | None, steps: StepBuffer, counts: AtifCounts,
              scope: _Scope, nest: dict[str, Any]) -> None:
    if not isinstance(ref, dict):
        raise steps.error(f"{where} is not an object")
    if len(scope.chain) >= _MAX_DEPTH:
        raise steps.error(f"{where}: sub-agents nest more than {_MAX_DEPTH} deep")
    tid, path = ref.get("trajectory_id"), ref.get("trajectory_path")
    loaded = None
    if isinstance(tid, str) and tid in scope.embedded:
        loaded = scope.embedded[tid], f"subagent {tid}"
    elif isinstance(path, str):
        loaded = _load_file(path, ref.get("session_id"), steps, scope, where)
    if loaded is None and (isinstance(path, str) or tid is None) and isinstance(ref.get("session_id"), str):
        # ATIF v1.6 and earlier: a ref needs only the sub-agent's session_id; its trajectory may not be
        # in the source at all. Nor is a trajectory_path's file always kept beside the trajectory: Harbor's
        # own terminus-2 golden linear-history trajectory names three no one saved. The span says a
        # sub-agent ran here; its steps are declared missing.
        counts.subagents_not_in_source += 1
        name = ref["session_id"]
        begin = steps.add("span_begin", name=name, t=t, payload={"ref": ref, "trajectory": "not in the source",
                                                               **({"source_call_id": source} if source else {})},
                          **nest)
        steps.add("span_end", name=name, payload={"launched_by": begin}, **nest)
        return
    if loaded is None and isinstance(path, str):
        raise steps.error(f"{where}: trajectory_path {path[:200]!r} does not exist beside the trajectory "
                          "and the ref has no session_id to name the sub-agent by")
    if loaded is None:
        raise steps.error(f"{where} names no embedded trajectory_id of this trajectory and no trajectory_path")
    sub, label = loaded
    if label in scope.chain:
        raise steps.error(f"{where}: {label} refers back to a trajectory that contains it")
    name = None
    if isinstance(sub.get("agent"), dict) and isinstance(sub["agent"].get("name"), str):
        name = sub["agent"]["name"]
    counts.subagents += 1
    copies = sum(1 for x in sub.get("steps") or () if isinstance(x, dict) and x.get("is_copied_context") is True)
    begin_payload = {"ref": ref, **({"source_call_id": source} if source else {}),
                     **({"copied_context_steps": copies} if copies else {})}
    begin = steps.add("span_begin", name=name or label, t=t, payload=begin_payload, **nest)
    add_trajectory(sub, steps, counts, directory=scope.directory, where=f"{label}: ", depth=scope.depth + 1,
                   parent_seq=begin, agent=name, chain=(*scope.chain, label))
    sub_meta = {k: sub[k] for k in ("session_id", "trajectory_id", "final_metrics", "notes", "extra", "agent")
                if sub.get(k) is not None}
    steps.add("span_end", name=name or label, payload=sub_meta or None, **nest)


def _load_file(path: str, session_id: Any, steps: StepBuffer, scope: _Scope,
               where: str) -> tuple[dict[str, Any], str] | None:
    """A referenced trajectory file inside the scope's directory (never outside it); None when there is none."""
    if scope.directory is None:
        raise steps.error(f"{where}: trajectory_path {path[:200]!r} cannot be resolved (no source directory)")
    pure = PurePosixPath(path.replace("\\", "/"))
    if "://" in path or pure.is_absolute() or ".." in pure.parts or not pure.parts or ":" in pure.parts[0]:
        raise steps.error(f"{where}: trajectory_path {path[:200]!r} points outside the source directory; "
                          "only files beside the trajectory are read")
    candidate = scope.directory.joinpath(*pure.parts)
    found = _regular(candidate, steps, where)
    if found is None and len(pure.parts) == 1:
        found = _prefixed_sibling(scope.directory, pure.name, session_id, steps, where)
    if found is None:
        return None  # not in the source: the caller declares it
    label = found.name
    value = read_document(found, max_value_chars=_MAX_SUB_CHARS)
    if not is_atif(value):
        raise SourceFormatError("is not an ATIF trajectory (referenced by " + where + ")", file=str(found),
                                record=steps.record)
    return value, label


def _regular(path: Path, steps: StepBuffer, where: str) -> Path | None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise steps.error(f"{where}: {path} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISLNK(mode):
        raise steps.error(f"{where}: {path} is a symbolic link; links are not followed out of a source")
    return path if stat.S_ISREG(mode) else None


def _prefixed_sibling(directory: Path, name: str, session_id: Any, steps: StepBuffer, where: str) -> Path | None:
    if not isinstance(session_id, str):
        return None
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith("." + name))
    except OSError:
        return None
    for sibling in names:
        path = _regular(directory / sibling, steps, where)
        if path is None:
            continue
        with open(path, "rb") as fh:
            stream = JsonStream(fh, str(path), max_value_chars=_MAX_SUB_CHARS)
            value = stream.read_value()
        if isinstance(value, dict) and value.get("session_id") == session_id:
            return path
    return None
