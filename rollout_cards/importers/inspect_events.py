"""Inspect AI sample events (or, without events, messages) to steps.

Every event becomes at least one step; none is dropped. Steps are in time order
(Inspect writes a tool event after the span it opened, with an earlier start, and a
tool result belongs at the tool's completion); ties keep the log's order. The event's JSON is kept
in `payload` (with Inspect's `attachment://` references as they are; the sample's
attachments are kept once per episode in `meta.attachments`), while `content`
columns hold the resolved text.

| event                  | steps                                                        |
|------------------------|--------------------------------------------------------------|
| `model`                | `message` (role assistant, name = model, content = output text, tokens from `output.usage`, is_error when the call failed) |
| `tool`                 | `tool_call` (name = function, args, call_id = id, t = start); `tool_result` (content = result, is_error = error present, t = `completed`) |
| `error`                | `error` (content = error message)                            |
| `sample_limit`         | `limit` (name = limit type, content = message)               |
| `span_begin`/`span_end`| `span_begin`/`span_end` (name = span name)                   |

Each step's `parent_seq`, `depth` and `agent` come from the sub-agent span its event is in
(inspect_spans).
| `step` begin/end (older logs) | `span_begin`/`span_end` (name = step name)            |
| `score`                | `score` (name = the enclosing scorer, content = value)       |
| `subtask` with its own `events` (older logs) | `span_begin` (name = subtask name, payload = the event without its events), the events' steps inside it (a sub-agent), `span_end` at `completed` |
| `tool` with an `agent` and its own `events` (older logs: a tool that ran an agent) | `tool_call` (payload without the events) launching a sub-agent (`agent` = the event's agent) whose steps are the events', then the `tool_result` |
| `state`, `store`, `sample_init` | `state` (name = event type)                         |
| `sandbox`              | `action` (name = sandbox)                                    |
| anything else          | `annotation` (name = event type; `logger`/`info` text as content) |

Without events, messages map as: system/user/assistant → `message`; an assistant's
`tool_calls` → one `tool_call` each; `tool` messages → `tool_result` by
`tool_call_id` (is_error when the message has an `error`); their depth is null.
"""

from __future__ import annotations

import operator
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

from ..errors import SourceFormatError
from ..jsondoc import fast_text, fast_texts
from .inspect_log import text as json_text
from .inspect_spans import TOOL_AGENT, Span, Spans, resolve
from .source_values import text as source_text
from .steps import StepBuffer, parse_timestamp

__all__ = ["add_events", "add_messages", "message_text", "resolve_attachment"]

_STATE = frozenset(("state", "store", "sample_init"))
_TEXT_OR_NONE = (str, type(None))
_FIRST = operator.itemgetter(0)
_FROM_ISO = datetime.fromisoformat
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_PREFIXES = ("attachment://", "tc://")  # tc:// in logs of 2024 (inspect_ai 0.3.4x)


def resolve_attachment(text: Any, attachments: dict[str, str]) -> Any:
    """The attachment an `attachment://<hash>` (or older `tc://<hash>`) reference names (other values unchanged)."""
    if isinstance(text, str):
        for prefix in _PREFIXES:
            if text.startswith(prefix):
                found = attachments.get(text[len(prefix) :])
                return found if isinstance(found, str) else text  # an attachment is text; else keep the reference
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


def _tokens(usage: Any, steps: StepBuffer, where: str) -> tuple[int | None, int | None]:
    """A model call's input and output tokens; a count that is not a non-negative integer is a
    source error naming the event (not a silent gap)."""
    if not isinstance(usage, dict):
        return None, None
    got = []
    for key in ("input_tokens", "output_tokens"):
        value = usage.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise steps.error(f"{where}.output.usage.{key} is {value!r}, not a non-negative integer")
        got.append(value)
    return got[0], got[1]


