"""Render a `RescoreReport` as a text table, Markdown, CSV or JSON.

The table puts every rule's headline for the same group on adjacent rows (declared
rules first), then the paired differences of alternatives against declared rules,
the rank changes, and each rule's warnings once. JSON is `RescoreReport.to_dict()`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from ..display import csv_cell, markdown_cell, one_line, text_table
from .results import GroupResult, RescoreReport, format_value

__all__ = ["FORMATS", "render"]


def _pairs(mapping: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (mapping or {}).items())


def _excluded(r: GroupResult) -> str:
    parts = [f"{s} {n}" for s, n in r.excluded_by_status.items()]
    if r.n_missing_excluded:
        parts.append(f"missing {r.n_missing_excluded}")
    return ", ".join(parts) or "0"


def _interval_text(low: float | None, high: float | None, reason: str | None) -> str:
    if low is None or high is None:
        return reason or "undefined"
    return f"[{format_value(low)}, {format_value(high)}]"


def _result_rows(report: RescoreReport) -> list[list[str]]:
    order = {run.rule: i for i, run in enumerate(report.runs)}
    results = sorted(
        report.results,
        key=lambda r: (tuple(map(str, r.group.values())), order[r.rule], r.stratum is None),
    )
    rows = []
    for r in results:
        stratum = (
            _pairs(r.stratum)
            if r.stratum
            else ("pooled " + r.pooled["weights"] if r.pooled else "")
        )
        rows.append(
            [
                _pairs(r.group) or "(all)",
                r.rule,
                stratum,
                _statistic(r),
                r.display,
                r.method_label,
                str(r.n),
                _excluded(r),
                str(r.n_selected_out),
                f"{r.unit} ({r.interval.n_units})",
            ]
        )
    return rows


_RESULT_HEADER = [
    "group",
    "rule",
    "stratum",
    "statistic",
    "value",
    "interval",
    "n",
    "excluded",
    "selected out",
    "unit (n)",
]
_DIFF_HEADER = [
    "group",
    "rule",
    "against rule",
    "value",
    "value there",
    "difference",
    "paired interval",
    "p",
    "p adjusted",
    "unit (n)",
]
_RANK_HEADER = [
    "group",
    "rule",
    "rank",
    "against",
    "rank there",
    "value",
    "value there",
    "flip",
]
_RANKING_HEADER = ["rule", "rank", "rank interval", "group", "value", "tied set"]


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _statistic(r: Any) -> str:
    """The statistic, with the reduction that fed it (a best-of-k shows its k)."""
    reduce = r.reduce or {}
    if r.pooled and r.statistic != "mean":
        return f"{r.pooled['weights']}-weight mean of stratum {r.statistic}s"
    over = r.interval.details.get("statistic_over") if r.interval.details else None
    if over and not reduce:
        return over
    if not reduce:
        return r.statistic
    with_ = reduce.get("with", "")
    lo, hi = reduce.get("attempts_min"), reduce.get("attempts_max")
    if with_ == "max":
        attempts = f"{lo}..{hi}" if lo != hi else f"{hi}"
        return f"{r.statistic} of best-of-{attempts}"
    k = reduce.get("k")
    return f"{r.statistic} of {with_}" + (f" (k={k})" if k and with_.startswith("pass") else "")


def _difference_rows(report: RescoreReport) -> list[list[str]]:
    return [
        [
            _pairs(d.group) or "(all)",
            d.rule,
            d.against,
            format_value(d.value),
            format_value(d.against_value),
            format_value(d.difference) if d.interval.defined else "-",
            _interval_text(d.interval.low, d.interval.high, d.interval.reason),
            _p(d.p_value),
            _p(d.p_adjusted),
            f"{d.unit or '-'} ({d.n_units})",
        ]
        for d in report.differences
    ]


def _comparison_rows(report: RescoreReport) -> list[list[str]]:
    return [
        [
            _pairs(c.group),
            c.rule,
            _pairs(c.baseline),
            format_value(c.difference),
            _interval_text(c.interval.low, c.interval.high, c.interval.reason),
            _p(c.p_value),
            _p(c.p_adjusted),
            f"{c.unit} ({c.n_units})",
        ]
        for run in report.runs
        for c in run.comparisons
    ]


def _ranking_rows(report: RescoreReport) -> list[list[str]]:
    rows = []
    for ranking in report.rankings:
        tied = {}
        for i, members in enumerate(ranking.tied_sets):
            for g in members:
                tied[_pairs(g)] = f"{i + 1}" + (f" ({len(members)} tied)" if len(members) > 1 else "")
        for e in ranking.entries:
            low, high = e["rank_low"], e["rank_high"]
            interval = "-" if low is None else (f"{low}" if low == high else f"{low}-{high}")
            rows.append(
                [
                    ranking.rule + ("" if ranking.higher_is_better else " (lower is better)"),
                    str(e["rank"]),
                    interval,
                    _pairs(e["group"]) or "(all)",
                    format_value(e["value"]),
                    tied.get(_pairs(e["group"]), "-"),
                ]
            )
    return rows


def _rank_rows(report: RescoreReport) -> list[list[str]]:
    return [
        [
            _pairs(c.group) or "(all)",
            c.rule,
            str(c.rank),
            c.against,
            str(c.against_rank),
            format_value(c.value),
            format_value(c.against_value),
            c.noise,
        ]
        for c in report.rank_changes
    ]


def _warnings(report: RescoreReport) -> list[str]:
    out: list[str] = []
    for run in report.runs:
        # A warning every result of the rule shares is the rule's; others name their groups.
        groups: dict[str, list[str]] = {}
        for r in run.results:
            for w in r.warnings:
                groups.setdefault(w, []).append(r.label)
        for text, labels in groups.items():
            labels = list(dict.fromkeys(labels))
            where = "" if len(labels) == len({r.label for r in run.results}) else f" ({'; '.join(labels)})"
            out.append(f"{run.rule}{where}: {text}")
    for d in report.differences:
        out += [f"{d.rule} vs {d.against} ({_pairs(d.group)}): {w}" for w in d.warnings]
    return list(dict.fromkeys(out))


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(text_table(header, rows))


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _document(
    report: RescoreReport,
    table: Callable[[list[str], list[list[str]]], str],
    heading: Callable[[str], str],
    field: Callable[[object], str],
) -> str:
    """The report as lines; `field` shows a value from the card (a name, a path, a warning that
    quotes them) on one line of the format (one_line for text, markdown_cell for Markdown)."""
    seed = "" if report.seed is None else f", seed {report.seed}"
    rules = ", ".join(
        f"{field(run.rule)} v{field(run.version)} ({run.kind}, {field(report.sources.get(run.rule, 'card'))})"
        for run in report.runs
    )
    parts = [heading(f"rescore of {field(report.card)} ({field(report.card_path)}{seed})"), f"rules: {rules}", ""]
    if not report.runs:
        parts += ["no rules: the card declares none; pass an alternative with --rule FILE", ""]
        return "\n".join(parts)
    parts += [table(_RESULT_HEADER, _result_rows(report)), ""]
    diffs = _difference_rows(report)
    if diffs:
        parts += [
            heading("differences: alternative - declared, paired on shared units"),
            table(_DIFF_HEADER, diffs),
            "",
        ]
    comparisons = _comparison_rows(report)
    if comparisons:
        header = ["group", "rule", "baseline", "difference", "paired interval", "p", "p adjusted", "unit (n)"]
        parts += [heading("group comparisons (compare)"), table(header, comparisons), ""]
    if report.adjust and (diffs or comparisons):
        a = report.adjust
        name = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no"}[a["method"]]
        parts += [f"p adjusted: {name} adjustment over {a['family']}", ""]
    ranks = _rank_rows(report)
    if ranks:
        parts += [
            heading("rank changes"),
            table(_RANK_HEADER, ranks),
            "flip: 'beyond the noise' when the paired interval of every swapped pair excludes "
            "zero under both rules, else 'inside the noise'",
            "",
        ]
    elif diffs:
        parts += ["no rank changes", ""]
    rankings = _ranking_rows(report)
    if rankings:
        level = report.rankings[0].details.get("level", 0.95)
        parts += [
            heading(f"ranks ({level:.0%} bootstrap rank intervals over the unit; tied sets from pairwise intervals)"),
            table(_RANKING_HEADER, rankings),
            # Why an interval is '-' (strata, too many groups, a statistic without one), per rule.
            *(field(f"{r.rule}: rank intervals {r.details['rank_interval']}") for r in report.rankings
              if str(r.details.get("rank_interval", "")).startswith("not computed")),
            "",
        ]
    mismatched = [c for c in report.reported if not c.ok]
    if report.reported:
        verdict = (f"{len(mismatched)} of {len(report.reported)} published numbers do NOT match their "
                   "recomputation (rcard validate reports reported-mismatch)" if mismatched
                   else f"all {len(report.reported)} published numbers match their recomputation")
        parts += [heading("reported numbers"), verdict, *(f"- {field(c.message)}" for c in mismatched), ""]
    warnings = _warnings(report)
    if warnings:
        parts += [heading("warnings"), *(f"- {field(w)}" for w in warnings), ""]
    return "\n".join(parts)


def _csv(report: RescoreReport) -> str:
    buffer = io.StringIO()
    columns = [
        "record",
        "rule",
        "against",
        "group",
        "stratum",
        "statistic",
        "value",
        "ci_low",
        "ci_high",
        "method",
        "level",
        "unit",
        "n_units",
        "n",
        "n_episodes",
        "n_excluded",
        "excluded_by_status",
        "n_selected_out",
        "difference",
        "rank",
        "against_rank",
        "p_value",
        "p_adjusted",
        "display",
        "warnings",
    ]
    table = csv.DictWriter(buffer, columns, lineterminator="\n")
    table.writeheader()

    def write(row: dict[str, Any]) -> None:  # text cells (names, ids from a package) inert in a spreadsheet
        table.writerow({k: csv_cell(v) for k, v in row.items()})

    for r in report.results:
        write(
            {
                "record": "result",
                "rule": r.rule,
                "group": _pairs(r.group),
                "stratum": _pairs(r.stratum) if r.stratum else ("pooled" if r.pooled else ""),
                "statistic": r.statistic,
                "value": r.value,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "method": r.interval.method,
                "level": r.interval.level,
                "unit": r.unit,
                "n_units": r.interval.n_units,
                "n": r.n,
                "n_episodes": r.n_episodes,
                "n_excluded": r.n_excluded,
                "excluded_by_status": _pairs(r.excluded_by_status),
                "n_selected_out": r.n_selected_out,
                "display": r.display,
                "warnings": " | ".join(r.warnings),
            }
        )
    for c in report.comparisons:
        d = c.to_dict()
        write(
            {
                "record": f"{d['type']}_difference",
                "rule": d["rule"],
                "against": d.get("against") or _pairs(d.get("baseline")),
                "group": _pairs(d["group"]),
                "statistic": d["statistic"],
                "difference": d["difference"],
                "ci_low": d["ci_low"],
                "ci_high": d["ci_high"],
                "method": d["interval"]["method"],
                "level": d["interval"]["level"],
                "unit": d["interval"]["unit"],
                "n_units": d["n_units"],
                "p_value": d["p_value"],
                "p_adjusted": d["p_adjusted"],
                "warnings": " | ".join(d["warnings"]),
            }
        )
    for k in report.rank_changes:
        write(
            {
                "record": "rank_change",
                "rule": k.rule,
                "against": k.against,
                "group": _pairs(k.group),
                "value": k.value,
                "rank": k.rank,
                "against_rank": k.against_rank,
            }
        )
    return buffer.getvalue()


def _json(report: RescoreReport) -> str:
    return json.dumps(report.to_dict(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


FORMATS: dict[str, Callable[[RescoreReport], str]] = {
    "table": lambda r: _document(r, _text_table, lambda t: f"== {t}", one_line),
    "markdown": lambda r: _document(r, _md_table, lambda t: f"## {t}\n", markdown_cell),
    "csv": _csv,
    "json": _json,
}


def render(report: RescoreReport, format: str = "table") -> str:
    """The report in `format`: table, markdown, csv or json."""
    try:
        return FORMATS[format](report)
    except KeyError:
        raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}") from None
