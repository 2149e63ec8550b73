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

Copies elsewhere (`check_copies_elsewhere`, after every drop was checked): a value redacted in
a step is also searched in its episode's row of the episodes table, a value redacted in an
episode row in every step of that episode (text cells and the strings inside JSON cells);
and every redacted value (8 characters or more) in the strings of card.json and of the rule
files, whole or quoted inside them, and among the artifacts (an artifact is named by its sha256, so one named by a redacted value's digest
holds exactly that value). Only digests are compared: the validator never sees a secret.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..errors import CardFormatError
from ..model.card import Drop
from ..numpy_arrow import int64_array
from ..tables import HMAC_PREFIX, REDACTED_HMAC_PATTERN, REDACTED_MARKER
from .context import CheckContext, TableState
from .episode_scan import report_rows
from .layout import MANIFEST
from .report import excerpt
from .semantics import iter_chunks

if TYPE_CHECKING:
    from ..expr import Expression

__all__ = ["check_copies_elsewhere", "check_redaction", "json_strings"]

_HEX64 = "^[0-9a-f]{64}$"
_DIGEST_PREFIX = "meta.digest."
_EMPTY = hashlib.sha256(b"").hexdigest()
#: Shortest value searched for in card.json and rule files, as `rcard redact` searches
#: substrings: a short redacted answer ("4") equal to some unrelated string there is no leak.
_MIN_FILE_COPY = 8


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
    linked = "episode_id" in schema.names and table in ("steps", "episodes")
    columns = sorted({column} | ({digest} if has_digest else set()) | (set(expr.names) if expr else set())
                     | (set(others) if has_digest else set()) | ({"episode_id"} if linked else set()))
    redacted = ctx.facts.setdefault("redacted", {"steps": {}, "episodes": {}, "pointers": {}})
    for offset, chunk in iter_chunks(ctx, state, columns):
        scope = np.ones(chunk.num_rows, dtype=bool)
        if expr is not None:
            scope = np.asarray(ac.fill_null(expr.evaluate(chunk), False).to_numpy(zero_copy_only=False), dtype=bool)
        values = chunk.column(column)
        present = np.asarray(ac.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
        marked = _marked(values)
        report_rows(f, "drop-redaction-not-applied", state, offset + np.flatnonzero(scope & present & ~marked),
                    column, lambda i: f"{excerpt(column)} is declared {drop.action.value} (card.json#{pointer}) "
                    f"but holds a value; replace it with {REDACTED_MARKER!r} or an {HMAC_PREFIX}<64 hex> digest")
        if not has_digest:
            continue
        digests = chunk.column(digest)
        given = np.asarray(ac.is_valid(digests).to_numpy(zero_copy_only=False), dtype=bool)
        report_rows(f, "drop-digest-missing", state, offset + np.flatnonzero(scope & present & marked & ~given),
                    digest, lambda i: f"{excerpt(digest)} is null for a redacted value; store the sha256 hex of "
                    "the original value")
        hexed = _is_hex_digest(digests)
        report_rows(f, "drop-digest-invalid", state, offset + np.flatnonzero(scope & given & ~hexed), digest,
                    lambda i: f"{excerpt(digest)} is not a sha256 hex digest (64 lowercase hex characters)")
        rows = np.flatnonzero(scope & given & hexed)
        _check_copies(ctx, state, chunk, offset, rows, column, digest, others, pointer)
        _collect(redacted, table, chunk, rows, digest, f"{table}.{column} (card.json#{pointer})", linked)


def _collect(redacted: dict, table: str, chunk: pa.Table, rows: np.ndarray, digest: str, what: str,
             linked: bool) -> None:
    """Remember each redacted value's digest (by episode, when the table has episode ids) for
    the checks across tables; `pointers` maps a digest to the drop that redacted it."""
    if not len(rows):
        return
    taken = int64_array(rows)
    digests = ac.take(chunk.column(digest), taken).to_pylist()
    ids = ac.take(chunk.column("episode_id"), taken).to_pylist() if linked else [None] * len(digests)
    by_episode = redacted.get(table) if linked else None
    for eid, d in zip(ids, digests, strict=True):
        if d == _EMPTY:
            continue  # an empty text redacted: every empty string is not a copy of it
        redacted["pointers"].setdefault(d, what)
        if by_episode is not None and eid is not None:
            by_episode.setdefault(eid, set()).add(d)


def check_copies_elsewhere(ctx: CheckContext) -> None:
    """`redaction-copy-remains` for copies of redacted values outside their own row (module doc)."""
    redacted = ctx.facts.get("redacted")
    if not redacted or not redacted["pointers"]:
        return
    for table, other in (("steps", "episodes"), ("episodes", "steps")):
        state = ctx.table_state.get(other)
        if redacted[table] and state is not None and state.readable and not state.damaged:
            _scan_episode_rows(ctx, state, redacted[table], redacted["pointers"])
    _check_files(ctx, redacted["pointers"])


def _scan_episode_rows(ctx: CheckContext, state: TableState, by_episode: dict[str, set[str]],
                       pointers: dict[str, str]) -> None:
    schema = state.schema
    assert schema is not None
    if "episode_id" not in schema.names:
        return
    texts = [n for n in schema.names if n != "episode_id" and not n.startswith(_DIGEST_PREFIX)
             and n not in state.bad_columns and _is_text(schema.field(n).type)]
    if not texts:
        return
    wanted = pa.array(sorted(by_episode), pa.string())
    hits: dict[str, list[tuple[int, str]]] = {}
    for offset, chunk in iter_chunks(ctx, state, ["episode_id", *texts]):
        ids = chunk.column("episode_id")
        rows = np.flatnonzero(np.asarray(ac.fill_null(ac.is_in(ids, value_set=wanted), False)
                                         .to_numpy(zero_copy_only=False), dtype=bool))
        if not len(rows):
            continue
        taken = int64_array(rows)
        eids = ac.take(ids, taken).to_pylist()
        for name in texts:
            for row, eid, cell in zip(rows, eids, ac.take(chunk.column(name), taken).to_pylist(), strict=True):
                if cell and not _marked_text(cell):
                    found = _found(cell, by_episode[eid])
                    if found is not None:
                        hits.setdefault(name, []).append((offset + int(row), found))
    for name, found in hits.items():
        report_rows(ctx.findings, "redaction-copy-remains", state, np.asarray([r for r, _ in found], dtype=np.int64),
                    name, lambda i, name=name, found=found: f"{excerpt(name)} holds a copy of the value redacted in "
                    f"{pointers[found[i][1]]} (same episode); redact {state.name}.{excerpt(name)} too (add a redact "
                    "entry for it)")


def _found(cell: str, digests: set[str]) -> str | None:
    """The digest in `digests` of `cell` or of a string inside it (JSON), else None."""
    d = _sha(cell)
    if d in digests:
        return d
    return next((d for d in map(_sha, json_strings(cell)) if d in digests), None)


def _marked_text(cell: str) -> bool:
    return cell == REDACTED_MARKER or (cell.startswith(HMAC_PREFIX) and len(cell) == len(HMAC_PREFIX) + 64)


def _check_files(ctx: CheckContext, pointers: dict[str, str]) -> None:
    """Redacted values in card.json's strings, the rule files' strings, or stored as an artifact."""
    f = ctx.findings
    digests = set(pointers)
    m = ctx.manifest
    if m is not None:
        document = m.model_dump(mode="json", exclude_none=True)
        for pointer, text in _strings(document, ""):
            d = next((d for d in map(_sha, _pieces(text)) if d in digests), None)
            if d is not None:
                f.add("redaction-copy-remains", f"holds a copy of the value redacted in {pointers[d]}; remove it "
                      "from card.json", file=MANIFEST, pointer=pointer or "/")
        for entry in m.inventory.files:
            parts = entry.path.split("/")
            if len(parts) == 2 and parts[0] == "artifacts" and parts[1] in digests:
                f.add("redaction-copy-remains", f"this artifact holds exactly the value redacted in "
                      f"{pointers[parts[1]]} (it is named by its sha256); remove the artifact", file=entry.path)
        import yaml  # only for a card with redactions and rules

        from ..yamldoc import load_strict_yaml

        for rule in m.rules:
            if rule.path not in ctx.readable:
                continue
            try:
                doc = load_strict_yaml(ctx.source.read_bytes(rule.path, limit=1 << 20).decode("utf-8"))[0]
            except (CardFormatError, UnicodeDecodeError, yaml.YAMLError):
                continue  # the rule checks report an unreadable rule file
            for key, text in _strings(doc, ""):
                d = next((d for d in map(_sha, _pieces(text)) if d in digests), None)
                if d is not None:
                    f.add("redaction-copy-remains", f"{key or '/'} holds a copy of the value redacted in "
                          f"{pointers[d]}; remove it from the rule file", file=rule.path)


def _strings(value: Any, pointer: str):
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{pointer}/{str(k).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{pointer}/{i}")


def _pieces(text: str) -> list[str]:
    """`text` and every quoted piece inside it (a selector or expression quoting a value), of at
    least _MIN_FILE_COPY characters."""
    pieces = [text, *(m.group(2) for m in _QUOTED.finditer(text))] if ("'" in text or '"' in text) else [text]
    return [p for p in pieces if len(p) >= _MIN_FILE_COPY]


_QUOTED = re.compile(r"""(["'])(.*?)\1""")


def _check_copies(ctx: CheckContext, state: TableState, chunk: pa.Table, offset: int, rows: np.ndarray,
                  column: str, digest: str, others: list[str], pointer: str) -> None:
    if not len(rows) or not others:
        return
    taken = int64_array(rows)
    wanted = ac.take(chunk.column(digest), taken).to_pylist()
    for other in others:
        cells = ac.take(chunk.column(other), taken).to_pylist()
        hits = [int(r) for r, want, cell in zip(rows, wanted, cells, strict=True)
                if cell and (_sha(cell) == want or any(_sha(s) == want for s in json_strings(cell)))]
        report_rows(ctx.findings, "redaction-copy-remains", state, offset + np.asarray(hits, dtype=np.int64), other,
                    lambda i, other=other: f"{excerpt(other)} holds a copy of the {excerpt(column)} value redacted by "
                    f"card.json#{pointer} (its sha256 is in {excerpt(digest)}); redact {excerpt(other)} in the same "
                    "rows too (`rcard redact` with `copies: redact`)")


def _marked(values: pa.ChunkedArray) -> np.ndarray:
    if not _is_text(values.type):
        return np.zeros(len(values), dtype=bool)
    ok = ac.or_(ac.equal(values, REDACTED_MARKER), ac.match_substring_regex(values, REDACTED_HMAC_PATTERN))
    return np.asarray(ac.fill_null(ok, False).to_numpy(zero_copy_only=False), dtype=bool)


def _is_hex_digest(values: Any) -> np.ndarray:
    if not _is_text(values.type):
        return np.zeros(len(values), dtype=bool)
    ok = ac.match_substring_regex(values, _HEX64)
    return np.asarray(ac.fill_null(ok, False).to_numpy(zero_copy_only=False), dtype=bool)
