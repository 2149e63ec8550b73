"""SIGINT and SIGTERM stop `rcard` like Ctrl-C: exit code 128 + n and one line on stderr.

`install()` makes the first of either signal raise KeyboardInterrupt in the main thread,
so every cleanup on the way up runs (an import removes its staging directory, a writer
records the interruption). Later signals are only recorded: they cannot cut that cleanup
short. `finish(code)` ends a command: from then on nothing raises, and if a signal came,
the exit code is 128 + its number and the one line is printed unless `report()` already
printed it. The console script installs the handlers before it imports the command line,
so a signal while modules load, while a command runs or while it prints its result ends
the same way; only one during the interpreter's own start-up keeps Python's default.

No imports beyond the standard library: this runs before anything else is loaded.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

__all__ = ["exit_code", "finish", "install", "report", "stopped"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict[str, Any] = {"signal": None, "raising": True, "told": False}


def _handle(signum: int, frame: Any) -> None:  # noqa: ARG001
    if _state["signal"] is not None:
        return  # the first one is already unwinding the command
    _state["signal"] = signum
    if _state["raising"]:
        raise KeyboardInterrupt


def install() -> None:
    """Handle SIGINT and SIGTERM as described above (a no-op outside the main thread)."""
    try:
        for signum in _SIGNALS:
            signal.signal(signum, _handle)
    except ValueError:
        pass  # not the main thread: signals keep their handlers


def stopped() -> int | None:
    """The number of the signal that stopped the command, or None."""
    return _state["signal"]


def exit_code() -> int:
    """128 + the stopping signal's number (a KeyboardInterrupt without one is Ctrl-C: 130)."""
    return 128 + (_state["signal"] or signal.SIGINT)


def report() -> None:
    """Print the one line saying the command was stopped (once)."""
    if _state["told"]:
        return
    _state["told"] = True
    name = signal.Signals(_state["signal"] or signal.SIGINT).name
    try:
        sys.stderr.write(f"rcard: stopped by {name}; nothing was left half-written\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the exit code still says it
        pass


def finish(code: int) -> int:
    """The command's exit code: `code`, or 128 + n when a signal stopped it (reported)."""
    _state["raising"] = False
    if _state["signal"] is None:
        return code
    report()
    return exit_code()
