"""`rcard rescore`: a card's declared rules and alternative rules side by side; `rcard rules`:
the rule library."""

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from . import ADDRESS_HELP, ENGINE_HELP, Engine, app, paths_or_uris, printable, run, without_pandas


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
    card: Annotated[str, typer.Argument(callback=paths_or_uris, help="Card directory, packed .rcard file or card URI (s3://, gs://, file://).")],
    rule: Annotated[
        list[Path] | None,
        typer.Option(
            "--rule",
            "-r",
            help="An alternative rule file (YAML) or lib:ID for a library rule (rcard rules); repeat for more.",
        ),
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
    no_verify_digests: Annotated[
        bool, typer.Option("--no-verify-digests", help="Read the tables without checking them against the inventory.")
    ] = False,
    engine: Annotated[
        Engine, typer.Option("--engine", help=ENGINE_HELP)
    ] = Engine.local,
    address: Annotated[
        str | None, typer.Option("--address", help=ADDRESS_HELP)
    ] = None,
) -> None:
    """Replay the card's rules and alternative rules on the same episodes: headlines per
    group, paired differences against the declared rules (with p-values adjusted as one
    family), rank changes (flips inside the noise labelled), and ranks with intervals."""
    if engine is Engine.ray:  # before anything converts: Ray's driver uses pandas
        without_pandas.unblock()
    from ..rules.render import render

    report = run(
        _rescore,
        card,
        list(rule or []),
        not no_verify_digests,
        seed=seed,
        against=list(against or []) or None,
        pair_on=list(pair_on or []) or None,
        adjust=adjust.value,
        engine=engine.value,
        address=address,
    )
    text = render(report, format.value)
    typer.echo(text if format.value == "json" else printable(text), nl=False)


class RulesFormat(StrEnum):
    table = "table"
    json = "json"


@app.command("rules")
def rules(
    format: Annotated[RulesFormat, typer.Option("--format", "-f", help="Output format.")] = RulesFormat.table,
    show: Annotated[
        str | None, typer.Option("--show", help="Print one library rule's YAML (an id, with or without lib:).")
    ] = None,
) -> None:
    """The rule library: rules papers and harnesses regrade with, usable anywhere a
    rule file is (`rcard rescore CARD --rule lib:tau_bench.write_set`)."""
    from ..rules.library import library_rule, library_rules, render_library, render_rule_yaml

    entries = run(library_rules)
    if show is not None:
        entry = run(library_rule, show)
        typer.echo(render_rule_yaml(entry), nl=False)
        return
    typer.echo(render_library(entries, format.value), nl=False)


def _rescore(path: str, rules: list[Path], verify: bool, **options: Any):
    from ..errors import RuleError
    from ..io.reader import open_card
    from ..rules.rescore import rescore as rescore_card

    if options.get("address") and options.get("engine") != "ray":
        raise RuleError("--address names a Ray cluster: use it with --engine ray", key="--address")
    card = open_card(path, verify=verify)
    if options.get("engine") != "ray":  # on Ray the workers hash the steps parts
        card.verify_all(wait=False)  # hashed while the rules run; nothing is printed before it is done
    report = rescore_card(card, rules, **options)
    card.verify_all()
    return report