class _Timeline:
    """Steps of one sample's events, put in time order before they are written.

    Inspect writes some events after others that began later (a tool event follows the
    span it opened, with an earlier start); a tool result happens when the tool
    completes. Steps are ordered by time, ties and untimed steps keeping the log's
    order (an untimed step stays right after the step before it). A step is put in the
    `span` of its event (inspect_spans); one whose time is earlier than the `span_begin` of
    its sub-agent (a clock that ran back) hangs under the nearest enclosing sub-agent that
    began before it (counted as `unnested`), since a parent step comes first. The steps are
    handed to the StepBuffer as columns (`StepBuffer.extend`), one tuple per step until then.
    """

    def __init__(self, steps: StepBuffer) -> None:
        self.steps = steps
        #: (time key, log order, span, then the step's fields in STEP_COLUMNS order from kind to
        #: payload without agent): the log order is unique, so sorting never compares past it
        self.items: list[tuple[Any, ...]] = []
        self.last = -(1 << 62)  # the time key of the step put last (an untimed step takes it)
        self.span: Span | None = None
        self.counts: Counter[str] = Counter()

    def put(
        self, t: int | None, kind: str, role: str | None = None, name: str | None = None, content: str | None = None,
        is_error: bool | None = None, payload: Any = None, call_id: str | None = None, args: str | None = None,
        input_tokens: int | None = None, output_tokens: int | None = None, cost_usd: float | None = None,
    ) -> int:
        """Put a step (the fields of `StepBuffer.add`; a `tool_call` or `tool_result` with the source's
        call id, as given to StepBuffer.tool_call / tool_result); returns its item number."""
        key = self.last if t is None else t
        self.last = key
        n = len(self.items)
        self.items.append((key, n, self.span, kind, t, role, name, call_id, content, args, is_error, input_tokens,
                           output_tokens, cost_usd, payload))
        return n

    def write(self) -> Counter[str]:
        """Append the steps in time order; returns the counts: `moved` (steps that moved from the
        log's order), `sub_agents` (sub-agent spans with steps), `unnested` (see the class)."""
        if not self.items:
            return self.counts
        items = self.items
        keys = list(map(_FIRST, items))
        if not all(map(operator.le, keys, keys[1:])):  # most samples are in time order already
            items = sorted(items, key=_FIRST)  # stable: ties keep the log's order
        (_keys, orders, spans, kind, t, role, name, call_id, content, args, is_error, input_tokens, output_tokens,
         cost_usd, payload) = zip(*items, strict=True)
        places = {span: resolve(span) for span in set(spans)}
        if all(place[0] is None for place in places.values()):  # no sub-agent: no step has a parent
            parents: Any = (None,) * len(spans)
            _parents, depths, agents = zip(*map(places.__getitem__, spans), strict=True)
            launched: set[int] = set()
        else:
            parents, depths, agents, launched = self._nest(orders, spans)
        calls = ([i for i, k in enumerate(kind) if k == "tool_call" or k == "tool_result"]
                 if "tool_call" in kind or "tool_result" in kind else ())
        self.steps.extend((kind, t, role, agents, name, call_id, content, args, is_error, input_tokens,
                           output_tokens, cost_usd, payload, parents, depths), calls)
        self.counts["moved"] += sum(map(operator.lt, orders[1:], orders[:-1]))
        self.counts["sub_agents"] += len(launched)
        return self.counts

    def _nest(self, orders: tuple[int, ...], spans: tuple[Span | None, ...]) -> tuple[
            list[int | None], list[int], list[str | None], set[int]]:
        """Each step's parent seq, depth and agent, and the item numbers of the sub-agents' span_begins
        that launched steps, of steps in time order (`orders`: their item numbers; `spans`: theirs)."""
        first = len(self.steps)
        seqs: list[int] | None = None  # item number -> seq, once a step has a parent
        launched = set()
        last: Any = self  # the span of the step before (steps of one span come in runs)
        place: tuple[int | None, int, str | None] = (None, 0, None)
        parents: list[int | None] = []
        depths: list[int] = []
        agents: list[str | None] = []
        for position, span in enumerate(spans, first):
            if span is not last:
                place, last = resolve(span), span
            parent, depth, agent = place
            if parent is not None:
                if seqs is None:
                    seqs = [0] * len(orders)
                    for at, item in enumerate(orders, first):
                        seqs[item] = at
                while parent is not None and seqs[parent] > position:
                    self.counts["unnested"] += 1
                    while span is not None and span.item != parent:  # up to the sub-agent's span
                        span = span.parent
                    parent, depth, agent = resolve(span.parent if span is not None else None)
                    last = self  # `place` no longer holds for the next step of this span
                if parent is not None:
                    launched.add(parent)
                    parent = seqs[parent]
            parents.append(parent)
            depths.append(depth)
            agents.append(agent)
        return parents, depths, agents, launched


