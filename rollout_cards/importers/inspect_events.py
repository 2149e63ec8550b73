"""Inspect AI sample events (or, without events, messages) to steps.

Every event becomes at least one step; none is dropped. The event's JSON is kept
in `payload` (with Inspect's `attachment://` references as they are; the sample's
attachments are kept once per episode in `meta.attachments`), while `content`
columns hold the resolved text.

| event                  | steps                                                        |
|------------------------|--------------------------------------------------------------|
| `model`                | `message` (role assistant, name = model, content = output text, tokens from `output.usage`, is_error when the call failed) |
| `tool`                 | `tool_call` (name = function, args, call_id = id, t = start); `tool_result` (content = result, is_error = error present, t = `completed`), placed among the later events at its completion time |
| `error`                | `error` (content = error message)                            |
| `sample_limit`         | `limit` (name = limit type, content = message)               |
| `span_begin`/`span_end`| `span_begin`/`span_end` (name = span name)                   |
| `step` begin/end (older logs) | `span_begin`/`span_end` (name = step name)            |
| `score`                | `score` (name = the enclosing scorer, content = value)       |
| `state`, `store`, `sample_init` | `state` (name = event type)                         |
| `sandbox`              | `action` (name = sandbox)                                    |
| anything else          | `annotation` (name = event type; `logger`/`info` text as content) |

Without events, messages map as: system/user/assistant → `message`; an assistant's
`tool_calls` → one `tool_call` each; `tool` messages → `tool_result` by
`tool_call_id` (is_error when the message has an `error`).
"""

from __future__ import annotations

from typing import Any

from .steps import StepBuffer, json_text, parse_timestamp

__all__ = ["add_events", "add_messages", "message_text", "resolve_attachment"]

_STATE = frozenset(("state", "store", "sample_init"))
_PREFIX = "attachment://"


def resolve_attachment(text: Any, attachments: dict[str, str]) -> Any:
    """The attachment an `attachment://<hash>` reference names (other values unchanged)."""
    if isinstance(text, str) and text.startswith(_PREFIX):
        return attachments.get(text[len(_PREFIX) :], text)
    return text


def message_text(content: Any, attachments: dict[str, str]) -> str | None:
    """Text of an Inspect message content: a string or a list of content parts."""
    if content is None:
        return None
    if isinstance(content, str):
        return resolve_attachment(content, attachments)
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                for key in ("text", "reasoning"):
                    if isinstance(part.get(key), str):
                        texts.append(resolve_attachment(part[key], attachments))
                        break
        return "\n".join(texts) if texts else None
    return json_text(content)


def _tokens(usage: Any) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    got = [usage.get("input_tokens"), usage.get("output_tokens")]
    return tuple(v if type(v) is int and v >= 0 else None for v in got)  # type: ignore[return-value]


