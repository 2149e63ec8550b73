"""`rcard export`: a card's results in other tools' formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import app, run

export_app = typer.Typer(help="Write a card's results in other tools' formats.", no_args_is_help=True)
app.add_typer(export_app, name="export")


@export_app.command("inspect-scores")
def inspect_scores(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.")],
    rule: Annotated[str, typer.Option("--rule", "-r", help="A declared rule id of the card, or a rule file (YAML).")],
    out: Annotated[Path, typer.Option("--output", "--out", "-o", help="Scores file: .jsonl (JSON Lines) or .json.")],
) -> None:
    """A rule's per-sample scores as Inspect's precomputed_scores scorer reads them ({id, epoch,
    value, metadata}); attach them with `inspect score LOG --scorer precomputed_scores -S scores=FILE`."""
    from ..export import export_inspect_scores
    from ..io.reader import open_card

    opened = run(open_card, card)
    n = run(export_inspect_scores, opened, rule, out)
    typer.echo(f"wrote {n} score record(s) of rule {rule} to {out}")
