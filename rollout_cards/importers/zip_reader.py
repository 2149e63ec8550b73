"""Read members of an untrusted zip archive as bounded streams, never onto disk.

Before any member is read, the central directory is checked: member count, each
member's declared size, the total, the compression ratio of large members, the
names (relative, no `..`, no backslashes or NUL, no duplicates) and encryption.

A member is then read as a stream (`open`), decompressed here rather than by
`zipfile` (which cannot decompress zstd, method 93, before Python 3.14):

- stored (0), deflate (8) and zstd (93, via `zstandard`) are read; any other method
  is refused with an error naming the member and its method;
- every read returns at most the bytes asked for (a 64 KB zstd block can expand to
  gigabytes, so output is bounded, not input);
- decoding stops at the member's declared size (a member that inflates beyond what
  its header claims is refused) and at the caller's `budget`, so a header that
  inflates to 600 MB is refused after `budget` bytes, not allocated;
- at the end the decoded size and the CRC-32 must match the directory.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from types import TracebackType
from typing import BinaryIO

import zstandard

from ..errors import CardFormatError, SourceFormatError
from ..io.reader import safe_relative
from .compression import member_pointer_error

__all__ = ["METHODS", "SafeZip", "ZipLimits"]

#: Compression methods this reader decodes, by zip method number.
METHODS = {0: "stored", 8: "deflate", 93: "zstd"}
_KNOWN_METHODS = {**METHODS, 1: "shrink", 6: "implode", 9: "deflate64", 12: "bzip2", 14: "lzma", 95: "xz", 98: "ppmd"}
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIG = 0x04034B50
_RAW_CHUNK = 1 << 16
#: zstd frames may ask for a window this large at most (libzstd's default decoding limit)
_ZSTD_MAX_WINDOW = 1 << 27


@dataclass(frozen=True)
class ZipLimits:
    """Caps applied to a source archive before anything is decompressed."""

    max_members: int = 500_000
    max_member_bytes: int = 2 * 1024**3
    max_total_bytes: int = 64 * 1024**3
    #: uncompressed / compressed size above which a member is taken for a zip bomb
    max_ratio: float = 1000.0
    #: members smaller than this are not ratio-checked (tiny members compress absurdly well)
    ratio_floor: int = 1 << 20


class SafeZip:
    """A zip archive whose directory passed `ZipLimits`; `open(name)` streams a member,
    `read(name)` returns its bytes."""

    def __init__(self, path: str | os.PathLike[str], name: str, limits: ZipLimits = ZipLimits()):
        self.name = name
        self.limits = limits
        # One zstd decompressor for the members read one after another (making one per member cost
        # ~8 us, a quarter of reading a 17 KB sample); a stream opened while another holds it makes its own.
        self._spare_zstd: zstandard.ZstdDecompressor | None = None
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise SourceFormatError(f"is not a readable zip archive: {exc}", file=name) from None
        try:
            self._members = self._check(self._zip.infolist())
            self._fh: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        except BaseException:
            self._zip.close()
            raise

    def _fail(self, message: str, member: str | None = None) -> SourceFormatError:
        return SourceFormatError(f"unsafe or corrupt archive: {message}", file=self.name, record=member)

    def _check(self, infos: list[zipfile.ZipInfo]) -> dict[str, zipfile.ZipInfo]:
        lim = self.limits
        if len(infos) > lim.max_members:
            raise self._fail(f"{len(infos)} members, more than the limit of {lim.max_members}")
        members: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in infos:
            name = info.filename
            if _unsafe_name(name):
                raise self._fail(f"member name {name[:120]!r} is not a safe relative path")
            if name in members:
                raise self._fail("member name appears twice", name)
            if info.flag_bits & 0x1:
                raise self._fail("member is encrypted", name)
            if info.file_size > lim.max_member_bytes:
                raise self._fail(
                    f"member declares {info.file_size} bytes, more than the limit of {lim.max_member_bytes}", name
                )
            if info.file_size > lim.ratio_floor and info.file_size > lim.max_ratio * max(info.compress_size, 1):
                raise self._fail(
                    f"member inflates {info.compress_size} bytes to {info.file_size} "
                    f"(ratio above {lim.max_ratio:g})",
                    name,
                )
            total += info.file_size
            if total > lim.max_total_bytes:
                raise self._fail(f"members declare more than {lim.max_total_bytes} bytes in total")
            members[name] = info
        self._refuse_overlaps(infos)
        return members

    def _refuse_overlaps(self, infos: list[zipfile.ZipInfo]) -> None:
        """Members must not share bytes: directory entries pointing into one another's data
        (a 'quoted-overlap' bomb) make one stored blob decode once per entry."""
        ordered = sorted(infos, key=lambda i: i.header_offset)
        for a, b in zip(ordered, ordered[1:], strict=False):
            # a's local header is at least 30 bytes, then its data; b must start after both
            if b.header_offset < a.header_offset + _LOCAL.size + a.compress_size:
                raise self._fail(f"member overlaps the data of member {a.filename[:120]!r} (directory entries "
                                 "pointing into one another's bytes: a crafted archive)", b.filename)

    def names(self) -> list[str]:
        """Names of the file members (directories left out), in archive order."""
        return [n for n, info in self._members.items() if not info.is_dir()]

    def __contains__(self, name: str) -> bool:
        return name in self._members

    def size(self, name: str) -> int:
        """The decoded size member `name` declares."""
        return self._info(name).file_size

    def method(self, name: str) -> str:
        """The compression method of member `name`, by name (e.g. 'zstd')."""
        number = self._info(name).compress_type
        return _KNOWN_METHODS.get(number, f"method {number}")

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = self._members.get(name)
        if info is None or info.is_dir():
            raise SourceFormatError("member is missing from the archive", file=self.name, record=name)
        return info

    def open(self, name: str, *, budget: int | None = None, what: str = "member") -> MemberStream:
        """A stream of member `name`'s decoded bytes. More than `budget` decoded bytes is an
        error naming the member (`what` says what the budget is for, e.g. 'an Inspect header')."""
        info = self._info(name)
        if info.compress_type not in METHODS:
            raise self._fail(
                f"member cannot be decompressed: it uses compression method {info.compress_type} "
                f"({_KNOWN_METHODS.get(info.compress_type, 'unknown')}); this reader decodes "
                + ", ".join(f"{v} ({k})" for k, v in METHODS.items()),
                name,
            )
        if budget is not None and info.file_size > budget:
            raise self._fail(
                f"member declares {info.file_size} bytes, more than the {budget}-byte budget for {what}", name
            )
        self._fh.seek(info.header_offset)
        head = self._fh.read(_LOCAL.size)
        if len(head) < _LOCAL.size or _LOCAL.unpack(head)[0] != _LOCAL_SIG:
            raise self._fail("member's local header is missing or corrupt", name)
        fields = _LOCAL.unpack(head)
        if fields[3] != info.compress_type:
            raise self._fail(
                f"member's local header says compression method {fields[3]}, its directory entry "
                f"{info.compress_type}",
                name,
            )
        local_name = self._fh.read(fields[9])
        encoding = "utf-8" if fields[2] & 0x800 else "cp437"
        if local_name.decode(encoding, errors="replace") != info.orig_filename:
            # two readers (this one by the directory, zipfile/Inspect by the local header) would
            # disagree about what the member is
            raise self._fail(f"member's local header names it {local_name[:120]!r}, its directory entry "
                             f"{info.orig_filename[:120]!r}", name)
        start = info.header_offset + _LOCAL.size + fields[9] + fields[10]
        return MemberStream(self, info, start, budget, what)

    def read(self, name: str, *, budget: int | None = None, what: str = "member") -> bytes:
        """The bytes of member `name` (see `open`); a member that is a Git LFS pointer is refused."""
        with self.open(name, budget=budget, what=what) as stream:
            data = stream.read()
        if (pointer := member_pointer_error(self.name, name, data)) is not None:
            raise pointer  # named before any format reads it as a broken document
        return data

    def close(self) -> None:
        """Close the archive."""
        self._zip.close()
        self._fh.close()

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class MemberStream:
    """Decoded bytes of one member; `read(n)` returns at most n bytes (all with n < 0)."""

    def __init__(self, archive: SafeZip, info: zipfile.ZipInfo, start: int, budget: int | None, what: str):
        self._archive = archive
        self._info = info
        self.name = info.filename
        self._pos = start  # next compressed byte to read, in the archive file
        self._left = info.compress_size  # compressed bytes not read yet
        self._limit = info.file_size if budget is None else min(info.file_size, budget)
        self._budget = budget
        self._what = what
        self._got = 0
        self._crc = 0
        self._done = False
        method = info.compress_type
        self._dctx: zstandard.ZstdDecompressor | None = None
        if method == 93:
            # stream_reader resets the decompressor's session: a reused one starts clean
            dctx = archive._spare_zstd or zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
            archive._spare_zstd = None
            self._dctx = dctx
            self._zstd = dctx.stream_reader(_RawReader(self), read_across_frames=True, read_size=_RAW_CHUNK)
        else:
            self._zstd = None
        self._inflate = zlib.decompressobj(-15) if method == 8 else None
        self._tail = b""  # deflate input not consumed yet

    def _fail(self, message: str) -> SourceFormatError:
        return self._archive._fail(message, self.name)

    def _raw(self, n: int) -> bytes:
        n = min(n, self._left)
        if n <= 0:
            return b""
        fh = self._archive._fh
        fh.seek(self._pos)
        data = fh.read(n)
        if len(data) < n:
            raise self._fail("member's data is cut short (the archive is truncated)")
        self._pos += n
        self._left -= n
        return data

    def _decode(self, n: int) -> bytes:
        """Up to n decoded bytes (b"" at the end of the member's data)."""
        try:
            if self._zstd is not None:
                return self._zstd.read(n)
            if self._inflate is None:
                return self._raw(n)
            while True:
                if not self._tail:
                    self._tail = self._raw(_RAW_CHUNK)
                    if not self._tail:
                        return b""  # end of the data; _finish checks the size and CRC
                out = self._inflate.decompress(self._tail, n)
                self._tail = self._inflate.unconsumed_tail
                if out or self._inflate.eof:
                    return out
        except (zlib.error, zstandard.ZstdError) as exc:
            method = METHODS[self._info.compress_type]
            raise self._fail(f"member cannot be decompressed ({method}): {exc}") from None

    def read(self, n: int = -1) -> bytes:
        """At most n decoded bytes (n < 0: the rest); b"" at the end."""
        if n is None or n < 0:
            chunks = []
            while chunk := self.read(1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        if self._done or n == 0:
            return b""
        # ask for one byte more than allowed, so that inflating beyond the limit is seen
        data = self._decode(min(n, self._limit - self._got + 1))
        self._got += len(data)
        if self._got > self._limit:
            if self._budget is not None and self._got > self._budget:
                raise self._fail(f"member decodes to more than the {self._budget}-byte budget for {self._what}")
            raise self._fail(f"member inflates beyond its declared {self._info.file_size} bytes")
        self._crc = zlib.crc32(data, self._crc)
        if not data:
            self._finish()
        return data

    def _finish(self) -> None:
        self._done = True
        if self._got != self._info.file_size:
            raise self._fail(f"member decodes to {self._got} bytes, its directory entry says {self._info.file_size}")
        if self._crc != self._info.CRC:
            raise self._fail("member's CRC-32 does not match its directory entry (corrupt data)")

    def close(self) -> None:
        """Release the decompressor (the archive's next member stream reuses it)."""
        self._done = True
        self._zstd = None
        if self._dctx is not None:
            self._archive._spare_zstd, self._dctx = self._dctx, None

    def __enter__(self) -> MemberStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _RawReader:
    """The compressed bytes of a member, as a file for zstandard's stream reader."""

    def __init__(self, stream: MemberStream):
        self._stream = stream

    def read(self, n: int = -1) -> bytes:
        return self._stream._raw(_RAW_CHUNK if n is None or n < 0 else n)


def _unsafe_name(name: str) -> bool:
    try:
        safe_relative(name)
    except CardFormatError:
        return True
    return False
