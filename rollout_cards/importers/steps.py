"""The steps of one imported episode, built row by row in the steps table's column order.

`StepBuffer` keeps the invariants the format needs while an importer maps a source
record: `seq` contiguous from 0, call ids unique per episode, and every tool result
linked to an earlier tool call. A result whose call the source does not hold (a history
trimmed to fit a context window, a call that was never logged) is kept — as a role-'tool'
`message` step carrying the source's call id in `payload.source_call_id`, never as a
dangling `tool_result` — and counted in `orphan_results`; the import session declares
the missing calls in the drops manifest.

Some sources reuse a call id within one episode (OpenAI models do; results follow
their call). Stored ids follow the one rule of `io.call_ids` that `CardWriter` follows
too: a reused id X is stored as `X#n` with the source id kept in the payload's
`source_call_id`, and a result is linked to the latest call with its id — the pairing
the source's order gives. `reused_call_ids` counts the reuses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

from ..errors import SourceFormatError
from ..io.call_ids import CallIds, with_source_call_id
from ..jsondoc import fast_texts
from ..tables import STEP_COLUMNS, StepKind

__all__ = ["StepBuffer", "decoded_json_text", "json_text", "parse_timestamp"]

_KINDS = frozenset(k.value for k in StepKind)
# The exact types `extend` takes without a closer look (anything else: `add` decides, step by step).
_TEXT = frozenset((str, type(None)))
_COUNT = frozenset((int, type(None)))
_COST = frozenset((float, int, type(None)))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WIDTH = 17  # the columns of STEP_COLUMNS (episode_id, seq, then the `add` fields)
_INDEX = {c.name: i for i, c in enumerate(STEP_COLUMNS)}


# One encoder for every call: json.dumps with these options builds a new JSONEncoder each time.
_ENCODE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def json_text(value: Any) -> str:
    """Deterministic JSON text of a source value (sorted keys, UTF-8 kept, no NaN)."""
    return _ENCODE(value)


def decoded_json_text(value: Any) -> str:
    """`json_text(value)` of a value a strict JSON decoder gave (jsondoc, JsonStream: NaN and
    Infinity refused), by msgspec's encoder where that writes the same text (`jsondoc.fast_texts`,
    2-3x faster on the nested objects of agent logs). With no non-finite float possible, a `null`
    in the text is a JSON null (`finite`), so a value holding nulls takes the fast path too."""
    got = fast_texts([value], finite=True)
    text = got[0] if got is not None else None
    return _ENCODE(value) if text is None else text


def parse_timestamp(value: Any, *, file: str, record: str | None) -> int | None:
    """Epoch microseconds of an ISO 8601 timestamp with a UTC offset; None for None.

    A timestamp without an offset is refused: guessing its time zone would invent data.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise SourceFormatError(f"timestamp {value!r} is not a string", file=file, record=record)
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise SourceFormatError(f"timestamp {value[:60]!r} is not ISO 8601", file=file, record=record) from None
    if t.tzinfo is None:
        raise SourceFormatError(
            f"timestamp {value[:60]!r} has no UTC offset; its time zone is unknown", file=file, record=record
        )
    d = t - _EPOCH  # as io.writer.to_micros, without its checks (done above) and the timedelta division
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


