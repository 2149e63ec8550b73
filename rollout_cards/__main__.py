"""The `rcard` console script, also run by `python -m rollout_cards`.

The signal handlers are installed before the command line's modules are imported, so
Ctrl-C or SIGTERM while they load exits 130 / 143 with one line, like anywhere else
(`interrupts`).
"""

import atexit
import os
import sys

from . import interrupts

#: Commands that write nothing but their output: when one is done, the process exits without
#: tearing the interpreter down (freeing every module and object: ~85 M instructions of a small
#: `rcard validate`, a sixth of what it adds to its start-up baseline; bench_startup.py).
_READ_ONLY = frozenset({"validate"})


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rcard` console script; returns the exit code."""
    interrupts.install()
    # pydantic scans the entry points of every installed distribution for plug-ins when it
    # builds its first model: milliseconds of a short command, for plug-ins that would only
    # watch this tool's own internal models. A user who sets the variable keeps their value.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        return interrupts.finish(interrupts.exit_code())
    code = cli_main(argv)
    if argv is None and sys.argv[1:2] and sys.argv[1] in _READ_ONLY:  # the console script, not a caller
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """Exit with `code` after what a normal exit does that anyone can see: the exit handlers
    run and the output is flushed (a failed flush, a closed pipe, is exit 120, as Python's own)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
