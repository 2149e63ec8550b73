"""`rcard validate`: run every check on a card and print the report (text or JSON)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..validate import render_json, render_text
from ..validate import validate as validate_card
from . import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, app, run

_EXIT = {"valid": EXIT_OK, "invalid": EXIT_INVALID, "internal-error": EXIT_INTERNAL}


class ReportFormat(StrEnum):
    text = "text"
    json = "json"


@app.command()
def validate(
    card: Annotated[Path, typer.Argument(exists=True, help="Card directory or packed .rcard file.")],
    format: Annotated[ReportFormat, typer.Option("--format", "-f", help="Report format.")] = ReportFormat.text,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings make the card invalid.")] = False,
    no_replay: Annotated[bool, typer.Option("--no-replay", help="Do not recompute reported numbers.")] = False,
    max_findings: Annotated[
        int | None, typer.Option("--max-findings", min=1, help="List at most N findings per code (the rest are counted).")
    ] = None,
    pubkey: Annotated[
        Path | None, typer.Option("--pubkey", help="Also verify the card's detached signature with this public key.")
    ] = None,
    signature: Annotated[
        Path | None, typer.Option("--signature", help="The signature file (default: <card>.sig).")
    ] = None,
) -> None:
    """Check a card: layout, manifest, integrity, tables, plan coverage, drops and rules.

    Exit code 0 when valid (warnings allowed unless --strict), 1 when invalid, 2 on a
    usage error or an internal failure of the validator.
    """
    report = run(validate_card, card, replay=not no_replay, max_findings=max_findings, strict=strict,
                 public_key=pubkey, signature=signature)
    typer.echo(render_json(report) if format is ReportFormat.json else render_text(report), nl=False)
    raise typer.Exit(_EXIT[report.outcome])