class StepBuffer:
    """The steps of one episode, in `STEP_COLUMNS` order: `rows` (one tuple per step) or `columns()`
    (one list per column). `add` appends a row, `extend` appends columns; each form is built from the
    other only when it is asked for (an importer that extends in bulk hands its columns to
    `ChunkedTables` without building a tuple per step and taking them apart again)."""

    __slots__ = ("_calls", "_columns", "_rows", "episode_id", "file", "orphan_results", "record")

    def __init__(self, episode_id: str, *, file: str, record: str):
        self.episode_id = episode_id
        self.file = file
        self.record = record
        # The steps are those of self._columns (lists, when some were extended) followed by self._rows.
        self._columns: list[list[Any]] | None = None
        self._rows: list[tuple[Any, ...]] = []
        self._calls = CallIds()
        #: Tool results kept as messages because no earlier call of the episode issued their id.
        self.orphan_results = 0

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        """The steps as tuples in STEP_COLUMNS order (read them; steps are appended by add / extend)."""
        if self._columns is not None:
            self._rows[:0] = zip(*self._columns, strict=True)
            self._columns = None
        return self._rows

    def columns(self) -> list[list[Any]]:
        """The steps as one list per column of STEP_COLUMNS (read them, as `rows`)."""
        if self._columns is None:
            self._columns = [list(values) for values in zip(*self._rows, strict=True)] if self._rows else [
                [] for _ in range(_WIDTH)]
        elif self._rows:
            for column, values in zip(self._columns, zip(*self._rows, strict=True), strict=True):
                column.extend(values)
        self._rows = []
        return self._columns

    def nulls(self, column: str) -> int:
        """How many steps have no value in `column` (a STEP_COLUMNS name), counted in the form the
        steps are held in: reading `rows` or `columns()` for it would build the other form."""
        i = _INDEX[column]
        held = self._columns[i].count(None) if self._columns is not None else 0
        return held + sum(1 for row in self._rows if row[i] is None)

    def __len__(self) -> int:
        return len(self._rows) + (len(self._columns[0]) if self._columns is not None else 0)

    def error(self, message: str) -> SourceFormatError:
        """A SourceFormatError located at this buffer's file and record."""
        return SourceFormatError(message, file=self.file, record=self.record)

    def add(
        self,
        kind: str,
        *,
        role: str | None = None,
        agent: str | None = None,
        name: str | None = None,
        call_id: str | None = None,
        content: str | None = None,
        args: str | None = None,
        is_error: bool | None = None,
        t: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
        payload: Any = None,
        parent_seq: int | None = None,
        depth: int | None = None,
    ) -> int:
        """Append a step; `args` is JSON text, `payload` any JSON value; returns its seq."""
        if kind not in _KINDS:
            raise ValueError(f"unknown step kind {kind!r}")  # an importer bug, not a source error
        if content is not None and type(content) is not str:
            raise self.error(f"step {len(self)}: content is {type(content).__name__}, expected text")
        if not ((input_tokens is None or (type(input_tokens) is int and input_tokens >= 0))
                and (output_tokens is None or (type(output_tokens) is int and output_tokens >= 0))
                and (cost_usd is None or (type(cost_usd) is float and math.isfinite(cost_usd)))):
            self._check_counts(input_tokens, output_tokens, cost_usd)  # says which one is wrong
        if payload is not None and type(payload) is not str:
            try:
                payload = json_text(payload)
            except ValueError as exc:
                raise self.error(f"step {len(self)}: payload is not JSON-serialisable: {exc}") from None
        seq = len(self)
        self._rows.append(
            (self.episode_id, seq, kind, t, role, agent, name, call_id, content, args, is_error,
             input_tokens, output_tokens, None if cost_usd is None else float(cost_usd), payload,
             parent_seq, depth)
        )
        return seq

    def _check_counts(self, input_tokens: Any, output_tokens: Any, cost_usd: Any) -> None:
        for label, count in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if count is not None and (type(count) is not int or count < 0):
                raise self.error(f"step {len(self)}: {label} {count!r} is not a non-negative integer")
        if cost_usd is not None and (not isinstance(cost_usd, (int, float)) or not math.isfinite(cost_usd)):
            raise self.error(f"step {len(self)}: cost {cost_usd!r} is not a finite number")

    @property
    def reused_call_ids(self) -> int:
        """Tool calls whose source id an earlier call of the episode had already used."""
        return self._calls.reused

    def tool_call(self, name: str | None, args: str | None, call_id: str | None, **fields: Any) -> int:
        """A tool call; a reused call id is stored as `<id>#<n>` (see the module docstring)."""
        if call_id is None:
            return self.add("tool_call", name=name, args=args, **fields)
        stored = self._calls.stored_id(call_id)
        if stored != call_id:
            fields["payload"] = self._source_payload(fields.get("payload"), call_id)
        seq = self.add("tool_call", name=name, args=args, call_id=stored, **fields)
        self._calls.add(call_id, stored)
        return seq

    def has_call(self, call_id: str) -> bool:
        """Whether an earlier tool call of this episode issued `call_id`."""
        return self._calls.result_id(call_id) is not None

    def tool_result(self, call_id: str, content: str | None, **fields: Any) -> int:
        """The result of an earlier tool call of this episode (the latest one with this id); one
        whose call the source does not hold becomes a role-'tool' message (module docstring)."""
        stored = self._calls.result_id(call_id)
        if stored is None:
            self.orphan_results += 1
            fields["payload"] = self._source_payload(fields.get("payload"), call_id)
            fields["role"] = fields.get("role") or "tool"
            return self.add("message", content=content, **fields)
        if stored != call_id:
            fields["payload"] = self._source_payload(fields.get("payload"), call_id)
        return self.add("tool_result", call_id=stored, content=content, **fields)

    def _source_payload(self, payload: Any, call_id: str, seq: int | None = None) -> dict[str, Any]:
        try:
            return with_source_call_id(payload, call_id)
        except ValueError as exc:
            raise self.error(f"step {len(self) if seq is None else seq}: {exc}") from None

    def extend(self, columns: Sequence[Sequence[Any]], calls: Sequence[int] = ()) -> None:
        """Append steps given as columns: the `add` fields after `seq` in STEP_COLUMNS order (kind,
        t, role, agent, name, call_id, content, args, is_error, input_tokens, output_tokens, cost_usd,
        payload, parent_seq, depth), one value per step. The steps at the indices `calls` are those
        an importer would give to `tool_call` (kind 'tool_call') or `tool_result` (kind 'tool_result'),
        with the source's call id. The result is what those calls and `add`, step by step, give —
        a bad value fails with the same error — in bulk (one Python call per column, not per step)."""
        (kind, t, role, agent, name, call_id, content, args, is_error, input_tokens, output_tokens, cost_usd,
         payload, parent_seq, depth) = columns
        if len({len(column) for column in columns}) > 1:
            raise ValueError("StepBuffer.extend: the columns differ in length")  # an importer bug
        costs = set(map(type, cost_usd))
        if not (_KINDS.issuperset(kind) and _TEXT.issuperset(map(type, content))
                and _COUNT.issuperset(map(type, input_tokens)) and _COUNT.issuperset(map(type, output_tokens))
                and _COST.issuperset(costs) and min(filter(None, input_tokens), default=0) >= 0
                and min(filter(None, output_tokens), default=0) >= 0
                and all(map(math.isfinite, filter(None, cost_usd)))):
            self._replay(columns, calls)  # a value add converts or refuses: step by step
            return
        first = len(self)
        odd = [i for i, p in enumerate(payload) if p is not None and type(p) is not str]
        if calls or odd:
            kind, role, call_id, payload = list(kind), list(role), list(call_id), list(payload)
            calls = set(calls)
            for i in sorted(calls.union(odd)):
                seq = first + i
                if i in calls and call_id[i] is None:
                    pass  # a tool call without an id (tool_call adds it as it is)
                elif kind[i] == "tool_call" and i in calls:
                    stored = self._calls.stored_id(call_id[i])
                    if stored != call_id[i]:
                        payload[i] = self._source_payload(payload[i], call_id[i], seq)
                    self._calls.add(call_id[i], stored)
                    call_id[i] = stored
                elif i in calls:
                    stored = self._calls.result_id(call_id[i])
                    if stored is None or stored != call_id[i]:
                        payload[i] = self._source_payload(payload[i], call_id[i], seq)
                    if stored is None:
                        self.orphan_results += 1
                        kind[i], role[i] = "message", role[i] or "tool"
                    call_id[i] = stored
                if payload[i] is not None and type(payload[i]) is not str:
                    try:
                        payload[i] = json_text(payload[i])
                    except ValueError as exc:
                        raise self.error(f"step {seq}: payload is not JSON-serialisable: {exc}") from None
        n = len(kind)
        out = self.columns()
        for column, values in zip(out, (repeat(self.episode_id, n), range(first, first + n), kind, t, role, agent,
                                        name, call_id, content, args, is_error, input_tokens, output_tokens,
                                        map(_float, cost_usd) if int in costs else cost_usd, payload, parent_seq,
                                        depth), strict=True):
            column.extend(values)

    def extend_rows(self, rows: list[tuple[Any, ...]], calls: Sequence[int] = (), *, finite: bool = False) -> None:
        """`extend` of steps given as tuples (kind, t, role, name, call_id, content, args, is_error,
        input_tokens, output_tokens, cost_usd, payload; no agent, parent_seq or depth), the payloads
        given as JSON values (dicts) and encoded in one go (`jsondoc.fast_texts`: json_text's texts;
        a payload it cannot encode is encoded by `extend`, as `add` would). `finite`: the payloads
        are values a strict decoder gave (no NaN or Infinity, as for `decoded_json_text`), so one
        holding a null is encoded in the same go instead of by json_text one by one."""
        if not rows:
            return
        kind, t, role, name, call_id, content, args, is_error, t_in, t_out, cost, payload = zip(*rows, strict=True)
        texts = fast_texts(list(payload), finite=finite)
        if texts is not None:  # a None payload stays None (fast_texts writes it 'null')
            payload = tuple(p if p is None or text is None else text for p, text in zip(payload, texts, strict=True))
        none = (None,) * len(rows)
        self.extend((kind, t, role, none, name, call_id, content, args, is_error, t_in, t_out, cost, payload, none,
                     none), calls)

    def _replay(self, columns: Sequence[Sequence[Any]], calls: Sequence[int]) -> None:
        """`extend` step by step through `add`, `tool_call` and `tool_result` (for a value `add`
        converts or refuses: it is then exactly what `add` makes of it)."""
        names = ("kind", "t", "role", "agent", "name", "call_id", "content", "args", "is_error", "input_tokens",
                 "output_tokens", "cost_usd", "payload", "parent_seq", "depth")
        calls = set(calls)
        for i, values in enumerate(zip(*columns, strict=True)):
            fields = dict(zip(names, values, strict=True))
            if i in calls and fields["kind"] == "tool_call":
                del fields["kind"]
                self.tool_call(fields.pop("name"), fields.pop("args"), fields.pop("call_id"), **fields)
            elif i in calls:
                del fields["kind"]
                self.tool_result(fields.pop("call_id"), fields.pop("content"), **fields)
            else:
                self.add(fields.pop("kind"), **fields)