def add_events(
    steps: StepBuffer, events: list[Any], attachments: dict[str, str], pool: list[Any] | None = None,
    raw: list[str] | None = None, *, finite: bool = False, marked: bool = False,
) -> Counter[str]:
    """Append one or two steps per event (see the module table), in time order, nested by
    their spans (inspect_spans); returns counts: `moved` (steps that the log had written out
    of time order), `sub_agents`, `unnested` (_Timeline.write). `pool` is the sample's
    message pool (`events_data.messages`, or `message_pool` of format 3) that model events'
    `input_refs` index. `raw`, when given, is each event's source JSON text: it is the
    payload as it is (re-serialising every event was a third of an import's time), except
    where it may hold a NaN/Infinity literal, which JSON text cannot (then as `text`). `finite`:
    the events are known to hold no NaN or Infinity float (none of their texts can hold one); `marked`:
    their floats that msgspec writes unlike repr are `jsondoc.ReprFloat`s (see `jsondoc.fast_texts`)."""
    line = _Timeline(steps)
    texts: list[str] | list[str | None] | None = raw
    if raw is None or len(raw) != len(events):
        # no source texts (a .json log): the payloads' texts, all in one encoding (fast_texts
        # gives exactly what `json_text(ev)` below gives, or None for that one)
        texts = fast_texts(events, finite=finite, marked=marked)
    labels: list[str] | None = None  # each event's place, once older nested events are spliced in
    if _may_hold_events(events) and any(map(_holds_events, events)):
        events, texts, labels = _splice(events, texts)
    seen: Counter[tuple[str, str]] = Counter()  # conversation messages already stepped
    scorer_spans: set[str] = set()
    scorer: str | None = None  # the scorer whose span or step encloses a `score` event
    nesting = Spans()
    items = line.items
    subtasks: list[Span] = []  # the older subtasks and tool agents whose spliced events are being read
    for i, ev in enumerate(events):
        kind = ev.get("event") if type(ev) is dict else None
        if kind == "span_begin" or kind == "span_end":
            # Two thirds of an agent's events: what the general path below does (_time, line.put)
            # written out for them, as those calls cost more than the work.
            stamp = ev.get("timestamp")
            if type(stamp) is str:
                try:
                    parsed = _FROM_ISO(stamp)
                except ValueError:
                    parsed = None
                t = ((parsed - _EPOCH) // _MICROSECOND if parsed is not None and parsed.tzinfo is not None
                     else _time(steps, stamp, i if labels is None else labels[i]))
            else:
                t = None if stamp is None else _time(steps, stamp, i if labels is None else labels[i])
            typ = ev.get("type")
            if typ is not None and type(typ) is not str:  # looked up in the span kinds' tables
                source_text(steps, typ, f"{_where(i if labels is None else labels[i])}.type")
            source = texts[i] if texts is not None else None
            payload = (source if source is not None and (finite or ("NaN" not in source and "Infinity" not in source))
                       else json_text(ev))
            key = ev.get("id")
            if type(key) is not str:
                key = str(key)
            if t is None:
                t_key = line.last
            else:
                t_key = line.last = t
            item = len(items)
            if kind == "span_begin":
                name = ev.get("name")
                if name is not None and type(name) is not str:
                    name = json_text(name)
                if typ == "scorer":
                    scorer_spans.add(key)
                    scorer = name
                parent = nesting.begin(ev, key, typ, name, item)
            else:  # span_end carries only the id
                parent, name = nesting.end(key)
                if key in scorer_spans:
                    scorer = None
            items.append((t_key, item, parent, kind, t, None, name, None, None, None, None, None, None, None, payload))
            continue
        at = i if labels is None else labels[i]
        if type(kind) is not str:
            if type(ev) is _SubtaskEnd:  # after an older subtask's or tool agent's own events
                span = subtasks.pop()
                nesting.close(span)
                line.span = span.parent
                if span.kind == TOOL_AGENT:
                    continue  # the tool's result (at its completion) ends it
                done = ev.event.get("completed")
                done = None if done is None else _time(steps, done, at)
                if done is not None and span.t is not None and done < span.t:
                    raise steps.error(f"{_where(at)}: the subtask completed before it started")
                line.put(done, "span_end", name=span.name)
                continue
            raise steps.error(f"{_where(at)} is not an Inspect event (no `event` type)")
        line.span = nesting.of(ev, kind)
        source = texts[i] if texts is not None else None
        ok = source is not None and (finite or ("NaN" not in source and "Infinity" not in source))
        payload = source if ok else None if kind == "tool" else json_text(ev)  # a tool event's is built below
        stamp = ev.get("timestamp")
        t = None if stamp is None else _time(steps, stamp, at)
        if kind == "step":  # older logs: solver and scorer steps instead of spans
            if type(ev.get("type")) not in _TEXT_OR_NONE:  # looked up in the span kinds' tables
                source_text(steps, ev.get("type"), f"{_where(at)}.type")
            begin, name = ev.get("action") == "begin", _str(ev.get("name"))
            if ev.get("type") == "scorer":  # step end events repeat their type
                scorer = name if begin else None
            line.put(t, "span_begin" if begin else "span_end", name=name, payload=payload)
        elif kind == "model":
            _model(steps, line, ev, t, attachments, pool, seen, at, payload)
        elif kind == "tool":
            seen[("tool", str(ev.get("id")))] += 1
            nested = labels is not None and _holds_events(ev)  # an older log's tool agent
            item = _tool(steps, line, ev, t, attachments, at, nested, marked)
            if nested:
                subtasks.append(nesting.open(TOOL_AGENT, _str(ev.get("agent")), line.span, item, t))
        elif kind == "error":
            error = ev.get("error") if isinstance(ev.get("error"), dict) else {}
            line.put(t, "error", content=_str(error.get("message")), is_error=True, payload=payload)
        elif kind == "sample_limit":
            line.put(t, "limit", name=_str(ev.get("type")), content=_str(ev.get("message")), payload=payload)
        elif kind == "score":
            score = ev.get("score") if isinstance(ev.get("score"), dict) else {}
            value = score.get("value")
            line.put(t, "score", name=scorer,
                     content=value if isinstance(value, str) else (None if value is None else json_text(value)),
                     payload=payload)
        elif kind == "subtask" and labels is not None and _holds_events(ev):  # an older log's subtask
            name = _str(ev.get("name"))
            item = line.put(t, "span_begin", name=name, payload=json_text({k: v for k, v in ev.items() if k != "events"}))
            subtasks.append(nesting.open("subtask", name, line.span, item, t))
        elif kind in _STATE:
            line.put(t, "state", name=kind, payload=payload)
        elif kind == "sandbox":
            line.put(t, "action", name="sandbox", payload=payload)
        else:
            line.put(t, "annotation", name=kind, content=_annotation_text(ev, attachments), payload=payload)
    return line.write()


