"""Reading and writing rollout cards on disk."""

from __future__ import annotations

from pathlib import Path

from ..errors import CardFormatError


def archive_source(path: Path):  # -> CardSource
    """The source of a packed card file (`rcard pack` output)."""
    try:
        from .archive import ArchiveSource
    except ModuleNotFoundError:
        raise CardFormatError(
            f"{path} is a file; this version of rollout-cards reads card directories only"
        ) from None
    return ArchiveSource(path)
