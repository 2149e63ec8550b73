"""Packed cards (`.rcard`): `ArchiveSource` that reads a packed card in place, and safe
`unpack_card` (`pack_card`, re-exported here, is in `packing`).

A packed card is an uncompressed POSIX tar (see `ustar` and docs/format.md):
`card.json` first, then every inventory file in path order, each stored whole and
unchanged at a 512-byte boundary. Parquet files are already zstd-compressed inside,
so the container adds ~1 KiB per member and lets a reader serve each member as a
byte range of the file: tables are read through a pyarrow filesystem over a memory
map, without extracting anything.

Nothing in a packed card is trusted. Opening it scans the headers (`ustar.scan_members`),
checks every member (`ustar.member_problems`) and compares the members with the
inventory of `card.json`; `unpack_card` also hashes every byte it writes, into a
temporary directory that is renamed into place only when all of it checked out.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import mmap
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs

from .. import progress
from ..errors import CardFormatError, UnsafeArchiveError
from ..model.card import CardManifest
from ..regular_files import NotRegularFileError, open_regular_fd
from .hashing import CHUNK, root_digest
from .manifest import MAX_MANIFEST_BYTES, parse_manifest
from .packing import MANIFEST, PackResult, copy_hashed, pack_card
from .reader import Entry, safe_relative
from .targets import new_directory_target
from .ustar import ArchiveLimits, Member, member_problems, scan_members

__all__ = ["ArchiveLimits", "ArchiveSource", "PackResult", "pack_card", "unpack_card"]

_ENTRY_KIND = {"file": "file", "dir": "dir", "symlink": "symlink", "hardlink": "hardlink",
               "device": "device", "fifo": "other", "other": "other"}


class ArchiveSource:
    """A packed card read in place (implements `reader.CardSource`).

    `strict=True` (what `open_card` uses) refuses the archive at once, with an
    UnsafeArchiveError naming the member and the rule, when any member breaks a
    safety rule or the members differ from card.json's inventory. `strict=False`
    keeps a structurally readable archive open for inspection: `problems` lists the
    violations, `entries()` still lists every member as stored (so a validator's
    layout checks see them), and file access refuses only the offending members.
    Structural damage (bad headers, truncation, sizes beyond the file, trailing
    data) is refused in both modes, since nothing after it can be located reliably.
    """

    def __init__(self, path: str | os.PathLike[str], *, strict: bool = True,
                 limits: ArchiveLimits | None = None):
        self.path = Path(path)
        self.name = str(self.path)
        self.limits = limits or ArchiveLimits()
        self._mmap: mmap.mmap | None = None
        self._buffer: pa.Buffer | None = None
        self._lock = threading.Lock()
        try:  # a FIFO or device is refused without blocking
            self._fd = open_regular_fd(self.path, follow_symlinks=False)
        except NotRegularFileError:
            raise UnsafeArchiveError("is not a regular file", member=self.name, rule="not-a-regular-file") from None
        except OSError as exc:
            raise CardFormatError(f"{self.path}: cannot open: {exc.strerror}") from None
        try:
            st = os.fstat(self._fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeArchiveError("is not a regular file", member=self.name, rule="not-a-regular-file")
            self.size = st.st_size
            self.members: tuple[Member, ...] = tuple(scan_members(self._fd, self.size, self.name, self.limits))
            problems = list(member_problems(list(self.members), self.limits))
            self._bad = {p.member for p in problems}
            self._files = self._unique_files()
            self.manifest_bytes: bytes | None = None
            self.manifest: CardManifest | None = None
            if strict:
                _raise_first(problems)
            problems += self._check_inventory(strict)
            self.problems: tuple[UnsafeArchiveError, ...] = tuple(problems)
            if strict:
                _raise_first(problems)
        except BaseException as exc:
            os.close(self._fd)
            self._fd = -1
            if isinstance(exc, UnsafeArchiveError):
                raise exc.within(self.name) from None
            raise

    # -- index -------------------------------------------------------------------------------
    def _unique_files(self) -> dict[str, Member]:
        files: dict[str, Member] = {}
        counts: dict[str, int] = {}
        for m in self.members:
            counts[m.name] = counts.get(m.name, 0) + 1
            if m.kind == "file" and m.name not in self._bad:
                files[m.name] = m
        return {k: v for k, v in files.items() if counts[k] == 1}

    def _check_inventory(self, strict: bool) -> list[UnsafeArchiveError]:
        """Members against card.json: card.json first, nothing extra or missing, sizes as listed."""
        first = self.members[0].name if self.members else None
        if first != MANIFEST:
            return [UnsafeArchiveError(f"the first member is {first!r}; a packed card starts with card.json",
                                       member=first or self.name, rule="card-json-first")]
        if MANIFEST not in self._files:
            return []  # already reported as a member problem
        try:
            data = self.read_bytes(MANIFEST, limit=MAX_MANIFEST_BYTES)
        except CardFormatError:
            if strict:
                raise
            return []  # too large: the validator reports manifest-too-large from the member's size
        self.manifest_bytes = data
        if not strict:
            try:
                self.manifest = parse_manifest(data, f"{self.name}/{MANIFEST}")
            except CardFormatError:
                return []  # the validator reports manifest problems itself
        else:
            self.manifest = parse_manifest(data, f"{self.name}/{MANIFEST}")
        listed = {f.path: f.bytes for f in self.manifest.inventory.files}
        parents = {"/".join(p.split("/")[:i]) for p in listed for i in range(1, p.count("/") + 1)}
        out = []
        for m in self.members:
            name = m.name.rstrip("/") if m.kind == "dir" else m.name
            if m.name in self._bad or name == MANIFEST:
                continue
            if m.kind == "dir":
                if name not in parents:
                    out.append(UnsafeArchiveError("directory holds no file of the inventory",
                                                  member=name, rule="extra-member"))
            elif name not in listed:
                out.append(UnsafeArchiveError("is not listed in card.json's inventory", member=name,
                                              rule="extra-member"))
            elif listed[name] != m.size:
                out.append(UnsafeArchiveError(
                    f"is {m.size:,} bytes but the inventory lists {listed[name]:,}", member=name,
                    rule="size-mismatch"))
        stored = {m.name for m in self.members}
        out += [UnsafeArchiveError("is listed in the inventory but not in the archive", member=p,
                                   rule="missing-member") for p in sorted(set(listed) - stored)]
        return out

    def _member(self, rel: str) -> Member:
        safe_relative(rel)
        member = self._files.get(rel)
        if member is None:
            if rel in self._bad:
                raise UnsafeArchiveError("breaks a safety rule and is not served", member=rel, rule="unsafe-member")
            raise CardFormatError(f"{self.name}: {rel} is not a regular file of the archive")
        return member

    # -- CardSource --------------------------------------------------------------------------
    def entries(self) -> Iterator[Entry]:
        """Every member as stored (name, kind, size, link target), in archive order."""
        for m in self.members:
            name = m.name.rstrip("/") if m.kind == "dir" else m.name
            yield Entry(name, _ENTRY_KIND[m.kind], m.size, target=m.linkname,
                        links=2 if m.kind == "hardlink" else 1)

    def open_binary(self, rel: str) -> BinaryIO:
        """A buffered binary stream over one member's bytes."""
        member = self._member(rel)
        return io.BufferedReader(_RangeReader(self._fd, member.offset, member.size), CHUNK)  # type: ignore[return-value]

    def read_bytes(self, rel: str, *, limit: int) -> bytes:
        """The bytes of one member, refusing members larger than `limit`."""
        member = self._member(rel)
        if member.size > limit:
            raise CardFormatError(f"{self.name}: {rel} is larger than the limit of {limit} bytes")
        return _pread_exact(self._fd, member.size, member.offset)

    def exists(self, rel: str) -> bool:
        """Whether `rel` is a safe regular-file member."""
        try:
            self._member(rel)
        except (CardFormatError, UnsafeArchiveError):
            return False
        return True

    def check(self, rel: str) -> None:
        """Raise unless `rel` is a safe regular-file member."""
        self._member(rel)

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """A read-only pyarrow filesystem whose files are the members, served from a memory map."""
        with self._lock:  # the validator reads from a second thread
            if self._buffer is None:
                self._mmap = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
                self._buffer = pa.py_buffer(self._mmap)
            buffer = self._buffer
        return pafs.PyFileSystem(_MemberFileSystem(self, buffer)), _FS_ROOT

    # -- lifetime --------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the file descriptor (and the memory map once no table refers to it)."""
        self._buffer = None
        if self._mmap is not None:
            # Arrow buffers may still point into the map; it is unmapped when they go.
            with contextlib.suppress(BufferError):
                self._mmap.close()
            self._mmap = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ArchiveSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1