def _model(
    steps: StepBuffer, line: _Timeline, ev: dict[str, Any], t: int | None, attachments: dict[str, str],
    pool: list[Any] | None, seen: Counter[tuple[str, str]], at: int | str, payload: str,
) -> None:
    """Steps of a model event: first the input messages not stepped before (system and user
    prompts, prefilled assistant turns, tool results no tool event gave), then the call: an
    assistant `message`, or an `error` step for a failed attempt (Inspect retries those)."""
    inputs = ev.get("input") or []
    refs = ev.get("input_refs")
    if not inputs and refs:
        inputs = _expand_refs(steps, refs, pool, at)
    if not isinstance(inputs, list):
        raise steps.error(f"{_where(at)}.input is not a list of messages")
    here: Counter[tuple[str, str]] = Counter()
    for msg in inputs:
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise steps.error(f"{_where(at)}.input holds something that is not an Inspect chat message")
        key = _message_key(msg)
        here[key] += 1
        if here[key] <= seen[key]:
            continue
        seen[key] += 1
        role, content = msg["role"], message_text(msg.get("content"), attachments)
        if role == "tool":
            line.put(t, "observation", role="tool", name=_str(msg.get("function")), content=content,
                     is_error=msg.get("error") is not None, payload=json_text(msg))
        else:
            line.put(t, "message", role=role, content=content, payload=json_text(msg))
    output = ev.get("output") if isinstance(ev.get("output"), dict) else {}
    choices = output.get("choices") or []
    if not isinstance(choices, list):  # a number or an object here was an internal error (exit 2)
        raise steps.error(f"{_where(at)}.output.choices is {type(choices).__name__}, not a list of choices")
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    if isinstance(message, dict):
        seen[_message_key({**message, "role": "assistant"})] += 1  # an output message is the assistant's
    usage = output.get("usage") if isinstance(output.get("usage"), dict) else {}
    cost = usage.get("total_cost")
    cost = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0 else None
    tin, tout = _tokens(usage, steps, _where(at))
    if ev.get("error"):
        line.put(t, "error", name=_str(ev.get("model")), content=_str(ev["error"]), is_error=True,
                 input_tokens=tin, output_tokens=tout, cost_usd=cost, payload=payload)
        return
    text = message_text(message.get("content"), attachments) if isinstance(message, dict) else None
    line.put(t, "message", role="assistant", name=_str(ev.get("model")), content=text,
             input_tokens=tin, output_tokens=tout, cost_usd=cost, payload=payload)


