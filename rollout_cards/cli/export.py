"""`rcard export`: a card's results in other tools' formats."""

from pathlib import Path
from typing import Annotated

import typer

from ..display import one_line
from . import EXIT_INVALID, app, fail, printable, run

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


@export_app.command("eee")
def eee(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.")],
    out: Annotated[Path, typer.Option("--output", "--out", "-o", help="Directory to write EEE's data/ layout into.")],
    rule: Annotated[list[str] | None, typer.Option("--rule", "-r", help="A declared rule id or a rule file "
                                                   "(repeat; default: every rule the card declares).")] = None,
    organization: Annotated[str | None, typer.Option(help="EEE source_organization_name (default: the card's "
                                                     "first author, else unknown).")] = None,
    relationship: Annotated[str, typer.Option(help="EEE evaluator_relationship: first_party, third_party, "
                                              "collaborative, other.")] = "other",
    developer: Annotated[str | None, typer.Option(help="Model developer for agents named without a 'developer/' "
                                                  "prefix.")] = None,
    collection: Annotated[str | None, typer.Option(help="Datastore collection (default: the harness name, else the "
                                                   "card id).")] = None,
    instances: Annotated[bool, typer.Option("--instances/--no-instances", help="Write the instance JSONL "
                                            "files beside the aggregates.")] = True,
    schemas: Annotated[Path | None, typer.Option(help="Directory holding EEE's eval.schema.json and "
                                                 "instance_level_eval.schema.json: validate what was written "
                                                 "(exit 1 listing every problem).")] = None,
) -> None:
    """The card's rule results in the Every Eval Ever format (schema 0.3.0): one aggregate JSON
    per agent with each headline's n, interval and its method, and instance JSONL records, in
    EEE's data/<collection>/<developer>/<model>/ layout (docs/export.md)."""
    from ..export.eee import export_eee, validate_eee
    from ..io.reader import open_card

    opened = run(open_card, card)
    result = run(export_eee, opened, out, rules=rule or None, organization=organization, relationship=relationship,
                 developer=developer, collection=collection, instances=instances)
    typer.echo(f"wrote {len(result.logs)} aggregate file(s) with {result.results} result(s) and "
               f"{result.instances} instance record(s) in {len(result.samples)} file(s) under {out}")
    for reason in result.skipped:
        typer.echo(printable(f"  left out: {one_line(reason)}"))  # it quotes the card's group names
    if schemas is not None:
        problems = run(validate_eee, out, schemas)
        if problems:
            shown = "\n".join(f"  {p}" for p in problems[:50])
            more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
            fail(f"the export does not validate against the EEE schemas in {schemas}:\n{shown}{more}", EXIT_INVALID)
        typer.echo(f"valid against the EEE schemas in {schemas}")
