"""`rcard report`: one self-contained HTML page of a card, its rules and its episodes."""

from pathlib import Path
from typing import Annotated

import typer

from . import app, run


@app.command()
def report(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    rule: Annotated[
        list[Path] | None,
        typer.Option("--rule", "-r", help="An alternative rule file (YAML); repeat for more.", show_default=False),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, help="Seed of every bootstrap and of the episode sample.", show_default=False),
    ] = None,
    episodes: Annotated[
        int, typer.Option("--episodes", min=0, max=5000, help="Most episodes the browser embeds (a sample, said so).")
    ] = 120,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Validate the card for the integrity panel.")
    ] = True,
    pubkey: Annotated[
        Path | None, typer.Option("--pubkey", help="Also verify the detached signature with this public key.", show_default=False)
    ] = None,
    signature: Annotated[
        Path | None, typer.Option("--signature", help="The signature file (default: CARD.sig).", show_default=False)
    ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing output file.")] = False,
) -> None:
    """Write an HTML report: forest plots of every rule, paired differences, rank changes,
    accounting, the card's scope and drops, and an episode browser; works offline from file://.

    Example: rcard report fixtures/cards/synthetic -r fixtures/rules/errors_excluded.yaml -o report.html
    """
    from ..report import SampleLimits, build_report, check_target, write_report

    run(check_target, output, overwrite=overwrite, card=card)
    html_text = run(
        build_report, card, list(rule or []), seed=seed, limits=SampleLimits(episodes=episodes),
        check=check, public_key=pubkey, signature=signature,
    )
    path = run(write_report, html_text, output, overwrite=overwrite, card=card)
    typer.echo(f"wrote {path} ({len(html_text.encode('utf-8')):,} bytes)")
