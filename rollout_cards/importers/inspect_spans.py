"""Which agent an Inspect event belongs to: spans and subtasks to `parent_seq`, `depth`, `agent`.

Inspect records one flat event stream per sample. Since inspect-ai 0.3.9x every event
carries the `span_id` of the span it happened in and a `span_begin` its `parent_id`
(absent: a top-level span); in logs without them the spans nest in the order they begin
and end. Sub-agents are spans, classified as Inspect's own `timeline_build` classifies
agents (inspect_ai/event/_timeline.py), plus subtasks:

| span (`type`) | steps of the events inside it |
|---|---|
| `agent` inside a tool call (an `as_tool()` agent; a `handoff()`, which Inspect runs in a `handoff` and a `tool` span), another agent or a subtask | a sub-agent's: `parent_seq` = that span's `span_begin`, `depth` = its depth + 1, `agent` = the span name |
| `agent` outside all of those (the task's own agent, e.g. `react()` as the solver) | the top level's (`depth` unchanged), `agent` = the span name |
| `subtask` (an `@subtask` function; Inspect writes a `subtask` event inside it; an older log's `subtask` event with its own `events` is opened as one, `Spans.open`) | a sub-agent's, as for `agent` (`agent` = the subtask name) |
| `tool` with a model call inside it and no `agent` or `subtask` span (a tool that runs a model itself) | a sub-agent's (`agent` = the tool name) |
| an older log's `tool` event with an `agent` and its own `events` (opened by `Spans.open` as a `TOOL_AGENT` span, launched by the tool_call step) | a sub-agent's (`agent` = the event's agent) |
| any other (`init`, `solvers`, `solver`, `handoff`, `scorers`, `scorer`, other tools, …) | the enclosing span's |

A span's own `span_begin` and `span_end` steps belong to the enclosing agent. Top-level
steps have depth 0: the event stream is the sample's whole transcript, so an event in no
sub-agent's span is the task's own agent's. Whether a tool span is a sub-agent is known
only once its events are read, so `resolve` is called when the sample's steps are written.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOL_AGENT", "Span", "Spans", "resolve"]

#: The kind of the span `Spans.open` opens for an older log's tool event with its own agent events.
TOOL_AGENT = "tool agent"
_AGENTS = frozenset(("agent", "subtask", TOOL_AGENT))
_SUB_AGENTS = frozenset(("subtask", TOOL_AGENT))  # always a sub-agent
_LAUNCHERS = frozenset(("agent", "subtask", "tool", "handoff"))  # an agent span below one is a sub-agent


class Span:
    """One span of a sample: its kind, name, parent span and the timeline item of its `span_begin`."""

    __slots__ = ("closed", "has_agent", "has_model", "item", "kind", "name", "parent", "resolved", "t")

    def __init__(self, kind: Any, name: str | None, parent: Span | None, item: int, t: int | None = None) -> None:
        self.kind, self.name, self.parent, self.item, self.t = kind, name, parent, item, t
        self.has_model = self.has_agent = False  # a model event / an agent or subtask span below it
        self.closed = False  # its span_end was read
        self.resolved: tuple[int | None, int, str | None, bool] | None = None


class Spans:
    """The spans of one sample's events, in the order the log gives them."""

    __slots__ = ("_by_id", "_open")

    def __init__(self) -> None:
        # span id -> the span its (latest) `span_begin` began
        self._by_id: dict[str, Span] = {}
        self._open: list[Span] = []  # spans begun and not ended (and ended ones below one), for id-less logs

    def _here(self) -> Span | None:
        """The innermost open span: where an event without a (known) span id happens."""
        return self._open[-1] if self._open else None

    def of(self, ev: dict[str, Any], kind: str) -> Span | None:
        """The span an event (of type `kind`, not a span's own begin or end: `begin`, `end`)
        belongs to (None: the top level)."""
        key = ev.get("span_id")
        span = self._by_id.get(key) if isinstance(key, str) else None
        if span is None:
            span = self._here()
            if kind == "tool" and span is not None and span.kind == "tool":
                span = span.parent  # Inspect writes a tool event inside the span of its call; it is the caller's
        if kind == "model":
            _mark(span, "has_model")
        return span

    def begin(self, ev: dict[str, Any], key: str, kind: Any, name: str | None, item: int) -> Span | None:
        """A `span_begin` event of span id `key` and type `kind`, whose step is timeline item `item`;
        returns the span it begins in (its step's: a span's own begin step belongs to its parent)."""
        if "span_id" not in ev:  # an older log: spans nest in their order
            parent = self._here()
        else:
            above = ev.get("parent_id")
            parent = None if above is None else self._by_id.get(above) if isinstance(above, str) else None
            if parent is None and above is not None:
                parent = self._here()
        self._by_id[key] = self.open(kind, name, parent, item)
        return parent

    def end(self, key: str) -> tuple[Span | None, str | None]:
        """A `span_end` of span id `key` (see `close`): the span its step belongs to (the ended span's
        parent) and the ended span's name (None for an id no span_begin had)."""
        span = self._by_id.get(key)
        if span is None:
            return self._here(), None
        self.close(span)
        return span.parent, span.name

    def open(self, kind: Any, name: str | None, parent: Span | None, item: int, t: int | None = None) -> Span:
        """A span that begins here (its `span_begin` step is timeline item `item`, at time `t`): events
        without ids are in it until it is closed. An older log's subtask or tool agent is opened so, by its event."""
        span = Span(kind, name, parent, item, t)
        if kind in _AGENTS:
            _mark(parent, "has_agent")
        self._open.append(span)
        return span

    def close(self, span: Span) -> None:
        """`span` is no longer where later events without ids happen. Marked closed and popped
        once no open span is above it, so ending spans in any order costs constant time per span
        (a search of the open list per end was quadratic on a hostile log of nested spans ended
        oldest first); the innermost open span (`_here`) is the same as after removing it."""
        span.closed = True
        while self._open and self._open[-1].closed:
            self._open.pop()


def _mark(span: Span | None, flag: str) -> None:
    while span is not None and not getattr(span, flag):
        setattr(span, flag, True)
        span = span.parent


_TOP: tuple[int | None, int, str | None] = (None, 0, None)


def resolve(span: Span | None) -> tuple[int | None, int, str | None]:
    """(timeline item of the launching `span_begin`, depth, agent) of a step in `span`."""
    if span is None:
        return _TOP
    if span.resolved is not None:
        return span.resolved[:3]
    chain = []
    above = span
    while above is not None and above.resolved is None:  # a loop, not recursion: spans may nest deeply
        chain.append(above)
        above = above.parent
    outer = (None, 0, None, False) if above is None else above.resolved
    for node in reversed(chain):
        item, depth, agent, launched = outer
        if node.kind in _SUB_AGENTS or (node.kind == "agent" and launched) or (
                node.kind == "tool" and node.has_model and not node.has_agent):
            outer = (node.item, depth + 1, node.name, True)
        elif node.kind == "agent":  # the task's own agent
            outer = (item, depth, node.name, True)
        else:
            outer = (item, depth, agent, launched or node.kind in _LAUNCHERS)
        node.resolved = outer
    return outer[:3]
