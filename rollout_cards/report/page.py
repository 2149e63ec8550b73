"""The HTML page of `rcard report`: one self-contained file, safe to open from `file://`.

Charts are static SVG drawn in Python (`svg.py`); the only script is the episode browser,
inline, allowed by its sha256 in a Content-Security-Policy that forbids every other
script, network access and plugin — so even a value that escaped escaping could not run.
Package values reach the page as escaped text, or as JSON in a non-executable
`<script type="application/json">` block that the browser script reads with JSON.parse and
shows with `textContent`, never as HTML.
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources
from typing import Any

from ..rules.results import GroupResult, RescoreReport, format_value
from . import svg
from .data import ReportData
from .svg import ForestRow, esc

__all__ = ["render_html"]


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text("utf-8")


def _sha256(text: str) -> str:
    """The CSP source expression allowing exactly this inline script or style."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _json_block(data: Any) -> str:
    """JSON that cannot close its <script> element or start markup inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _kv_table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(f"<tr><th scope='row'>{esc(k)}</th><td>{esc(_plain(v))}</td></tr>" for k, v in rows)
    return f"<table class='kv'>{cells}</table>"


def _plain(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items()) or "—"
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value) or "—"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]], cls: str = "grid") -> str:
    head = "".join(f"<th scope='col'>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(_plain(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{esc(cls)}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _excluded(r: GroupResult) -> str:
    parts = [f"{k} {v}" for k, v in r.excluded_by_status.items() if v]
    if r.n_missing_excluded:
        parts.append(f"missing score {r.n_missing_excluded}")
    return ", ".join(parts) or "none"


def _hover(r: GroupResult) -> str:
    return (
        f"{r.rule} · {r.label}: {r.display}; statistic {r.statistic}; interval {r.method_label}; "
        f"n {r.n} over {r.n_episodes} episodes; unit {r.unit} ({r.interval.n_units} units); "
        f"excluded: {_excluded(r)}; selected out {r.n_selected_out}"
        + (f"; warnings: {' | '.join(r.warnings)}" if r.warnings else "")
    )


def _note(r: GroupResult) -> str:
    return f"{r.display} · {r.method_label} · n {r.n}, {r.interval.n_units} {r.unit}"


def _row(r: GroupResult, label: str, series: int) -> ForestRow:
    low, high = (r.ci_low, r.ci_high) if r.interval.defined else (None, None)
    return ForestRow(label=label, value=r.value, low=low, high=high, note=_note(r), hover=_hover(r), series=series)


def _headline_section(report: RescoreReport) -> str:
    """Declared rules and alternatives side by side: one forest row per (group, rule)."""
    out = ["<section id='headlines'><h2>Headlines: declared rules and alternatives</h2>"]
    out.append(
        "<p class='lede'>Each row is one rule's statistic for one group, with its interval. "
        "Hover a row for n, the independent unit and its count, the interval method and what "
        "was excluded. Declared rules are the card's own; alternatives come from <code>--rule</code>.</p>"
    )
    out.append("<div class='panels'>")
    for run in report.runs:
        source = report.sources.get(run.rule, "card")
        rows = [_row(head, head.label, 0 if source == "card" else 1) for head in run.headlines().values()]
        title = f"{run.rule} — {'declared' if source == 'card' else 'alternative'}: {run.statistic}"
        out.append(f"<div class='panel {esc(source)}'>" + svg.forest(rows, title=title) + "</div>")
    out.append("</div>")
    out.append(_results_table(report))
    out.append("</section>")
    return "".join(out)


def _results_table(report: RescoreReport) -> str:
    rows = [
        [
            r.rule, report.sources.get(r.rule, "card"), r.label, r.statistic, r.display, r.method_label,
            r.n, r.n_episodes, f"{r.interval.n_units} {r.unit}", _excluded(r), r.n_selected_out,
            " | ".join(r.warnings),
        ]
        for r in report.results
    ]
    return "<details><summary>Every number as a table</summary>" + _table(
        ["rule", "source", "group", "statistic", "value [interval]", "method", "n", "episodes",
         "units", "excluded", "selected out", "warnings"],
        rows,
    ) + "</details>"


def _strata_section(report: RescoreReport) -> str:
    panels = []
    for i, run in enumerate(report.runs):
        strata = [r for r in run.results if r.stratum is not None]
        if not strata:
            continue
        rows = [_row(r, r.label, i) for r in run.results]
        panels.append(svg.forest(rows, title=f"{run.rule}: per stratum and pooled"))
    if not panels:
        return ""
    return "<section id='strata'><h2>Per stratum</h2>" + "".join(panels) + "</section>"


def _difference_section(report: RescoreReport) -> str:
    """One panel per compared pair (alternative − declared rule, and each rule's own
    group comparisons): rows of one panel share a scale, panels do not."""
    panels: dict[str, list[ForestRow]] = {}
    for d in report.differences:
        defined = d.interval.defined
        label = ", ".join(f"{k}={v}" for k, v in d.group.items()) or "(all)"
        note = (
            f"{format_value(d.difference)} [{format_value(d.interval.low)}, {format_value(d.interval.high)}] "
            f"· {d.interval.method} · {d.n_units} {d.unit}"
            if defined else f"{format_value(d.difference)}, interval {d.interval.reason}"
        )
        hover = (
            f"{d.rule} − {d.against}, {label}: {note}; paired over {d.n_units} shared units ({d.unit}); "
            f"only in {d.rule}: {d.dropped_only_in_rule}, only in {d.against}: {d.dropped_only_in_against}"
            + (f"; warnings: {' | '.join(d.warnings)}" if d.warnings else "")
        )
        panels.setdefault(f"{d.rule} − {d.against}", []).append(
            ForestRow(label, d.difference, d.interval.low if defined else None,
                      d.interval.high if defined else None, note, hover, 0, _zero_flag(d.interval)))
    for c in (c for run in report.runs for c in run.comparisons):
        defined = c.interval.defined
        label = f"{_plain(c.group)} − {_plain(c.baseline)}"
        note = (
            f"{format_value(c.difference)} [{format_value(c.interval.low)}, {format_value(c.interval.high)}] "
            f"· {c.interval.method} · {c.n_units} {c.unit}"
            if defined else f"{format_value(c.difference)}, interval {c.interval.reason}"
        )
        hover = f"{c.rule}: {label}: {note}; paired over {c.n_units} shared units ({c.unit})"
        panels.setdefault(f"{c.rule}: group − baseline", []).append(
            ForestRow(label, c.difference, c.interval.low if defined else None,
                      c.interval.high if defined else None, note, hover, 1, _zero_flag(c.interval)))
    if not panels:
        return ""
    charts = "".join(
        f"<div class='panel'>{svg.forest(rows, title=title, zero_line=True)}</div>" for title, rows in panels.items()
    )
    return (
        "<section id='differences'><h2>Paired differences</h2><p class='lede'>Alternative minus declared "
        "rule per group, and the rules' own group comparisons, paired on shared units; the dashed "
        f"line is zero.</p><div class='panels'>{charts}</div></section>"
    )


def _zero_flag(interval: Any) -> str:
    if not interval.defined or interval.low is None or interval.high is None:
        return ""
    return "interval includes 0" if interval.low <= 0 <= interval.high else "excludes 0"


def _rank_section(report: RescoreReport) -> str:
    """Slopegraphs of ranks (with their bootstrap intervals) for each moved pair of rules,
    and every rule's ranking with its statistically tied sets."""
    rankings = {r.rule: r for r in getattr(report, "rankings", ())}
    pairs: dict[tuple[str, str], list[Any]] = {}
    for change in report.rank_changes:
        pairs.setdefault((change.against, change.rule), []).append(change)
    charts = []
    for (against, rule), changes in pairs.items():
        left, right = _rank_entries(report, rankings, against), _rank_entries(report, rankings, rule)
        moved = {_key(c.group): c for c in changes}
        points = []
        for key, (label, value, rank, text) in right.items():
            if key not in left:
                continue
            _, l_value, l_rank, l_text = left[key]
            change = moved.get(key)
            flag = f"rank {change.against_rank}→{change.rank}, {change.noise}" if change else ""
            points.append(svg.SlopePoint(label, l_value, value, l_rank, rank, l_text, text, flag))
        charts.append(svg.slopegraph(points, title=f"Ranks: {against} → {rule}", left=against, right=rule))
    tables = []
    for ranking in rankings.values():
        rows = [[e.get("rank"), _plain(e.get("group")), format_value(e.get("value")),
                 f"[{e.get('rank_low')}, {e.get('rank_high')}]"] for e in ranking.entries]
        tied = "; ".join(" = ".join(_plain(g) for g in tie) for tie in ranking.tied_sets) or "none"
        direction = "higher is better" if ranking.higher_is_better else "lower is better"
        tables.append(f"<h3>{esc(ranking.rule)} ({esc(direction)})</h3>"
                      + _table(["rank", "group", "value", "rank interval"], rows)
                      + f"<p class='lede'>Statistically tied: {esc(tied)}. {esc(_plain(ranking.details))}</p>")
    if not charts and not tables:
        return ""
    return (
        "<section id='ranks'><h2>Ranks</h2><p class='lede'>Each group's rank (and rank interval) under the "
        "declared rule (left) and the alternative (right). A dashed line marks a rank flip inside the "
        "noise (an interval of the swapped groups' difference includes zero); bold, one beyond it.</p>"
        + "".join(charts) + "<details><summary>Rankings with intervals and tied sets</summary>"
        + "".join(tables) + "</details></section>"
    )


