"""`redact_card`: a new card with chosen values replaced, their digests kept, and the drops
manifest, scope and version saying so.

A spec is YAML (safe loader, size-capped):

    redact:
      - target: steps.content                 # <table>.<column>, a text column
        where: "role == 'user'"               # optional: which rows (expression language)
        action: replace                       # replace -> "[redacted]"; digest -> "hmac-sha256:<hex>" (needs a key)
        reason: user messages may hold personal data
        loss_class: privacy                   # optional, default privacy
        copies: refuse                        # optional: refuse (default) or redact, see below

Conventions shared with the validator: a redacted value becomes `[redacted]` or
`hmac-sha256:<hex>` (HMAC-SHA256 of its UTF-8 bytes with the key); only exactly
those count as already redacted (`tables.is_redacted_value`), so a value that merely
starts with `hmac-sha256:` is redacted like any other; the column
`meta.digest.<column>` of the same table holds the plain sha256 hex of every
original value (null where it was null); each entry appends a drops entry
(action `redacted`, its count, the rules that read the column, the digest
column). When steps are redacted, every episode without an `episode_digest`
gets one: the sha256 of its original steps (see docs/release.md).

Copies: importers keep each source event's JSON in `steps.payload`, so a step's text
is often also inside another column of its row. Before writing, every row an entry
redacts is searched: another text column of the same table holding the value (the
whole cell, the value as a JSON string, or, for values of 8 characters or more,
anywhere in the cell) is a copy, unless another entry redacts that column in that row;
for a steps entry, so is such a text in the episodes row of the step's episode.
With `copies: refuse` the redaction is refused, naming the column, the number of
copies and the first row; with `copies: redact` each such column is redacted too,
in every row of the entry's `where`, with its own drops entry and digest column (copies
in the other table are always refused: add an entry for them).
The validator checks the same (`redaction-copy-remains`).

Everything is checked before anything is written (targets, types, expressions,
key); tables are streamed batch by batch; the output is written to a temporary
directory next to `out` and renamed into place at the end; the source is never
changed.
"""

from __future__ import annotations

import difflib
import hashlib
import hmac
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import progress
from ..errors import CardFormatError, RedactionSpecError, RolloutCardError
from ..expr import Expression, parse_expression
from ..io.decode import DecodeBudget, variable_width
from ..io.finalize import refresh_manifest
from ..io.hashing import sha256_stream
from ..io.manifest import MAX_MANIFEST_BYTES, pydantic_problems
from ..io.reader import Card, open_card, unreadable
from ..io.targets import make_parent, refuse_link
from ..io.writer import PARQUET_OPTIONS
from ..model.card import CardManifest, Drop
from ..numpy_arrow import check_batch
from ..tables import HMAC_PREFIX, REDACTED_MARKER, STEP_COLUMNS, is_redacted_value
from ..yamldoc import load_strict_yaml
from ._files import read_small_file
from .rule_columns import columns_read_by_rules

__all__ = [
    "DIGEST_PREFIX",
    "HMAC_PREFIX",
    "MARKER",
    "RedactionEntry",
    "RedactionResult",
    "RedactionSpec",
    "bump_minor",
    "episode_digest_line",
    "load_redaction_spec",
    "read_key",
    "redact_card",
]

MARKER = REDACTED_MARKER
DIGEST_PREFIX = "meta.digest."
MAX_SPEC_BYTES = 256 * 1024
MIN_KEY_BYTES = 16
_BATCH = 65_536
# Identity and structure columns: redacting them would break ids, joins and the plan.
_PROTECTED = {
    "episodes": {"episode_id", "task_id", "status", "agent", "trial", "run_id", "seed", "episode_digest"},
    "steps": {"episode_id", "seq", "kind"},
}


