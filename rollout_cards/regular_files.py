"""Opening a file someone hands us, refusing anything that is not a regular file.

`open()` on a FIFO blocks until a writer appears (forever, for `rcard validate pipe`),
and a device such as /dev/zero or /dev/urandom never ends. Every input path of the
library and the CLI (packed cards, rule files, redaction specs, keys, signatures)
opens through `open_regular_fd`: it opens with O_NONBLOCK, so opening a FIFO returns
at once, checks with fstat (on the descriptor, so there is no race with the name)
that it is a regular file, and only then clears O_NONBLOCK. A refusal is an OSError
(IsADirectoryError for a directory, `NotRegularFileError` otherwise) whose `strerror`
says what the file is, so every caller's existing `except OSError` names it.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

__all__ = ["NotRegularFileError", "file_kind", "open_regular", "open_regular_fd"]


class NotRegularFileError(OSError):
    """The path names a FIFO, device or socket, not a regular file."""


def file_kind(mode: int) -> str:
    """What a file of this st_mode is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_regular_fd(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of the regular file at `path` (raises OSError otherwise)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(errno.EINVAL, f"is {file_kind(mode)}, not a regular file; give a file",
                                      str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> BinaryIO:
    """`open(path, "rb")` for a regular file only (see the module doc)."""
    return os.fdopen(open_regular_fd(path, follow_symlinks=follow_symlinks), "rb")
