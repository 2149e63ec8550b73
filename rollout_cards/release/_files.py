"""Reading small user-given files (specs, keys, signatures, READMEs) with a size cap."""

from __future__ import annotations

import os

from ..errors import RolloutCardError
from ..regular_files import open_regular

__all__ = ["read_small_file"]


def read_small_file(path: str | os.PathLike[str], limit: int, what: str,
                    error: type[RolloutCardError]) -> bytes:
    """The bytes of `path`, refusing (with `error`, naming the file) more than `limit` bytes."""
    try:
        with open_regular(path) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror}") from None
    if len(data) > limit:
        raise error(f"{path}: the {what} is larger than the limit of {limit} bytes")
    return data
