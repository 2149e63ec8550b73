"""Parquet footers and Arrow schemas of the tables, read with limits; row counts against card.json.

Each part file is opened through the source's pyarrow filesystem. Its footer
length is read from the last 8 bytes and checked against the limits before
pyarrow parses it; the declared column-chunk sizes are checked before any page
is read. No page is decoded here: `semantics` streams the columns it checks.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.parquet as pq

from ..tables import (
    EPISODE_COLUMNS,
    MAX_COLUMNS,
    STEP_COLUMNS,
    extra_column_problem,
    is_extension,
    part_difference,
    standard_column_problems,
)
from .context import CheckContext, TableState
from .layout import MANIFEST
from .report import excerpt

__all__ = [
    "MAX_COLUMNS",
    "MAX_COLUMN_CHUNK_BYTES",
    "MAX_FOOTER_BYTES",
    "check_tables",
    "open_parquet",
    "read_errors",
]

#: A footer (file metadata) longer than this is refused before it is parsed.
MAX_FOOTER_BYTES = 64 * 1024 * 1024

#: A column chunk whose declared uncompressed size exceeds this is refused before it is read.
MAX_COLUMN_CHUNK_BYTES = 2 * 1024**3

#: Errors pyarrow raises on malformed Parquet.
read_errors = (pa.ArrowException, OSError, ValueError, EOFError)

_STANDARD = {"episodes": {c.name: c for c in EPISODE_COLUMNS}, "steps": {c.name: c for c in STEP_COLUMNS}}
_PARQUET_KEYS = {b"ARROW:schema", b"rollout_cards.table"}
_SCHEMA_KEYS = {b"rollout_cards.table"}


class _Refused(Exception):
    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(message)


def open_parquet(ctx: CheckContext, rel: str, read_dictionary: list[str] | None = None) -> pq.ParquetFile:
    """Open a table part after checking its magic bytes, footer length and declared sizes.

    Raises `_Refused` (code and message) when the file breaks a limit or is not Parquet.
    """
    fh = ctx.open_table_file(rel)
    size = fh.size()
    if size < 12:
        raise _Refused("parquet-unreadable", f"is {size} bytes, too short to be Parquet")
    head = fh.read_at(4, 0)
    tail = fh.read_at(8, size - 8)
    if head != b"PAR1" or tail[4:] not in (b"PAR1", b"PARE"):
        raise _Refused("parquet-unreadable", "does not start and end with the Parquet magic bytes (truncated, or "
                       "not Parquet)")
    if tail[4:] == b"PARE":
        raise _Refused("parquet-unreadable", "has an encrypted footer; cards hold unencrypted Parquet")
    (footer,) = struct.unpack("<I", tail[:4])
    if footer > MAX_FOOTER_BYTES:
        raise _Refused("parquet-limit-exceeded", f"declares a {footer:,}-byte footer, more than the limit of "
                       f"{MAX_FOOTER_BYTES:,}")
    if footer + 12 > size:
        raise _Refused("parquet-unreadable", f"declares a {footer:,}-byte footer in a {size:,}-byte file "
                       "(truncated or corrupt)")
    try:
        pf = pq.ParquetFile(fh, read_dictionary=read_dictionary or None)
        md = pf.metadata
        pf.schema_arrow  # noqa: B018 - parses the Arrow schema now, inside this try
    except read_errors as exc:
        raise _Refused("parquet-unreadable", f"footer cannot be read: {str(exc)[:120]}") from None
    if md.num_columns > MAX_COLUMNS:
        raise _Refused("parquet-limit-exceeded", f"has {md.num_columns:,} columns, more than the limit of "
                       f"{MAX_COLUMNS:,}")
    for g in range(md.num_row_groups):
        group = md.row_group(g)
        if group.total_byte_size > MAX_COLUMN_CHUNK_BYTES * max(1, group.num_columns):
            raise _Refused("parquet-limit-exceeded", f"row group {g} declares {group.total_byte_size:,} bytes, more "
                           f"than {MAX_COLUMN_CHUNK_BYTES:,} per column; write smaller row groups")
        # pyarrow aborts the whole process (C++ terminate) when Python code reads a column
        # chunk's metadata whose size statistics are corrupt, but raises a normal error when
        # a reader opens the same chunk; so open a reader over the group (one row) first.
        try:
            next(pf.iter_batches(batch_size=1, row_groups=[g]), None)
        except read_errors as exc:
            raise _Refused("parquet-unreadable", f"row group {g} cannot be read: {str(exc)[:120]}") from None
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.total_uncompressed_size > MAX_COLUMN_CHUNK_BYTES or chunk.total_compressed_size > size:
                raise _Refused("parquet-limit-exceeded", f"row group {g} column {excerpt(chunk.path_in_schema)} "
                               f"declares {chunk.total_uncompressed_size:,} bytes; the limit is "
                               f"{MAX_COLUMN_CHUNK_BYTES:,} per column chunk (write smaller row groups)")
    return pf


def _schema_findings(ctx: CheckContext, table: str, rel: str, pf: pq.ParquetFile, state: TableState) -> None:
    f = ctx.findings
    schema = pf.schema_arrow
    kv = set(pf.metadata.metadata or {})
    extra = sorted((kv - _PARQUET_KEYS) | (set(schema.metadata or {}) - _SCHEMA_KEYS))
    if extra:
        shown = ", ".join(excerpt(k) for k in extra[:3])
        f.add("parquet-metadata-forbidden", f"carries key-value metadata {shown}; a card's Parquet holds only "
              "the Arrow schema (write with pyarrow, without pandas metadata or pickled values)", file=rel)
    standard = _STANDARD[table]
    names = schema.names
    for name in sorted({n for n in names if names.count(n) > 1}):
        f.add("table-column-duplicate", f"column {excerpt(name)} appears {names.count(name)} times; keep one",
              file=rel, column=name)
        state.bad_columns.add(name)
    codes = {"missing": "table-column-missing", "extension": "table-extension-type", "type": "table-column-type"}
    for problem in standard_column_problems(table, schema):
        f.add(codes[problem.kind], problem.message, file=rel, column=problem.column)
        state.bad_columns.add(problem.column)
    for field in schema:
        if field.name in standard:
            continue
        if is_extension(field):
            f.add("table-extension-type", f"column {excerpt(field.name)} uses an Arrow extension type; store "
                  "its plain storage type", file=rel, column=field.name)
            continue
        problem = extra_column_problem(table, field.name, field.type)
        if problem is None:
            continue
        code = "table-column-unknown" if "is not a standard" in problem else "table-column-type"
        f.add(code, _problem_text(problem, field.name), file=rel, column=field.name)


def _problem_text(problem: str, name: str) -> str:
    # extra_column_problem quotes the full column name; keep only an excerpt of it.
    return problem.replace(repr(name), excerpt(name))


def _table(ctx: CheckContext, table: str) -> TableState:
    f = ctx.findings
    ref = getattr(ctx.tables, table)
    state = TableState(table, list(ref.paths))
    schemas: list[pa.Schema] = []
    readable: list[str] = []  # the part of each schema
    for rel in ref.paths:
        if rel not in ctx.readable:
            state.part_rows.append(None)  # absent, a link or unsafe: reported by layout / inventory
            continue
        try:
            pf = open_parquet(ctx, rel)
        except _Refused as exc:
            f.add(exc.code, f"{exc}; regenerate this table file", file=rel)
            state.part_rows.append(None)
            continue
        _schema_findings(ctx, table, rel, pf, state)
        state.part_rows.append(pf.metadata.num_rows)
        schemas.append(pf.schema_arrow.remove_metadata())
        readable.append(rel)
    if schemas and all(s.equals(schemas[0]) for s in schemas[1:]):
        state.schema = schemas[0]
    elif schemas:
        differ, how = next((i, d) for i, s in enumerate(schemas) if (d := part_difference(schemas[0], s)))
        f.add("table-parts-inconsistent", f"part {ref.paths.index(readable[differ])} of the {table} table {how} "
              f"({excerpt(readable[0])}); every part must have the same schema", file=readable[differ])
    if state.readable:
        total = sum(r or 0 for r in state.part_rows)
        if total != ref.rows:
            f.add("table-rows-mismatch", f"the {table} table has {total:,} rows, card.json says {ref.rows:,}; "
                  f"update tables.{table}.rows", file=MANIFEST, pointer=f"/tables/{table}/rows")
    return state


def check_tables(ctx: CheckContext) -> None:
    """Footers, Arrow schemas and row counts of the episodes and steps tables."""
    if ctx.tables is None:
        ctx.skip("card.json has no valid tables section")
    for table in ("episodes", "steps"):
        ctx.table_state[table] = _table(ctx, table)
