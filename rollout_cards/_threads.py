"""One call on a thread of its own, its result (or its error) picked up later.

    Background(fn, *args, name="...", nice=0).result() -> fn(*args), or raises what it raised

A daemon thread, not a ThreadPoolExecutor worker: when the caller fails before it needs the
result, the error reaches the user at once and the process exits without joining the thread
(an executor's worker is joined first: for `rcard report`, a whole validation of a large card).
`nice` lowers the thread's priority by that much (Linux only, where a thread id names the thread; elsewhere
it could name a process) so that the work takes a core the caller's own threads leave idle:
the rule engine makes its scoring factors so while the step scan runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Background"]


class Background:
    """`fn(*args)` on a daemon thread; `result()` waits for it and raises what it raised."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "rollout-cards-background",
                 nice: int = 0) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self._nice = nice
        self._thread = threading.Thread(target=self._run, args=(fn, *args), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._nice > 0 and sys.platform == "linux":
            with contextlib.suppress(OSError):  # (relative to what the thread inherited; 19 is the lowest)
                me = threading.get_native_id()
                os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + self._nice))
        try:
            self._result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result