def add_events(steps: StepBuffer, events: list[Any], attachments: dict[str, str]) -> None:
    """Append one or two steps per event (see the module table)."""
    spans: dict[str, str | None] = {}
    scorer_spans: set[str] = set()
    scorer: str | None = None  # the scorer whose span or step encloses a `score` event
    # Tool results wait for the first later event that happened after the tool completed
    # (its sandbox calls and span end come first), so the steps follow what happened.
    pending: list[tuple[int, dict[str, Any]]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
            raise steps.error(f"events[{i}] is not an Inspect event (no `event` type)")
        kind = ev["event"]
        t = parse_timestamp(ev.get("timestamp"), file=steps.file, record=f"{steps.record}, events[{i}]")
        while pending and t is not None and pending[0][0] <= t:
            steps.tool_result(**pending.pop(0)[1])
        if kind == "model":
            output = ev.get("output") if isinstance(ev.get("output"), dict) else {}
            choices = output.get("choices") or []
            message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
            text = message_text(message.get("content"), attachments) if isinstance(message, dict) else None
            tin, tout = _tokens(output.get("usage"))
            steps.add("message", role="assistant", name=ev.get("model"), content=text, t=t,
                      input_tokens=tin, output_tokens=tout, is_error=True if ev.get("error") else None, payload=ev)
        elif kind == "tool":
            result = _tool(steps, ev, t, attachments, i)
            if result is not None and result["t"] is not None:
                pending.append((result["t"], result))
                pending.sort(key=lambda item: item[0])
            elif result is not None:
                steps.tool_result(**result)
        elif kind == "error":
            error = ev.get("error") if isinstance(ev.get("error"), dict) else {}
            steps.add("error", content=_str(error.get("message")), is_error=True, t=t, payload=ev)
        elif kind == "sample_limit":
            steps.add("limit", name=_str(ev.get("type")), content=_str(ev.get("message")), t=t, payload=ev)
        elif kind in ("span_begin", "span_end", "step"):
            if kind == "step":  # older logs: solver and scorer steps instead of spans
                begin, key, name = ev.get("action") == "begin", None, _str(ev.get("name"))
            else:
                begin, key = kind == "span_begin", str(ev.get("id"))
                name = _str(ev.get("name")) if begin else spans.get(key)
                if begin:
                    spans[key] = name
            # span_end carries only the id; step end events repeat their type
            if (ev.get("type") == "scorer") if key is None or begin else key in scorer_spans:
                if key is not None:
                    scorer_spans.add(key)
                scorer = name if begin else None
            steps.add("span_begin" if begin else "span_end", name=name, t=t, payload=ev)
        elif kind == "score":
            score = ev.get("score") if isinstance(ev.get("score"), dict) else {}
            value = score.get("value")
            steps.add("score", name=scorer,
                      content=value if isinstance(value, str) else (None if value is None else json_text(value)),
                      t=t, payload=ev)
        elif kind in _STATE:
            steps.add("state", name=kind, t=t, payload=ev)
        elif kind == "sandbox":
            steps.add("action", name="sandbox", t=t, payload=ev)
        else:
            steps.add("annotation", name=kind, content=_annotation_text(ev, attachments), t=t, payload=ev)
    for _, result in pending:
        steps.tool_result(**result)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None else json_text(value)


def _annotation_text(ev: dict[str, Any], attachments: dict[str, str]) -> str | None:
    if ev["event"] == "logger" and isinstance(ev.get("message"), dict):
        return _str(ev["message"].get("message"))
    if ev["event"] == "info" and isinstance(ev.get("data"), str):
        return resolve_attachment(ev["data"], attachments)
    return None


def _tool(
    steps: StepBuffer, ev: dict[str, Any], t: int | None, attachments: dict[str, str], i: int
) -> dict[str, Any] | None:
    """Add the tool_call step; return the tool_result's arguments (None while the tool is pending)."""
    call_id = ev.get("id")
    if not isinstance(call_id, str):
        raise steps.error(f"events[{i}] is a tool event without a string id")
    arguments = ev.get("arguments")
    call_payload = {k: v for k, v in ev.items() if k != "result"}
    steps.tool_call(_str(ev.get("function")), None if arguments is None else json_text(arguments), call_id,
                    role="assistant", t=t, payload=call_payload)
    if ev.get("pending"):
        return None  # the tool had not returned when the log was written: no result to record
    done = parse_timestamp(ev.get("completed"), file=steps.file, record=f"{steps.record}, events[{i}]")
    error = ev.get("error")
    result = ev.get("result")
    result_payload = {"result": result} if isinstance(result, list) else {}
    if error is not None:
        result_payload["error"] = error
    text = json_text(result) if isinstance(result, (int, float, bool)) else message_text(result, attachments)
    return {"call_id": call_id, "content": text, "role": "tool", "name": _str(ev.get("function")),
            "is_error": error is not None, "t": done, "payload": result_payload or None}


def add_messages(steps: StepBuffer, messages: list[Any], attachments: dict[str, str]) -> None:
    """Append the steps of an Inspect message list (used when a sample has no events)."""
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise steps.error(f"messages[{i}] is not an Inspect chat message")
        role = msg["role"]
        text = message_text(msg.get("content"), attachments)
        rest = {k: v for k, v in msg.items() if k not in ("role", "content", "tool_calls", "tool_call_id", "function", "error")}
        if isinstance(msg.get("content"), list):
            rest["content"] = msg["content"]
        if role == "tool":
            call_id = msg.get("tool_call_id")
            error = msg.get("error")
            if error is not None:
                rest["error"] = error
            if isinstance(call_id, str):
                steps.tool_result(call_id, text, role="tool", name=_str(msg.get("function")),
                                  is_error=error is not None, payload=rest or None)
            else:
                steps.add("observation", role="tool", name=_str(msg.get("function")), content=text,
                          is_error=error is not None, payload=rest or None)
            continue
        calls = msg.get("tool_calls") or []
        if text or not calls:
            steps.add("message", role=role, content=text, payload=rest or None)
            rest = {}
        for j, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("function"), str):
                raise steps.error(f"messages[{i}].tool_calls[{j}] is not an Inspect tool call")
            arguments = call.get("arguments")
            extra = {k: v for k, v in call.items() if k not in ("id", "function", "arguments", "type")}
            steps.tool_call(call["function"], None if arguments is None else json_text(arguments),
                            call.get("id") if isinstance(call.get("id"), str) else None,
                            role=role, payload={**rest, **extra} or None)
            rest = {}
