"""Streaming sha256 of files, the inventory's root digest, and Git LFS pointers (what a file
checked out without its LFS content holds instead: a card on a Git host keeps its Parquet in LFS)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from .. import progress
from ..model.card import FileEntry, Inventory

__all__ = ["CHUNK", "MAX_LFS_POINTER", "build_inventory", "lfs_pointer", "lfs_pointer_note", "root_digest",
           "sha256_file", "sha256_stream"]

CHUNK = 1024 * 1024
#: git-lfs writes pointer files under 1024 bytes (its spec): a larger file is data whatever its first line
MAX_LFS_POINTER = 1024
# The version URLs git-lfs reads a pointer by (lfs/pointer.go v1Aliases: alpha, pre-release "hawser",
# public launch), compared as plain strings, as the spec says.
_LFS_VERSIONS = (b"http://git-media.io/v/2", b"https://hawser.github.com/spec/v1", b"https://git-lfs.github.com/spec/v1")
# The rest of a pointer, as git-lfs decodes it: extension lines (ext-<digit>-<name> sha256:<oid>, in their
# sorted order), then oid and size; every line `key value\n`; nothing else (git-lfs spec, lfs/pointer.go).
_LFS_BODY = re.compile(rb"((?:ext-[0-9]-[0-9A-Za-z_]+ sha256:[0-9a-f]{64}\n)*)"
                       rb"oid sha256:([0-9a-f]{64})\nsize ([0-9]{1,19})\n")


def lfs_pointer(data: bytes) -> tuple[str, int] | None:
    """(sha256, size) of the file a Git LFS pointer stands for when `data` — a whole file, or a head
    longer than any pointer (MAX_LFS_POINTER + 1 bytes) — is exactly one, else None. A pointer is a
    small text file of that grammar only: bytes that merely begin with its version line are data."""
    if len(data) > MAX_LFS_POINTER or not data.startswith(b"version "):
        return None
    version, _, body = data[8:].partition(b"\n")
    if version not in _LFS_VERSIONS or (m := _LFS_BODY.fullmatch(body)) is None:
        return None
    extensions = m.group(1).splitlines()
    size = int(m.group(3))
    if extensions != sorted(extensions) or size >= 1 << 63:  # sorted keys; size an int64, as git-lfs parses it
        return None
    return m.group(2).decode("ascii"), size


def lfs_pointer_note(data: bytes, sha256: str) -> str | None:
    """What to say of a card file whose bytes `data` (at most MAX_LFS_POINTER) are a Git LFS
    pointer, the inventory listing `sha256` for it; None when they are not one."""
    pointer = lfs_pointer(data) if len(data) <= MAX_LFS_POINTER else None
    if pointer is None:
        return None
    same = " to the listed content (its oid is the inventory's sha256)" if pointer[0] == sha256 else ""
    return (f"it is a Git LFS pointer{same}: the card was checked out without its LFS content; run "
            "`git lfs pull` in that repository (or download the files themselves), then run the command again")


def sha256_stream(fh: BinaryIO, *, limit: int | None = None, label: str | None = None,
                  size: int | None = None) -> tuple[str, int]:
    """sha256 and byte count of a stream, read in 1 MiB chunks (at most `limit` bytes); with
    a `label` (the file's name) and its expected `size`, the bytes are counted as progress."""
    digest = hashlib.sha256()
    total = 0
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with progress.task(f"sha256 {label}" if label else "sha256", total=size, unit="B") as counted:
        while True:
            want = CHUNK if limit is None else min(CHUNK, limit - total)
            if want <= 0:
                break
            n = fh.readinto(view[:want])  # type: ignore[attr-defined]
            if not n:
                break
            digest.update(view[:n])
            total += n
            counted.advance(n)
    return digest.hexdigest(), total


def sha256_file(path: Path) -> tuple[str, int]:
    """sha256 and size of a file, streamed; never loads the whole file."""
    with open(path, "rb", buffering=0) as fh:
        return sha256_stream(fh, label=path.name, size=os.fstat(fh.fileno()).st_size)


def root_digest(entries: Iterable[FileEntry]) -> str:
    """sha256 over `<sha256> <bytes> <path>\\n` lines of the entries sorted by path."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        digest.update(f"{entry.sha256} {entry.bytes} {entry.path}\n".encode())
    return digest.hexdigest()


def build_inventory(root: Path, paths: Iterable[str]) -> Inventory:
    """Hash the given card-relative paths into an Inventory."""
    entries = []
    for rel in sorted(set(paths)):
        sha, size = sha256_file(root / rel)
        entries.append(FileEntry(path=rel, bytes=size, sha256=sha))
    return Inventory(files=entries, root_digest=root_digest(entries))
