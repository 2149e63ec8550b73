"""`rcard rescore`: a card's declared rules and alternative rules side by side."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..rules.render import render
from ..rules.rescore import rescore as rescore_card
from . import app, run


class RescoreFormat(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"
    csv = "csv"


@app.command()
def rescore(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.")],
    rule: Annotated[
        list[Path] | None,
        typer.Option("--rule", "-r", help="An alternative rule file (YAML); repeat for more."),
    ] = None,
    format: Annotated[
        RescoreFormat, typer.Option("--format", "-f", help="Output format.")
    ] = RescoreFormat.table,
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, help="Seed of every bootstrap (overrides the rules' seeds)."),
    ] = None,
) -> None:
    """Replay the card's rules and alternative rules on the same episodes: headlines per
    group, paired differences against the declared rules, and rank changes."""
    report = run(rescore_card, card, list(rule or []), seed=seed)
    typer.echo(render(report, format.value), nl=False)
