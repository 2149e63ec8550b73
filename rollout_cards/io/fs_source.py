"""Cards addressed by URI: `s3://bucket/card`, `gs://...`, `file:///data/card`, or any pyarrow
filesystem, through one `CardSource`.

    card_location("s3://bucket/cards/x") -> FileSystemSource (pyarrow.fs.FileSystem.from_uri)
    card_location("file:///data/x")      -> Path("/data/x") (the directory source, links refused)
    card_location("cards/x")             -> Path("cards/x")

A local `file://` URI becomes the plain directory source, so the checks that need a local
filesystem (no symbolic links followed, regular files only) hold for it; other filesystems
(object stores) have no links, and their objects are read as streams. The digest check on
read (`io.integrity`) goes through `open_binary` and so holds on every filesystem.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import CardFormatError
from .reader import Entry, safe_relative

__all__ = ["FileSystemSource", "card_location", "is_uri"]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(text: str) -> bool:
    """Whether `text` is a URI (scheme://...) rather than a local path."""
    return bool(_URI.match(text))


def card_location(location: str | os.PathLike[str]) -> Path | FileSystemSource:
    """A local path for local cards (plain paths and file:// URIs), a FileSystemSource otherwise."""
    text = os.fspath(location)
    if not is_uri(text):
        return Path(text)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise CardFormatError(f"{text}: a file:// URI names a path on this machine (file:///path), not host {parsed.netloc!r}")
        return Path(unquote(parsed.path))
    try:
        filesystem, path = pafs.FileSystem.from_uri(text)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CardFormatError(f"{text}: cannot open this URI ({str(exc).splitlines()[0][:160]}); "
                              "pyarrow reads s3://, gs://, hdfs:// and file:// URIs") from None
    return FileSystemSource(filesystem, path, name=text)


class FileSystemSource:
    """A card stored as a directory (or key prefix) on a pyarrow filesystem."""

    def __init__(self, filesystem: pafs.FileSystem, base: str, *, name: str | None = None):
        self._fs = filesystem
        self.base = base.rstrip("/")
        self.name = name or base

    def _path(self, rel: str) -> str:
        return f"{self.base}/{safe_relative(rel)}"

    def _info(self, rel: str) -> pafs.FileInfo:
        try:
            return self._fs.get_file_info(self._path(rel))
        except (pa.ArrowException, OSError) as exc:
            raise CardFormatError(f"{self.name}: {rel} cannot be read ({str(exc).splitlines()[0][:160]})") from None

    def is_card(self) -> bool:
        """Whether the location holds a card.json (else it does not exist, or is no card)."""
        return self._info("card.json").type == pafs.FileType.File

    def entries(self) -> Iterator[Entry]:
        try:
            infos = self._fs.get_file_info(pafs.FileSelector(self.base, recursive=True))
        except (pa.ArrowException, OSError) as exc:
            raise CardFormatError(f"{self.name}: cannot list the card ({str(exc).splitlines()[0][:160]})") from None
        for info in sorted(infos, key=lambda i: i.path):
            rel = PurePosixPath(info.path).relative_to(PurePosixPath(self.base)).as_posix()
            if info.type == pafs.FileType.File:
                yield Entry(rel, "file", info.size or 0)
            elif info.type == pafs.FileType.Directory:
                yield Entry(rel, "dir", 0)
            else:
                yield Entry(rel, "other", 0)

    def _regular(self, rel: str) -> str:
        if self._info(rel).type != pafs.FileType.File:
            raise CardFormatError(f"{self.name}: {rel} does not exist or is not a file")
        return self._path(rel)

    def open_binary(self, rel: str) -> BinaryIO:
        return self._fs.open_input_stream(self._regular(rel))  # type: ignore[return-value]

    def read_bytes(self, rel: str, *, limit: int) -> bytes:
        with self._fs.open_input_stream(self._regular(rel)) as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise CardFormatError(f"{self.name}: {rel} is larger than the limit of {limit} bytes")
        return bytes(data)

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        return self._fs, self.base

    def exists(self, rel: str) -> bool:
        try:
            return self._info(rel).type == pafs.FileType.File
        except CardFormatError:
            return False

    def check(self, rel: str) -> None:
        """Raise CardFormatError unless `rel` is a file of the card."""
        self._regular(rel)
