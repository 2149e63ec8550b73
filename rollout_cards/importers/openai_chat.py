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

import json
from typing import Any

from .steps import StepBuffer, json_text

__all__ = ["ChatMapping", "add_chat_messages", "content_text"]

_KNOWN = frozenset(("role", "content", "tool_calls", "tool_call_id", "name"))


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
    if isinstance(raw, str):
        try:
            json.loads(raw)
        except ValueError:
            counts.invalid_arguments += 1
            return None, {"arguments": raw, "arguments_invalid_json": True}
        return raw, None
    return json_text(raw), None


def add_chat_messages(steps: StepBuffer, messages: Any, counts: ChatMapping, *, field: str = "messages") -> None:
    """Append the steps of an OpenAI-format message list (see the module table)."""
    if not isinstance(messages, list):
        raise steps.error(f"{field} is not a list of messages")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise steps.error(f"{field}[{i}] is not an object")
        role = msg.get("role")
        if not isinstance(role, str):
            raise steps.error(f"{field}[{i}] has no role")
        text, parts = content_text(msg.get("content"))
        extra = {k: v for k, v in msg.items() if k not in _KNOWN} if len(msg) > 2 else {}
        if parts is not None:
            extra["content"] = parts
        calls = msg.get("tool_calls")
        if role in ("tool", "function"):
            call_id = msg.get("tool_call_id")
            name = msg.get("name")
            if call_id is None:
                steps.add("observation", role=role, name=name, content=text, payload=extra or None)
            elif not isinstance(call_id, str):
                raise steps.error(f"{field}[{i}].tool_call_id is not a string")
            else:
                steps.tool_result(call_id, text, role=role, name=name, payload=extra or None)
            continue
        if "name" in msg:
            extra["name"] = msg["name"]
        legacy = extra.pop("function_call", None)
        if text is not None or (not calls and legacy is None):
            steps.add("message", role=role, content=text, payload=extra or None)
            extra = {}
        if calls is not None:
            if not isinstance(calls, list):
                raise steps.error(f"{field}[{i}].tool_calls is not a list")
            for j, call in enumerate(calls):
                _add_call(steps, call, role, counts, f"{field}[{i}].tool_calls[{j}]", extra)
                extra = {}
        if legacy is not None:
            _add_call(steps, {"function": legacy}, role, counts, f"{field}[{i}].function_call", extra)
    counts.reused_call_ids += steps.reused_call_ids


def _add_call(steps: StepBuffer, call: Any, role: str, counts: ChatMapping, where: str, extra: dict[str, Any]) -> None:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise steps.error(f"{where} is not a tool call with a function")
    fn = call["function"]
    name = fn.get("name")
    if not isinstance(name, str):
        raise steps.error(f"{where}.function has no name")
    call_id = call.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise steps.error(f"{where}.id is not a string")
    args, payload = _arguments(fn.get("arguments"), counts)
    rest = {k: v for k, v in call.items() if k not in ("id", "function", "type")}
    if call.get("type") not in (None, "function"):
        rest["type"] = call["type"]
    payload = {**extra, **rest, **(payload or {})} or None
    steps.tool_call(name, args, call_id, role=role, payload=payload)
