"""What the checks share: the card source, what earlier checks learned, and the current findings.

Each check is a function `check(ctx)` that reads what earlier checks left in the
context, adds findings to `ctx.findings`, and may record facts for later checks
(the parsed manifest, the files that are safe to open, the tables' schemas). A
check that cannot run calls `ctx.skip(reason)`; the runner records the reason.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.fs as pafs

from ..io.hashing import sha256_stream
from ..io.reader import CardSource, Entry
from ..model.card import CardManifest, FileEntry, Tables
from .report import Findings

__all__ = ["CheckContext", "SkipCheck", "TableState"]


_current = threading.local()


class SkipCheck(Exception):  # noqa: N818 - control flow, not an error
    """Raised by `CheckContext.skip`: the check cannot run; the message says why."""


@dataclass
class TableState:
    """What the Parquet check learned about one table (episodes or steps)."""

    name: str
    parts: list[str]
    #: Rows of each part, from its footer (None when the part could not be read).
    part_rows: list[int | None] = field(default_factory=list)
    #: The schema shared by all parts (None when a part is unreadable or parts differ).
    schema: pa.Schema | None = None
    #: Standard columns that are missing or have the wrong type: semantic checks leave them out.
    bad_columns: set[str] = field(default_factory=set)
    #: Set when a page of the table could not be decoded (reported once).
    damaged: bool = False

    @property
    def readable(self) -> bool:
        """Whether every part was read and they share one schema."""
        return self.schema is not None and all(r is not None for r in self.part_rows)

    def has(self, *columns: str) -> bool:
        """Whether the table can be read and holds every column with the right type."""
        return self.readable and all(
            c in self.schema.names and c not in self.bad_columns for c in columns  # type: ignore[union-attr]
        )

    def locate(self, row: int) -> tuple[str, int]:
        """(part path, row inside the part) of a row index counted over all parts."""
        for path, rows in zip(self.parts, self.part_rows, strict=True):
            if row < (rows or 0):
                return path, row
            row -= rows or 0
        return self.parts[-1], row


@dataclass
class CheckContext:
    """State shared by the checks of one validation run."""

    source: CardSource
    replay: bool = True
    #: Public key and detached signature to verify (signature check; None: not asked).
    public_key: str | None = None
    signature: str | None = None
    #: Every member of the card as stored, by path (set by the layout check).
    entries: dict[str, Entry] = field(default_factory=dict)
    #: Regular files with safe names that may be hashed.
    hashable: set[str] = field(default_factory=set)
    #: Regular files whose content may be parsed (hashable, and not hard-linked).
    readable: set[str] = field(default_factory=set)
    #: card.json as parsed JSON (None until it parses).
    document: Any = None
    #: The validated manifest (None when card.json does not validate as a whole).
    manifest: CardManifest | None = None
    #: Inventory entries that validate on their own (checked even when the manifest does not).
    inventory: list[FileEntry] | None = None
    #: Inventory entries as declared, for the root digest: (path, bytes, sha256).
    declared_lines: list[tuple[str, int, str]] | None = None
    declared_root: str | None = None
    #: The tables section, when it validates on its own.
    tables: Tables | None = None
    table_state: dict[str, TableState] = field(default_factory=dict)
    #: Facts one semantic check leaves for another (episode ids, row counts).
    facts: dict[str, Any] = field(default_factory=dict)
    #: Another engine's hooks (rollout_cards.scale.ray_engine.RayChecks): `hash_files(rels)` ->
    #: {rel: (sha256, bytes)} and `step_features(card)` for replay; None: all in this process.
    engine: Any = None
    _filesystem: tuple[pafs.FileSystem, str] | None = None

    @property
    def findings(self) -> Findings:
        """Where the running check records its findings (one collector per check and thread)."""
        return _current.findings

    @contextmanager
    def collecting(self, findings: Findings) -> Iterator[None]:
        """Send the findings of the check run inside this block (in this thread) to `findings`."""
        previous = getattr(_current, "findings", None)
        _current.findings = findings
        try:
            yield
        finally:
            _current.findings = previous

    def skip(self, reason: str) -> NoReturn:
        """Stop the current check and record it as skipped for `reason`."""
        raise SkipCheck(reason)

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The source's pyarrow filesystem and base path (opened once)."""
        if self._filesystem is None:
            self._filesystem = self.source.filesystem()
        return self._filesystem

    def hash_files(self, rels: list[str]) -> Iterator[tuple[str, str]]:
        """(rel, sha256) of each file, streamed here or by the engine's workers, in order."""
        if self.engine is not None:
            digests = self.engine.hash_files(rels)
            for rel in rels:
                yield rel, digests[rel][0]
            return
        for rel in rels:
            with self.source.open_binary(rel) as fh:
                yield rel, sha256_stream(fh, label=rel, size=self.entries[rel].size if rel in self.entries else None)[0]

    def open_table_file(self, rel: str) -> pa.NativeFile:
        """A random-access pyarrow file of a table part that the layout check found safe to read."""
        if rel not in self.readable:
            raise ValueError(f"{rel!r} was not found safe to read")  # a bug in a check
        fs, base = self.filesystem()
        return fs.open_input_file(f"{base}/{rel}")

    @property
    def inventory_paths(self) -> set[str]:
        """Paths listed in the inventory (valid entries)."""
        return {f.path for f in self.inventory or ()}
