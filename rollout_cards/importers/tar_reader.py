"""Read members of an untrusted `.tar.gz` in one bounded pass, never onto disk.

A source's tar.gz (OpenHands' `conversations/<instance>.tar.gz`, written by `tar -czf`:
GNU tar format with `././@LongLink` names, or POSIX pax) is decompressed as a stream and
its headers walked as they arrive; nothing is extracted and `tarfile` is not used:

- the file must be a regular file no larger than `max_file_bytes` (checked before it
  is opened); the decompressed stream stops at `max_total_bytes` (a gzip bomb costs that
  much CPU, never memory), and the gzip trailer (CRC, length) must check out;
- every header's checksum is checked; sizes are octal (or GNU base-256) and a member
  larger than `max_member_bytes` is refused before it is read when it is wanted;
- the member count, long-name and pax header sizes are capped;
- names go through `io.ustar.name_problem` (no absolute paths, `..`, backslashes, control
  characters; a leading `./` is dropped), a name seen twice is refused (extraction would
  keep the last one: two readers could disagree), and links, devices, FIFOs and sparse
  files are refused rather than followed or skipped.

Every refusal is a `SourceFormatError` naming the archive and the member (or the byte
offset in the decompressed stream). `read_tar_gz` returns the bytes of the members the
caller wants, at most `max_kept_bytes` in all, and the names and kinds of all of them.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..errors import SourceFormatError
from ..io.ustar import (
    BLOCK,
    KINDS,
    ArchiveLimits,
    PaxError,
    checksum_matches,
    header_number,
    header_text,
    name_problem,
    padding,
    pax_records,
)
from ..numbers import parse_decimal
from .compression import HEAD_BYTES, lfs_pointer_error, member_pointer_error
from .source_dir import regular_file

__all__ = ["TarContents", "TarLimits", "read_tar_gz"]

_RAW_CHUNK = 1 << 16
_KINDS = {**KINDS, b"7": "file"}  # a contiguous file (GNU tar writes it as a regular file) is read as one
_REFUSED = {"hardlink": "a hard link", "symlink": "a symbolic link", "device": "a device file", "fifo": "a FIFO"}
# pax keys that change where a member is or what it holds; others (times, owners, vendor keys) do not
_PAX_USED = ("path", "size", "linkpath")


@dataclass(frozen=True)
class TarLimits:
    """Caps of one archive, checked before the bytes they cover are read."""

    max_file_bytes: int = 4 << 30
    max_total_bytes: int = 8 << 30
    max_member_bytes: int = 256 << 20
    max_kept_bytes: int = 2 << 30
    max_members: int = 200_000
    max_name_bytes: int = 4096
    max_pax_bytes: int = 1 << 20


@dataclass
class TarContents:
    """What one pass over an archive found: wanted members' bytes, every member's kind."""

    members: dict[str, bytes] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)


class _Gunzip:
    """The decompressed bytes of a gzip file (one or more gzip members), read exactly."""

    def __init__(self, fh: BinaryIO, name: str, limit: int):
        self._fh = fh
        self._name = name
        self._limit = limit
        self._z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self._input = b""  # compressed bytes zlib has not taken yet
        self._buf = bytearray()
        self.offset = 0  # decompressed bytes consumed so far
        self._produced = 0
        self._eof = False

    def _error(self, message: str) -> SourceFormatError:
        return SourceFormatError(message, file=self._name)

    def _next_member(self) -> None:
        """After a gzip member's end: another member, zero padding to the end, or the end."""
        rest = self._z.unused_data + self._input
        while len(rest) < 2 and (more := self._fh.read(_RAW_CHUNK)):
            rest += more
        if rest.startswith(b"\x1f\x8b"):
            self._z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            self._input = rest
            return
        while not rest.strip(b"\x00"):  # zeros after the stream (tape blocking) are ignored, as gzip does
            rest = self._fh.read(_RAW_CHUNK)
            if not rest:
                self._eof = True
                return
        raise self._error("has bytes after its gzip stream that are not another gzip member")

    def _more(self, want: int) -> None:
        """Decompress until `want` bytes are buffered or the stream ends."""
        while len(self._buf) < want and not self._eof:
            if self._z.eof:
                self._next_member()
                continue
            if not self._input:
                self._input = self._fh.read(_RAW_CHUNK)
                if not self._input:
                    raise self._error("is a truncated gzip stream (the file ends inside compressed data)")
            try:
                out = self._z.decompress(self._input, min(self._limit - self._produced + 1, 1 << 20))
            except zlib.error as exc:
                raise self._error(f"is not a readable gzip stream: {exc}") from None
            self._input = self._z.unconsumed_tail
            self._produced += len(out)
            if self._produced > self._limit:
                raise self._error(f"decompresses to more than {self._limit:,} bytes, the limit of one archive")
            self._buf += out

    def read(self, n: int) -> bytes:
        """Exactly `n` bytes, or fewer only at the end of the stream."""
        self._more(n)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        self.offset += len(out)
        return out

    def skip(self, n: int) -> int:
        """Discard `n` bytes without keeping them; returns how many there were."""
        done = 0
        while done < n:
            got = len(self.read(min(n - done, 1 << 20)))
            if not got:
                break
            done += got
        return done

    def drain(self) -> None:
        """Read to the end, so the gzip trailer (CRC-32, length) is checked."""
        while self.read(1 << 20):
            pass


