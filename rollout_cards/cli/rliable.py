"""`rcard rliable`: rliable's statistics (IQM, optimality gap, profiles, probability of
improvement) of a rule's scores, groups as methods, with stratified-bootstrap intervals."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..display import one_line
from . import app, finite, printable, run

if TYPE_CHECKING:
    from ..rules.runs_tasks import RunsTasksReport


def _pairs(mapping: dict) -> str:
    """A group as one line: its names come from the card (display.one_line)."""
    return one_line(", ".join(f"{k}={v}" for k, v in mapping.items())) or "(all)"


def _text(report: "RunsTasksReport") -> str:
    from ..rules.results import format_value

    d = report.details
    lines = [
        f"== {one_line(report.rule)} on {one_line(report.card)}: {report.runs} x {report.tasks} matrices, "
        f"{d['level']:.0%} stratified bootstrap ({d['resampled']}; {d['resamples']} resamples, seed {d['seed']})"
    ]
    for g in report.groups:
        lines.append(f"{_pairs(g['group'])} ({g['runs']} runs x {g['tasks']} tasks)")
        for name, s in g["statistics"].items():
            lines.append(f"  {one_line(name)}: {format_value(s['value'])} [{format_value(s['low'])}, {format_value(s['high'])}]")
        for p in g["profile"]:
            lines.append(f"  fraction of scores > {p['tau']:g}: {format_value(p['fraction_above'])} "
                         f"[{format_value(p['low'])}, {format_value(p['high'])}]")
    for p in report.improvement:
        if p["probability"] is None:
            lines.append(f"P({_pairs(p['group'])} > {_pairs(p['over'])}): {one_line(p['reason'])}")
            continue
        lines.append(f"P({_pairs(p['group'])} > {_pairs(p['over'])}) = {format_value(p['probability'])} "
                     f"[{format_value(p['low'])}, {format_value(p['high'])}]")
    return "\n".join(lines) + "\n"


@app.command()
def rliable(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.")],
    rule: Annotated[str, typer.Option("--rule", "-r", help="A rule file, or the id of a rule the card declares.")],
    runs: Annotated[str, typer.Option("--runs", help="Episode column naming the run (seed).")] = "run_id",
    tasks: Annotated[str, typer.Option("--tasks", help="Episode column naming the task.")] = "task_id",
    tau: Annotated[list[float] | None, typer.Option("--tau", help="Profile threshold; repeat for more.", callback=finite)] = None,
    gamma: Annotated[float, typer.Option("--gamma", help="Target of the optimality gap.", callback=finite)] = 1.0,
    task_bootstrap: Annotated[bool, typer.Option("--task-bootstrap", help="Resample tasks too.")] = False,
    resamples: Annotated[int, typer.Option("--resamples", min=2, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the numpy Generator.")] = 0,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """rliable's aggregates, performance profiles and probability of improvement, seeded,
    with the task draw shared by every group (pairing kept)."""
    if format not in ("table", "json"):
        raise typer.BadParameter("use table or json", param_hint="--format")
    from ..rules.runs_tasks import runs_tasks_view

    report = run(
        runs_tasks_view, card, rule, runs=runs, tasks=tasks, taus=tuple(tau or (0.25, 0.5, 0.75)),
        gamma=gamma, task_bootstrap=task_bootstrap, resamples=resamples, seed=seed,
    )
    if format == "json":
        typer.echo(json.dumps(report.to_dict(), indent=2, allow_nan=False, ensure_ascii=False))
    else:
        typer.echo(printable(_text(report)), nl=False)