def _message_key(msg: dict[str, Any]) -> tuple[str, str]:
    """What identifies a conversation message across model events: a tool result by its call,
    another message by its id (older logs have none: by its JSON)."""
    if msg["role"] == "tool" and isinstance(msg.get("tool_call_id"), str):
        return ("tool", msg["tool_call_id"])
    if isinstance(msg.get("id"), str):
        return (msg["role"], msg["id"])
    return (msg["role"], json_text({k: v for k, v in msg.items() if k not in ("source", "model")}))


def _expand_refs(steps: StepBuffer, refs: Any, pool: list[Any] | None, at: int | str) -> list[Any]:
    """Inspect's `input_refs`: [start, end) ranges into the sample's message pool."""
    if pool is None:
        raise steps.error(f"{_where(at)} refers to a message pool (input_refs) the sample does not have")
    out: list[Any] = []
    for pair in refs if isinstance(refs, list) else [None]:
        if (not isinstance(pair, list) or len(pair) != 2 or any(type(x) is not int for x in pair)
                or not 0 <= pair[0] <= pair[1] <= len(pool)):
            raise steps.error(f"{_where(at)}.input_refs holds {pair!r}, not a [start, end) range into the "
                              f"{len(pool)}-message pool")
        out.extend(pool[pair[0] : pair[1]])
    return out


class _SubtaskEnd:
    """Where an older subtask's own events end in the spliced event list (`_splice`)."""

    __slots__ = ("event",)

    def __init__(self, event: dict[str, Any]) -> None:
        self.event = event


def _may_hold_events(events: list[Any]) -> bool:
    """False when no event is a dict with an `events` key (so none `_holds_events`), tested at C
    speed (a call of `_holds_events` per event cost ~1 us); True when one may be."""
    try:
        return any(map(dict.__contains__, events, repeat("events")))
    except TypeError:  # an item that is not a dict: the exact test says
        return True


def _holds_events(ev: Any) -> bool:
    """Whether `ev` is an event of an older log holding its own `events` (deprecated in Inspect: newer
    logs record them in the main transcript, inside a span): a `subtask`, or a `tool` event with an
    `agent` (a tool that ran an agent: Inspect's timeline makes those an agent span)."""
    if type(ev) is not dict or type(ev.get("events")) is not list or not ev["events"]:
        return False
    kind = ev.get("event")
    return kind == "subtask" or (kind == "tool" and bool(ev.get("agent")))


