"""`rcard info`, `rcard recover`, `rcard schemas`."""

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from . import EXIT_INVALID, app, printable, run


class InfoFormat(StrEnum):
    text = "text"
    json = "json"


@app.command()
def info(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.")],
    format: Annotated[InfoFormat, typer.Option("--format", "-f", help="Output format.")] = InfoFormat.text,
    no_verify_digests: Annotated[
        bool, typer.Option("--no-verify-digests", help="Read the tables without checking them against the inventory.")
    ] = False,
) -> None:
    """Summarize a card: identity, scope, episodes per agent and status, rules, drops."""
    from ..summary import render_text

    summary = run(_summary, card, not no_verify_digests)
    if format is InfoFormat.json:
        typer.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        typer.echo(printable(render_text(summary)), nl=False)


def _summary(path: Path, verify: bool) -> dict:
    from ..io.reader import open_card
    from ..summary import summarize

    card = open_card(path, verify=verify)
    card.verify_all(wait=False)  # hashed while the summary is read
    summary = summarize(card)
    card.verify_all()
    return summary


@app.command()
def recover(
    card: Annotated[Path, typer.Argument(help="Directory of a card whose writer stopped before closing.")],
    force: Annotated[bool, typer.Option(help="Recover even if the writing process seems alive.")] = False,
) -> None:
    """Finalize a card whose writer died: keep ended episodes, record open ones as cancelled."""
    from ..io.finalize import recover_card

    manifest = run(recover_card, card, force=force)
    cancelled = sum(d.count or 0 for d in manifest.drops if d.loss_class == "interrupted_run" and d.target == "episodes")
    typer.echo(
        f"recovered {card}: {manifest.tables.episodes.rows} episodes "
        f"({cancelled} recorded as cancelled), {manifest.tables.steps.rows} steps"
    )


@app.command()
def schemas(
    directory: Annotated[Path, typer.Argument(help="Where the schema files are (default: schemas).")] = Path("schemas"),
    write: Annotated[bool, typer.Option("--write", help="Regenerate the files from the models.")] = False,
) -> None:
    """Check (or with --write regenerate) the JSON Schemas generated from the models."""
    from ..model import schemas as schema_files

    code = run(schema_files.main, ["--write" if write else "--check", str(directory)])
    if code:
        raise typer.Exit(EXIT_INVALID)
    if not write:
        typer.echo(f"{directory}: schemas match the models")