def _key(group: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(group.items())


def _rank_entries(report: RescoreReport, rankings: dict[str, Any], rule: str) -> dict[tuple[Any, ...], tuple[str, float | None, int, str]]:
    """Group -> (label, value, rank, rank-interval text) of one rule, from its ranking when the
    report has one, else by value (higher first)."""
    ranking = rankings.get(rule)
    if ranking is not None:
        return {
            _key(e["group"]): (_plain(e["group"]), e.get("value"), int(e["rank"]),
                               f" [{e['rank_low']}–{e['rank_high']}]" if e.get("rank_low") is not None else "")
            for e in ranking.entries
        }
    run = next(r for r in report.runs if r.rule == rule)
    heads = sorted(run.headlines().values(), key=lambda h: (h.value is None, -(h.value or 0.0)))
    return {_key(h.group): (h.label, h.value, i + 1, "") for i, h in enumerate(heads)}


def _attempts_section(data: ReportData) -> str:
    if not data.attempts:
        return ""
    charts = []
    for entry in data.attempts:
        series = [svg.Curve(name, tuple((k, v) for k, v in pts)) for name, pts in entry["curves"].items()]
        charts.append(svg.curves(series, title=f"{entry['rule']}: {entry['estimator']} for k = 1..{entry['k_max']} "
                                 f"(attempts grouped by {', '.join(entry['by'])})", x_label="k", y_label="value"))
        if entry.get("stopped"):
            charts.append(f"<p class='lede'>{esc(entry['stopped'])}</p>")
    return "<section id='attempts'><h2>Attempts</h2>" + "".join(charts) + "</section>"


def _accounting_section(data: ReportData) -> str:
    out = ["<section id='accounting'><h2>Accounting: terminal states and exclusions</h2>"]
    for keys, groups in data.status_by_group.items():
        bars = [svg.StackedBar(label, counts) for label, counts in groups.items()]
        out.append(svg.stacked_bars(bars, title=f"Episodes by terminal state, per {', '.join(keys) or 'card'}"))
    rows = [
        [r.rule, r.label, r.n_episodes, r.n, _excluded(r), r.n_missing, r.n_selected_out]
        for r in data.rescore.results if r.stratum is None
    ]
    out.append("<h3>What each rule excluded, and why</h3>")
    out.append(_table(["rule", "group", "episodes", "n (in the statistic)", "excluded (cause count)",
                       "missing scores", "removed by select"], rows))
    out.append("</section>")
    return "".join(out)


def _reported_section(report: RescoreReport) -> str:
    if not report.reported:
        return ""
    rows = []
    for check in report.reported:
        d = check.to_dict()
        rows.append([d.get("rule"), _plain(d.get("group")), d.get("field"), d.get("reported"),
                     d.get("computed"), d.get("tolerance"), "matches" if d.get("ok") else "DOES NOT MATCH"])
    return ("<section id='reported'><h2>Published numbers against their recomputation</h2>"
            + _table(["rule", "group", "field", "reported", "recomputed", "tolerance", "verdict"], rows)
            + "</section>")


def _card_section(data: ReportData) -> str:
    s = data.summary
    scope = s["scope"]
    personal = scope.get("personal_data") or {}
    out = ["<section id='card'><h2>The card</h2><div class='cols'>"]
    out.append("<div><h3>Identity</h3>" + _kv_table([
        ("id", s["card"]), ("title", s["title"]), ("version", s["version"]), ("format", s["format"]),
        ("created", s["created"]), ("episodes", s["episodes"]), ("steps", s["steps"]),
        ("files", f"{s['files']} ({s['bytes']:,} bytes)"), ("root digest", s["root_digest"]),
    ]) + "</div>")
    out.append("<div><h3>Scope</h3>" + _kv_table([
        ("license", scope.get("license") or "NOT DECLARED"), ("access", scope.get("access")),
        ("personal data", personal.get("contains")), ("statement", personal.get("statement")),
        ("citation", scope.get("citation")), ("contact", scope.get("contact")),
    ]) + "</div>")
    prov = s["provenance"]
    out.append("<div><h3>Provenance</h3>" + _kv_table([
        ("generator", f"{prov['generator'].get('name')} {prov['generator'].get('version') or ''}"),
        ("harness", prov["harness"]), ("agents", prov["agents"]), ("sources", prov["sources"]),
    ]) + "</div>")
    planned = s["planned_episodes"]
    coverage = (f"{s['episodes']} of {planned} planned episodes ({s['episodes'] / planned:.1%})"
                if planned else "no plan declared")
    out.append("<div><h3>Plan coverage</h3><p>" + esc(coverage) + "</p>" + _integrity(data) + "</div>")
    out.append("</div><h3>Drops manifest</h3>")
    drops = [[d["target"], d["action"], d["declaration"], d["loss_class"],
              d.get("count") if d.get("count") is not None else "unknown", d["reason"]] for d in s["drops"]]
    out.append(_table(["target", "action", "declaration", "loss class", "count", "reason"], drops)
               if drops else "<p>None declared.</p>")
    out.append("</section>")
    return "".join(out)


def _integrity(data: ReportData) -> str:
    v = data.validation
    if v is None:
        return "<h3>Integrity</h3><p>Not checked (built with --no-check).</p>"
    checks = {c["name"]: c["status"] for c in v.get("checks", [])}
    digests = checks.get("inventory.digests", "not run")
    sig = checks.get("signature", "not checked") if data.signature_checked else "no public key given"
    verdict = "VALID" if v["valid"] else "INVALID"
    counts = ", ".join(f"{k} {n}" for k, n in v["counts"].items())
    findings = [[f["severity"], f["code"], f["message"]] for f in v["findings"][:20]]
    return (
        "<h3>Integrity</h3>" + _kv_table([
            ("rcard validate", f"{verdict} ({counts})"), ("file digests", digests), ("signature", sig),
        ]) + (_table(["severity", "code", "message"], findings) if findings else "")
    )


def _browser_section(data: ReportData) -> str:
    ep = data.episodes
    notes = "".join(f"<li>{esc(n)}</li>" for n in ep.notes)
    return (
        "<section id='episodes'><h2>Episode browser</h2>"
        f"<p class='lede' id='sampling-rule'>Shows {esc(ep.rule)}.</p><ul class='notes'>{notes}</ul>"
        "<form id='filters' class='filters'>"
        "<label>agent <select id='f-agent'><option value=''>all</option></select></label>"
        "<label>status <select id='f-status'><option value=''>all</option></select></label>"
        "<label>task <input id='f-task' type='search' placeholder='task id contains'></label>"
        "<label>score <select id='f-score'><option value=''>(none)</option></select></label>"
        "<label>≥ <input id='f-min' type='number' step='any' size='6'></label>"
        "<label>≤ <input id='f-max' type='number' step='any' size='6'></label>"
        "<span id='f-count' aria-live='polite'></span></form>"
        "<div class='browser'><div class='list'><table class='grid' id='episode-list'><thead><tr>"
        "<th>episode</th><th>task</th><th>agent</th><th>status</th><th>steps</th><th>scores</th>"
        "</tr></thead><tbody></tbody></table></div>"
        "<div class='detail' id='episode-detail'><p>Choose an episode to see its step stream.</p></div></div>"
        f"<script type='application/json' id='episodes-data'>{_json_block(_browser_data(data))}</script>"
        "</section>"
    )


def _browser_data(data: ReportData) -> dict[str, Any]:
    ep = data.episodes
    return {"columns": ep.columns, "episodes": ep.rows, "steps": ep.steps, "truncated": ep.truncated_steps}


def render_html(data: ReportData, *, generated_by: str) -> str:
    """The whole page as text."""
    report = data.rescore
    script = _asset("browser.js")
    style = _asset("report.css")
    csp = (
        f"default-src 'none'; img-src data:; style-src '{_sha256(style)}'; "
        f"script-src '{_sha256(script)}'; form-action 'none'; base-uri 'none'"
    )
    s = data.summary
    nav = "".join(
        f"<a href='#{anchor}'>{esc(name)}</a>"
        for anchor, name in [("headlines", "Headlines"), ("differences", "Differences"), ("ranks", "Ranks"),
                             ("strata", "Strata"), ("attempts", "Attempts"), ("accounting", "Accounting"),
                             ("reported", "Published numbers"), ("card", "The card"), ("episodes", "Episodes")]
    )
    body = "".join([
        _headline_section(report), _difference_section(report), _rank_section(report), _strata_section(report),
        _attempts_section(data), _accounting_section(data), _reported_section(report), _card_section(data),
        _browser_section(data),
    ])
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{esc(csp)}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(s['title'])} — rollout card report</title><style>{style}</style></head>"
        f"<body><header><h1>{esc(s['title'])}</h1><p class='ident'>{esc(s['card'])} v{esc(s['version'])} · "
        f"{esc(s['format'])} · {esc(s['episodes'])} episodes, {esc(s['steps'])} steps · "
        f"{len(report.runs)} rules · seed {esc(report.seed if report.seed is not None else 'from the rules')}</p>"
        f"<nav>{nav}</nav></header><main>{body}</main>"
        f"<footer>Generated by {esc(generated_by)} from the same rescore report as <code>rcard rescore</code>; "
        "every number above is one it prints. Content from the package is shown as text.</footer>"
        f"<script>{script}</script></body></html>"
    )
