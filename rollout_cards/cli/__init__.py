"""`rcard`: the command-line shell over the library.

Each command parses its arguments, calls one library function and renders the
result; it holds no logic of its own. Exit codes: 0 ok, 1 invalid input or a
failed check, 2 usage error or internal failure, 128 + the signal's number when
stopped by SIGINT (130) or SIGTERM (143). Library errors become one-line messages; a
traceback is printed only with RCARD_DEBUG=1.
"""

import copy
import errno
import importlib
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any, NoReturn

import typer

from .. import interrupts
from ..display import escape_controls, inert_commands
from ..errors import (
    CardFormatError,
    PathError,
    RolloutCardError,
    RuleError,
    SourceFormatError,
    StatisticsError,
    UnsafeArchiveError,
    WriterError,
)
from . import deferred_params

__all__ = ["EXIT_INTERNAL", "EXIT_INVALID", "EXIT_OK", "app", "fail", "main", "printable", "run"]

EXIT_OK, EXIT_INVALID, EXIT_INTERNAL = 0, 1, 2

app = typer.Typer(
    name="rcard",
    help="Write, validate, rescore and publish rollout cards: reproducible agent and eval results.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

def _version(value: bool) -> None:
    if value:
        from ..version import FORMAT, __version__

        typer.echo(f"rcard (rollout-cards) {__version__}, format {FORMAT}")
        raise typer.Exit(EXIT_OK)


#: Commands that run code other than ours (importer plugins), which may use pandas.
_RUNS_PLUGINS = frozenset({"import"})


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Write, validate, rescore and publish rollout cards: reproducible agent and eval results."""
    if ctx.invoked_subcommand not in _RUNS_PLUGINS:
        from . import without_pandas  # pyarrow's pandas probe costs more than a small validate

        without_pandas.block()
        ctx.call_on_close(without_pandas.unblock)


# Invalid input (exit 1) versus a broken request (exit 2).
_INVALID = (CardFormatError, SourceFormatError, UnsafeArchiveError, PathError)
# What the file system says about a path the user gave (too long, not a directory, a link
# loop, no permission, ...): the path cannot be used, not a bug of ours.
_PATH_ERRNOS = frozenset(getattr(errno, n) for n in ("ENAMETOOLONG", "ENOTDIR", "ELOOP", "EACCES", "EPERM", "EISDIR",
                                                       "EROFS", "ENOSPC", "EDQUOT") if hasattr(errno, n))
_USAGE = (RuleError, StatisticsError, WriterError)


def printable(text: str) -> str:
    """`text` with control characters escaped (\\x1b, \\u202e, ...), newlines kept, and nothing a CI
    runner reads as a workflow command (a package's names must not drive the terminal or the CI)."""
    return inert_commands(escape_controls(text))


def fail(message: str, code: int = EXIT_INVALID) -> NoReturn:
    """Print `message` (control characters escaped) to stderr and exit with `code`."""
    typer.echo(f"rcard: {printable(message)}", err=True)
    raise typer.Exit(code)


class Engine(StrEnum):
    """--engine of rescore and validate (rollout_cards.scale)."""

    local = "local"
    ray = "ray"


ENGINE_HELP = "Where tables are scanned: this process, or Ray Data (pip install 'rollout-cards[ray]', docs/scale.md); same results."
ADDRESS_HELP = "With --engine ray: the Ray cluster to use (default: start a local one)."


def paths_or_uris(values: list[str] | str) -> list[str] | str:
    """Typer callback: each value is an existing local path or a URI (scheme://, read by pyarrow)."""
    from ..io.fs_source import is_uri

    for value in [values] if isinstance(values, str) else values:
        if not is_uri(value) and not os.path.lexists(value):
            raise typer.BadParameter(f"Path '{value}' does not exist.")
    return values


def finite(value: float | list[float] | None) -> float | list[float] | None:
    """Typer callback: a float option is a finite number (typer accepts 'nan' and 'inf')."""
    import math

    for v in value if isinstance(value, list) else [value]:
        if v is not None and not math.isfinite(v):
            raise typer.BadParameter(f"{v} is not a finite number")
    return value


def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a library function, turning its errors into messages and exit codes; its progress
    is shown on stderr while it runs when stderr is a terminal (cli/progress.py)."""
    from .progress import terminal_progress

    try:
        with terminal_progress():  # removed before any message below is printed
            return fn(*args, **kwargs)
    except typer.Exit:
        raise
    except _INVALID as exc:
        fail(_naming_the_card(str(exc), exc, args), EXIT_INVALID)
    except _USAGE as exc:
        if isinstance(exc, RuleError) and exc.card is not None:  # the card's own rule: the card is wrong
            fail(f"{exc.card}: {exc}\n  the card declares this rule; `rcard validate {exc.card}` lists every "
                 "problem of the card", EXIT_INVALID)
        fail(str(exc), EXIT_INTERNAL)
    except RolloutCardError as exc:
        fail(str(exc), EXIT_INTERNAL)
    except KeyboardInterrupt:
        # Raised by Ctrl-C, or by the SIGTERM handler: every cleanup on the way up has run.
        interrupts.report()
        raise typer.Exit(interrupts.exit_code()) from None
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a bare traceback
        if os.environ.get("RCARD_DEBUG"):
            raise
        if isinstance(exc, OSError) and exc.errno in _PATH_ERRNOS and exc.filename is not None:
            fail(path_problem(exc), EXIT_INVALID)
        fail(
            f"internal error: {type(exc).__name__}: {exc} (this is a bug in rollout-cards, not in "
            "your input; rerun with RCARD_DEBUG=1 for a traceback and report it)",
            EXIT_INTERNAL,
        )


def _naming_the_card(message: str, exc: Exception, args: tuple[Any, ...]) -> str:
    """`message` with the card it is about in front when it does not name it: a problem found
    deep in a read (a status outside the enum, met while a rule scores) is raised where the
    card's path is not known, and a script running over many cards could not tell which."""
    if not isinstance(exc, CardFormatError) or not args:
        return message
    first = args[0]
    name = getattr(first, "path", None) if hasattr(first, "manifest") else first
    if not isinstance(name, str | os.PathLike) or not str(name) or str(name) in message:
        return message
    return f"{os.fspath(name)}: {message}"


def path_problem(exc: OSError) -> str:
    """One line for an OSError about a path: which path (shortened), what the system said, the fix."""
    name = os.fsdecode(exc.filename)
    shown = name if len(name) <= 200 else f"{name[:120]}...{name[-60:]} ({len(os.fsencode(name)):,} bytes)"
    fix = {
        errno.ENAMETOOLONG: "a name is longer than the file system allows (255 bytes per name, 4,096 per path "
                            "on Linux); choose a shorter path",
        errno.ELOOP: "a symbolic link in the path points back into itself; fix the link",
        errno.ENOTDIR: "a component of the path is a file, not a directory; fix the path",
    }.get(exc.errno, "check the path and its permissions")
    return f"{shown}: {exc.strerror}; {fix}"


# Command modules register themselves on `app` when imported.
_COMMANDS = ("card_commands", "validate", "rescore", "importers", "release", "report", "export", "power", "rliable")
for _name in _COMMANDS:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"{__name__}.{_name}":
            raise


#: One example per command, shown at the end of its --help (commands added later without one
#: fail tests/cli/test_help.py).
EXAMPLES = {
    "card": "rcard card out/card --into",
    "export": "rcard export inspect-scores out/card --rule R -o scores.jsonl",
    "eee": "rcard export eee out/card -o out/eee --organization 'My Lab' --schemas every_eval_ever/schemas",
    "inspect-scores": "rcard export inspect-scores out/card --rule R -o scores.jsonl",
    "import": "rcard import tau-bench results.json -o out/tau",
    "info": "rcard info fixtures/cards/synthetic",
    "keygen": "rcard keygen --private me.pem --public me.pub.pem",
    "pack": "rcard pack out/card -o card-1.0.0.rcard",
    "power": "rcard power fixtures/cards/synthetic --rule synthetic.success_rate --delta 0.1",
    "recover": "rcard recover out/card",
    "redact": "rcard redact out/card --spec redact.yaml -o out/public",
    "report": "rcard report fixtures/cards/synthetic -r fixtures/rules/errors_excluded.yaml -o report.html",
    "rescore": "rcard rescore fixtures/cards/synthetic --rule fixtures/rules/errors_excluded.yaml",
    "rliable": "rcard rliable out/card --rule R --runs run_id --tasks task_id --task-bootstrap",
    "rules": "rcard rules",
    "schemas": "rcard schemas --write",
    "sign": "rcard sign card-1.0.0.rcard --key me.pem",
    "unpack": "rcard unpack card-1.0.0.rcard -o out/card",
    "validate": "rcard validate fixtures/cards/synthetic --format json",
    "verify": "rcard verify card-1.0.0.rcard --pubkey me.pub.pem",
}


def _with_example(command: Any, name: str) -> None:
    example = EXAMPLES.get(name)
    if example and "Example:" not in (command.help or ""):
        command.help = f"{(command.help or '').rstrip()}\n\nExample: {example}"


# typer 0.29 labels a value by its Python annotation; help shows what to type instead.
_PLAIN_TYPES = {"str": "text", "int": "integer", "float": "number", "int range": "integer", "float range": "number"}


def _plain_label(label: str) -> str:
    inner = label.removeprefix("<").removesuffix(">")
    listed = inner.startswith("list[")
    inner = inner.removeprefix("list[").removesuffix("]") if listed else inner
    return f"<{_PLAIN_TYPES.get(inner, inner.lower())}>" + ("..." if listed else "")


def _readable_metavars(command: Any) -> Any:
    """Help without Python type names: typer 0.29 shows `<bool>` for flags (and --help),
    `<list[Path]>` for repeatable ones and `<str>`/`<int range>` for values; flags get no
    placeholder, lists the element's (`<path>...`), values a plain word (`<text>`, `<integer>`).
    Applied once to the command tree before it runs."""
    for name, sub in getattr(command, "commands", {}).items():
        _with_example(sub, name)
        _readable_metavars(sub)
    ctx = command.context_class(command, help_option_names=["-h", "--help"])
    help_option = command.get_help_option(ctx)  # created once and cached by the command
    for param in [*getattr(command, "params", ()), *([help_option] if help_option else [])]:
        deferred_params.defer_coercion(param)
        if param.metavar is not None:
            continue
        if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
            param.metavar = ""
        elif hasattr(param, "display_type"):
            label = _plain_label(param.display_type(ctx))
            if (param.multiple or param.nargs == -1) and not label.endswith("..."):
                label += "..."
            if isinstance(param, typer.core.TyperArgument):
                # An argument's metavar would rename it in the usage line; override its type label.
                param.display_type_rich = lambda ctx, _label=label: _label
            else:
                param.metavar = label
    return command


def cli_command(argv: list[str] | None = None) -> Any:
    """The `rcard` command tree as it runs: with readable placeholders and examples.

    Given the arguments of a run, only the command they name is built: typer builds every
    command's parameters when the tree is made (about 0.15 s for all of them, most of a small
    `rcard validate`). The whole tree is built for root options (`--help`), shell completion
    and a name that is not a command (so click can suggest one)."""
    return _readable_metavars(typer.main.get_command(_only_invoked(argv)))


def _only_invoked(argv: list[str] | None) -> typer.Typer:
    if not argv or argv[0].startswith("-") or any(k.endswith("_COMPLETE") for k in os.environ):
        return app
    name = argv[0]
    commands = [c for c in app.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def main(argv: list[str] | None = None) -> int:
    """Run `rcard` with `argv`; returns the exit code (`rollout_cards.__main__.main` is the
    console script: it installs the signal handlers before this module is imported)."""
    interrupts.install()
    try:
        code = _main(argv)
    except KeyboardInterrupt:  # outside run() and outside click (which turns one into exit 130)
        code = interrupts.exit_code()
    return interrupts.finish(code)


def _main(argv: list[str] | None) -> int:
    try:
        cli_command(sys.argv[1:] if argv is None else argv)(args=argv, prog_name="rcard", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - rendering or argument handling outside run()
        if os.environ.get("RCARD_DEBUG"):
            raise
        typer.echo(f"rcard: internal error: {type(exc).__name__}: {printable(str(exc))[:300]} (a bug in "
                   "rollout-cards; rerun with RCARD_DEBUG=1 for a traceback and report it)", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
