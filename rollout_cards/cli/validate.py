"""`rcard validate`: run every check on a card and print the report (text or JSON)."""

import contextlib
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from . import (
    ADDRESS_HELP,
    ENGINE_HELP,
    EXIT_INTERNAL,
    Engine,
    app,
    fail,
    paths_or_uris,
    printable,
    run,
    without_pandas,
)


class ReportFormat(StrEnum):
    text = "text"
    json = "json"
    github = "github"
    markdown = "markdown"


@app.command()
def validate(
    cards: Annotated[
        list[str],
        typer.Argument(callback=paths_or_uris,
                       help="Card directories, packed .rcard files or card URIs (s3://, gs://, file://); one or more."),
    ],
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
    ignore: Annotated[
        list[str] | None,
        typer.Option("--ignore", help="Leave findings of this code out of the verdict (listed as ignored); repeatable."),
    ] = None,
    engine: Annotated[Engine, typer.Option("--engine", help=ENGINE_HELP)] = Engine.local,
    address: Annotated[str | None, typer.Option("--address", help=ADDRESS_HELP)] = None,
) -> None:
    """Check a card: layout, manifest, integrity, tables, plan coverage, drops and rules.

    Exit code 0 when every card is valid (warnings allowed unless --strict), 1 when one is
    invalid, 2 on a usage error or an internal failure of the validator. --format github
    prints workflow annotations, --format markdown a job summary (docs/validation.md).
    """
    if engine is Engine.ray:  # before anything converts: Ray's driver uses pandas
        without_pandas.unblock()
    from ..validate import render_text
    from ..validate import validate as validate_card
    from ..validate.ci_output import (
        combined_exit,
        ignore_codes,
        render_github,
        render_json_many,
        render_markdown,
    )

    if address and engine is not Engine.ray:
        fail("--address names a Ray cluster: use it with --engine ray", EXIT_INTERNAL)
    if pubkey is not None and signature is not None and len(cards) > 1:
        fail("--signature names one file; with several cards each uses CARD.sig", EXIT_INTERNAL)
    with contextlib.ExitStack() as stack:
        if engine is Engine.ray and len(cards) > 1:  # one Ray session for every card
            from ..scale.ray_engine import ray_session

            run(stack.enter_context, ray_session(address))
        reports = []
        for card in cards:
            report = run(validate_card, card, replay=not no_replay, max_findings=max_findings, strict=strict,
                         public_key=pubkey, signature=signature, engine=engine.value, address=address)
            try:
                reports.append(ignore_codes(report, ignore or ()))
            except KeyError as exc:
                fail(f"--ignore: unknown finding code {exc.args[0]} (the codes are listed in docs/validation.md)",
                     EXIT_INTERNAL)

    if format is ReportFormat.json:
        text = render_json_many(reports)
    elif format is ReportFormat.github:
        text = render_github(reports)
    elif format is ReportFormat.markdown:
        text = render_markdown(reports)
    else:
        text = "".join(render_text(r) for r in reports)
    # Annotations are workflow commands by design (their data escaped by render_github).
    typer.echo(text if format in (ReportFormat.json, ReportFormat.github) else printable(text), nl=False)
    raise typer.Exit(combined_exit(reports))
