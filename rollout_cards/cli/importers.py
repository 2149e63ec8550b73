"""`rcard import FORMAT SOURCE... -o DIR`: turn other tools' logs into a rollout card."""

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..display import one_line
from ..errors import ImporterError
from . import app, printable, run, without_pandas

if TYPE_CHECKING:
    from ..importers.session import ImportResult


#: The formats shipped (the `rollout_cards.importers` entry points in pyproject.toml; a test
#: keeps the two equal). Listed here so that --help does not load the importers.
BUILT_IN = ("agentbench", "agentlab", "atif", "chat-jsonl", "inspect", "lm-eval", "mini-swe-agent", "openhands",
            "swe-agent", "swe-bench", "tau-bench", "tau2-bench")


class ImportFormat(StrEnum):
    text = "text"
    json = "json"


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ImporterError(f"{flag} takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _options(predictions: Path | None, mapping: Path | None, fields: list[str], option: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = _pairs(option, "--option")
    if predictions is not None:
        options["predictions"] = str(predictions)
    if mapping is not None:
        options["mapping"] = str(mapping)
    if fields:
        options["fields"] = _pairs(fields, "--field")
    return options


@app.command("import")
def import_command(
    format: Annotated[str, typer.Argument(help=f"Source format: {', '.join(BUILT_IN)}, or one added by a plug-in.")],
    sources: Annotated[list[Path], typer.Argument(help="Source files.")],
    out: Annotated[Path, typer.Option("--output", "--out", "-o", help="Directory of the new card (must not exist or be empty).")],
    card_id: Annotated[str | None, typer.Option("--id", help="Card id (default: the output directory's name).")] = None,
    title: Annotated[str | None, typer.Option(help="Card title.")] = None,
    license: Annotated[str | None, typer.Option(help="SPDX license of the card (yours to choose; check the sources' terms).")] = None,
    agent: Annotated[str | None, typer.Option(help="Agent name for every episode (default: from the source).")] = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Leave out records that cannot be mapped and declare them as a source_malformed drop.")] = False,
    url: Annotated[list[str] | None, typer.Option("--url", help="Where each source was published, in source order (repeatable).")] = None,
    predictions: Annotated[Path | None, typer.Option(help="swe-bench: the predictions file (JSON or JSONL) whose patches become artifacts.")] = None,
    mapping: Annotated[Path | None, typer.Option(help="chat-jsonl / atif: YAML or JSON file naming the id, task, agent, trial, status and score fields.")] = None,
    field: Annotated[list[str] | None, typer.Option("--field", help="chat-jsonl / atif: KEY=PATH, e.g. task=metadata.task_id or score.reward=reward (repeatable).")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="Importer-specific KEY=VALUE (repeatable).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing card at --out.")] = False,
    max_value_mb: Annotated[int, typer.Option("--max-value-mb", min=1, max=2047, help="Largest single text or JSON value (a message, a tool result, a task input) in MiB; a larger one stops the import naming it.")] = 64,
    format_: Annotated[ImportFormat, typer.Option("--format", "-f", help="Output format of the summary.")] = ImportFormat.text,
) -> None:
    """Import another tool's logs (Inspect, tau-bench, SWE-bench, SWE-agent, OpenHands, lm-eval, ...) into a new card.

    The card is written to a temporary directory and renamed into place at the end;
    on bad input nothing is left behind and the exit code is 1.
    """
    from ..importers.registry import is_builtin
    from ..importers.run import import_source

    if is_builtin(format):  # our importers never hand pyarrow pandas objects (cli/without_pandas.py)
        without_pandas.block()
    try:
        result: ImportResult = run(
            lambda: import_source(
                format,
                sources,
                out,
                card_id=card_id,
                title=title,
                agent=agent,
                keep_going=keep_going,
                urls=url or [],
                options=_options(predictions, mapping, field or [], option or []),
                overwrite=overwrite,
                license=license,
                max_value_mb=max_value_mb,
            )
        )
    finally:
        without_pandas.unblock()
    if format_ is ImportFormat.json:
        typer.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
        return
    typer.echo(printable(_render(result)), nl=False)


def _render(result: "ImportResult") -> str:
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
    lines = [f"imported {result.episodes} episodes ({one_line(statuses)}), {result.steps} steps into "
             f"{one_line(result.path)}"]
    for rule in result.rules:
        reported = "; ".join(
            f"{one_line(', '.join(f'{k}={v}' for k, v in r['group'].items()))}: {r['value']:.6g}" for r in rule["reported"]
        )
        lines.append(f"  rule {rule['rule']} ({rule['kind']})"
                     + (f": as the source reported it, {reported}" if reported else ""))
    if result.malformed:
        lines.append(f"  {len(result.malformed)} malformed record(s) left out (declared as a source_malformed drop)")
    lines.append(f"  {len(result.drops)} drops declared")
    # One line each: notes, warnings and groups quote the source's names.
    lines.extend(f"  note: {one_line(note)}" for note in result.notes)
    lines.extend(f"  warning: {one_line(warning)}" for warning in result.warnings)
    if result.rules:
        lines.append(f"  recompute them with n, unit and interval: rcard rescore {result.path}")
    return "\n".join(lines) + "\n"
