"""`rcard rescore`: a card's declared rules and alternative rules side by side."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..rules.render import render
from ..rules.rescore import rescore as rescore_card
from . import app, run


class Adjustment(StrEnum):
    holm = "holm"
    bh = "bh"
    none = "none"


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
    against: Annotated[
        list[str] | None,
        typer.Option("--against", help="Compare alternatives only with this declared rule id; repeat for more."),
    ] = None,
    pair_on: Annotated[
        list[str] | None,
        typer.Option("--pair-on", help="Column(s) rule differences pair on (default: the coarser unit)."),
    ] = None,
    adjust: Annotated[
        Adjustment, typer.Option("--adjust", help="p-value adjustment over every printed comparison.")
    ] = Adjustment.holm,
) -> None:
    """Replay the card's rules and alternative rules on the same episodes: headlines per
    group, paired differences against the declared rules (with p-values adjusted as one
    family), rank changes (flips inside the noise labelled), and ranks with intervals."""
    report = run(
        rescore_card,
        card,
        list(rule or []),
        seed=seed,
        against=list(against or []) or None,
        pair_on=list(pair_on or []) or None,
        adjust=adjust.value,
    )
    typer.echo(render(report, format.value), nl=False)
