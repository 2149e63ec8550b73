"""Episode rows and step tuples gathered into Arrow tables for `CardWriter`'s bulk path.

`ChunkedTables` keeps each extra column to one type for the whole import (an int
column may widen to float), refuses a repeated episode id, derives `n_steps`, and
writes a chunk whenever it holds `chunk_episodes` episodes, `chunk_steps` steps or
`chunk_chars` characters of step text (content, args, payload) — so memory is bounded
by the chunk whatever a source's step sizes (a mini-swe-agent step holds ~3.5 KB of
text: 50,000 of them were ~175 MB). A column that is null in a whole chunk is left
out of that chunk (finalize fills it with nulls of the column's type). A column that is
null in every row of the import (a field every source record leaves empty) still exists
in the card, all null — a rule the importer declares over it must find it: its type is
the one `declare` gave, else float64 for `score.*` (grader outputs a rule averages) and
string for the others; `finish` writes it as a zero-row part.

A value over the writer's per-value cap (`io.value_sizes`, checked by the writer on each
chunk) is a SourceFormatError naming the episode's source file and record, the step,
the column, its size and the cap: the chunk keeps each episode's place in the sources.

An episode's `episode_id`, `task_id` and `agent` are at most `MAX_LABEL_CHARS`
characters: drop selectors, redaction specs and rules' groups name episodes by them in
expressions of at most 10,000 characters, so a longer one (a mutated source's 3 MiB
string in a name field) could never be selected; it is refused at its record.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ..errors import SourceFormatError, ValueTooLargeError, WriterError
from ..io.value_sizes import mib
from ..io.writer import CardWriter
from ..tables import (
    ARROW_OF_KIND,
    EPISODE_COLUMNS,
    SCALAR_KINDS,
    STEP_COLUMNS,
    TerminalStatus,
    merge_kind,
    steps_schema,
)
from .steps import StepBuffer

__all__ = ["CHUNK_CHARS", "MAX_LABEL_CHARS", "ChunkedTables"]

#: Longest episode_id, task_id or agent an import accepts, in characters.
MAX_LABEL_CHARS = 4096
_LABELS = ("agent", "task_id", "episode_id")  # the agent first: ids are often built from it

_STATUSES = frozenset(s.value for s in TerminalStatus)
_STANDARD = {c.name: c for c in EPISODE_COLUMNS}
_DERIVED = ("n_steps",)
_STEP_SCHEMA = steps_schema()
_STEP_TYPES = [c.type for c in STEP_COLUMNS]


def _expected(typ: pa.DataType) -> tuple[tuple[type, ...], str] | None:
    """The Python values a column of `typ` accepts (None always), and their name; None: not checked."""
    if pa.types.is_dictionary(typ) or pa.types.is_string(typ):
        return (str,), "text"
    if pa.types.is_boolean(typ):
        return (bool,), "true or false"
    if pa.types.is_integer(typ):
        return (int,), "an integer"
    if pa.types.is_floating(typ):
        return (int, float), "a number"
    return None


# A source's object where a column holds text (a tool name given as {"a": [null]}) is the
# source's fault: refused here with its record, not left to fail as an Arrow error at flush.
_STEP_CHECKS = [(i, c.name, *e) for i, c in enumerate(STEP_COLUMNS) if (e := _expected(c.type)) is not None]
_EPISODE_CHECKS = {c.name: e for c in EPISODE_COLUMNS if (e := _expected(c.type)) is not None}
_SEQ = [c.name for c in STEP_COLUMNS].index("seq")
_T = [c.name for c in STEP_COLUMNS].index("t")
_TEXTS = [[c.name for c in STEP_COLUMNS].index(name) for name in ("content", "args", "payload")]
#: Characters of buffered step text (content, args, payload) that make a chunk (~8 Mi: a few MB of
#: Arrow data per chunk, so the buffer does not grow with a source's step sizes).
CHUNK_CHARS = 8 * 2**20
# The exact types each checked column accepts without a closer look (None included).
_EXACT = {i: frozenset((*accepted, type(None))) for i, _, accepted, _ in _STEP_CHECKS}


def _wrong(value: Any, accepted: tuple[type, ...]) -> bool:
    return value is not None and (not isinstance(value, accepted) or (isinstance(value, bool) and bool not in accepted))


class ChunkedTables:
    """Buffers episodes and steps and writes them through `writer` in chunks."""

    def __init__(self, writer: CardWriter, *, chunk_episodes: int, chunk_steps: int, chunk_chars: int = CHUNK_CHARS):
        self._writer = writer
        self._chunk_episodes = chunk_episodes
        self._chunk_steps = chunk_steps
        self._chunk_chars = chunk_chars
        self._chars = 0  # characters of step text in self._steps
        self._episodes: list[dict[str, Any]] = []
        self._steps: list[list[Any]] = [[] for _ in STEP_COLUMNS]  # buffered steps, column by column
        self._buffered = 0  # steps in self._steps
        self._types: dict[str, str] = {}
        self.ids: set[str] = set()
        self.statuses: Counter[str] = Counter()
        self.episodes = 0
        self.steps = 0
        self.time_inversions = 0  # steps whose time is earlier than the step before them
        self._nulls: set[str] = set()  # extra columns given as None in some row
        self._written: set[str] = set()  # columns of the episode chunks written
        self._places: dict[str, tuple[str, str]] = {}  # buffered episode id -> its source file and record

    def declare(self, column: str, kind: str) -> None:
        """Fix the type of an extra column ('bool', 'int', 'float' or 'str') before any value."""
        if kind not in ARROW_OF_KIND:
            raise ValueError(f"unknown column kind {kind!r}")
        merged = merge_kind(self._types.get(column), kind)
        if merged is None:
            raise ValueError(f"{column} already has kind {self._types[column]}")
        self._types[column] = merged

    def _check_extra(self, column: str, value: Any, record: StepBuffer) -> None:
        kind = SCALAR_KINDS.get(type(value))
        if kind is None:
            raise WriterError(f"{column}: importer produced a {type(value).__name__}; columns hold scalars")
        if kind == "float" and not math.isfinite(value):
            raise record.error(f"{column} is {value}, not a finite number")
        seen = self._types.get(column)
        merged = merge_kind(seen, kind)
        if merged is None:
            raise record.error(f"{column} holds {kind} here but {seen} in earlier records; a column keeps one type")
        self._types[column] = merged

    def add(self, row: Mapping[str, Any], steps: StepBuffer) -> None:
        """Buffer one episode row and its steps (the row's episode_id must match the steps')."""
        episode_id = row.get("episode_id")
        if not isinstance(episode_id, str) or not episode_id or episode_id != steps.episode_id:
            raise ValueError("episode row and steps disagree on episode_id")
        if episode_id in self.ids:
            raise steps.error(f"episode id {episode_id!r} occurs twice in the sources")
        status = row.get("status")
        if status not in _STATUSES:
            raise ValueError(f"unknown status {status!r}")
        if not isinstance(row.get("task_id"), str) or not row["task_id"]:
            raise steps.error("the record has no task id")
        if row.get("agent") == "":  # an agent named after an empty field or a nameless path
            raise steps.error("the episode's agent name is empty; name the agent with --agent NAME")
        for label in _LABELS:
            value = row.get(label)
            if isinstance(value, str) and len(value) > MAX_LABEL_CHARS:
                raise steps.error(f"{label} is {len(value):,} characters long ({value[:40]!r}…), more than the "
                                  f"{MAX_LABEL_CHARS:,} an episode's id, task id or agent may have; a name field of "
                                  "the source holds something else")
        out: dict[str, Any] = {}
        for column, value in row.items():
            if column in _STANDARD:
                if column in _DERIVED:
                    raise ValueError(f"{column} is derived from the steps")
                check = _EPISODE_CHECKS.get(column)
                if check is not None and _wrong(value, check[0]):
                    raise steps.error(f"{column} must be {check[1]}, not a {type(value).__name__} ({str(value)[:60]})")
                out[column] = value
            elif value is not None:
                self._check_extra(column, value, steps)
                out[column] = value
            else:
                self._nulls.add(column)
        n = len(steps)
        out["n_steps"] = n
        if n:
            columns = steps.columns()
            # A column's values are checked by their set of exact types (C loops); only a column
            # holding another type (a subclass, or a wrong value) is walked value by value.
            for i, name, accepted, what in _STEP_CHECKS:
                if not _EXACT[i].issuperset(map(type, columns[i])):
                    for seq, value in zip(columns[_SEQ], columns[i], strict=True):
                        if _wrong(value, accepted):
                            raise steps.error(f"step {seq}: {name} must be {what}, not a "
                                              f"{type(value).__name__} ({str(value)[:60]}); the source has "
                                              "another shape here")
            times = [t for t in columns[_T] if t is not None]
            if len(times) > 1:
                self.time_inversions += sum(map(operator.lt, times[1:], times[:-1]))
            for buffered, values in zip(self._steps, columns, strict=True):
                buffered.extend(values)
            self._chars += sum(sum(map(len, filter(None, columns[i]))) for i in _TEXTS)
        self.ids.add(episode_id)
        self._places[episode_id] = (steps.file, steps.record)
        self._episodes.append(out)
        self.statuses[status] += 1
        self.episodes += 1
        self.steps += n
        self._buffered += n
        if (len(self._episodes) >= self._chunk_episodes or self._buffered >= self._chunk_steps
                or self._chars >= self._chunk_chars):
            self.flush()

    def flush(self) -> None:
        """Write what is buffered."""
        try:
            self._flush()
        except ValueTooLargeError as exc:
            file, record = self._places.get(exc.episode_id or "", (None, None))
            step = f"episode {exc.episode_id!r}" + (f", step {exc.seq}" if exc.seq is not None else "") + ": "
            raise SourceFormatError(
                f"{step}{exc.column} is {mib(exc.size, exact=True)}, more than the {mib(exc.limit)} a single value "
                "of a card may hold (a value that large cannot be written or read safely); raise the cap with "
                "`rcard import --max-value-mb N` (import_source(max_value_mb=N)), or shorten the value in the source",
                file=file, record=record) from None
        self._places.clear()

    def _flush(self) -> None:
        if self._episodes:
            self._writer.write_episodes(self._episode_table(self._episodes))
            self._episodes = []
        if self._buffered:
            columns, self._steps, self._buffered, self._chars = self._steps, [[] for _ in STEP_COLUMNS], 0, 0
            arrays = [
                pa.array(values, pa.string()).dictionary_encode() if pa.types.is_dictionary(t) else pa.array(values, t)
                for values, t in zip(columns, _STEP_TYPES, strict=True)
            ]
            self._writer.write_steps(pa.Table.from_arrays(arrays, schema=_STEP_SCHEMA))

    def finish(self) -> None:
        """Write what is buffered, and every column no row gave a value (see the module docstring)."""
        self.flush()
        untyped = sorted(self._nulls - self._written)
        if untyped:
            for column in untyped:
                self._types.setdefault(column, "float" if column.startswith("score.") else "str")
            schema = pa.schema([*(pa.field(c.name, pa.string() if pa.types.is_dictionary(c.type) else c.type)
                                  for c in EPISODE_COLUMNS),
                                *(pa.field(c, ARROW_OF_KIND[self._types[c]]) for c in untyped)])
            self._writer.write_episodes(schema.empty_table())

    def _episode_table(self, rows: list[dict[str, Any]]) -> pa.Table:
        names: dict[str, None] = {}
        for row in rows:
            names.update(dict.fromkeys(row))
        self._written.update(names)
        arrays, fields = [], []
        for name in names:
            values = [row.get(name) for row in rows]
            if name in _STANDARD:
                col = _STANDARD[name]
                typ = pa.string() if pa.types.is_dictionary(col.type) else col.type
            else:
                typ = ARROW_OF_KIND[self._types[name]]
            arrays.append(pa.array(values, typ))
            fields.append(pa.field(name, typ))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
