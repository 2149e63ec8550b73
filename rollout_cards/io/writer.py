"""CardWriter: write a rollout card while an evaluation runs, or in bulk from Arrow tables.

    with CardWriter("out/card", id="demo", title="Demo") as card:
        with card.episode(task_id="t1", agent="gpt-4o", trial=0) as ep:
            ep.message("user", "Book a flight")
            ep.tool_call("search", args={"to": "SFO"}, call_id="c1")
            ep.tool_result("c1", "3 flights", is_error=False)
            ep.score("reward", 1.0)

Steps are buffered in columns and appended to an Arrow IPC stream in the staging
area (see `staging`), so memory stays bounded however long the run; every episode
end is journaled and flushed, so a killed process keeps its ended episodes
(`rcard recover`). Every other file the writer puts into the card (rules,
artifacts, card.json) is written in the staging area and renamed into place once
complete, so a kill at any point leaves a card `rcard recover` finishes. Closing
finalizes the staging area into Parquet tables, hashes every file, and writes
card.json atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
import traceback
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import yaml

from ..errors import TableSchemaError, WriterError
from ..jsondoc import DECODER, may_hold_surrogate, surrogate_pointer
from ..model.card import Drop, Plan, Provenance, Scope, Software
from ..tables import (
    EPISODE_COLUMNS,
    EXTRA_PREFIXES,
    MAX_COLUMNS,
    SCALAR_KINDS,
    STEP_COLUMNS,
    StepKind,
    TerminalStatus,
    conform_table,
    merge_kind,
    steps_schema,
)
from ..yamldoc import load_strict_yaml
from . import staging
from .call_ids import CallIds, with_source_call_id
from .finalize import PARQUET_OPTIONS, ROW_GROUP_ROWS, finalize_card
from .value_sizes import MAX_VALUE_BYTES, check_limit, check_table, check_text

__all__ = ["PARQUET_OPTIONS", "ROW_GROUP_ROWS", "CardWriter", "EpisodeWriter", "to_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STATUSES = frozenset(s.value for s in TerminalStatus)
_KINDS = frozenset(k.value for k in StepKind)
_STEP_NAMES = tuple(c.name for c in STEP_COLUMNS)
_STEP_SCHEMA = steps_schema()


def to_micros(t: datetime | None) -> int | None:
    """Microseconds since the Unix epoch of an aware datetime (None stays None)."""
    if t is None:
        return None
    if not isinstance(t, datetime):
        raise WriterError(f"timestamps must be datetime objects, got {type(t).__name__}")
    if t.tzinfo is None:
        raise WriterError("timestamps must be timezone-aware (e.g. datetime.now(UTC))")
    return (t - _EPOCH) // timedelta(microseconds=1)


def _text(what: str, value: str, limit: int = MAX_VALUE_BYTES) -> str:
    """`value` if it is valid Unicode text of at most `limit` bytes: a lone surrogate (e.g.
    "\\ud800" from bytes decoded with surrogateescape) cannot be stored as UTF-8, so it is
    refused here, naming the field, instead of failing a later flush (and losing the steps
    buffered with it); so is a value over the per-value cap (`value_sizes`)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise WriterError(
                f"{what} holds a lone surrogate ({value[exc.start]!r} at character {exc.start}), which is not "
                "Unicode text and cannot be stored; decode the source with errors='replace' or fix the value"
            ) from None
    check_text(what, value, limit)
    return value


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if not text.isascii() else text


def _json_text(value: Any, what: str, limit: int = MAX_VALUE_BYTES) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = DECODER.decode(value)  # the strict decoder readers use: int64, finite, no NaN
        except ValueError as exc:
            raise WriterError(f"{what} given as text must be valid JSON ({exc}); pass a dict instead") from None
        pointer = surrogate_pointer(parsed) if may_hold_surrogate(value) else None
        if pointer is not None:
            raise WriterError(f"{what} at {pointer} holds a lone surrogate escape, which is not Unicode text; fix "
                              "the value") from None
        return _text(what, value, limit)
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise WriterError(f"{what} must be JSON-serialisable: {exc}") from None
    if not text.isascii() and (pointer := surrogate_pointer(value)) is not None:
        raise WriterError(f"{what} at {pointer} holds a lone surrogate, which is not Unicode text and cannot be "
                          "stored; decode the source with errors='replace' or fix the value")
    check_text(what, text, limit)
    return text


