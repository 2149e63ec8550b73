"""Progress on a terminal: a rich display on stderr while a command runs, and nothing at all
when stderr is a pipe, a file or a CI log (not a TTY), with TERM=dumb, or with RCARD_PROGRESS=0.

The display appears only once a command has run for `DELAY` seconds (RCARD_PROGRESS_DELAY;
a quick command prints exactly what it prints in a pipe) and is removed when the command
ends, before its output.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .. import progress
from ..display import one_line

__all__ = ["DELAY", "terminal_progress"]

DELAY = 0.5


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("RCARD_PROGRESS_DELAY", DELAY)))
    except ValueError:
        return DELAY


def wanted(stream: Any = None) -> bool:
    """Whether to show progress on `stream` (default stderr)."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("RCARD_PROGRESS", "1") == "0" or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


class _Renderer:
    def __init__(self, stream: Any) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            ProgressColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.text import Text

        from . import printable

        class Amount(ProgressColumn):
            """`12.3 MB / 40.0 MB`, `1,234 / 5,000 episodes` or `1,234 episodes`."""

            def render(self, task: Any) -> Text:
                unit = task.fields.get("unit", "")
                return Text(_amount(int(task.completed), task.total, unit), style="progress.download")

        self._printable = printable
        self._progress = Progress(
            # markup=False: a description names files and cards, and rich reads "[/x]" in one as a
            # closing tag (MarkupError, the command dies) and "[red]" as a style.
            SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), Amount(), TimeElapsedColumn(),
            console=Console(file=stream), transient=True, refresh_per_second=8,
        )
        self._started = False
        self._stopped = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(_delay(), self._start)
        self._timer.daemon = True
        self._timer.start()

    def _start(self) -> None:
        with self._lock:
            if not self._stopped:
                self._progress.start()
                self._started = True

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._stopped = True
            if self._started:
                self._progress.stop()

    def open(self, description: str, total: int | None, unit: str) -> object:
        return self._progress.add_task(self._printable(one_line(description)), total=total, unit=unit)

    def advance(self, handle: object, n: int) -> None:
        self._progress.advance(handle, n)  # type: ignore[arg-type]

    def close(self, handle: object) -> None:
        self._progress.remove_task(handle)  # type: ignore[arg-type]


def _amount(done: int, total: float | None, unit: str) -> str:
    if total is None and not unit:
        return ""  # a phase (a validation check, a rule): its name and time say it all
    if unit == "B":
        from rich.filesize import decimal

        return decimal(done) + (f" / {decimal(int(total))}" if total is not None else "")
    suffix = f" {unit}" if unit else ""
    return f"{done:,}" + (f" / {int(total):,}" if total is not None else "") + suffix


@contextmanager
def terminal_progress() -> Iterator[None]:
    """Render the library's progress on stderr for the block, if stderr is a terminal."""
    if not wanted():
        yield
        return
    renderer = _Renderer(sys.stderr)
    try:
        with progress.rendering(renderer):
            yield
    finally:
        renderer.stop()
