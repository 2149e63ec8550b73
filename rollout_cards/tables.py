"""Arrow schemas of the `episodes` and `steps` tables, their enums, and the format version.

This module is the single source of truth for column names and types: the writer
casts to these schemas, the reader and validator check against them, and
`docs/format.md` renders its column tables from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa

from .errors import TableSchemaError
from .version import FORMAT, FORMAT_VERSION

__all__ = [
    "ARROW_OF_KIND",
    "ColumnProblem",
    "HMAC_PREFIX",
    "REDACTED_HMAC_PATTERN",
    "REDACTED_MARKER",
    "EPISODE_COLUMNS",
    "EXTRA_PREFIXES",
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_COLUMNS",
    "SCALAR_KINDS",
    "STEP_COLUMNS",
    "Column",
    "StepKind",
    "TerminalStatus",
    "conform_table",
    "episodes_schema",
    "extra_column_problem",
    "is_extension",
    "merge_kind",
    "parse_format",
    "standard_column_problems",
    "steps_schema",
    "type_matches",
    "is_redacted_value",
]

# What a redacted cell holds (docs/format.md): exactly the marker, or exactly the keyed digest
# (the prefix and 64 lowercase hex digits). A prefix test would let "hmac-sha256:<secret>" pass.
REDACTED_MARKER = "[redacted]"
HMAC_PREFIX = "hmac-sha256:"
REDACTED_HMAC_PATTERN = "^hmac-sha256:[0-9a-f]{64}$"
_REDACTED_HMAC = re.compile(r"hmac-sha256:[0-9a-f]{64}")


def is_redacted_value(value: str) -> bool:
    """Whether a text cell holds a redaction: the exact marker or an exact keyed digest."""
    return value == REDACTED_MARKER or (len(value) == 76 and _REDACTED_HMAC.fullmatch(value) is not None)


# ASCII digits only (`\d` takes `٠.١` as 0.1), bounded, and nothing after (`$` allows a newline).
_FORMAT_RE = re.compile(r"rollout-card/([0-9]{1,9})\.([0-9]{1,9})")


def parse_format(value: str) -> tuple[int, int] | None:
    """Return (major, minor) of a `format` string, or None when it is not a rollout-card format."""
    m = _FORMAT_RE.fullmatch(value) if isinstance(value, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


class TerminalStatus(StrEnum):
    """How an episode ended. Every planned episode ends in exactly one of these."""

    COMPLETED = "completed"
    ERROR = "error"
    TIMEOUT = "timeout"
    LIMIT = "limit"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class StepKind(StrEnum):
    """What a row of the steps table records."""

    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    OBSERVATION = "observation"
    ACTION = "action"
    STATE = "state"
    ERROR = "error"
    LIMIT = "limit"
    SCORE = "score"
    ANNOTATION = "annotation"
    SPAN_BEGIN = "span_begin"
    SPAN_END = "span_end"


TIMESTAMP = pa.timestamp("us", tz="UTC")
ENUM = pa.dictionary(pa.int32(), pa.string())


@dataclass(frozen=True)
class Column:
    """One standard column: name, Arrow type, whether it must be present, and what it means."""

    name: str
    type: pa.DataType
    required: bool
    doc: str
    nullable: bool = True
    enum: type[StrEnum] | None = None
    #: The format version that introduced the column; cards of earlier versions lack it.
    since: tuple[int, int] = (0, 1)
    #: Smallest value allowed (counts are never negative); None: any value.
    minimum: int | None = None


EPISODE_COLUMNS: tuple[Column, ...] = (
    Column("episode_id", pa.string(), True, "Unique id of the episode within the card.", nullable=False),
    Column("task_id", pa.string(), True, "The task the episode attempted.", nullable=False),
    Column("status", ENUM, True, "Terminal state (enum).", nullable=False, enum=TerminalStatus),
    Column("agent", pa.string(), True, "The agent or model that ran (what varied between groups)."),
    Column("trial", pa.int64(), False, "Attempt index of this agent on this task (0-based).", minimum=0),
    Column("run_id", pa.string(), False, "Training or evaluation run the episode belongs to."),
    Column("seed", pa.int64(), False, "Random seed of the episode."),
    Column("started_at", TIMESTAMP, False, "When the episode started (UTC)."),
    Column("ended_at", TIMESTAMP, False, "When the episode reached its terminal state (UTC)."),
    Column("n_steps", pa.int64(), False, "Number of rows of this episode in the steps table.", minimum=0),
    Column("input_tokens", pa.int64(), False, "Total input tokens of the episode.", minimum=0),
    Column("output_tokens", pa.int64(), False, "Total output tokens of the episode.", minimum=0),
    Column("total_tokens", pa.int64(), False, "Total tokens of the episode.", minimum=0),
    Column("cost_usd", pa.float64(), False, "Total cost of the episode in US dollars."),
    Column("error_type", pa.string(), False, "Exception type or error class when status is error."),
    Column("error_message", pa.string(), False, "Error message when status is not completed."),
    Column("error_traceback", pa.string(), False, "Traceback of the error, when one was captured."),
    Column("episode_digest", pa.string(), False, "sha256 of the episode's original steps, set by redaction so a redacted episode keeps one."),
)

STEP_COLUMNS: tuple[Column, ...] = (
    Column("episode_id", pa.string(), True, "Episode the step belongs to.", nullable=False),
    Column("seq", pa.int64(), True, "Position of the step in its episode, contiguous from 0.", nullable=False),
    Column("kind", ENUM, True, "What the step records (enum).", nullable=False, enum=StepKind),
    Column("t", TIMESTAMP, False, "When the step happened (UTC); null where the source has none (then declared in drops)."),
    Column("role", pa.string(), False, "Message role: system, user, assistant, tool."),
    Column("agent", pa.string(), False, "Which agent acted, in multi-agent episodes."),
    Column("name", pa.string(), False, "Tool name or event name."),
    Column("call_id", pa.string(), False, "Links a tool_result to its tool_call."),
    Column("content", pa.string(), False, "Text content of the step."),
    Column("args", pa.string(), False, "Tool-call arguments as JSON text."),
    Column("is_error", pa.bool_(), False, "Whether a tool result or event reports an error."),
    Column("input_tokens", pa.int64(), False, "Input tokens of this step (model calls).", minimum=0),
    Column("output_tokens", pa.int64(), False, "Output tokens of this step (model calls).", minimum=0),
    Column("cost_usd", pa.float64(), False, "Cost of this step in US dollars."),
    Column("payload", pa.string(), False, "Everything else about the step, as JSON text."),
    Column("parent_seq", pa.int64(), False, "Nested agents: `seq` of the earlier step of the same episode that launched the sub-agent this step belongs to (its tool_call or span_begin); null for the top-level agent's steps.", since=(0, 2)),
    Column("depth", pa.int64(), False, "Nested agents: 0 for the top-level agent, the launching step's depth + 1 for a sub-agent's steps; null where the source does not say (and in 0.1 cards).", since=(0, 2)),
)

#: Most columns a table may have: readers and validators refuse wider tables (each column
#: costs footer metadata and memory before a single row is read).
MAX_COLUMNS = 10_000

#: Extra columns are allowed under these prefixes; `score.` columns hold grader outputs.
EXTRA_PREFIXES: dict[str, tuple[str, ...]] = {
    "episodes": ("score.", "cond.", "task.", "meta."),
    "steps": ("meta.",),
}

_STANDARD = {
    "episodes": {c.name: c for c in EPISODE_COLUMNS},
    "steps": {c.name: c for c in STEP_COLUMNS},
}


#: Python scalar type -> kind of an extra column written from Python values, and its Arrow type.
SCALAR_KINDS: dict[type, str] = {bool: "bool", int: "int", float: "float", str: "str"}
ARROW_OF_KIND: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "int": pa.int64(),
    "float": pa.float64(),
    "str": pa.string(),
}


def merge_kind(seen: str | None, kind: str) -> str | None:
    """The kind of a column that held `seen` values and now gets a `kind` value.

    Integers and floats widen to float; any other mix is a conflict (None), since a
    column keeps one type across episodes.
    """
    if seen is None or seen == kind:
        return kind
    if {seen, kind} == {"int", "float"}:
        return "float"
    return None


def _scalar_extra_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    return (
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_null(t)
    )


def extra_column_problem(table: str, name: str, type_: pa.DataType) -> str | None:
    """Why `name` may not be an extra column of `table`, or None when it may."""
    prefixes = EXTRA_PREFIXES[table]
    if not name.startswith(prefixes) or any(name == p for p in prefixes):
        return (
            f"column {name!r} is not a standard {table} column; extra columns must be named "
            f"{' / '.join(p + '<name>' for p in prefixes)}"
        )
    if not _scalar_extra_type(type_):
        return (
            f"column {name!r} has type {type_}; extra columns hold booleans, numbers, strings or "
            "timestamps (store structured values as JSON text)"
        )
    return None


def _string_like(t: pa.DataType) -> bool:
    # Not string_view: the format allows string and large_string, and Arrow's kernels the
    # readers use (take, coalesce) have none for it (a card of it validated, every read failed).
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def type_matches(col: Column, t: pa.DataType) -> bool:
    """Whether `t` stores standard column `col`: exactly its type, any string type for strings,
    and strings or dictionary-encoded strings for enums."""
    if col.type == ENUM:
        return _string_like(t) or (pa.types.is_dictionary(t) and _string_like(t.value_type))
    if pa.types.is_string(col.type):
        return _string_like(t)
    return t == col.type


def is_extension(field: pa.Field) -> bool:
    """Whether `field` is stored under an Arrow extension type (declared or by metadata)."""
    if isinstance(field.type, pa.ExtensionType):
        return True
    return any(k.startswith(b"ARROW:extension") for k in (field.metadata or {}))


@dataclass(frozen=True)
class ColumnProblem:
    """A standard column a table's schema lacks or stores otherwise: `kind` is missing
    (a required column), extension (an Arrow extension type) or type (another type)."""

    column: str
    kind: str
    message: str


def standard_column_problems(table: str, schema: pa.Schema) -> list[ColumnProblem]:
    """Every standard column of `table` ('episodes' or 'steps') that `schema` lacks while it is
    required, stores under an extension type, or stores with a type the format does not allow.
    The validator reports them (table-column-*); the reader refuses a table with one when it
    opens it, before any command reads a value."""
    names = set(schema.names)
    out = []
    for col in _STANDARD[table].values():
        if col.name not in names:
            if col.required:
                out.append(ColumnProblem(col.name, "missing", f"required {table} column {col.name!r} is absent; "
                                         f"add it (type {col.type})"))
            continue
        field = schema.field(schema.names.index(col.name))  # the first of duplicates (reported apart)
        if is_extension(field):
            out.append(ColumnProblem(col.name, "extension", f"column {col.name!r} uses an Arrow extension type; "
                                     f"store {col.type}"))
        elif not type_matches(col, field.type):
            shown = str(field.type)
            shown = shown if len(shown) <= 60 else shown[:60] + "…"
            out.append(ColumnProblem(col.name, "type", f"column {col.name!r} has type {shown!r}, the format "
                                     f"requires {col.type}; cast it"))
    return out


def part_difference(first: pa.Schema, part: pa.Schema) -> str | None:
    """How the Arrow schema of a table's later part file differs from its first part's, or None
    when they are the same (schema metadata aside). A dataset reads every part with the first
    part's schema: a column only a later part has would be dropped, one it lacks read as nulls,
    another type cast — so the validator reports it (table-parts-inconsistent) and the reader
    refuses the table."""
    if part.remove_metadata().equals(first.remove_metadata()):
        return None
    names, known = part.names, set(first.names)
    for name in names:
        if name not in known:
            return f"has column {name[:60]!r}, which the first part lacks"
    for field in first:
        if field.name not in names:
            return f"lacks column {field.name[:60]!r}, which the first part has"
        other = part.field(field.name)
        if other.type != field.type:
            return f"stores column {field.name[:60]!r} as {str(other.type)[:40]}, the first part as {str(field.type)[:40]}"
        if other.nullable != field.nullable:
            return f"declares column {field.name[:60]!r} {'' if other.nullable else 'not '}nullable, unlike the first part"
    return "has the first part's columns in another order" if sorted(names) == sorted(first.names) else \
        "has other columns than the first part"


def _schema(columns: tuple[Column, ...], metadata_table: str) -> pa.Schema:
    return pa.schema(
        [pa.field(c.name, c.type, nullable=c.nullable) for c in columns],
        metadata={b"rollout_cards.table": metadata_table.encode()},
    )


def episodes_schema() -> pa.Schema:
    """The standard columns of the episodes table."""
    return _schema(EPISODE_COLUMNS, "episodes")


def steps_schema() -> pa.Schema:
    """The standard columns of the steps table."""
    return _schema(STEP_COLUMNS, "steps")


def _enum_problem(col: Column, arr: pa.ChunkedArray) -> str | None:
    allowed = {e.value for e in col.enum}  # type: ignore[union-attr]
    values = arr.unique()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    bad = sorted(v for v in values.to_pylist() if v is not None and v not in allowed)
    if bad:
        shown = ", ".join(repr(v[:40]) for v in bad[:5])
        return f"column {col.name!r} has values outside its enum: {shown}; allowed: {', '.join(sorted(allowed))}"
    return None


def conform_table(table: pa.Table, which: str) -> pa.Table:
    """Cast `table` to the standard schema of `which` ('episodes' or 'steps').

    Standard columns are cast to their types (and added as nulls when optional and
    absent); extra columns must use an allowed prefix. Columns come out in standard
    order, then extras sorted by name, so equal data gives equal files.
    Raises TableSchemaError listing every problem.
    """
    standard = _STANDARD[which]
    problems: list[str] = []
    names = table.column_names
    if len(names) > MAX_COLUMNS:
        raise TableSchemaError(f"{which} table has {len(names)} columns, more than the limit of {MAX_COLUMNS}")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        problems.append(f"duplicate column names: {', '.join(dup)}")
    arrays: list[pa.ChunkedArray] = []
    fields: list[pa.Field] = []
    for col in standard.values():
        if col.name not in names:
            if col.required:
                problems.append(f"required column {col.name!r} is missing")
                continue
            arr = pa.chunked_array([pa.nulls(table.num_rows, col.type)], type=col.type)
        else:
            arr = table.column(col.name)
            try:
                arr = arr.cast(col.type) if arr.type != col.type else arr
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                problems.append(f"column {col.name!r} has type {arr.type}, expected {col.type}: {exc}")
                continue
        if not col.nullable and arr.null_count:
            problems.append(f"column {col.name!r} has {arr.null_count} null value(s); it may not be null")
        if col.enum is not None:
            msg = _enum_problem(col, arr)
            if msg:
                problems.append(msg)
        if col.minimum is not None and len(arr):
            import pyarrow.compute as pc

            low = pc.min(arr).as_py()
            if low is not None and low < col.minimum:
                problems.append(f"column {col.name!r} holds {low}; it counts something and is never below "
                                f"{col.minimum}")
        arrays.append(arr)
        fields.append(pa.field(col.name, col.type, nullable=col.nullable))
    for name in sorted(n for n in set(names) if n not in standard):
        arr = table.column(name)
        msg = extra_column_problem(which, name, arr.type)
        if msg:
            problems.append(msg)
            continue
        if pa.types.is_null(arr.type):
            # An all-null extra column carries no type; store it as string so parts unify.
            arr = arr.cast(pa.string())
        arrays.append(arr)
        fields.append(pa.field(name, arr.type))
    if problems:
        raise TableSchemaError(f"{which} table: " + "; ".join(problems))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=_schema((), which).metadata))