def _check_extra_value(column: str, value: Any, limit: int = MAX_VALUE_BYTES) -> Any:
    if isinstance(value, str):
        return _text(column, value, limit)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise WriterError(f"{column} is {value}; scores and columns must be finite (use None for missing)")
        return value
    raise WriterError(
        f"{column} must be a bool, int, float, str or None, got {type(value).__name__}; "
        "store structured values as JSON text"
    )




def _check_nesting(parent_seq: Any, depth: Any, seq: int) -> None:
    if parent_seq is not None and (type(parent_seq) is not int or not 0 <= parent_seq < seq):
        raise WriterError(f"parent_seq {parent_seq!r} must be the seq of an earlier step (0 to {seq - 1})")
    if depth is not None and (type(depth) is not int or depth < 0):
        raise WriterError(f"depth {depth!r} must be a non-negative integer")
    if parent_seq is not None and depth == 0:
        raise WriterError("a step with a parent_seq belongs to a sub-agent: its depth is at least 1")


class EpisodeWriter:
    """Records the steps and outcome of one episode; get one from `CardWriter.episode()`."""

    def __init__(self, card: CardWriter, row: dict[str, Any], suppress: bool):
        self._card = card
        self._row = row
        self._suppress = suppress
        self._seq = 0
        self._calls = CallIds()
        self._tokens = [0, 0, 0.0]
        self._tokens_seen = False
        self.ended = False

    @property
    def episode_id(self) -> str:
        """The episode's id (given or generated)."""
        return self._row["episode_id"]

    # -- steps -------------------------------------------------------------------------
    def step(
        self,
        kind: str,
        *,
        content: str | None = None,
        role: str | None = None,
        name: str | None = None,
        call_id: str | None = None,
        args: Any = None,
        is_error: bool | None = None,
        agent: str | None = None,
        t: datetime | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
        payload: Any = None,
        parent_seq: int | None = None,
        depth: int | None = None,
    ) -> int:
        """Append a step of any kind; returns its `seq`. The typed helpers below call this.

        A sub-agent's steps give `parent_seq` (the seq of the step that launched it) and
        `depth` (0 for the top-level agent)."""
        # This is the hot path of a live harness: keep it to checks and one tuple append.
        if self.ended:
            raise WriterError(f"episode {self.episode_id!r} has ended; no step may follow its end")
        if kind not in _KINDS:
            raise WriterError(f"unknown step kind {kind!r}; use one of {', '.join(sorted(_KINDS))}")
        card = self._card
        limit = card._max_value_bytes
        for label, value in (("content", content), ("role", role), ("name", name), ("call_id", call_id),
                             ("agent", agent)):
            if value is not None:
                if not isinstance(value, str):
                    raise WriterError(f"{label} must be text, got {type(value).__name__}")
                _text(f"step {self._seq} of episode {self.episode_id!r}: {label}", value, limit)
        if parent_seq is not None or depth is not None:
            _check_nesting(parent_seq, depth, self._seq)
        # Everything that can refuse comes before seq moves: a refused step leaves no gap.
        args_text = None if args is None else _json_text(args, f"step {self._seq} of episode "
                                                          f"{self.episode_id!r}: args", limit)
        payload_text = None if payload is None else _json_text(payload, f"step {self._seq} of episode "
                                                                f"{self.episode_id!r}: payload", limit)
        micros = card._clock() if t is None else to_micros(t)
        if input_tokens is not None or output_tokens is not None or cost_usd is not None:
            if cost_usd is not None and not math.isfinite(cost_usd):
                raise WriterError("cost_usd must be finite")
            self._tokens_seen = True
            self._tokens[0] += input_tokens or 0
            self._tokens[1] += output_tokens or 0
            self._tokens[2] += cost_usd or 0.0
        seq = self._seq
        self._seq = seq + 1
        card._buffer.append(
            (
                self._row["episode_id"],
                seq,
                kind,
                micros,
                role,
                agent,
                name,
                call_id,
                content,
                args_text,
                is_error,
                input_tokens,
                output_tokens,
                cost_usd,
                payload_text,
                parent_seq,
                depth,
            )
        )
        if len(card._buffer) >= card._flush_rows:
            card._flush_steps()
        return seq

    def message(self, role: str, content: str | None, **fields: Any) -> int:
        """A chat message from `role` (system, user, assistant, tool)."""
        return self.step("message", role=role, content=content, **fields)

    def tool_call(self, name: str, args: Any = None, *, call_id: str | None = None, **fields: Any) -> str:
        """A tool call; returns the call id to give its `tool_result` (generated when not given).

        An id an earlier call of the episode used is stored as `<id>#<n>`, with the source id
        in `payload.source_call_id` (the rule of `io.call_ids`, shared with the importers); a
        result with that id pairs with the latest call.
        """
        call_id = call_id or f"call-{self._seq}"
        if not isinstance(call_id, str):
            raise WriterError(f"call_id must be text, got {type(call_id).__name__}")
        stored = self._calls.stored_id(call_id)
        if stored != call_id:
            fields["payload"] = self._source_payload(fields.get("payload"), call_id)
        self.step("tool_call", name=name, args=args, call_id=stored, **fields)
        self._calls.add(call_id, stored)
        return call_id

    def tool_result(self, call_id: str, content: str | None, *, is_error: bool = False, **fields: Any) -> int:
        """The result of an earlier tool call of this episode (the latest one with this id)."""
        stored = self._calls.result_id(call_id) if isinstance(call_id, str) else None
        if stored is None:
            raise WriterError(
                f"tool_result refers to call_id {call_id!r}, which no earlier tool_call of "
                f"episode {self.episode_id!r} issued"
            )
        if stored != call_id:
            fields["payload"] = self._source_payload(fields.get("payload"), call_id)
        return self.step("tool_result", call_id=stored, content=content, is_error=is_error, **fields)

    def _source_payload(self, payload: Any, call_id: str) -> dict[str, Any]:
        try:
            return with_source_call_id(payload, call_id)
        except ValueError as exc:
            raise WriterError(f"episode {self.episode_id!r}, call_id {call_id!r}: {exc}") from None

    def observation(self, content: str | None, **fields: Any) -> int:
        """Something the environment showed the agent."""
        return self.step("observation", content=content, **fields)

    def action(self, name: str, args: Any = None, **fields: Any) -> int:
        """An environment action that is not a tool call."""
        return self.step("action", name=name, args=args, **fields)

    def error(self, message: str, *, name: str | None = None, **fields: Any) -> int:
        """An error event inside the episode (the episode may still complete)."""
        return self.step("error", content=message, name=name, is_error=True, **fields)

    def annotation(self, content: str, **fields: Any) -> int:
        """A note attached to the episode's timeline."""
        return self.step("annotation", content=content, **fields)

    # -- episode columns -------------------------------------------------------------------
    def score(self, name: str, value: bool | int | float | str | None) -> None:
        """Record a grader output as the episode column `score.<name>`."""
        self._set_extra(f"score.{name}", value)

    def set(self, column: str, value: Any) -> None:
        """Set an extra episode column (`score.*`, `cond.*`, `task.*` or `meta.*`)."""
        if not column.startswith(EXTRA_PREFIXES["episodes"]):
            raise WriterError(
                f"column {column!r} is not an extra column; use score.*, cond.*, task.* or meta.*"
            )
        self._set_extra(column, value)

    def usage(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """Set the episode's token and cost totals (otherwise summed from its steps)."""
        self._check_open()
        for key, value in (
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("total_tokens", total_tokens),
            ("cost_usd", cost_usd),
        ):
            if value is not None:
                self._row[key] = value

    def _set_extra(self, column: str, value: Any) -> None:
        self._check_open()
        _text("column name", column)
        if len(column.split(".", 1)[1]) == 0:
            raise WriterError(f"column {column!r} needs a name after the prefix")
        self._row[column] = self._card._check_extra_type(
            column, _check_extra_value(f"episode {self.episode_id!r}: {column}", value, self._card._max_value_bytes))

    def _check_open(self) -> None:
        if self.ended:
            raise WriterError(f"episode {self.episode_id!r} has ended; it cannot be changed")

    # -- ending ------------------------------------------------------------------------------
    def end(
        self,
        status: str = "completed",
        *,
        error_type: str | None = None,
        message: str | None = None,
        traceback: str | None = None,
        t: datetime | None = None,
    ) -> None:
        """Set the terminal state (completed, error, timeout, limit, cancelled, skipped) and close."""
        if self.ended:
            raise WriterError(f"episode {self.episode_id!r} has already ended")
        if status not in _STATUSES:
            raise WriterError(f"unknown status {status!r}; use one of {', '.join(sorted(_STATUSES))}")
        for label, value in (("error_type", error_type), ("message", message), ("traceback", traceback)):
            if value is not None:
                _text(f"episode {self.episode_id!r}: {label}", value, self._card._max_value_bytes)
        row = self._row
        row["status"] = status
        row["error_type"] = error_type
        row["error_message"] = message
        row["error_traceback"] = traceback
        row["ended_at"] = to_micros(t) if t is not None else self._card._clock()
        row["n_steps"] = self._seq
        if self._tokens_seen:
            row.setdefault("input_tokens", self._tokens[0])
            row.setdefault("output_tokens", self._tokens[1])
            row.setdefault("total_tokens", self._tokens[0] + self._tokens[1])
            row.setdefault("cost_usd", self._tokens[2])
        self.ended = True
        self._card._end_episode(row)

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None:
            if not self.ended:
                self.end("completed")
            return False
        if self.ended:
            return False
        if isinstance(exc, KeyboardInterrupt):
            self.end("cancelled", error_type=exc_type.__name__ if exc_type else None,
                     message="interrupted (KeyboardInterrupt)")
            self._card._interrupted_episodes += 1
            return False
        self.end(
            "error",
            error_type=exc_type.__qualname__ if exc_type else "Exception",
            # Our own record of the exception: a lone surrogate in it (a file name, say) is escaped.
            message=_escaped(str(exc)),
            traceback=_escaped("".join(traceback.format_exception(exc_type, exc, tb))),
        )
        return self._suppress and isinstance(exc, Exception)


class CardWriter:
    """Writes a rollout card directory; use as a context manager or call `close()`.

    `plan` and `scope` are optional (a card without a license validates with a
    warning). `timestamps=True` records wall-clock times of episodes and steps
    that are not given explicitly; set it False to leave them null.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        id: str,
        title: str,
        description: str = "",
        version: str = "1.0.0",
        authors: Iterable[Mapping[str, Any]] = (),
        plan: Plan | Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        provenance: Provenance | Mapping[str, Any] | None = None,
        drops: Iterable[Drop | Mapping[str, Any]] = (),
        meta: Mapping[str, Any] | None = None,
        created: datetime | None = None,
        timestamps: bool = True,
        flush_rows: int = 65_536,
        overwrite: bool = False,
        max_value_bytes: int = MAX_VALUE_BYTES,
    ):
        from ..model.card import CardManifest, utc_now

        self.path = Path(path)
        staging.sweep_stale(self.path.parent)
        replaced = None
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            if not overwrite:
                raise WriterError(f"{self.path} exists and is not empty; choose a new directory or pass overwrite=True")
            if not (self.path / "card.json").is_file() and not (self.path / staging.STAGING_DIR).is_dir():
                raise WriterError(f"{self.path} is not a rollout card; refusing to overwrite it")
            replaced = self.path
        if flush_rows < 1:
            raise WriterError("flush_rows must be at least 1")
        self._max_value_bytes = check_limit(max_value_bytes)
        self._timestamps = timestamps
        self._flush_rows = flush_rows
        self._artifacts: set[str] = set()  # written by add_artifact: a repeated blob costs its hash only
        header = {
            "id": id,
            "title": title,
            "description": description,
            "version": version,
            "authors": [dict(a) for a in authors],
            "plan": _dump(plan, Plan),
            "scope": _dump(scope, Scope) or {},
            "provenance": _dump(provenance, Provenance)
            or {"generator": Software(name="rollout-cards", version=_version()).model_dump(mode="json")},
            "drops": [_dump(d, Drop) for d in drops],
            "meta": dict(meta or {}),
            "created": (created or utc_now()).isoformat(),
        }
        # Validate the header now, so a bad id or license fails at the call, not at close.
        try:
            CardManifest.model_validate(
                {**{k: v for k, v in header.items() if v is not None},
                 "tables": {"episodes": {"paths": ["episodes.parquet"], "rows": 0},
                            "steps": {"paths": ["steps.parquet"], "rows": 0}},
                 "inventory": {"files": [], "root_digest": "0" * 64}}
            )
        except Exception as exc:
            raise WriterError(f"invalid card metadata: {exc}") from None
        # A card being overwritten is renamed aside (with an owner marker) and removed only once
        # the new staging area exists: a sweep restores it if we die before, removes it after.
        aside = None
        if replaced is not None:
            try:
                aside = staging.claim_sibling(self.path.parent, self.path.name, "replaced", uuid.uuid4().hex[:12])
                os.rename(self.path, aside)
            except OSError as exc:
                raise WriterError(f"cannot overwrite {self.path}: {exc.strerror or exc}") from None
        self._stage = self.path / staging.STAGING_DIR
        try:
            self._stage.mkdir(parents=True)
        except OSError as exc:
            if aside is not None:
                os.rename(aside, self.path)
                staging.release_sibling(aside)
            raise WriterError(f"cannot create the card directory {self.path}: {exc.strerror}") from None
        # The owner first (recover must not race a live writer), then the header: a stage
        # without a header is one whose writer died here, before any episode could be written.
        staging.write_atomic(self._stage, self._stage / staging.PID, staging.owner_record("writer"))
        staging.write_atomic(self._stage, self._stage / staging.HEADER, json.dumps(header, sort_keys=True).encode(),
                             durable=True)
        self._journal = open(self._stage / staging.JOURNAL, "a", encoding="utf-8")  # noqa: SIM115
        if aside is not None:
            shutil.rmtree(aside)
            staging.release_sibling(aside)
        self._stream_sink: pa.NativeFile | None = None
        self._stream: pa.ipc.RecordBatchStreamWriter | None = None
        self._buffer: list[tuple[Any, ...]] = []
        self._ids: set[str] = set()
        self._open: dict[str, EpisodeWriter] = {}
        self._extra_types: dict[str, str] = {}
        self._bulk_steps_schema: pa.Schema | None = None
        self._bulk_steps_parts = 0
        self._bulk_episode_parts = 0
        self._rules: set[str] = set()
        self._interrupted_episodes = 0
        self._stopped = False  # an exception left the `with` block: bulk tables may be half written
        self.closed = False

    # -- clock and buffers -------------------------------------------------------------------
    def _clock(self) -> int | None:
        return time.time_ns() // 1000 if self._timestamps else None

    def _flush_steps(self) -> None:
        if not self._buffer:
            return
        columns = list(zip(*self._buffer, strict=True))
        self._buffer = []
        arrays = []
        for field, values in zip(_STEP_SCHEMA, columns, strict=True):
            if pa.types.is_dictionary(field.type):
                arrays.append(pa.array(values, pa.string()).dictionary_encode())
            else:
                arrays.append(pa.array(values, field.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=_STEP_SCHEMA)
        if self._stream is None:
            self._stream_sink = pa.OSFile(str(self._stage / staging.STEPS_STREAM), "wb")
            self._stream = pa.ipc.new_stream(self._stream_sink, _STEP_SCHEMA)
        self._stream.write_batch(batch)
        self._stream_sink.flush()  # type: ignore[union-attr]

    def _journal_line(self, record: dict[str, Any]) -> None:
        self._journal.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        self._journal.flush()

    def _check_extra_type(self, column: str, value: Any) -> Any:
        if value is None:
            return None
        kind = SCALAR_KINDS[type(value)]
        seen = self._extra_types.get(column)
        if seen is None and len(self._extra_types) + len(EPISODE_COLUMNS) >= MAX_COLUMNS:
            raise WriterError(f"{column} would make more than {MAX_COLUMNS} episode columns, the format's limit")
        merged = merge_kind(seen, kind)
        if merged is None:
            raise WriterError(
                f"{column} was {seen} in earlier episodes and is {kind} now; a column keeps one type"
            )
        self._extra_types[column] = merged
        return value

    # -- episodes ------------------------------------------------------------------------------
    def episode(
        self,
        *,
        task_id: str,
        agent: str | None = None,
        trial: int | None = None,
        episode_id: str | None = None,
        run_id: str | None = None,
        seed: int | None = None,
        cond: Mapping[str, Any] | None = None,
        task: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        started_at: datetime | None = None,
        suppress_errors: bool = False,
    ) -> EpisodeWriter:
        """Begin an episode. Used as a context manager, an exception inside it records the
        episode as `error` with its traceback and then propagates (unless `suppress_errors`)."""
        self._check_writable()
        if not isinstance(task_id, str) or not task_id:
            raise WriterError("task_id must be a non-empty string")
        episode_id = episode_id or uuid.uuid4().hex
        if not isinstance(episode_id, str):
            raise WriterError("episode_id must be a string")
        for label, text in (("task_id", task_id), ("episode_id", episode_id), ("agent", agent), ("run_id", run_id)):
            if isinstance(text, str):
                _text(label, text, self._max_value_bytes)
        if episode_id in self._ids:
            raise WriterError(f"episode_id {episode_id!r} was already written to this card")
        for name, value in (("trial", trial), ("seed", seed)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise WriterError(f"{name} must be an integer")
        row: dict[str, Any] = {
            "episode_id": episode_id,
            "task_id": task_id,
            "agent": agent,
            "trial": trial,
            "run_id": run_id,
            "seed": seed,
            "started_at": to_micros(started_at) if started_at is not None else self._clock(),
        }
        for prefix, values in (("cond", cond), ("task", task), ("meta", meta)):
            for key, value in (values or {}).items():
                if not isinstance(key, str) or not key:
                    raise WriterError(f"{prefix} keys must be non-empty strings, got {key!r}")
                _text(f"{prefix} key", key)
                column = f"{prefix}.{key}"
                row[column] = self._check_extra_type(
                    column, _check_extra_value(f"episode {episode_id!r}: {column}", value, self._max_value_bytes))
        self._ids.add(episode_id)
        ep = EpisodeWriter(self, row, suppress_errors)
        self._open[episode_id] = ep
        self._journal_line({"begin": {k: v for k, v in row.items()}})
        return ep

    def _end_episode(self, row: dict[str, Any]) -> None:
        # Steps first, then the journal line: an ended episode on disk always has its steps.
        self._flush_steps()
        self._journal_line({"end": row})
        self._open.pop(row["episode_id"], None)

    # -- bulk path -------------------------------------------------------------------------------
    def write_episodes(self, data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch]) -> int:
        """Bulk-write episode rows (standard columns plus score.*/cond.*/task.*/meta.*); returns rows."""
        self._check_writable()
        table = _as_table(data)
        table = _conform(table, "episodes")
        check_table(table, "episodes", self._max_value_bytes)
        ids = table.column("episode_id").to_pylist()
        fresh = set(ids)
        if len(fresh) != len(ids):
            raise WriterError("write_episodes: episode_id values repeat within the table")
        clash = fresh & self._ids
        if clash:
            raise WriterError(f"write_episodes: episode_id {sorted(clash)[0]!r} was already written")
        self._ids |= fresh
        # Staged as Arrow IPC (cheap to write) and converted to Parquet once, at close.
        staging.write_ipc_part(self._stage, "episodes", self._bulk_episode_parts, table)
        self._bulk_episode_parts += 1
        return table.num_rows

    def write_steps(self, data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch]) -> int:
        """Bulk-write step rows; their episodes must be written (by either path) before close."""
        self._check_writable()
        total = 0
        batches = [data] if isinstance(data, (pa.Table, pa.RecordBatch)) else data
        for chunk in batches:
            table = _conform(_as_table(chunk), "steps")
            check_table(table, "steps", self._max_value_bytes)
            if self._bulk_steps_schema is None:
                self._bulk_steps_schema = table.schema
            elif table.schema != self._bulk_steps_schema:
                raise WriterError("write_steps: every bulk steps table must have the same extra columns")
            # One staged part per table, renamed into place whole: a kill loses at most the
            # table being written (recover then reconciles the episodes' n_steps).
            staging.write_ipc_part(self._stage, "steps", self._bulk_steps_parts, table)
            self._bulk_steps_parts += 1
            total += table.num_rows
        return total

    def add_rule(self, source: str | os.PathLike[str], *, text: str | None = None) -> str:
        """Copy a rule file (YAML) into rules/<id>.yaml; returns the rule id."""
        self._check_writable()
        if text is None:
            text = Path(source).read_text(encoding="utf-8")
        _text(f"rule {source}", text)
        try:
            doc = load_strict_yaml(text)[0]
        except yaml.YAMLError as exc:
            raise WriterError(f"{source}: not valid YAML: {exc}") from None
        rule_id = doc.get("rule") if isinstance(doc, dict) else None
        if not isinstance(rule_id, str) or not rule_id:
            raise WriterError(f"{source}: a rule file needs a `rule:` id")
        if rule_id in self._rules:
            raise WriterError(f"rule {rule_id!r} was already added")
        from ..model.card import RuleRef

        RuleRef(id=rule_id, path=f"rules/{rule_id}.yaml", sha256="0" * 64)  # validates the id
        rules = self.path / "rules"
        rules.mkdir(exist_ok=True)
        staging.write_atomic(self._stage, rules / f"{rule_id}.yaml", text.encode("utf-8"))
        self._rules.add(rule_id)
        return rule_id

    def add_artifact(self, data: bytes) -> str:
        """Store a blob under artifacts/<sha256>; returns the sha256 to reference it by."""
        self._check_writable()
        sha = hashlib.sha256(data).hexdigest()
        if sha in self._artifacts:
            return sha
        directory = self.path / "artifacts"
        if not self._artifacts:
            directory.mkdir(exist_ok=True)
        target = directory / sha
        if not target.exists():
            staging.write_atomic(self._stage, target, data)
        self._artifacts.add(sha)
        return sha

    def add_drop(self, drop: Drop | Mapping[str, Any]) -> None:
        """Append an entry to the drops manifest."""
        self._check_writable()
        entry = _dump(drop, Drop)
        header_path = self._stage / staging.HEADER
        header = json.loads(header_path.read_bytes())
        header["drops"].append(entry)
        staging.write_atomic(self._stage, header_path, json.dumps(header, sort_keys=True).encode(), durable=True)

    # -- closing ---------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self.closed:
            raise WriterError("the card writer is closed")

    def close(self):  # -> CardManifest
        """Finalize: write tables, hash files, write card.json; returns the manifest.

        Episodes still open are recorded as `cancelled` with a drops entry.
        """
        if self.closed:
            raise WriterError("the card writer is already closed")
        self._flush_steps()
        self._release()
        return finalize_card(self.path, reason="closed while the episode was still open", reconcile=self._stopped)

    def _release(self) -> None:
        self.closed = True
        if self._stream is not None:
            self._stream.close()
            self._stream_sink.close()  # type: ignore[union-attr]
        self._journal.close()

    def abort(self) -> None:
        """Stop writing and leave the staging area as it is (finish later with `rcard recover`)."""
        if not self.closed:
            self._flush_steps()
            self._release()

    def __enter__(self) -> CardWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.closed:
            return
        if exc is not None and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            self._record_interruption(exc)
        self.close()

    def _record_interruption(self, exc: BaseException) -> None:
        """An exception left the `with` block: the run stopped before it finished, and the
        card must say so (the episodes it never started are simply absent otherwise)."""
        what = "interrupted (KeyboardInterrupt)" if isinstance(exc, KeyboardInterrupt) else (
            f"stopped by {type(exc).__qualname__}: {_escaped(str(exc))[:200]}")
        n = self._interrupted_episodes
        self._stopped = True
        self.add_drop(
            Drop(
                target="episodes",
                action="unobserved",
                declaration="author_declared",
                loss_class="interrupted_run",
                reason=f"the run was {what} before it finished: episodes it had not started are not in the card"
                + (f"; {n} episode(s) running at the interrupt were recorded as cancelled" if n else ""),
                selector="error_type == 'KeyboardInterrupt'" if n else None,
                count=n if n else None,
            )
        )


def _version() -> str:
    from .. import __version__

    return __version__


def _dump(value: Any, model: type) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, model):
        try:
            value = model.model_validate(value)  # type: ignore[attr-defined]
        except Exception as exc:
            raise WriterError(f"invalid {model.__name__.lower()}: {exc}") from None
    return value.model_dump(mode="json", exclude_none=True)  # type: ignore[attr-defined]


def _as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    batches = list(data)
    if not batches:
        raise WriterError("no record batches given")
    return pa.Table.from_batches(batches)


def _conform(table: pa.Table, which: str) -> pa.Table:
    try:
        return conform_table(table, which)
    except TableSchemaError as exc:
        raise WriterError(str(exc)) from None
