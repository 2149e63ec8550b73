"""Validation output for CI systems: GitHub workflow annotations, a Markdown job summary,
several cards per call, and findings the caller chose to ignore.

The report objects are the validator's own (`Report`); this module only filters and lays
them out. Paths in annotations are prefixed by the card's path so GitHub places them in
the repository; YAML line numbers of rule findings come from the finding's message
("…, line 28: …"), which is where the rule loader puts them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from ..display import escape_controls, markdown_cell
from .report import CODES, Report, Severity

__all__ = ["combined_exit", "ignore_codes", "render_github", "render_markdown", "render_json_many"]

_LINE = re.compile(r"\bline (\d{1,9})\b")


def ignore_codes(report: Report, codes: Iterable[str]) -> Report:
    """`report` without the findings of `codes` (counted in `ignored`), its verdict recomputed.

    Raises KeyError naming a code that is not in the catalogue (a typo must not silently
    ignore nothing)."""
    wanted = set(codes)
    unknown = sorted(c for c in wanted if c not in CODES)
    if unknown:
        raise KeyError(", ".join(unknown))
    if not wanted:
        return report
    if "internal-error" in wanted:
        raise KeyError("internal-error (a failure of the validator cannot be ignored)")
    kept = [f for f in report.findings if f.code not in wanted]
    ignored = {c: 0 for c in sorted(wanted)}
    for f in report.findings:
        if f.code in wanted:
            ignored[f.code] += 1
    omitted = {}
    for code, n in report.omitted.items():
        if code in wanted:
            ignored[code] += n
        else:
            omitted[code] = n
    counts = {s: 0 for s in Severity}
    for f in kept:
        counts[f.severity] += 1
    for code, n in omitted.items():
        counts[CODES[code].severity] += n
    valid = counts[Severity.ERROR] == 0 and not (report.strict and counts[Severity.WARNING])
    outcome = "internal-error" if report.outcome == "internal-error" else ("valid" if valid else "invalid")
    return report.model_copy(update={
        "findings": kept, "omitted": omitted, "counts": counts, "valid": valid, "outcome": outcome,
        "ignored": ignored,
    })


def combined_exit(reports: Sequence[Report]) -> int:
    """2 if any validation failed internally, else 1 if any card is invalid, else 0."""
    if any(r.outcome == "internal-error" for r in reports):
        return 2
    return 0 if all(r.valid for r in reports) else 1


def _escape_data(text: str) -> str:
    # The runner's own escapes (actions/toolkit escapeData); other controls as \\xNN so a
    # package's ESC sequences do not colour or clear the log.
    return escape_controls(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def render_github(reports: Sequence[Report]) -> str:
    """GitHub Actions workflow commands: one annotation per finding, one notice per card."""
    lines = []
    for report in reports:
        base = report.card.rstrip("/")
        for f in report.findings:
            props = [f"title={_escape_property(f'rcard {f.code}')}"]
            where = f.location.file
            if where:
                props.insert(0, f"file={_escape_property(f'{base}/{where}')}")
                match = _LINE.search(f.message) if where.endswith((".yaml", ".yml")) else None
                if match:
                    props.insert(1, f"line={match.group(1)}")
            detail = str(f.location) if f.location.pointer or f.location.row is not None else ""
            message = f"{f.message}" + (f" ({detail})" if detail else "")
            lines.append(f"::{_LEVEL[f.severity]} {','.join(props)}::{_escape_data(message)}")
        for code, n in report.omitted.items():
            lines.append(f"::warning title={_escape_property('rcard ' + code)}::"
                         f"{_escape_data(f'{base}: {n} more {code} finding(s) not listed')}")
        verdict = report.outcome.upper()
        counts = ", ".join(f"{n} {s.value}" for s, n in report.counts.items())
        ignored = f"; ignored: {', '.join(f'{c} ({n})' for c, n in report.ignored.items())}" if report.ignored else ""
        level = "notice" if report.valid else "error"
        lines.append(f"::{level} title=rcard validate::{_escape_data(f'{base}: {verdict} ({counts}){ignored}')}")
    return "\n".join(lines) + "\n"


def render_markdown(reports: Sequence[Report]) -> str:
    """A job-summary table (append to $GITHUB_STEP_SUMMARY), then each card's findings."""
    out = ["## rcard validate", "", "| card | verdict | errors | warnings | info | ignored |", "|---|---|---|---|---|---|"]
    for r in reports:
        ignored = ", ".join(f"{c} ({n})" for c, n in r.ignored.items()) or "—"
        mark = "✅ valid" if r.valid else ("⚠️ internal error" if r.outcome == "internal-error" else "❌ invalid")
        out.append(f"| {markdown_cell(r.card)} | {mark} | {r.counts[Severity.ERROR]} | {r.counts[Severity.WARNING]} | "
                   f"{r.counts[Severity.INFO]} | {markdown_cell(ignored)} |")
    out.append("")
    for r in reports:
        if not r.findings and not r.omitted:
            continue
        out += [f"### {markdown_cell(r.card)}", "", "| severity | code | where | message |", "|---|---|---|---|"]
        out += [f"| {f.severity.value} | `{f.code}` | {markdown_cell(f.location)} | {markdown_cell(f.message)} |" for f in r.findings]
        out += [f"| | `{c}` | | {n} more not listed |" for c, n in r.omitted.items()]
        out.append("")
    return "\n".join(out) + "\n"


def render_json_many(reports: Sequence[Report]) -> str:
    """One card: its report as always; several: {"reports": [...]} in the order given."""
    if len(reports) == 1:
        data = reports[0].to_json_dict()
    else:
        data = {"format": "rollout-card-reports/0.1", "reports": [r.to_json_dict() for r in reports]}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
