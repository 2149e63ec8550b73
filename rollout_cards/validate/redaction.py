"""A redacted or hashed column checked against the data: redacted for real, digests kept,
and no copy of a redacted value left readable in another column of the same row.

A redacted cell holds exactly `[redacted]` or exactly `hmac-sha256:` + 64 lowercase hex
digits (`tables.is_redacted_value`; a prefix test would pass `hmac-sha256:<secret>`), or
null; `meta.digest.<column>` holds the sha256 hex of every original value.

Copies: importers keep each source event's JSON in `steps.payload`, so a step's
`content` is often also a string inside its payload. The validator never sees the
original values, only their digests, so in every row in the drop's scope it hashes each
other text cell of the row, and each string inside a cell that is a JSON object or
array, and reports `redaction-copy-remains` when one of them is the redacted original
(the same check `rcard redact` makes on the plain text before it writes anything).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..model.card import Drop
from ..tables import HMAC_PREFIX, REDACTED_HMAC_PATTERN, REDACTED_MARKER
from .context import CheckContext, TableState
from .episode_scan import report_rows
from .layout import MANIFEST
from .report import excerpt
from .semantics import iter_chunks

if TYPE_CHECKING:
    from ..rules.expressions import Expression

__all__ = ["check_redaction", "json_strings"]

_HEX64 = "^[0-9a-f]{64}$"
_DIGEST_PREFIX = "meta.digest."


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _digest_column(drop: Drop, table: str, column: str) -> str:
    name = drop.digest_column or f"{_DIGEST_PREFIX}{column}"
    return name[len(table) + 1:] if name.startswith(table + ".") and not name.startswith("meta.") else name


def json_strings(text: str) -> list[str]:
    """Every string (keys and values) inside `text` when it is a JSON object or array, else []."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return []
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return []
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out.extend(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_redaction(ctx: CheckContext, state: TableState, drop: Drop, pointer: str, table: str, column: str,
                    expr: Expression | None) -> None:
    """Findings for one `redacted`/`hashed` drop on `<table>.<column>` (see the module doc)."""
    f = ctx.findings
    schema = state.schema
    assert schema is not None
    digest = _digest_column(drop, table, column)
    has_digest = digest in schema.names
    if not has_digest:
        f.add("drop-digest-missing", f"the {table} table has no column {excerpt(digest)} with the sha256 of each "
              f"original {excerpt(column)} value; add it (null where the original was null)",
              file=MANIFEST, pointer=f"{pointer}/digest_column")
    others = [n for n in schema.names
              if n not in (column, digest) and not n.startswith(_DIGEST_PREFIX) and _is_text(schema.field(n).type)]
    columns = sorted({column} | ({digest} if has_digest else set()) | (set(expr.names) if expr else set())
                     | (set(others) if has_digest else set()))
    for offset, chunk in iter_chunks(ctx, state, columns):
        scope = np.ones(chunk.num_rows, dtype=bool)
        if expr is not None:
            scope = np.asarray(pc.fill_null(expr.evaluate(chunk), False).to_numpy(zero_copy_only=False), dtype=bool)
        values = chunk.column(column)
        present = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        marked = _marked(values)
        report_rows(f, "drop-redaction-not-applied", state, offset + np.flatnonzero(scope & present & ~marked),
                    column, lambda i: f"{excerpt(column)} is declared {drop.action.value} (card.json#{pointer}) "
                    f"but holds a value; replace it with {REDACTED_MARKER!r} or an {HMAC_PREFIX}<64 hex> digest")
        if not has_digest:
            continue
        digests = chunk.column(digest)
        given = np.asarray(digests.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        report_rows(f, "drop-digest-missing", state, offset + np.flatnonzero(scope & present & marked & ~given),
                    digest, lambda i: f"{excerpt(digest)} is null for a redacted value; store the sha256 hex of "
                    "the original value")
        hexed = _is_hex_digest(digests)
        report_rows(f, "drop-digest-invalid", state, offset + np.flatnonzero(scope & given & ~hexed), digest,
                    lambda i: f"{excerpt(digest)} is not a sha256 hex digest (64 lowercase hex characters)")
        _check_copies(ctx, state, chunk, offset, np.flatnonzero(scope & given & hexed), column, digest, others,
                      pointer)


def _check_copies(ctx: CheckContext, state: TableState, chunk: pa.Table, offset: int, rows: np.ndarray,
                  column: str, digest: str, others: list[str], pointer: str) -> None:
    if not len(rows) or not others:
        return
    taken = pa.array(rows, pa.int64())
    wanted = chunk.column(digest).take(taken).to_pylist()
    for other in others:
        cells = chunk.column(other).take(taken).to_pylist()
        hits = [int(r) for r, want, cell in zip(rows, wanted, cells, strict=True)
                if cell and (_sha(cell) == want or any(_sha(s) == want for s in json_strings(cell)))]
        report_rows(ctx.findings, "redaction-copy-remains", state, offset + np.asarray(hits, dtype=np.int64), other,
                    lambda i, other=other: f"{excerpt(other)} holds a copy of the {excerpt(column)} value redacted by "
                    f"card.json#{pointer} (its sha256 is in {excerpt(digest)}); redact {excerpt(other)} in the same "
                    "rows too (`rcard redact` with `copies: redact`)")


def _marked(values: pa.ChunkedArray) -> np.ndarray:
    if not _is_text(values.type):
        return np.zeros(len(values), dtype=bool)
    ok = pc.or_(pc.equal(values, REDACTED_MARKER), pc.match_substring_regex(values, REDACTED_HMAC_PATTERN))
    return np.asarray(pc.fill_null(ok, False).to_numpy(zero_copy_only=False), dtype=bool)


def _is_hex_digest(values: Any) -> np.ndarray:
    if not _is_text(values.type):
        return np.zeros(len(values), dtype=bool)
    ok = pc.match_substring_regex(values, _HEX64)
    return np.asarray(pc.fill_null(ok, False).to_numpy(zero_copy_only=False), dtype=bool)