def _raise_first(problems: list[UnsafeArchiveError]) -> None:
    if problems:
        first = problems[0]
        if len(problems) > 1:
            first.add_note(f"{len(problems) - 1} more problem(s): " + "; ".join(str(p) for p in problems[1:6]))
        raise first


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise UnsafeArchiveError("the archive shrank while it was being read", rule="truncated")
    return data


class _RangeReader(io.RawIOBase):
    """Raw reads of bytes [offset, offset+size) of a shared file descriptor (pread: no seek state)."""

    def __init__(self, fd: int, offset: int, size: int):
        self._fd, self._start, self._size, self._pos = fd, offset, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        n = os.preadv(self._fd, [memoryview(buffer)[:want]], self._start + self._pos)
        self._pos += n
        return n


_FS_ROOT = "rcard"


class ReadOnlyMembers(pafs.FileSystemHandler):
    """The part every pyarrow handler over a packed card's members shares: members are opened
    as `_slice(path)` (a subclass's zero-copy reader), paths are kept as given, nothing is written."""

    def _slice(self, path: str) -> pa.NativeFile:
        raise NotImplementedError

    def normalize_path(self, path: str) -> str:
        return path

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self._slice(path)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self._slice(path)

    def _read_only(self, *args: object) -> None:
        raise OSError("a packed card is read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


class _MemberFileSystem(ReadOnlyMembers):
    """pyarrow filesystem handler: `rcard/<member>` is a zero-copy slice of the memory map."""

    def __init__(self, source: ArchiveSource, buffer: pa.Buffer):
        self._source = source
        self._buffer = buffer

    def _rel(self, path: str) -> str:
        prefix = _FS_ROOT + "/"
        if not path.startswith(prefix):
            raise FileNotFoundError(path)
        return path[len(prefix):]

    def _slice(self, path: str) -> pa.BufferReader:
        try:
            member = self._source._member(self._rel(path))
        except (CardFormatError, UnsafeArchiveError) as exc:
            raise FileNotFoundError(f"{path}: {exc}") from None
        return pa.BufferReader(self._buffer.slice(member.offset, member.size))

    def get_type_name(self) -> str:
        return "rcard"

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        infos = []
        for path in paths:
            try:
                member = self._source._member(self._rel(path))
            except (FileNotFoundError, CardFormatError, UnsafeArchiveError):
                infos.append(pafs.FileInfo(path, pafs.FileType.NotFound))
            else:
                infos.append(pafs.FileInfo(path, pafs.FileType.File, size=member.size))
        return infos

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.rstrip("/") + "/"
        out = []
        for name, member in sorted(self._source._files.items()):
            full = f"{_FS_ROOT}/{name}"
            if full.startswith(base) and (selector.recursive or "/" not in full[len(base):]):
                out.append(pafs.FileInfo(full, pafs.FileType.File, size=member.size))
        return out



# -- unpacking ---------------------------------------------------------------------------------------


def unpack_card(archive: str | os.PathLike[str], out: str | os.PathLike[str], *,
                limits: ArchiveLimits | None = None) -> CardManifest:
    """Unpack a `.rcard` file into the new directory `out`, safely.

    The archive is checked before anything is written (structure, names, member
    types, duplicates and collisions, members against the inventory, total size
    against `limits` and the free space). Files are written into a temporary
    directory next to `out`, each hashed while written and compared with the
    inventory; the directory is renamed to `out` only when every check passed.
    On any failure nothing is left behind. Returns the card's manifest.
    """
    out = Path(out)
    with ArchiveSource(archive, strict=True, limits=limits) as source:
        manifest = source.manifest
        assert manifest is not None and source.manifest_bytes is not None
        new_directory_target(out)
        total = sum(m.size for m in source.members)
        if total > source.limits.max_total_bytes:
            raise UnsafeArchiveError(
                f"members total {total:,} bytes, more than the limit of {source.limits.max_total_bytes:,}",
                member=source.name, rule="total-size")
        free = shutil.disk_usage(out.parent).free
        if total > free:
            raise UnsafeArchiveError(f"needs {total:,} bytes but only {free:,} are free at {out.parent}",
                                     member=source.name, rule="total-size")
        expected = {f.path: f.sha256 for f in manifest.inventory.files}
        expected[MANIFEST] = hashlib.sha256(source.manifest_bytes).hexdigest()
        if root_digest(manifest.inventory.files) != manifest.inventory.root_digest:
            raise UnsafeArchiveError("the inventory's root digest does not match its files",
                                     member=MANIFEST, rule="root-digest")
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.unpacking-"))
        try:
            with progress.task(f"unpack {source.name}", total=total, unit="B") as unpacking:
                for member in source.members:
                    _write_member(source, member, tmp, expected)
                    unpacking.advance(member.size)
            os.chmod(tmp, 0o755)  # noqa: S103 - a card directory is world-readable like a packed file
            if out.exists():
                out.rmdir()
            os.rename(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return manifest


def _write_member(source: ArchiveSource, member: Member, tmp: Path, expected: dict[str, str]) -> None:
    # Names were checked (relative, no '..', no links anywhere in the archive), and
    # only this function creates entries under tmp, so joining is safe; O_EXCL and
    # O_NOFOLLOW make sure of it anyway.
    if member.kind == "dir":
        (tmp / member.name.rstrip("/")).mkdir(parents=True, exist_ok=True)
        return
    target = tmp / member.name
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(target, flags, 0o644)
    try:
        sha = copy_hashed(source._fd, member.offset, member.size, fd, f"{source.name}:{member.name}")
    finally:
        os.close(fd)
    if sha != expected[member.name]:
        raise UnsafeArchiveError(f"sha256 is {sha} but the inventory lists {expected[member.name]}",
                                 member=member.name, rule="digest-mismatch")
