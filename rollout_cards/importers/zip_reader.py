"""Read members of an untrusted zip archive into memory, never onto disk.

Before any member is read, the central directory is checked: member count, each
member's declared size, the total, the compression ratio of large members, the
names (relative, no `..`, no backslashes or NUL, no duplicates) and encryption.
Reading then stops at the declared size, so a member that inflates beyond what
its header claims is refused rather than allocated.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from types import TracebackType

from ..errors import CardFormatError, SourceFormatError
from ..io.reader import safe_relative

__all__ = ["SafeZip", "ZipLimits"]


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
    """A zip archive whose directory passed `ZipLimits`; `read(name)` returns a member's bytes."""

    def __init__(self, path: str | os.PathLike[str], name: str, limits: ZipLimits = ZipLimits()):
        self.name = name
        self.limits = limits
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
            raise SourceFormatError(f"is not a readable zip archive: {exc}", file=name) from None
        try:
            self._members = self._check(self._zip.infolist())
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
        return members

    def names(self) -> list[str]:
        """Names of the file members (directories left out), in archive order."""
        return [n for n, info in self._members.items() if not info.is_dir()]

    def __contains__(self, name: str) -> bool:
        return name in self._members

    def read(self, name: str) -> bytes:
        """The bytes of member `name`, read in chunks and stopped at its declared size."""
        info = self._members.get(name)
        if info is None or info.is_dir():
            raise SourceFormatError("member is missing from the archive", file=self.name, record=name)
        chunks: list[bytes] = []
        got = 0
        try:
            with self._zip.open(info) as fh:
                while True:
                    chunk = fh.read(min(1 << 20, info.file_size - got + 1))
                    if not chunk:
                        break
                    got += len(chunk)
                    if got > info.file_size:
                        raise self._fail(f"member inflates beyond its declared {info.file_size} bytes", name)
                    chunks.append(chunk)
        except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
            raise self._fail(f"member cannot be decompressed: {exc}", name) from None
        return b"".join(chunks)

    def close(self) -> None:
        """Close the archive."""
        self._zip.close()

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _unsafe_name(name: str) -> bool:
    try:
        safe_relative(name)
    except CardFormatError:
        return True
    return False