class RedactionEntry(BaseModel):
    """One `redact:` entry of a spec."""

    model_config = ConfigDict(extra="forbid")

    target: str = Field(pattern=r"^(episodes|steps)\..+$", max_length=256)
    """`<table>.<column>`, e.g. steps.content or episodes.task.instruction."""
    where: str | None = None
    """Expression selecting the rows to redact (all rows when absent)."""
    action: Literal["replace", "digest"] = "replace"
    """replace: the marker `[redacted]`; digest: `hmac-sha256:<hex>` with the given key."""
    reason: str = Field(min_length=1)
    """Why the values are redacted (goes into the drops manifest)."""
    loss_class: str = Field(default="privacy", pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    """Kind of loss recorded in the drops entry."""
    copies: Literal["refuse", "redact"] = "refuse"
    """Copies of a redacted value in other columns of its row: refuse, or redact those columns too."""

    @property
    def table(self) -> str:
        return self.target.split(".", 1)[0]

    @property
    def column(self) -> str:
        return self.target.split(".", 1)[1]


class RedactionSpec(BaseModel):
    """A redaction spec: the list of redactions to apply, in order."""

    model_config = ConfigDict(extra="forbid")

    redact: list[RedactionEntry] = Field(min_length=1)
    """The redactions."""


def load_redaction_spec(source: str | os.PathLike[str] | Mapping[str, Any]) -> RedactionSpec:
    """Read a spec from a YAML file (or an already parsed mapping); RedactionSpecError names
    the file and the entry of every problem."""
    name = "redaction spec"
    if isinstance(source, Mapping):
        document: Any = dict(source)
    else:
        path = Path(source)
        name = str(path)
        data = read_small_file(path, MAX_SPEC_BYTES, "redaction spec", RedactionSpecError)
        try:
            document = load_strict_yaml(data.decode("utf-8"))[0]
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise RedactionSpecError(f"{path}: not valid UTF-8 YAML: {exc}") from None
    try:
        spec = RedactionSpec.model_validate(document)
    except ValidationError as exc:
        lines = "; ".join(str(p) for p in pydantic_problems(exc))
        raise RedactionSpecError(f"{name}: {lines}") from None
    spec._source = name  # type: ignore[attr-defined]
    return spec


def read_key(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a key file for `action: digest` (at most 4 KiB; a final newline is kept)."""
    return read_small_file(path, 4096, "key", RedactionSpecError)


@dataclass
class RedactionResult:
    """What `redact_card` wrote: the new card's path and manifest, and the values changed per entry."""

    path: Path
    manifest: CardManifest
    counts: list[int]
    drops: list[Drop] = field(default_factory=list)


def bump_minor(version: str) -> str:
    """1.2.3 -> 1.3.0 (pre-release and build parts are dropped)."""
    m = re.match(r"([0-9]{1,19})\.([0-9]{1,19})\.([0-9]{1,19})", version)
    if not m:
        raise CardFormatError(f"version {version[:40]!r} is not a semantic version")
    return f"{m.group(1)}.{int(m.group(2)) + 1}.0"


# -- planning: everything is checked before anything is written ---------------------------------


@dataclass
class _Planned:
    entry: RedactionEntry
    where: Expression | None
    count: int = 0


def _plan(card: Card, spec: RedactionSpec, key: bytes | None, name: str) -> list[_Planned]:
    planned = []
    for i, entry in enumerate(spec.redact):
        where_key = f"redact[{i}]"
        schema = card.schema(entry.table)
        column = entry.column
        if column not in schema.names:
            close = difflib.get_close_matches(column, schema.names, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; columns: {', '.join(schema.names)}"
            raise RedactionSpecError(f"{name}: {where_key}.target: {entry.table} has no column {column!r}{hint}")
        if column in _PROTECTED[entry.table] or column.startswith(DIGEST_PREFIX):
            raise RedactionSpecError(
                f"{name}: {where_key}.target: {entry.target} identifies rows or keeps digests and "
                "cannot be redacted")
        ctype = schema.field(column).type
        if not (pa.types.is_string(ctype) or pa.types.is_large_string(ctype)):
            raise RedactionSpecError(
                f"{name}: {where_key}.target: {entry.target} is {ctype}; only text columns can be redacted")
        if entry.action == "digest" and key is None:
            raise RedactionSpecError(f"{name}: {where_key}.action: digest needs a key (--key FILE)")
        where = None
        if entry.where is not None:
            where = parse_expression(entry.where, file=name, key=f"{where_key}.where")
            where.typecheck(schema, expect="boolean")
        planned.append(_Planned(entry, where))
    if key is not None and len(key) < MIN_KEY_BYTES:
        raise RedactionSpecError(f"the key has {len(key)} bytes; use at least {MIN_KEY_BYTES} random bytes")
    return planned


# -- copies: a redacted value also readable in another column of its row ------------------------


#: Values at least this long count as copied when they appear anywhere inside another cell;
#: shorter ones only as the whole cell or as a JSON string ("ok" is inside too many texts).
MIN_SUBSTRING_COPY = 8


def holds_copy(value: str, cell: str) -> bool:
    """Whether the text `cell` holds `value`: the whole cell, as a JSON string, or (when long) inside."""
    if cell == value:
        return True
    quoted = (json.dumps(value, ensure_ascii=False), json.dumps(value))
    if any(q in cell for q in quoted):
        return True
    return len(value) >= MIN_SUBSTRING_COPY and (value in cell or any(q[1:-1] in cell for q in quoted))


@dataclass
class _Copies:
    count: int = 0
    first: str = ""


def _scan(card: Card, table: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
    fs, base = card.source.filesystem()
    budget = _budget(card, table)
    for rel in getattr(card.manifest.tables, table).paths:
        card.verify_file(rel)  # a part that does not match the inventory is named so, before it is decoded
        with fs.open_input_file(f"{base}/{rel}") as fh:
            yield from _part_batches(card, table, fh, budget, columns)[1]


def _budget(card: Card, table: str) -> DecodeBudget:
    """The table's decode budget, by the parts' sizes the inventory lists (each part is checked
    against it before it is decoded)."""
    sizes = {f.path: f.bytes for f in card.manifest.inventory.files}
    stored = sum(sizes.get(rel, 0) for rel in getattr(card.manifest.tables, table).paths)
    return DecodeBudget(f"{card.source.name}: the {table} table", stored)


def _part_batches(card: Card, table: str, fh: Any, budget: DecodeBudget,
                  columns: list[str] | None = None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and batches of one table part, read here rather than through `Card.episodes`/
    `steps` but as the reader reads: strings dictionary-encoded and expanded within the table's
    decode budget (a 5 KB part whose dictionary page holds a 40 MiB string took redact past 600 MiB),
    each raw batch checked (a corrupt page can decode into invalid UTF-8 or offsets). A part pyarrow
    cannot decode is the card's error (exit 1), not an internal one: pyarrow reports a corrupt page
    as an OSError without an errno; one with an errno is the system's and stays."""
    try:
        schema = pq.ParquetFile(fh).schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(card, table, exc) from None
    names = schema.names if columns is None else [n for n in columns if n in schema.names]
    expand = {n for n in names if variable_width(schema.field(n).type)}

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            encoded = pq.ParquetFile(fh, read_dictionary=sorted(expand) or None)
            for raw in encoded.iter_batches(batch_size=_BATCH, columns=columns):
                check_batch(raw)
                yield from budget.decode(raw, schema, expand)
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(card, table, exc) from None
    return schema, batches()


def _unreadable(card: Card, table: str, exc: BaseException) -> BaseException:
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc
    return unreadable(card.source.name, table, exc, str(getattr(card.source, "root", "")))


def _scope(item: _Planned, batch: pa.RecordBatch) -> list[bool]:
    if item.where is None:
        return [True] * batch.num_rows
    return pc.fill_null(item.where.evaluate(batch), False).to_pylist()


def _text_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
            and not f.name.startswith(DIGEST_PREFIX)]


def _episode_texts(card: Card, planned: list[_Planned]) -> dict[str, list[tuple[str, str]]]:
    """episode_id -> (column, text) of the episodes table's text cells no entry redacts there."""
    schema = card.schema("episodes")
    text = [c for c in _text_columns(schema) if c not in _PROTECTED["episodes"]]
    mine = [p for p in planned if p.entry.table == "episodes"]
    names = sorted(set(text) | {"episode_id"} | {n for p in mine if p.where is not None for n in p.where.names})
    out: dict[str, list[tuple[str, str]]] = {}
    for batch in _scan(card, "episodes", names):
        scopes = [(p.entry.column, _scope(p, batch)) for p in mine]
        cols = {n: batch.column(n).to_pylist() for n in text}
        for row, episode in enumerate(batch.column("episode_id").to_pylist()):
            out[episode] = [(c, cols[c][row]) for c in text if cols[c][row]
                            and not any(col == c and scope[row] for col, scope in scopes)]
    return out


def _find_copies(card: Card, table: str, planned: list[_Planned]) -> dict[tuple[int, str], _Copies]:
    """(index of the entry in `planned`, column) -> copies of that entry's values left readable;
    for steps entries also the episodes columns of the step's episode (as `episodes.<column>`)."""
    schema = card.schema(table)
    text = _text_columns(schema)
    episodes = _episode_texts(card, planned) if table == "steps" else {}
    mine = [(i, p) for i, p in enumerate(planned) if p.entry.table == table]
    where_names = {n for _, p in mine if p.where is not None for n in p.where.names}
    ids = [c for c in ("episode_id", "seq") if c in schema.names]
    columns = sorted(set(text) | where_names | set(ids))
    found: dict[tuple[int, str], _Copies] = {}
    for batch in _scan(card, table, columns):
        scopes = {i: _scope(p, batch) for i, p in mine}
        cols = {n: batch.column(n).to_pylist() for n in text}
        for i, item in mine:
            own = item.entry.column
            covering = [(p.entry.column, scopes[j]) for j, p in mine]
            for row, (inside, value) in enumerate(zip(scopes[i], cols[own], strict=True)):
                if not inside or not value or is_redacted_value(value):
                    continue
                for other in text:
                    cell = cols[other][row]
                    if other == own or not cell or not holds_copy(value, cell):
                        continue
                    if any(col == other and scope[row] for col, scope in covering):
                        continue
                    _count(found, (i, other), batch, ids, row)
                if episodes:
                    for other, cell in episodes.get(batch.column("episode_id")[row].as_py(), ()):
                        if holds_copy(value, cell):
                            _count(found, (i, f"episodes.{other}"), batch, ids, row)
    return found


def _count(found: dict[tuple[int, str], _Copies], key: tuple[int, str], batch: pa.RecordBatch, ids: list[str],
           row: int) -> None:
    hit = found.setdefault(key, _Copies())
    if not hit.count:
        hit.first = ", ".join(f"{c} {batch.column(c)[row].as_py()!r}"[:80] for c in ids) or f"row {row}"
    hit.count += 1


def _cover_copies(card: Card, planned: list[_Planned], name: str) -> list[_Planned]:
    """`planned` plus an entry per column holding copies of an entry with `copies: redact`;
    RedactionSpecError for copies of any other entry."""
    out = list(planned)
    for table in ("steps", "episodes"):
        if not any(p.entry.table == table for p in planned):
            continue
        for (i, column), hit in sorted(_find_copies(card, table, planned).items()):
            entry = planned[i].entry
            where = f"{name}: redact[{i}]"
            target = column if column.startswith("episodes.") else f"{table}.{column}"
            if entry.copies == "refuse" or column in _PROTECTED[table] or column.startswith("episodes."):
                if column in _PROTECTED[table]:
                    fix = "it identifies rows and cannot be redacted; redact fewer rows"
                elif column.startswith("episodes."):
                    fix = (f"add an entry for {target} (copies in the other table are not redacted "
                           "automatically: a steps `where` does not select episodes)")
                else:
                    fix = f"add an entry for {target} with the same `where`, or set `copies: redact` on this entry"
                raise RedactionSpecError(
                    f"{where}: {target} holds a copy of {hit.count:,} value(s) this entry redacts from "
                    f"{entry.target} (first at {hit.first}); redacting only {entry.target} would leave them "
                    f"readable; {fix}")
            extra = entry.model_copy(update={
                "target": f"{table}.{column}", "copies": "refuse",
                "reason": f"holds copies of {entry.target} ({entry.reason})"})
            out.append(_Planned(extra, planned[i].where))
    return out


# -- table rewriting -------------------------------------------------------------------------------


def _sha256_hex(values: list[str | None]) -> list[str | None]:
    return [None if v is None else hashlib.sha256(v.encode("utf-8")).hexdigest() for v in values]


def _redacted_value(value: str, action: str, key: bytes | None) -> str:
    if action == "digest":
        assert key is not None
        return HMAC_PREFIX + hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return MARKER


def _output_schema(schema: pa.Schema, new_columns: list[str], standard: list[str]) -> pa.Schema:
    fields = {f.name: f for f in schema}
    for name in new_columns:
        fields[name] = pa.field(name, pa.string())
    extras = sorted(n for n in fields if n not in standard)
    ordered = [n for n in standard if n in fields] + extras
    return pa.schema([fields[n] for n in ordered], metadata=schema.metadata)


def _redact_batch(batch: pa.RecordBatch, planned: list[_Planned], key: bytes | None,
                  schema: pa.Schema) -> pa.RecordBatch:
    columns: dict[str, pa.Array] = dict(zip(batch.schema.names, batch.columns, strict=True))
    changed: dict[str, list[str | None]] = {}
    for item in planned:
        col = item.entry.column
        if col not in changed:
            original = columns[col].to_pylist()
            digest_col = DIGEST_PREFIX + col
            if digest_col not in columns:
                # A digest column already present came from an earlier redaction: keep it.
                columns[digest_col] = pa.array(_sha256_hex(original), pa.string())
            changed[col] = original
        values = changed[col]
        if item.where is None:
            rows: Iterator[int] = iter(range(batch.num_rows))
        else:
            mask = pc.fill_null(item.where.evaluate(batch), False)
            rows = iter(pc.indices_nonzero(mask).to_pylist())
        for i in rows:
            value = values[i]
            if value is not None and not is_redacted_value(value):
                values[i] = _redacted_value(value, item.entry.action, key)
                item.count += 1
    for col, values in changed.items():
        columns[col] = pa.array(values, columns[col].type)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


_STEP_STANDARD = [c.name for c in STEP_COLUMNS]
# Columns added after format 0.1 enter a digest line only when not null, so the digest of a
# step without them is the one a 0.1 card recorded.
_STEP_BASE = sum(1 for c in STEP_COLUMNS if c.since <= (0, 1)) - 1  # values after episode_id


def episode_digest_line(row: list[Any]) -> bytes:
    """One step's line of `episode_digest`: its standard columns after `episode_id` (STEP_COLUMNS
    order, timestamps as epoch microseconds, absent columns null) as compact JSON and a newline;
    trailing nulls of columns newer than format 0.1 are left out (a 0.1 card's lines stay valid)."""
    while len(row) > _STEP_BASE and row[-1] is None:
        row = row[:-1]
    return (json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


class _EpisodeDigests:
    """sha256 of each episode's original steps, fed batch by batch in stored order."""

    def __init__(self) -> None:
        self.digests: dict[str, Any] = {}
        self.next_seq: dict[str, int] = {}
        self.disordered: set[str] = set()

    @staticmethod
    def rows(batch: pa.RecordBatch | pa.Table) -> Iterator[tuple[str, list[Any]]]:
        names = batch.schema.names
        cols = []
        for name in _STEP_STANDARD:
            if name not in names:
                cols.append([None] * batch.num_rows)
                continue
            arr = batch.column(name)
            if pa.types.is_dictionary(arr.type):
                arr = arr.cast(arr.type.value_type)
            elif pa.types.is_timestamp(arr.type):
                arr = arr.cast(pa.int64())
            cols.append(arr.to_pylist())
        for values in zip(*cols, strict=True):
            yield values[0], list(values[1:])

    def feed(self, batch: pa.RecordBatch) -> None:
        for episode, row in self.rows(batch):
            if episode in self.disordered:
                continue
            if row[0] != self.next_seq.get(episode, 0):
                self.disordered.add(episode)
                continue
            self.digests.setdefault(episode, hashlib.sha256()).update(episode_digest_line(row))
            self.next_seq[episode] = row[0] + 1

    def finish(self, card: Card) -> dict[str, str]:
        """Digests of all episodes; those whose steps were stored out of order are re-read sorted."""
        out = {k: v.hexdigest() for k, v in self.digests.items() if k not in self.disordered}
        if self.disordered:
            ids = pa.array(sorted(self.disordered), pa.string())
            steps = card.steps(filter=pc.field("episode_id").isin(ids)).sort_by([("episode_id", "ascending"),
                                                                                ("seq", "ascending")])
            for episode, row in self.rows(steps):
                self.digests.setdefault(f"sorted:{episode}", hashlib.sha256()).update(episode_digest_line(row))
            out.update({k[len("sorted:"):]: v.hexdigest() for k, v in self.digests.items() if k.startswith("sorted:")})
        return out


def _rewrite_table(card: Card, table: str, planned: list[_Planned], key: bytes | None, tmp: Path,
                   digests: _EpisodeDigests | None, episode_digests: dict[str, str] | None) -> None:
    from ..tables import EPISODE_COLUMNS

    standard = _STEP_STANDARD if table == "steps" else [c.name for c in EPISODE_COLUMNS]
    ref = getattr(card.manifest.tables, table)
    budget = _budget(card, table)
    with progress.task(f"redact {table}", total=ref.rows, unit="rows") as rows:
        for rel in ref.paths:
            _rewrite_file(card, table, rel, planned, key, tmp / rel, digests, episode_digests, standard, rows, budget)


def _rewrite_file(card: Card, table: str, rel: str, planned: list[_Planned], key: bytes | None, target: Path,
                  digests: _EpisodeDigests | None, episode_digests: dict[str, str] | None,
                  standard: list[str], rows: progress.Task, budget: DecodeBudget) -> None:
    fs, base = card.source.filesystem()
    card.verify_file(rel)
    with fs.open_input_file(f"{base}/{rel}") as fh:
        schema_in, batches = _part_batches(card, table, fh, budget)
        new_cols = [DIGEST_PREFIX + c for c in dict.fromkeys(p.entry.column for p in planned)]
        new_cols = [c for c in new_cols if c not in schema_in.names]
        if episode_digests is not None and "episode_digest" not in schema_in.names:
            new_cols.append("episode_digest")
        schema = _output_schema(schema_in, new_cols, standard)
        target.parent.mkdir(parents=True, exist_ok=True)
        with pq.ParquetWriter(target, schema, **PARQUET_OPTIONS) as writer:
            for batch in batches:
                if digests is not None:
                    digests.feed(batch)
                if episode_digests is not None:
                    batch = _fill_episode_digests(batch, episode_digests)
                writer.write_batch(_redact_batch(batch, planned, key, schema))
                rows.advance(batch.num_rows)


def _fill_episode_digests(batch: pa.RecordBatch, digests: dict[str, str]) -> pa.RecordBatch:
    ids = batch.column("episode_id").to_pylist()
    current = (batch.column("episode_digest").to_pylist() if "episode_digest" in batch.schema.names
               else [None] * batch.num_rows)
    empty = hashlib.sha256().hexdigest()  # an episode without steps
    filled = pa.array([c if c is not None else digests.get(i, empty) for i, c in zip(ids, current, strict=True)],
                      pa.string())
    if "episode_digest" in batch.schema.names:
        return batch.set_column(batch.schema.get_field_index("episode_digest"), "episode_digest", filled)
    return batch.append_column("episode_digest", filled)


# -- the card ---------------------------------------------------------------------------------------


def _copy_verified(card: Card, rel: str, sha256: str, tmp: Path) -> None:
    target = tmp / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    with card.source.open_binary(rel) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    with open(target, "rb") as fh:
        got, _ = sha256_stream(fh)
    if got != sha256:
        raise CardFormatError(f"{card.path}: {rel} does not match its inventory sha256; validate the card first")


def redact_card(
    src: str | os.PathLike[str],
    spec: str | os.PathLike[str] | Mapping[str, Any] | RedactionSpec,
    out: str | os.PathLike[str],
    *,
    key: bytes | None = None,
) -> RedactionResult:
    """Write a redacted copy of the card `src` (a directory or .rcard file) to the new directory `out`.

    Refuses, before writing anything, a spec naming an unknown or non-text column,
    an invalid `where` expression, or `action: digest` without a `key`.
    """
    card = open_card(src)
    if not isinstance(spec, RedactionSpec):
        spec = load_redaction_spec(spec)
    name = getattr(spec, "_source", "redaction spec")
    planned = _cover_copies(card, _plan(card, spec, key, name), name)
    out = Path(out)
    refuse_link(out)
    if out.exists():
        raise RolloutCardError(f"{out} exists; redaction writes a new card into a new directory")
    src_path = Path(src).resolve()
    if out.resolve().is_relative_to(src_path):
        raise RolloutCardError(f"{out} is inside the source card; write the redacted card elsewhere")
    affects = columns_read_by_rules(card.rule_files())
    make_parent(out)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.redacting-"))
    try:
        by_table = {t: [p for p in planned if p.entry.table == t] for t in ("steps", "episodes")}
        rewritten = {p for t, items in by_table.items() if items for p in getattr(card.manifest.tables, t).paths}
        digests = _EpisodeDigests() if by_table["steps"] else None
        if by_table["steps"]:
            _rewrite_table(card, "steps", by_table["steps"], key, tmp, digests, None)
        if by_table["episodes"] or digests is not None:
            rewritten |= set(card.manifest.tables.episodes.paths)
            _rewrite_table(card, "episodes", by_table["episodes"], key, tmp, None,
                           digests.finish(card) if digests is not None else None)
        for f in card.manifest.inventory.files:
            if f.path not in rewritten:
                _copy_verified(card, f.path, f.sha256, tmp)
        (tmp / "card.json").write_bytes(card.source.read_bytes("card.json", limit=MAX_MANIFEST_BYTES))
        drops = [
            Drop(
                target=p.entry.target, action="redacted", declaration="author_declared",
                loss_class=p.entry.loss_class, reason=p.entry.reason, selector=p.entry.where, count=p.count,
                affects=sorted(r for r, cols in affects.items() if p.entry.target in cols or "*" in cols),
                digest_column=DIGEST_PREFIX + p.entry.column,
            )
            for p in planned
        ]
        m = card.manifest
        scope = m.scope.model_dump(mode="json", exclude_none=True)
        scope["redactions"] = list(m.scope.redactions) + [_scope_line(p) for p in planned]
        manifest = refresh_manifest(
            tmp,
            version=bump_minor(m.version),
            drops=[d.model_dump(mode="json", exclude_none=True) for d in [*m.drops, *drops]],
            scope=scope,
        )
        os.chmod(tmp, 0o755)  # noqa: S103 - a card directory is world-readable like its source
        os.rename(tmp, out)
    except (pa.ArrowException, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError) and exc.filename is None \
                and exc.errno is not None:  # the system's (pyarrow's decode errors carry no errno)
            raise
        raise CardFormatError(
            f"{src}: a table of the card cannot be read ({str(exc).splitlines()[0][:120]}); "
            f"run `rcard validate {src}` to see what is wrong"
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return RedactionResult(out, manifest, [p.count for p in planned], drops)


def _scope_line(p: _Planned) -> str:
    how = "replaced with [redacted]" if p.entry.action == "replace" else "replaced with keyed HMAC-SHA256 digests"
    rows = f" where {p.entry.where}" if p.entry.where else ""
    return f"{p.entry.target}: {p.count} value(s){rows} {how} ({p.entry.reason})"
