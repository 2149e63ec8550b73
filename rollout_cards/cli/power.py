"""`rcard power`: units needed for a comparison, from the card's own variance."""

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..display import one_line, text_table
from . import app, finite, printable, run

if TYPE_CHECKING:
    from ..rules.power import PowerReport


class PowerFormat(StrEnum):
    table = "table"
    json = "json"


def _pairs(mapping: dict) -> str:
    """A group as one line: its names come from the card (display.one_line)."""
    return one_line(", ".join(f"{k}={v}" for k, v in mapping.items())) or "(all)"


def _table(report: "PowerReport") -> str:
    from ..rules.results import format_value

    lines = [f"== power of {one_line(report.rule)} on {one_line(report.card)}"]
    header = ["group", "baseline", "design", "se", "mde", "delta", "n units", "n units needed"]
    rows = [
        [
            _pairs(r.group),
            _pairs(r.baseline),
            r.design,
            format_value(r.se),
            format_value(r.mde),
            f"{format_value(r.delta)} ({r.delta_source})",
            f"{r.n_units} {r.unit}",
            "-" if r.n_units_needed is None else str(r.n_units_needed),
        ]
        for r in report.results
    ]
    if report.results:
        r0 = report.results[0]
        lines.append(f"alpha {r0.alpha}, power {r0.power}; {r0.method}")
    lines += text_table(header, rows)
    lines += [f"{_pairs(r.group)}: {one_line(r.note)}" for r in report.results if r.note]
    lines += ["", "== variance within and between units (SE with K attempts per unit)"]
    for v in report.variance:
        ks = ", ".join(f"K={k}: {format_value(se)}" for k, se in v["se_by_k"].items()) or (
            "one observation per unit: the split needs K >= 2"
        )
        lines.append(
            f"{_pairs(v['group'])}: {v['n_units']} {one_line(v['unit'])}, mean K {v['k_mean']:.2f}, "
            f"within {format_value(v['within'])}, between {format_value(v['between'])}, "
            f"SE now {format_value(v['se'])}; {ks}"
        )
    return "\n".join(lines) + "\n"


@app.command()
def power(
    card: Annotated[Path, typer.Argument(help="Card directory or packed .rcard file.")],
    rule: Annotated[str, typer.Option("--rule", "-r", help="A rule file, or the id of a rule the card declares.")],
    delta: Annotated[
        float | None, typer.Option("--delta", help="True difference to detect (default: the observed one).",
                                   callback=finite)
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="Two-sided level.")] = 0.05,
    power_: Annotated[float, typer.Option("--power", min=0.0, max=1.0, help="Target power.")] = 0.8,
    format: Annotated[PowerFormat, typer.Option("--format", "-f", help="Output format.")] = PowerFormat.table,
) -> None:
    """Standard error of each group difference, the minimum detectable effect at the card's
    n, the units per group needed to detect --delta, and the within/between-unit split."""
    from ..rules.power import power_analysis

    report = run(power_analysis, card, rule, delta=delta, alpha=alpha, power=power_)
    if format is PowerFormat.json:
        typer.echo(json.dumps(report.to_dict(), indent=2, allow_nan=False, ensure_ascii=False))
    else:
        typer.echo(printable(_table(report)), nl=False)
