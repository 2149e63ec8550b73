"""OpenAI-format chat messages to steps, shared by the tau-bench and chat JSONL importers.

| message                                   | steps                                              |
|-------------------------------------------|----------------------------------------------------|
| `{role, content}`                         | `message` (role, content)                          |
| assistant `tool_calls[i]`                 | one `tool_call` per call: name, `args` (JSON text), call_id |
| assistant with `content: null` + calls    | only the `tool_call` steps                         |
| `{role: tool, tool_call_id, name, content}` | `tool_result` linked by call_id (an unknown id is a source error) |
| `{role: tool}` without `tool_call_id`     | `observation` (nothing to link it to)              |
| legacy `function_call {name, arguments}`  | `tool_call` without call id                        |
| content as a list of parts                | text parts joined by newlines; the list in `payload` |
| any other key of a message                | kept in the step's `payload`                       |

Arguments that are not valid JSON text (a model can emit that) are kept verbatim
in `payload.arguments` with `args` null, and counted in `invalid_arguments`.
"""

from __future__ import annotations

from typing import Any

from ..jsondoc import DECODER
from .steps import StepBuffer, json_text

__all__ = ["ChatMapping", "add_chat_messages", "content_text"]

_KNOWN = frozenset(("role", "content", "tool_calls", "tool_call_id", "name"))
_scan = DECODER.raw_decode


class ChatMapping:
    """Counts of what a conversation held that the steps table keeps only in payload."""

    __slots__ = ("invalid_arguments", "reused_call_ids")

    def __init__(self) -> None:
        self.invalid_arguments = 0
        self.reused_call_ids = 0

    def notes(self) -> list[str]:
        """What a reader of the card should know about the mapping, in words."""
        out = []
        if self.invalid_arguments:
            out.append(f"{self.invalid_arguments} tool call(s) had arguments that are not valid JSON; they are "
                       "kept verbatim in payload.arguments with args null")
        if self.reused_call_ids:
            out.append(f"the source reused a tool call id within an episode {self.reused_call_ids} time(s); the "
                       "n-th reuse of id X is stored as call_id 'X#n' (source id in payload.source_call_id) "
                       "and each result is linked to the latest call with its id, as the source's order pairs them")
        return out


def content_text(content: Any) -> tuple[str | None, Any]:
    """(text, leftover) of a message content: a string, None, or a list of parts.

    Text parts are joined with newlines; a list is also returned as `leftover` so the
    caller keeps the exact parts (images, audio, part boundaries) in the payload.
    """
    if content is None or isinstance(content, str):
        return content, None
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return ("\n".join(texts) if texts else None), content
    return None, content


def _arguments(raw: Any, counts: ChatMapping) -> tuple[str | None, Any]:
    """(args JSON text, payload) of a tool call's arguments."""
    if raw is None:
        return None, None
    if type(raw) is str:
        text = raw.strip()
        try:  # validity only; raw_decode skips json.loads' wrapper (a measurable cost at 10^5 calls)
            valid = _scan(text)[1] == len(text)
        except (ValueError, RecursionError):  # also NaN, Infinity, 1e999, ints beyond int64
            valid = False
        if not valid:
            counts.invalid_arguments += 1
            return None, {"arguments": raw, "arguments_invalid_json": True}
        return raw, None
    return json_text(raw), None


def add_chat_messages(steps: StepBuffer, messages: Any, counts: ChatMapping, *, field: str = "messages") -> None:
    """Append the steps of an OpenAI-format message list (see the module table)."""
    if type(messages) is not list:
        raise steps.error(f"{field} is not a list of messages")
    # The hot loop of a large import: plain local lookups, no per-message allocations
    # beyond the step tuples (an `extra` dict only when a message has unknown keys).
    known = _KNOWN
    for i, msg in enumerate(messages):
        if type(msg) is not dict:
            raise steps.error(f"{field}[{i}] is not an object")
        role = msg.get("role")
        if type(role) is not str:
            raise steps.error(f"{field}[{i}] has no role")
        content = msg.get("content")
        if content is None or type(content) is str:
            text, parts = content, None
        else:
            text, parts = content_text(content)
        extra: dict[str, Any] | None = None
        if parts is not None or not msg.keys() <= known:
            extra = {k: v for k, v in msg.items() if k not in known}
            if parts is not None:
                extra["content"] = parts
        if role == "tool" or role == "function":
            call_id = msg.get("tool_call_id")
            name = msg.get("name")
            if call_id is None:
                steps.add("observation", role=role, name=name, content=text, payload=extra)
            elif type(call_id) is not str:
                raise steps.error(f"{field}[{i}].tool_call_id is not a string")
            else:
                steps.tool_result(call_id, text, role=role, name=name, payload=extra)
            continue
        calls = msg.get("tool_calls")
        legacy = None
        if extra is not None:
            legacy = extra.pop("function_call", None)
        if "name" in msg:
            extra = {**(extra or {}), "name": msg["name"]}
        if text is not None or (not calls and legacy is None):
            steps.add("message", role=role, content=text, payload=extra or None)
            extra = None
        if calls is not None:
            if type(calls) is not list:
                raise steps.error(f"{field}[{i}].tool_calls is not a list")
            for j, call in enumerate(calls):
                _add_call(steps, call, role, counts, field, i, j, extra)
                extra = None
        if legacy is not None:
            _add_call(steps, {"function": legacy}, role, counts, field, i, None, extra)
    counts.reused_call_ids += steps.reused_call_ids


def _add_call(
    steps: StepBuffer, call: Any, role: str, counts: ChatMapping, field: str, i: int, j: int | None,
    extra: dict[str, Any] | None,
) -> None:
    fn = call.get("function") if type(call) is dict else None
    name = fn.get("name") if type(fn) is dict else None
    call_id = call.get("id") if type(call) is dict else None
    if type(name) is not str or (call_id is not None and type(call_id) is not str):
        where = f"{field}[{i}]." + (f"tool_calls[{j}]" if j is not None else "function_call")
        raise steps.error(f"{where} is not a tool call with a function name and a string id")
    args, payload = _arguments(fn.get("arguments"), counts)
    if len(call) > 3 or call.get("type") not in (None, "function"):
        rest = {k: v for k, v in call.items() if k not in ("id", "function", "type")}
        if call.get("type") not in (None, "function"):
            rest["type"] = call["type"]
        payload = {**rest, **(payload or {})}
    if extra:
        payload = {**extra, **(payload or {})}
    steps.tool_call(name, args, call_id, role=role, payload=payload or None)
