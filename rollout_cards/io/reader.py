"""`open_card(path)`: a lazy, read-only view of a rollout card.

Opening reads and validates card.json only; tables are read on demand through
`pyarrow.dataset`, with column projection and filter pushdown, as whole tables
or as a stream of record batches. A card is reached through a `CardSource`
(a directory here; a packed file adds another source), which refuses paths that
leave the card and never follows a link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO, Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from .. import arrow_compute as ac
from ..errors import CardFormatError, TableSchemaError
from ..model.card import CardManifest, TableRef
from ..numpy_arrow import check_batch
from ..tables import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    Column,
    part_difference,
    standard_column_problems,
)
from .decode import DecodeBudget, variable_width
from .integrity import FileVerifier
from .manifest import MAX_MANIFEST_BYTES, parse_manifest
from .read_ahead import read_ahead

if TYPE_CHECKING:
    # Imported where a dataset is built: pyarrow.dataset loads pandas when it is installed
    # (~0.3 s), which `rcard validate` and the CLI's start never need.
    import pyarrow.dataset as ds

__all__ = ["BlockScan", "Card", "CardSource", "DirectorySource", "Entry", "open_card", "safe_relative"]

if TYPE_CHECKING:
    from .fs_source import FileSystemSource

Filter = ac.Expression | str | None

#: Batches (as scanned: strings still dictionary-encoded) a scan decodes ahead of its caller
#: while they take this little memory: the rule engine reads the episodes table while the
#: steps table decodes (rules.engine), at most two batches of any size beyond it.
_AHEAD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    """One member of a card as stored, before any safety check.

    `path` is the stored name (POSIX separators for directories; raw for archives);
    `kind` is file, dir, symlink, hardlink, device or other; `links` is the hard-link
    count where the storage has one.
    """

    path: str
    kind: str
    size: int
    target: str | None = None
    links: int = 1


class CardSource(Protocol):
    """Where a card's files are read from (a directory, or a packed file)."""

    name: str

    def entries(self) -> Iterator[Entry]:
        """Every member as stored, links not followed (for layout and path-safety checks)."""
        ...

    def open_binary(self, rel: str) -> BinaryIO:
        """A binary stream of a regular file inside the card (for streamed hashing)."""
        ...

    def read_bytes(self, rel: str, *, limit: int) -> bytes:
        """The bytes of a file inside the card, refusing files larger than `limit`."""
        ...

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem and the base path of the card on it."""
        ...

    def exists(self, rel: str) -> bool:
        """Whether a regular file exists at `rel` inside the card."""
        ...


def _newer_columns(table: str, schema: pa.Schema) -> list[Column]:
    """Standard columns added after format 0.1 that this table lacks (a card of an earlier format)."""
    columns = STEP_COLUMNS if table == "steps" else EPISODE_COLUMNS
    names = set(schema.names)
    return [c for c in columns if c.since > (0, 1) and c.name not in names]


def safe_relative(rel: str) -> str:
    """`rel` if it is a plain relative POSIX path inside the card; CardFormatError otherwise."""
    parts = PurePosixPath(rel).parts
    if (
        not rel
        or rel.startswith("/")
        or "\\" in rel
        or "\x00" in rel
        or (len(rel) > 1 and rel[1] == ":")
        or any(p in ("..", ".") for p in rel.split("/"))
        or not parts
    ):
        raise CardFormatError(f"path {rel[:80]!r} is not a relative path inside the card")
    return rel


class DirectorySource:
    """A card stored as a directory."""

    def __init__(self, root: Path):
        self.root = root
        self.name = str(root)

    def _regular(self, rel: str) -> Path:
        path = self.root / safe_relative(rel)
        current = self.root
        for part in PurePosixPath(rel).parts:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                raise CardFormatError(f"{self.name}: {rel} does not exist") from None
            if stat.S_ISLNK(st.st_mode):
                raise CardFormatError(f"{self.name}: {rel} is or passes through a symbolic link; links are not followed")
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise CardFormatError(f"{self.name}: {rel} is not a regular file")
        return path

    def entries(self) -> Iterator[Entry]:
        stack = [""]
        while stack:
            prefix = stack.pop()
            with os.scandir(self.root / prefix if prefix else self.root) as it:
                for item in sorted(it, key=lambda e: e.name):
                    rel = f"{prefix}{item.name}"
                    st = item.stat(follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        yield Entry(rel, "symlink", 0, target=os.readlink(item.path))
                    elif stat.S_ISDIR(st.st_mode):
                        yield Entry(rel, "dir", 0)
                        stack.append(rel + "/")
                    elif stat.S_ISREG(st.st_mode):
                        yield Entry(rel, "file", st.st_size, links=st.st_nlink)
                    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                        yield Entry(rel, "device", 0)
                    else:
                        yield Entry(rel, "other", 0)

    def open_binary(self, rel: str) -> BinaryIO:
        return open(self._regular(rel), "rb")  # noqa: SIM115 - the caller closes it

    def read_bytes(self, rel: str, *, limit: int) -> bytes:
        path = self._regular(rel)
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise CardFormatError(f"{self.name}: {rel} is larger than the limit of {limit} bytes")
        return data

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        return pafs.LocalFileSystem(), str(self.root.resolve())

    def exists(self, rel: str) -> bool:
        try:
            self._regular(rel)
        except CardFormatError:
            return False
        return True

    def check(self, rel: str) -> None:
        """Raise CardFormatError unless `rel` is a regular file reached without links."""
        self._regular(rel)


def unreadable(name: str, table: str, exc: BaseException, root: str = "") -> CardFormatError:
    """The error for a table pyarrow cannot decode (`exc`), paths inside the card shortened."""
    detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    for base in (name, root):
        detail = detail.replace(base + "/", "") if base else detail
    return CardFormatError(
        f"{name}: the {table} table cannot be read ({detail}); run `rcard validate {name}` to see what is wrong"
    )


def _decoded(raw: pa.RecordBatch, budget: DecodeBudget, schema: pa.Schema, expand: set[str] | frozenset[str],
             expr: ac.Expression | None, read: list[str] | None, selected: list[str] | None,
             encoded: bool = False) -> Iterator[pa.RecordBatch]:
    """One batch as scanned (strings dictionary-encoded) -> checked, decoded, filtered batches
    (with `encoded`: checked and charged to the budget, left encoded, not filtered)."""
    # Corrupt pages can decode into invalid UTF-8 or offsets that pyarrow does not
    # check on read; catch them here rather than deep inside whoever uses the values.
    check_batch(raw)
    if encoded:
        budget.charge(raw, set(expand))
        yield raw
        return
    for batch in budget.decode(raw, schema, set(expand)):
        if expr is not None:
            batch = batch.filter(expr)
            if read != selected:
                batch = batch.select(selected) if selected is not None else batch
        yield batch


@dataclass(frozen=True)
class BlockScan:
    """A table scan cut into blocks, one per Parquet row group, for engines that read the blocks
    on other processes or machines (rollout_cards.scale): everything in it pickles. Reading
    block (part, row group) with `read_block` yields exactly the batches `Card.iter_*` yields
    for that row group (the local scan never cuts a batch across row groups), decoded under
    the same checks; the filter is applied to decoded batches, never pushed into the Parquet
    scan (see `Card._batches`). Digests are the caller's to check (`Card.delegate_digest`)."""

    name: str
    table: str
    filesystem: pafs.FileSystem
    paths: list[str]
    rels: list[str]
    schema: pa.Schema
    scan_schema: pa.Schema
    expand: frozenset[str]
    stored: int
    read: list[str] | None
    selected: list[str] | None
    expr: ac.Expression | None
    encoded: bool = False

    def _format(self) -> ds.ParquetFileFormat:
        import pyarrow.dataset as ds  # where a dataset is built (see the module's imports)

        return ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=sorted(self.expand)))

    def blocks(self) -> list[tuple[int, int]]:
        """(part, row group) of every block, in table order (reads the Parquet footers)."""
        import pyarrow.dataset as ds

        out = []
        try:
            for part, path in enumerate(self.paths):
                (fragment,) = ds.dataset([path], format=self._format(), filesystem=self.filesystem).get_fragments()
                out += [(part, rg) for rg in range(fragment.num_row_groups)]
        except (pa.ArrowException, OSError) as exc:
            raise unreadable(self.name, self.table, exc) from None
        return out

    def read_block(self, part: int, row_group: int, budget: DecodeBudget,
                   batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        """The decoded, filtered batches of one row group (CardFormatError if undecodable)."""
        import pyarrow.dataset as ds

        try:
            dataset = ds.dataset([self.paths[part]], format=self._format(), filesystem=self.filesystem,
                                 schema=self.scan_schema)
            (fragment,) = dataset.get_fragments()
            scanner = ds.Scanner.from_fragment(fragment.subset(row_group_ids=[row_group]),
                                               schema=self.scan_schema, columns=self.read, batch_size=batch_size)
            for raw in scanner.to_batches():
                yield from _decoded(raw, budget, self.schema, self.expand, self.expr, self.read, self.selected,
                                    self.encoded)
        except (pa.ArrowException, OSError) as exc:
            raise unreadable(self.name, self.table, exc) from None


class Card:
    """A rollout card opened for reading. Get one from `rollout_cards.open()`.

    With `verify` (the default) every file read is first checked against card.json's
    inventory (size and sha256, see `io.integrity`): a table part is hashed once, in the
    background, when its table is first touched, and no table, batch or text is returned
    before its file verified; a mismatch raises `IntegrityError`. `verify=False` reads
    the files unchecked (for a card whose digests were just checked, e.g. by `validate`).
    """

    def __init__(self, source: CardSource, manifest: CardManifest, *, verify: bool = True):
        self.source = source
        self.manifest = manifest
        self.verify = verify
        self._verifier = FileVerifier(source, manifest, source.name) if verify else None
        self._datasets: dict[str, ds.Dataset] = {}
        self._scans: dict[str, tuple[ds.Dataset, set[str], int]] = {}

    def __repr__(self) -> str:
        m = self.manifest
        return (
            f"<Card {m.id!r} v{m.version}: {m.tables.episodes.rows} episodes, "
            f"{m.tables.steps.rows} steps, {len(m.rules)} rules>"
        )

    @property
    def id(self) -> str:
        """The card's id."""
        return self.manifest.id

    @property
    def path(self) -> str:
        """Where the card was opened from."""
        return self.source.name

    # -- tables -------------------------------------------------------------------------------
    def dataset(self, table: str) -> ds.Dataset:
        """The `pyarrow.dataset.Dataset` of 'episodes' or 'steps' (all parts)."""
        if table not in ("episodes", "steps"):
            raise ValueError(f"unknown table {table!r}; a card has 'episodes' and 'steps'")
        if table not in self._datasets:
            ref: TableRef = getattr(self.manifest.tables, table)
            check = getattr(self.source, "check", None)
            for rel in ref.paths:
                safe_relative(rel)
                if check is not None:
                    check(rel)
                if self._verifier is not None:
                    self._verifier.start(rel)
            import pyarrow.dataset as ds

            fs, base = self.source.filesystem()
            try:
                paths = [f"{base}/{rel}" for rel in ref.paths]
                dataset = ds.dataset(paths, format="parquet", filesystem=fs)
                dataset.schema.names  # noqa: B018 - decode the column names now (corrupt ones are not UTF-8)
                newer = _newer_columns(table, dataset.schema)
                if newer:  # a card of an earlier format: its later optional columns read as null
                    schema = dataset.schema
                    for col in newer:
                        schema = schema.append(pa.field(col.name, col.type))
                    dataset = ds.dataset(paths, format="parquet", filesystem=fs, schema=schema)
                scan = self._scan_dataset(dataset, paths, fs)
                # The dataset reads every part with the first part's schema: each later part's
                # footer is read here so that one of another shape is refused, not cast or cut.
                later = [f.physical_schema for f in dataset.get_fragments()][1:] if len(paths) > 1 else []
            except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
                self._verified(table)  # a changed file is named as such, not as unreadable
                raise self._unreadable(table, exc) from None
            self._check_columns(table, ref, dataset.schema)
            for rel, schema in zip(ref.paths[1:], later, strict=True):
                difference = part_difference(dataset.schema, schema)
                if difference is not None:
                    self._verified(table)
                    raise TableSchemaError(f"{self.source.name}: {rel}: this part of the {table} table {difference} "
                                           f"({ref.paths[0]}); every part must have the same schema; `rcard validate "
                                           f"{self.source.name}` lists every problem of the card")
            self._datasets[table], self._scans[table] = dataset, scan
        return self._datasets[table]

    def _check_columns(self, table: str, ref: TableRef, schema: pa.Schema) -> None:
        """TableSchemaError when a standard column is absent (if required) or of another type:
        every command would otherwise fail later, deep in a kernel, or print wrong values."""
        problems = standard_column_problems(table, schema)
        if not problems:
            return
        self._verified(table)  # a changed file is named as such
        shown = "; ".join(p.message for p in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        name = self.source.name
        # A dataset takes its schema from its first part: the part a problem is in.
        raise TableSchemaError(f"{name}: {ref.paths[0]}: {shown}{more}; `rcard validate {name}` lists every "
                               "problem of the card")

    @staticmethod
    def _scan_dataset(dataset: ds.Dataset, paths: list[str], fs: pafs.FileSystem) -> tuple[ds.Dataset, set[str], int]:
        """The dataset batches are read from: strings and binaries dictionary-encoded (so that a
        decode budget can be checked before they are expanded, io.decode), the columns so read,
        and the stored bytes of the table."""
        import pyarrow.dataset as ds

        expand = {f.name for f in dataset.schema if variable_width(f.type)}
        schema = pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in expand else f
                            for f in dataset.schema])
        fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=sorted(expand)))
        stored = sum(info.size or 0 for info in fs.get_file_info(paths))
        return ds.dataset(paths, format=fmt, filesystem=fs, schema=schema), expand, stored

    def verify_all(self, *, wait: bool = True) -> None:
        """Check every table part and rule file against the inventory, whether read or not
        (what `rcard info`, `rescore` and `card` do before printing). With `wait=False` the
        hashing only starts, in the background; call again to wait for it. No-op with verify=False."""
        if self._verifier is None:
            return
        tables = self.manifest.tables
        paths = [*tables.episodes.paths, *tables.steps.paths, *(r.path for r in self.manifest.rules)]
        for rel in paths:
            self._verifier.start(rel)
        if wait:
            for rel in paths:
                self._verifier.wait(rel)

    def delegate_digest(self, rel: str, fetch: Callable[[], tuple[str, int]]) -> None:
        """Check `rel` with the (sha256, size) `fetch()` returns when it is first needed, instead
        of hashing it in this process (an engine whose workers hash the parts); no-op once
        `rel`'s check began, and with verify=False."""
        if self._verifier is not None:
            self._verifier.delegate(rel, fetch)

    def verify_file(self, rel: str) -> None:
        """Check one file of the card against the inventory now, once (no-op with verify=False);
        for code that reads a table part itself rather than through `episodes()`/`steps()`."""
        if self._verifier is not None:
            self._verifier.wait(rel)

    def _verified(self, table: str) -> None:
        """Wait until every part of `table` matched the inventory (IntegrityError otherwise)."""
        if self._verifier is not None:
            for rel in getattr(self.manifest.tables, table).paths:
                self._verifier.wait(rel)

    def _unreadable(self, table: str, exc: BaseException) -> CardFormatError:
        return unreadable(self.source.name, table, exc, str(getattr(self.source, "root", "")))

    def _columns(self, table: str, columns: Sequence[str] | None) -> list[str] | None:
        if columns is None:
            return None
        columns = [columns] if isinstance(columns, str) else list(columns)
        names = self.schema(table).names
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ValueError(
                f"{table} has no column {unknown[0]!r}; its columns are: {', '.join(names)}"
            )
        return columns

    def schema(self, table: str) -> pa.Schema:
        """Arrow schema of a table, read from its Parquet footer."""
        return self.dataset(table).schema

    def _filter(self, table: str, where: Filter) -> tuple[ac.Expression | None, frozenset[str] | None]:
        """The filter as an Arrow expression and the columns it reads (None: not known)."""
        if where is None or isinstance(where, ac.Expression):
            return where, None
        from ..expr import parse_expression

        expr = parse_expression(where, key=f"{table} filter")
        return expr.to_arrow(self.schema(table)), expr.names

    def _read_columns(self, table: str, selected: list[str] | None, expr: ac.Expression,
                      names: frozenset[str] | None) -> list[str] | None:
        """The columns to read so that `expr` can be evaluated in memory next to `selected`."""
        if selected is None:
            return None
        if names is None:  # an Arrow expression: does it read only selected columns?
            empty = self.schema(table).empty_table().select(selected)
            try:
                empty.filter(expr)
            except (pa.ArrowException, TypeError):
                return None
            return selected
        return selected + sorted(n for n in names if n not in selected)

    def episodes(self, columns: Sequence[str] | None = None, filter: Filter = None) -> pa.Table:
        """The episodes table (or the given columns, of the rows matching `filter`)."""
        return self._table("episodes", columns, filter)

    def steps(self, columns: Sequence[str] | None = None, filter: Filter = None) -> pa.Table:
        """The steps table (or the given columns, of the rows matching `filter`)."""
        return self._table("steps", columns, filter)

    def _table(self, table: str, columns: Sequence[str] | None, where: Filter) -> pa.Table:
        dataset = self.dataset(table)
        selected = self._columns(table, columns)
        schema = dataset.schema if selected is None else pa.schema([dataset.schema.field(c) for c in selected])
        return pa.Table.from_batches(list(self._batches(table, columns, where, 65_536)), schema)

    def iter_episodes(
        self, columns: Sequence[str] | None = None, filter: Filter = None, batch_size: int = 65_536,
        *, encoded: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the episodes table as record batches (bounded memory); `encoded` as in `iter_steps`."""
        return self._batches("episodes", columns, filter, batch_size, encoded=encoded)

    def iter_steps(
        self, columns: Sequence[str] | None = None, filter: Filter = None, batch_size: int = 65_536,
        *, encoded: bool = False, episodes: Collection[str] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the steps table as record batches (bounded memory).

        With `encoded`, string and binary columns stay dictionary-encoded as read (their
        decoded size still counts against the decode budget); no `filter` then: a consumer
        that works on the dictionaries filters the batches itself. With `episodes`, only the
        row groups holding a step of one of those episodes are read (the batches still hold
        the other episodes of those row groups: filter them).
        """
        return self._batches("steps", columns, filter, batch_size, encoded=encoded, episodes=episodes)

    def _holding(self, table: str, scan: ds.Dataset, episodes: Collection[str]) -> ds.Dataset:
        """`scan` cut to the row groups whose `episode_id` column holds one of `episodes`. The ids
        are read (one dictionary-encoded column: a small part of a steps table), never taken from
        the footer's statistics, which nothing checks; a row group that does not decode is kept,
        so that the read reports it."""
        import pyarrow.dataset as ds

        self._verified(table)  # nothing is read before the parts matched the inventory
        wanted = pa.array(sorted(set(episodes)), pa.string())
        fragments = []
        try:
            for fragment in scan.get_fragments():
                keep = []
                for rg in range(fragment.num_row_groups):
                    try:
                        batches = fragment.subset(row_group_ids=[rg]).to_batches(
                            schema=scan.schema, columns=["episode_id"], batch_size=1 << 20)
                        for batch in batches:
                            ids = batch.column(0)
                            values = ids.dictionary if pa.types.is_dictionary(ids.type) else ids
                            if ac.any(ac.is_in(values, value_set=wanted)).as_py():
                                keep.append(rg)
                                break
                    except pa.ArrowException:
                        keep.append(rg)
                fragments.append(fragment.subset(row_group_ids=keep))
            return ds.FileSystemDataset(fragments, scan.schema, scan.format, scan.filesystem)
        except (pa.ArrowException, OSError) as exc:
            self._verified(table)
            raise self._unreadable(table, exc) from None

    def _batches(
        self, table: str, columns: Sequence[str] | None, where: Filter, batch_size: int,
        *, encoded: bool = False, episodes: Collection[str] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        # Filters are evaluated here, on decoded batches, never pushed into the Parquet scan:
        # pushdown prunes and short-cuts row groups by their footer statistics, which nothing
        # checks (a patched max(seq) made a rule skip the rows it selects). Cards are stored
        # grouped by episode, so the statistics of kind, name, ... rarely prune anything anyway.
        dataset = self.dataset(table)
        selected = self._columns(table, columns)
        if encoded and where is not None:
            raise ValueError("encoded batches are not filtered by the reader: filter them after reading")
        expr, names = self._filter(table, where)
        read = selected if expr is None else self._read_columns(table, selected, expr, names)
        scan, expand, stored = self._scans[table]
        if episodes is not None:
            scan = self._holding(table, scan, episodes)
        budget = DecodeBudget(f"{self.source.name}: the {table} table", stored)
        verified = False
        try:
            raws = scan.to_batches(columns=read, batch_size=batch_size, batch_readahead=2, fragment_readahead=1)
            # decoded on a thread while the caller works (small batches far ahead: see _AHEAD_BYTES)
            for raw in read_ahead(raws, ahead_bytes=_AHEAD_BYTES, size=pa.RecordBatch.get_total_buffer_size):
                if not verified:  # the first batch was decoded while the parts were hashed
                    self._verified(table)
                    verified = True
                yield from _decoded(raw, budget, dataset.schema, expand, expr, read, selected, encoded)
        except (pa.ArrowException, OSError) as exc:
            self._verified(table)
            raise self._unreadable(table, exc) from None
        if not verified:
            self._verified(table)

    def block_scan(self, table: str, columns: Sequence[str] | None = None, filter: Filter = None,
                   *, encoded: bool = False) -> BlockScan:
        """The scan `iter_*(columns, filter)` makes, as a picklable description an engine on
        other machines reads block by block (`read_block`); digests are not checked by it."""
        dataset = self.dataset(table)
        selected = self._columns(table, columns)
        expr, names = self._filter(table, filter)
        read = selected if expr is None else self._read_columns(table, selected, expr, names)
        scan, expand, stored = self._scans[table]
        fs, base = self.source.filesystem()
        rels = list(getattr(self.manifest.tables, table).paths)
        return BlockScan(self.source.name, table, fs, [f"{base}/{rel}" for rel in rels], rels,
                         dataset.schema, scan.schema, frozenset(expand), stored, read, selected, expr, encoded)

    def episode_steps(self, episode_id: str, columns: Sequence[str] | None = None) -> pa.Table:
        """The steps of one episode, in `seq` order."""
        schema = self.dataset("steps").schema
        batches = self._batches("steps", None, ac.field("episode_id") == episode_id, 65_536, episodes=[episode_id])
        table = pa.Table.from_batches(list(batches), schema).sort_by("seq")
        return table.select(list(columns)) if columns is not None else table

    # -- other files -----------------------------------------------------------------------------
    def rule_files(self) -> dict[str, str]:
        """Rule id -> YAML text of every rule shipped in the card."""
        return {ref.id: self.read_text(ref.path) for ref in self.manifest.rules}

    def read_text(self, rel: str, *, limit: int = 1024 * 1024) -> str:
        """A UTF-8 text file of the card (rules, README), size-capped, checked against the inventory."""
        data = self.source.read_bytes(rel, limit=limit)
        if self._verifier is not None:
            self._verifier.check_bytes(rel, data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise CardFormatError(f"{self.source.name}: {rel} is not UTF-8 text") from None

    def read_artifact(self, sha256: str, *, limit: int = 256 * 1024 * 1024) -> bytes:
        """The bytes of artifacts/<sha256>."""
        if len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
            raise CardFormatError(f"{sha256[:80]!r} is not a sha256 hex digest")
        rel = f"artifacts/{sha256}"
        data = self.source.read_bytes(rel, limit=limit)
        return self._verifier.check_bytes(rel, data) if self._verifier is not None else data


def open_card(path: str | os.PathLike[str] | FileSystemSource, *, verify: bool = True) -> Card:
    """Open a card directory, a packed `.rcard` file, or a card at a URI (`s3://...`, `gs://...`,
    `file://...`) or on any pyarrow filesystem (a `FileSystemSource`, `io.fs_source`); only
    card.json is read now.

    With `verify` (the default) every file later read is checked against card.json's
    inventory first (see `Card`); `verify=False` is the explicit opt-out.
    """
    from .fs_source import FileSystemSource, card_location

    location = path if isinstance(path, FileSystemSource) else card_location(path)
    if not isinstance(location, Path):
        if not location.is_card():
            raise CardFormatError(f"{location.name}: no card.json there (not a card, or it does not exist)")
        data = location.read_bytes("card.json", limit=MAX_MANIFEST_BYTES)
        return Card(location, parse_manifest(data, f"{location.name}/card.json"), verify=verify)
    root = location
    if root.is_dir():
        source: CardSource = DirectorySource(root)
    elif root.is_file() or root.exists():  # a FIFO or device: the archive source refuses it, without blocking
        from . import archive_source

        source = archive_source(root)
    else:
        raise CardFormatError(f"{root} does not exist")
    if root.is_dir() and not (root / "card.json").exists() and (root / ".rcard-staging").is_dir():
        raise CardFormatError(
            f"{root} is an unfinished card (its writer did not close it); finish it with `rcard recover {root}`"
        )
    data = source.read_bytes("card.json", limit=MAX_MANIFEST_BYTES)
    return Card(source, parse_manifest(data, f"{source.name}/card.json"), verify=verify)
