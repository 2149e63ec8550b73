"""Output paths: checks before a command creates its result (a card directory, a packed file).

A result is never written through a symbolic link (dangling or not): the link could point
anywhere, and replacing it by a rename would silently drop it. Links among the path's
parents are the user's own layout (`/tmp` on macOS is one) and are followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import PathError

__all__ = ["make_parent", "new_directory_target", "refuse_link"]


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