def read_tar_gz(path: Path, name: str, *, want: Callable[[str], bool], limits: TarLimits = TarLimits()) -> TarContents:
    """The members of the tar.gz at `path` for which `want(name)` is true, read whole (module doc)."""
    regular_file(path, what="archive")
    size = os.path.getsize(path)
    if size > limits.max_file_bytes:
        raise SourceFormatError(f"is {size:,} bytes, more than the {limits.max_file_bytes:,} an archive may be",
                                file=name)
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        if head[:2] != b"\x1f\x8b":
            raise lfs_pointer_error(name, head) or SourceFormatError(
                "is not a gzip file (a .tar.gz starts with the bytes 1f 8b)", file=name)
        fh.seek(0)
        stream = _Gunzip(fh, name, limits.max_total_bytes)
        contents = _walk(stream, name, want, limits)
        stream.drain()
    return contents


def _walk(stream: _Gunzip, name: str, want: Callable[[str], bool], limits: TarLimits) -> TarContents:
    out = TarContents()
    kept = 0
    long_name: str | None = None
    pax: dict[str, str] | None = None
    name_limits = ArchiveLimits(max_name_bytes=limits.max_name_bytes)

    def fail(message: str, member: str | None = None, at: int | None = None) -> SourceFormatError:
        where = f"member {member!r}" if member is not None else f"byte {at:,} of the tar stream"
        return SourceFormatError(message, file=name, record=where)

    while True:
        at = stream.offset
        block = stream.read(BLOCK)
        if len(block) < BLOCK:
            raise fail("the archive ends without its end-of-archive marker (truncated?)", at=at)
        if block == bytes(BLOCK):
            if long_name is not None or pax is not None:
                raise fail("a long-name or pax header is not followed by a member", at=at)
            if stream.read(BLOCK).strip(b"\x00"):
                raise fail("has data after a single zero block (a corrupt end-of-archive marker)", at=at)
            return out  # what follows is padding; drain() reads it for the gzip check
        if not checksum_matches(block, signed=True, base256=True):
            raise fail("has a header with a wrong checksum (corrupt, or not a tar archive)", at=at)
        typeflag = block[156:157]
        raw_size = header_number(block[124:136], base256=True)
        if raw_size is None:
            raise fail("has a header whose size is not a number", at=at)
        member = long_name if long_name is not None else header_text(block[0:100])
        if long_name is None and block[257:263] == b"ustar\x00" and block[345]:
            member = header_text(block[345:500]) + "/" + member  # POSIX prefix field
        size = raw_size
        if pax is not None:
            member = pax.get("path", member)
            if "size" in pax:
                pax_size = parse_decimal(pax["size"])
                if pax_size is None:
                    raise fail(f"has a pax size {pax['size'][:30]!r} that is not a number", member)
                size = pax_size
        if typeflag in (b"L", b"K", b"x", b"g"):
            cap = limits.max_name_bytes if typeflag in (b"L", b"K") else limits.max_pax_bytes
            if size > cap:
                raise fail(f"has a {'long-name' if typeflag in (b'L', b'K') else 'pax'} header of {size:,} bytes, "
                           f"more than the limit of {cap:,}", at=at)
            data = stream.read(size)
            if len(data) < size:
                raise fail("the archive ends inside a header (truncated?)", at=at)
            stream.skip(padding(size))
            if typeflag == b"L":
                long_name = header_text(data)
            elif typeflag == b"x":
                try:
                    records = {key: value for key, value, _ in pax_records(data)}
                except PaxError:
                    raise fail("has a malformed pax header", at=at) from None
                if any(k.startswith("GNU.sparse") for k in records):
                    raise fail("is a sparse file (GNU.sparse pax records), which is not read", member)
                pax = {k: v for k, v in records.items() if k in _PAX_USED}
            # K (a long link target) and g (global pax defaults) change no member we read
            continue
        long_name = None
        pax = None
        if len(out.kinds) >= limits.max_members:
            raise fail(f"has more than {limits.max_members:,} members", member)
        kind = _KINDS.get(typeflag, "other")
        while member.startswith("./"):
            member = member[2:]
        if member in ("", ".", "./") and kind == "dir":
            stream.skip(size + padding(size))
            continue
        problem = name_problem(member, kind, name_limits)
        if problem is not None:
            raise fail(f"is refused: {problem[1]} ({problem[0]})", member)
        if typeflag == b"S":
            raise fail("is a GNU sparse file, which is not read", member)
        if kind in _REFUSED or kind == "other":
            what = _REFUSED.get(kind, f"of tar type {typeflag!r}")
            raise fail(f"is {what}; links and special files in a source archive are refused, not followed", member)
        key = member.rstrip("/")
        if key in out.kinds:
            raise fail("appears twice in the archive (which copy is meant is ambiguous)", member)
        out.kinds[key] = kind
        if kind == "dir":
            stream.skip(size + padding(size))
            continue
        if want(key):
            if size > limits.max_member_bytes:
                raise fail(f"is {size:,} bytes, more than the {limits.max_member_bytes:,} a member may be", member)
            if kept + size > limits.max_kept_bytes:
                raise fail(f"would bring the members read to more than {limits.max_kept_bytes:,} bytes", member)
            data = stream.read(size)
            if len(data) < size:
                raise fail(f"declares {size:,} bytes but the archive ends after {len(data):,} (truncated?)", member)
            if (pointer := member_pointer_error(name, key, data, f"member {member!r}")) is not None:
                raise pointer  # named before any format reads it as a broken document
            kept += size
            out.members[key] = data
            stream.skip(padding(size))
        else:
            got = stream.skip(size + padding(size))
            if got < size:
                raise fail(f"declares {size:,} bytes but the archive ends after {got:,} (truncated?)", member)
