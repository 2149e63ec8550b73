"""Streaming sha256 of files and the inventory's root digest."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from .. import progress
from ..model.card import FileEntry, Inventory

__all__ = ["CHUNK", "build_inventory", "root_digest", "sha256_file", "sha256_stream"]

CHUNK = 1024 * 1024


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
