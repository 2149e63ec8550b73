"""Progress of long library calls, for whoever wants to show it.

Library code marks its long loops with `task(...)` and `Task.advance(n)`; by default nothing
listens and a task costs one attribute lookup per call. The CLI installs a renderer (a rich
progress display on a terminal, cli/progress.py) for the duration of one command. The
renderer is process-wide, not per thread, because checks and digests run on worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["IDLE", "Renderer", "Task", "rendering", "task"]


class Renderer(Protocol):
    """What shows progress: tasks are opened, advanced and closed, possibly from several threads."""

    def open(self, description: str, total: int | None, unit: str) -> object: ...
    def advance(self, handle: object, n: int) -> None: ...
    def close(self, handle: object) -> None: ...


_renderer: Renderer | None = None
_lock = threading.Lock()


class Task:
    """One unit of work being counted; `advance` is a no-op when nothing renders."""

    __slots__ = ("_handle", "_renderer")

    def __init__(self, renderer: Renderer | None, handle: object) -> None:
        self._renderer, self._handle = renderer, handle

    def advance(self, n: int = 1) -> None:
        if self._renderer is not None:
            self._renderer.advance(self._handle, n)


#: A task nobody watches (the default where a counter is optional).
IDLE = Task(None, None)


@contextmanager
def task(description: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
    """Count the work of a `with` block: `total` items of `unit` ("B" for bytes) if known."""
    renderer = _renderer
    if renderer is None:
        yield IDLE
        return
    handle = renderer.open(description, total, unit)
    try:
        yield Task(renderer, handle)
    finally:
        renderer.close(handle)


@contextmanager
def rendering(renderer: Renderer) -> Iterator[None]:
    """Show the progress of every task opened inside the block with `renderer`."""
    global _renderer
    with _lock:
        previous, _renderer = _renderer, renderer
    try:
        yield
    finally:
        with _lock:
            _renderer = previous
