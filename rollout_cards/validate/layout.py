"""Layout and path safety, from the members as stored (`CardSource.entries()`), links never followed.

Decides which files later checks may touch: `ctx.hashable` (regular files with
safe names) and `ctx.readable` (those that are also not hard-linked, so their
content may be parsed).
"""

from __future__ import annotations

import unicodedata

from ..errors import CardFormatError
from ..io.reader import safe_relative
from ..io.staging import STAGING_DIR
from .context import CheckContext
from .report import excerpt

__all__ = ["MANIFEST", "check_members", "path_problem"]

MANIFEST = "card.json"


def path_problem(path: str) -> str | None:
    """Why `path` is not a safe relative path inside a card, or None when it is."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in path):
        return "contains a control character"
    try:
        safe_relative(path)
        if "" in path.split("/"):
            raise CardFormatError("empty component")
    except CardFormatError:
        if path.startswith("/"):
            return "is absolute"
        if len(path) > 1 and path[1] == ":":
            return "starts with a drive letter"
        if "\\" in path:
            return "contains a backslash"
        return "has an empty, '.' or '..' component"
    return None


def _collision_key(path: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", path).casefold())


def check_members(ctx: CheckContext) -> None:
    """Every member: safe name, regular file or directory, no links, no colliding names."""
    f = ctx.findings
    seen: dict[str, str] = {}
    staging = False
    duplicates: set[str] = set()
    for entry in ctx.source.entries():
        path = entry.path
        if path in ctx.entries:  # possible in a packed card
            f.add("path-collision", "appears more than once; keep one member of that name", file=path)
            duplicates.add(path)
            continue
        ctx.entries[path] = entry
        if path == STAGING_DIR or path.startswith(STAGING_DIR + "/"):
            staging = True
        problem = path_problem(path)
        if problem:
            f.add("path-unsafe", f"member name {excerpt(path)} {problem}; rename it to a relative path inside "
                  "the card", file=path)
            continue
        key = _collision_key(path)
        if key in seen and seen[key] != path:
            f.add("path-collision", f"name collides with {excerpt(seen[key])} after Unicode normalisation or "
                  "case folding; rename one of them", file=path)
        seen.setdefault(key, path)
        if entry.kind == "symlink":
            f.add("path-symlink", f"is a symbolic link (to {excerpt(entry.target or '')}); links are never "
                  "followed: replace it with the file itself", file=path)
        elif entry.kind == "hardlink" or (entry.kind == "file" and entry.links > 1):
            f.add("path-hardlink", f"has {entry.links} hard links; store an independent copy of the file",
                  file=path)
            if entry.kind == "file":  # hashed for the integrity verdict, never parsed
                ctx.hashable.add(path)
        elif entry.kind == "file":
            ctx.hashable.add(path)
            ctx.readable.add(path)
        elif entry.kind != "dir":
            what = "device file" if entry.kind == "device" else f"special member ({entry.kind}: FIFO, socket or the like)"
            f.add("path-special", f"is a {what}; a card holds only regular files and directories: remove it",
                  file=path)
    # The source has the last word on what it serves (a packed card refuses members that
    # break its rules); a name that appears twice is ambiguous and never read.
    for path in sorted(ctx.hashable):
        if path in duplicates or not ctx.source.exists(path):
            ctx.hashable.discard(path)
            ctx.readable.discard(path)
    if staging:
        f.add("card-unfinished", f"{STAGING_DIR}/ is present: the card is still being written or its writer "
              "died; close the writer or run `rcard recover`", file=STAGING_DIR)
    if MANIFEST not in ctx.entries:
        f.add("manifest-missing", "card.json is not at the root of the package; is this a card directory?",
              file=MANIFEST)
