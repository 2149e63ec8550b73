"""The `rcard` console script, also run by `python -m rollout_cards`.

The signal handlers are installed before the command line's modules are imported, so
Ctrl-C or SIGTERM while they load exits 130 / 143 with one line, like anywhere else
(`interrupts`).
"""

import os
import sys

from . import interrupts


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
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