def _splice(events: list[Any], texts: list[Any] | None) -> tuple[list[Any], list[Any], list[str]]:
    """`events` with each older subtask's own events after it (recursively) and a `_SubtaskEnd`
    after those; their payload texts (a spliced event has none: it is encoded by itself) and
    their places (`events[3].events[0]`). A loop, not recursion: subtasks may nest deeply."""
    out: list[Any] = []
    out_texts: list[Any] = []
    labels: list[str] = []
    stack: list[tuple[list[Any], int, str, _SubtaskEnd | None]] = [(events, 0, "events", None)]
    while stack:
        items, i, prefix, end = stack.pop()
        if i == len(items):
            if end is not None:
                out.append(end)
                out_texts.append(None)
                labels.append(f"{prefix.removesuffix('.events')} (its end)")
            continue
        stack.append((items, i + 1, prefix, end))
        ev = items[i]
        out.append(ev)
        out_texts.append(texts[i] if texts is not None and len(stack) == 1 else None)
        labels.append(f"{prefix}[{i}]")
        if _holds_events(ev):
            stack.append((ev["events"], 0, f"{prefix}[{i}].events", _SubtaskEnd(ev)))
    return out, out_texts, labels


def _where(at: int | str) -> str:
    """An event's place for an error: `events[i]`, or the label `_splice` gave it."""
    return f"events[{at}]" if type(at) is int else str(at)


def _time(steps: StepBuffer, stamp: Any, at: int | str) -> int | None:
    """parse_timestamp of an event's timestamp (its error names the event; the record is built only
    then). An ISO string with an offset, as every event has, is converted here (the same number:
    whole microseconds since the epoch) without parse_timestamp's checks and calls, one per event."""
    if type(stamp) is str:
        try:
            parsed = _FROM_ISO(stamp)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return (parsed - _EPOCH) // _MICROSECOND
    try:
        return parse_timestamp(stamp, file=steps.file, record=None)
    except SourceFormatError:
        return parse_timestamp(stamp, file=steps.file, record=f"{steps.record}, {_where(at)}")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None else json_text(value)


def _annotation_text(ev: dict[str, Any], attachments: dict[str, str]) -> str | None:
    if ev["event"] == "logger" and isinstance(ev.get("message"), dict):
        return _str(ev["message"].get("message"))
    if ev["event"] == "info" and isinstance(ev.get("data"), str):
        return resolve_attachment(ev["data"], attachments)
    return None


def _tool(
    steps: StepBuffer, line: _Timeline, ev: dict[str, Any], t: int | None, attachments: dict[str, str], at: int | str,
    nested: bool = False, marked: bool = False,
) -> int:
    """The `tool_call` and `tool_result` steps of a tool event; returns the call's timeline item.
    `nested`: the event's own `events` are the steps of its agent (not kept in the payload);
    `marked`: as for add_events."""
    call_id = ev.get("id")
    if not isinstance(call_id, str):
        raise steps.error(f"{_where(at)} is a tool event without a string id")
    arguments = ev.get("arguments")
    payload = {k: v for k, v in ev.items() if k != "result" and (k != "events" or not nested)}
    item = line.put(t, "tool_call", name=_str(ev.get("function")), args=None if arguments is None else json_text(arguments),
             call_id=call_id, role="assistant", payload=fast_text(payload, marked=marked) or payload)  # as StepBuffer would encode it
    if ev.get("pending"):
        return item  # the tool had not returned when the log was written: no result to record
    done = ev.get("completed")
    done = None if done is None else _time(steps, done, at)
    if done is not None and t is not None and done < t:
        raise steps.error(f"{_where(at)}: the tool completed before it started")
    error = ev.get("error")
    result = ev.get("result")
    payload = {"result": result} if isinstance(result, list) else {}
    if error is not None:
        payload["error"] = error
    text = json_text(result) if isinstance(result, (int, float, bool)) else message_text(result, attachments)
    line.put(done, "tool_result", call_id=call_id, content=text, role="tool", name=_str(ev.get("function")),
             is_error=error is not None, payload=payload or None)
    return item


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
                          is_error=error is not None, payload=json_text(rest) if rest else None)
            continue
        calls = msg.get("tool_calls") or []
        if text or not calls:
            steps.add("message", role=role, content=text, payload=json_text(rest) if rest else None)
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
