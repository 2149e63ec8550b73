"""`import_source`: run one importer end to end.

Resolve the format, open an `ImportSession` on a temporary directory, let the
importer read every source, then finish (tables, manifest, rename into place) —
or, on any error, remove everything written so that no partial card is left.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import progress
from ..errors import ImporterError, SourceFormatError
from ..io.value_sizes import MAX_VALUE_BYTES
from .base import ImportRequest
from .registry import get_importer
from .session import ImportResult, ImportSession

__all__ = ["import_source"]


def import_source(
    format: str,
    sources: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    card_id: str | None = None,
    title: str | None = None,
    agent: str | None = None,
    keep_going: bool = False,
    urls: Sequence[str | None] = (),
    options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    created: datetime | None = None,
    license: str | None = None,
    max_value_mb: int = MAX_VALUE_BYTES // 1024**2,
) -> ImportResult:
    """Import `sources` (files of `format`) into a new card directory `out`.

    `card_id` defaults to the output directory's name, `agent` overrides the agent
    name the importer would take from the source, `urls[i]` is recorded as where
    `sources[i]` was published, `options` are importer-specific (see
    `rcard import --help`). With `keep_going`, records that cannot be mapped are left
    out and declared as a `source_malformed` drop; otherwise the first one raises
    SourceFormatError naming the file and record. `license` (SPDX) is the card's
    release license, which the publisher decides (the sources' licenses may differ).
    A single text or JSON value larger than `max_value_mb` MiB (64 by default) is a
    SourceFormatError naming its file, record, step and column (`io.value_sizes`).
    Nothing is left at `out` on failure.
    """
    importer = get_importer(format)
    paths = tuple(Path(s) for s in sources)
    if not paths:
        raise ImporterError("give at least one source file")
    if len(urls) > len(paths):
        raise ImporterError(f"{len(urls)} URLs given for {len(paths)} source file(s)")
    # An importer whose sources may be output directories says so with `directories = True`.
    directories = bool(getattr(importer, "directories", False))
    for path in paths:
        if not (path.is_file() or (directories and path.is_dir())):
            what = "a regular file or directory" if directories else "a regular file"
            raise SourceFormatError(f"does not exist or is not {what}", file=str(path))
    if isinstance(max_value_mb, bool) or not isinstance(max_value_mb, int) or not 1 <= max_value_mb <= 2047:
        raise ImporterError(f"max_value_mb must be a whole number of MiB from 1 to 2047, got {max_value_mb!r}")
    out_path = Path(out)
    request = ImportRequest(sources=paths, urls=tuple(urls), agent=agent, options=dict(options or {}))
    session = ImportSession(
        out_path,
        format=importer.name,
        card_id=card_id or _card_id(out_path),
        title=title or f"{importer.name} import of {', '.join(p.name for p in paths)}"[:200],
        keep_going=keep_going,
        overwrite=overwrite,
        created=created,
        license=license,
        max_value_bytes=max_value_mb * 1024**2,
    )
    try:
        with _fewer_collections():
            with progress.task(f"import {importer.name}", unit="episodes") as session.progress:
                importer.read(request, session)
            with progress.task("writing the card"):
                return session.finish()
    except BaseException:
        session.abort()
        raise


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often while an import runs. An import allocates
    millions of decoded dicts and lists that live until their record is mapped and form no cycles,
    so at the default thresholds (700, 10, 10) the collector walks them ~300 times per 3,000-sample
    Inspect log, the middle generation's walks the costly ones (0.15-0.19 CPU s of ~2.2 in gc
    callbacks); at (5000, 50, 10) it walks them ~40 times (0.035-0.045 s). Cycles that die young are
    still collected at each 5,000 allocations. The thresholds are restored on the way out; a
    collector that was switched off (threshold 0) is left alone."""
    before = gc.get_threshold()
    if before[0] > 0:
        gc.set_threshold(max(before[0], 5000), max(before[1], 50), before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _card_id(out: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", out.resolve().name).strip("-._")
    return (name or "imported")[:128]
