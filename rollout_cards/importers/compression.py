"""Recognise a compressed source by its first bytes, and say how to decompress it.

Importers read their formats uncompressed. A `results.jsonl.gz` handed to one used to
fail as "not valid UTF-8 at byte 1"; every reader that decodes a source's bytes
(`json_stream.JsonStream`, `iter_jsonl`, `parse_json`, `source_dir.read_yaml`, the
AgentLab CSV reader) asks `compressed_error` when the bytes at the start of a file do not
decode or parse, so every importer says the same thing: which compression the file
shows, and the command that decompresses it. Only the failure path looks, so reading an
uncompressed source costs nothing more.

A Git LFS pointer is recognised the same way: a repository checked out without `git lfs`
holds, under the data file's name, a three-line text that stands for it (its `size` and
`oid`), and every format failed on it as "not valid JSON at character 0" — an outside
user could not tell a pointer from a corrupt file. A member of an archive (a .eval zip, an
OpenHands conversations .tar.gz) that is a pointer is named by the archive readers as it is
read (`member_pointer_error`): the archive was made from such a checkout, and the fix is in
that repository, not a `git lfs pull` of the archive.
"""

from __future__ import annotations

import shlex

from ..errors import SourceFormatError
from ..io.hashing import MAX_LFS_POINTER, lfs_pointer

__all__ = ["HEAD_BYTES", "compressed_error", "compression_of", "lfs_pointer_error", "member_pointer_error"]

#: Bytes of a file's start that `compressed_error` looks at: a magic number needs 6; a Git LFS
#: pointer is a whole file of at most MAX_LFS_POINTER bytes, so a head one byte longer tells it apart.
HEAD_BYTES = MAX_LFS_POINTER + 1

# (magic, name, the command that writes the decompressed bytes of FILE to stdout)
_MAGIC = (
    (b"\x1f\x8b", "gzip", "gunzip -c"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -dc"),
    (b"\xfd7zXZ\x00", "xz", "xz -dc"),
    (b"BZh", "bzip2", "bunzip2 -c"),
    (b"PK\x03\x04", "zip", "unzip -l"),
)
_SUFFIXES = (".gz", ".zst", ".zstd", ".xz", ".bz2", ".zip")


def compression_of(head: bytes) -> str | None:
    """The compression (or zip container) whose magic number `head` starts with, else None."""
    for magic, kind, _ in _MAGIC:
        if head.startswith(magic):
            if kind == "bzip2" and not (len(head) > 3 and head[3:4].isdigit()):
                return None  # "BZh" is text too; bzip2 writes the block size digit after it
            return kind
    return None


def lfs_pointer_error(name: str, head: bytes, record: str | None = None) -> SourceFormatError | None:
    """The error for a source `name` whose first bytes `head` are a Git LFS pointer, else None.
    A reader whose format a pointer happens to satisfy (YAML, CSV) asks this before its own checks."""
    return _pointer_error(head, name, name, record, "the repository was checked out without its LFS content; fetch "
                          "it (`git lfs pull --include {base}` in that repository) and import the file again")


def member_pointer_error(archive: str, member: str, data: bytes, record: str | None = None) -> SourceFormatError | None:
    """The error for a `member` of `archive` whose bytes `data` are a Git LFS pointer, else None:
    the archive was made from a checkout without the LFS content, so its member stands for a file it
    does not hold (every format failed on it as a broken member, or the fix named the archive)."""
    return _pointer_error(data, member, archive, record or member,
                          "the archive was made from a checkout without its LFS content; fetch the member in that "
                          "repository (`git lfs pull --include {base}`), make the archive again and import that")


def _pointer_error(head: bytes, name: str, file: str, record: str | None, fix: str) -> SourceFormatError | None:
    pointer = lfs_pointer(head)
    if pointer is None:
        return None
    what = f" of {pointer[1]:,} bytes"
    return SourceFormatError(
        f"is a Git LFS pointer (it starts 'version https://git-lfs.github.com/spec/...'), not the file{what} it "
        f"stands for: " + fix.format(base=shlex.quote(name.rsplit("/", 1)[-1])), file=file, record=record)


def compressed_error(name: str, head: bytes, record: str | None = None) -> SourceFormatError | None:
    """The error for a source `name` whose first bytes are `head`, when they show a
    compression or a Git LFS pointer; None when they do not (the caller's own error stands)."""
    if (pointer := lfs_pointer_error(name, head, record)) is not None:
        return pointer
    kind = compression_of(head)
    if kind is None:
        return None
    magic, command = next((m, c) for m, k, c in _MAGIC if k == kind)
    base = name.rsplit("/", 1)[-1]
    plain = next((base[: -len(s)] for s in _SUFFIXES if base.lower().endswith(s) and len(base) > len(s)), None)
    q = shlex.quote
    if kind == "zip":
        how = f"extract the file it holds (`{command} {q(base)}` lists them) and import that"
    elif plain:
        how = f"decompress it first (`{command} {q(base)} > {q(plain)}`) and import {plain!r}"
    else:
        tmp = f"{base}.plain"
        how = (f"decompress it in place under the name the format expects (`{command} {q(base)} > {q(tmp)} && "
               f"mv {q(tmp)} {q(base)}`)")
    what = "a zip archive" if kind == "zip" else f"{kind}-compressed"
    return SourceFormatError(
        f"is {what} (its first bytes are the {kind} magic number {magic.hex(' ')}); importers read their "
        f"formats uncompressed: {how}", file=name, record=record)
