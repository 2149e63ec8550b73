"""Packed cards on Ray workers: the members of a `.rcard` file, read in place by each worker.

The driver's `ArchiveSource` serves members from a memory map of its own file descriptor,
which cannot travel to another process. `worker_filesystem(source)` gives instead a
pyarrow filesystem that pickles as (archive path, {member: (offset, size)}) — the member
table the driver already checked (`ArchiveSource(strict=True)`: names, types, duplicates,
members against the inventory) — and that each worker opens itself: the archive by its path
(a regular file, no symbolic link), memory-mapped, each member a zero-copy slice. A worker
therefore needs the archive at the same path (one machine, or a shared filesystem), as it
needs a card directory. What it reads is still checked: the digests of the table parts are
computed through this filesystem and compared with the inventory before a result is used.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ..io.archive import ReadOnlyMembers
from ..regular_files import open_regular_fd

__all__ = ["ArchiveMembers", "worker_filesystem"]

_ROOT = "rcard"


class ArchiveMembers(ReadOnlyMembers):
    """Read-only pyarrow filesystem handler: `rcard/<member>` is bytes [offset, offset + size)
    of the archive at `path`, mapped on first use in the process that reads it."""

    def __init__(self, path: str, members: dict[str, tuple[int, int]]):
        self.path, self.members = path, dict(members)
        self._buffer: pa.Buffer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "members": self.members}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.members, self._buffer = state["path"], state["members"], None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArchiveMembers) and (self.path, self.members) == (other.path, other.members)

    def __hash__(self) -> int:
        return hash(self.path)

    def _map(self) -> pa.Buffer:
        if self._buffer is None:
            fd = open_regular_fd(self.path, follow_symlinks=False)
            try:
                self._buffer = pa.py_buffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
            finally:
                os.close(fd)  # the map keeps the file
        return self._buffer

    def _member(self, path: str) -> tuple[int, int]:
        rel = path[len(_ROOT) + 1:] if path.startswith(_ROOT + "/") else None
        if rel not in self.members:
            raise FileNotFoundError(f"{self.path}: {path} is not a member served to the workers")
        return self.members[rel]

    def _slice(self, path: str) -> pa.BufferReader:
        offset, size = self._member(path)
        buffer = self._map()
        if offset + size > buffer.size:
            raise OSError(f"{self.path}: the archive is shorter than when the driver opened it")
        return pa.BufferReader(buffer.slice(offset, size))

    def get_type_name(self) -> str:
        return "rcard-members"

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        infos = []
        for path in paths:
            try:
                _, size = self._member(path)
            except FileNotFoundError:
                infos.append(pafs.FileInfo(path, pafs.FileType.NotFound))
            else:
                infos.append(pafs.FileInfo(path, pafs.FileType.File, size=size))
        return infos

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.rstrip("/") + "/"
        return [pafs.FileInfo(f"{_ROOT}/{rel}", pafs.FileType.File, size=size)
                for rel, (_, size) in sorted(self.members.items())
                if f"{_ROOT}/{rel}".startswith(base) and (selector.recursive or "/" not in rel)]


def worker_filesystem(source: Any, rels: list[str]) -> tuple[pafs.FileSystem, str]:
    """A filesystem Ray workers open for the members `rels` of the packed card `source` (an
    `io.archive.ArchiveSource`), and its base path (the driver's, so scans keep their paths)."""
    for rel in rels:
        source.check(rel)  # a safe, unique regular-file member (else the driver's error)
    files = {m.name: (m.offset, m.size) for m in source.members if m.kind == "file" and m.name in set(rels)}
    return pafs.PyFileSystem(ArchiveMembers(str(source.path), files)), _ROOT
