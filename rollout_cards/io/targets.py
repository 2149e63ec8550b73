"""Output paths: checks before a command creates its result (a card directory, a packed
file, a report, a signature, an export), and the one way a result file is written.

A result is never written through a symbolic link (dangling or not): the link could point
anywhere, and replacing it by a rename would silently drop it. Links among the path's
parents are the user's own layout (`/tmp` on macOS is one) and are followed. A result is
never written into the card it was made from (`inputs`): a report or signature named
`CARD/steps.parquet` would replace the card's data, and any new file inside a card makes
it invalid (`file-unlisted`). A file is written to a new temporary file beside it and
renamed into place, so a failed or interrupted command leaves the old file or none.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from ..errors import PathError, RolloutCardError
from ..regular_files import file_kind

__all__ = ["directory_target", "file_target", "local_paths", "make_parent", "new_directory_target", "open_output", "refuse_link",
           "refuse_inside", "refuse_special", "write_output"]

Inputs = Iterable[str | os.PathLike[str]]


def refuse_link(out: Path) -> None:
    """PathError when `out` itself is a symbolic link."""
    if out.is_symlink():
        raise PathError(f"{out} is a symbolic link (to {os.readlink(out)!r}); rcard never writes its output "
                        "through a link: give a new path, or remove the link")


def new_directory_target(out: Path) -> None:
    """Check that `out` can become a new directory, creating its parent: refuses a link at
    `out`, anything but an empty directory there, and a parent that cannot be made (a file
    or a dangling link in the way). Raises PathError naming the path and the fix."""
    refuse_link(out)
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise PathError(f"{out} exists and is not an empty directory; choose a new directory")
    make_parent(out)


def make_parent(out: Path) -> None:
    """Create `out`'s parent directories; PathError when a file or a dangling link is in the way."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise PathError(f"cannot create {out.parent}: a component of it is a file or a symbolic link to "
                        "nothing; choose another directory") from None


def local_paths(source: object) -> list[Path]:
    """The local directory or packed file a card is read from (none for a remote URI): the
    `inputs` an output made from that card must stay out of."""
    found = getattr(source, "root", None) or getattr(source, "path", None)
    return [found] if isinstance(found, Path) else []


def refuse_inside(out: Path, inputs: Inputs, what: str = "the output") -> None:
    """RolloutCardError when `out` is, or is inside, one of the `inputs` (card directories or
    packed files), links resolved: writing there would change or break the input."""
    target = out.resolve()
    for given in inputs:
        src = Path(given).resolve()
        if target == src or (src.is_dir() and target.is_relative_to(src)):
            where = "is" if target == src else "is inside"
            raise RolloutCardError(f"{out} {where} the card {given}; write {what} outside the card it is made from")


def refuse_special(out: Path) -> None:
    """PathError when `out` is a device, FIFO or socket: the new file is renamed into place,
    which would replace the node itself (as root, `-o /dev/null` replaced the system's)."""
    try:
        mode = os.lstat(out).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        raise PathError(f"{out} is {file_kind(mode)}, not a regular file; rcard writes its output to a new file "
                        "renamed into place: give a file path")


def file_target(out: str | os.PathLike[str], *, overwrite: bool = False, inputs: Inputs = (),
                what: str = "the output") -> Path:
    """Check, before any work is done, that `out` can receive a new file: not a link, not a
    directory, not in one of `inputs`, and absent unless `overwrite`; creates its parent."""
    target = Path(out)
    refuse_link(target)
    if target.is_dir():
        raise RolloutCardError(f"{target} is a directory; give a file name for {what}")
    refuse_special(target)
    refuse_inside(target, inputs, what)
    if target.exists() and not overwrite:
        raise RolloutCardError(f"{target} exists; pass --overwrite to replace it")
    make_parent(target)
    return target


def directory_target(out: str | os.PathLike[str], *, inputs: Inputs = (), what: str = "the output") -> Path:
    """Check that `out` is, or can become, a directory to write files into (not a link, not
    a file, not in one of `inputs`); creates it."""
    target = Path(out)
    refuse_link(target)
    refuse_special(target)
    if target.exists() and not target.is_dir():
        raise RolloutCardError(f"{target} exists and is not a directory; give a directory for {what}")
    refuse_inside(target, inputs, what)
    make_parent(target)
    target.mkdir(exist_ok=True)
    return target


@contextlib.contextmanager
def open_output(out: str | os.PathLike[str], mode: str = "w", *, overwrite: bool = False, inputs: Inputs = (),
                what: str = "the output", permissions: int = 0o644) -> Iterator[IO]:
    """A new temporary file beside `out` (checked with `file_target`), renamed onto `out` when
    the block ends without an exception and removed otherwise; `mode` "w" (text, UTF-8) or "wb"."""
    target = file_target(out, overwrite=overwrite, inputs=inputs, what=what)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, permissions)
        with (os.fdopen(fd, mode, encoding="utf-8") if "b" not in mode else os.fdopen(fd, mode)) as fh:
            yield fh
        refuse_link(target)  # made while we wrote: the rename would replace the link, not follow it
        if not overwrite and os.path.lexists(target):
            raise RolloutCardError(f"{target} exists; pass --overwrite to replace it")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_output(out: str | os.PathLike[str], data: str | bytes, **kwargs: object) -> Path:
    """Write `data` to `out` as `open_output` does; returns the path."""
    with open_output(out, "wb" if isinstance(data, bytes) else "w", **kwargs) as fh:  # type: ignore[arg-type]
        fh.write(data)
    return Path(out)
