"""A summary of a card for people: identity, scope, episodes per agent and status, rules, drops.

`summarize(card)` returns plain data (what `rcard info --format json` prints);
`render_text(summary)` lays it out for a terminal.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .display import one_line, text_table
from .io.reader import Card
from .tables import TerminalStatus

__all__ = ["render_text", "summarize"]

_STATUSES = [s.value for s in TerminalStatus]


def summarize(card: Card) -> dict[str, Any]:
    """Plain-data summary of `card` (reads only the agent and status columns)."""
    m = card.manifest
    table = card.episodes(columns=["agent", "status"])
    status = table.column("status")
    if pa.types.is_dictionary(status.type):
        status = status.cast(pa.string())
    table = pa.table({"agent": table.column("agent").fill_null("(none)"), "status": status})
    counts = table.group_by(["agent", "status"]).aggregate([([], "count_all")]).to_pylist()
    by_agent: dict[str, dict[str, int]] = {}
    for row in counts:
        by_agent.setdefault(row["agent"], {s: 0 for s in _STATUSES})[row["status"]] = row["count_all"]
    expected = m.plan.expected_count() if m.plan else None
    return {
        "card": m.id,
        "title": m.title,
        "version": m.version,
        "format": m.format,
        "created": m.created.isoformat(),
        "path": card.path,
        "scope": m.scope.model_dump(mode="json", exclude_none=True, exclude_defaults=False),
        "provenance": {
            "generator": m.provenance.generator.model_dump(mode="json", exclude_none=True),
            "harness": m.provenance.harness.name if m.provenance.harness else None,
            "agents": [a.name for a in m.provenance.agents],
            "sources": [s.name for s in m.provenance.sources],
        },
        "episodes": m.tables.episodes.rows,
        "steps": m.tables.steps.rows,
        "planned_episodes": expected,
        "status_by_agent": dict(sorted(by_agent.items())),
        "rules": [r.model_dump(mode="json", exclude_none=True) for r in m.rules],
        "drops": [d.model_dump(mode="json", exclude_none=True) for d in m.drops],
        "files": len(m.inventory.files),
        "bytes": sum(f.bytes for f in m.inventory.files),
        "root_digest": m.inventory.root_digest,
    }


def render_text(s: dict[str, Any]) -> str:
    """The summary as aligned text for a terminal; every value from the card on one line
    (display.one_line: a newline in a title or name would make a line of its own)."""
    f = one_line
    scope = s["scope"]
    generator = s["provenance"]["generator"]
    lines = [
        f"{f(s['title'])}  ({f(s['card'])} v{f(s['version'])}, {f(s['format'])})",
        f"  path:      {f(s['path'])}",
        f"  created:   {f(s['created'])}",
        f"  license:   {f(scope.get('license') or 'NOT DECLARED')}   access: {f(scope.get('access'))}",
        f"  generator: {f(generator.get('name'))} {f(generator.get('version', ''))}",
    ]
    planned = s["planned_episodes"]
    plan_note = f" of {planned} planned" if planned is not None else " (no plan declared)"
    lines.append(f"  episodes:  {s['episodes']}{plan_note}; steps: {s['steps']}")
    lines.append(f"  files:     {s['files']} ({s['bytes']} bytes), root digest {f(s['root_digest'][:16])}…")
    lines.append("")
    lines.append("Episodes by agent and terminal state (counts):")
    rows = []
    for agent, counts in s["status_by_agent"].items():
        rows.append([agent, *(str(counts[st]) for st in _STATUSES), str(sum(counts.values()))])
    header = ["agent", *_STATUSES, "total"]
    lines += ["  " + r for r in text_table(header, rows, right=range(1, len(header)))]
    lines.append("")
    lines.append(f"Rules ({len(s['rules'])}):")
    lines += [f"  {f(r['id'])}  [{f(r.get('kind', '?'))}]  {f(r['path'])}" for r in s["rules"]] or ["  (none)"]
    lines.append("")
    lines.append(f"Drops manifest ({len(s['drops'])} entries):")
    for d in s["drops"]:
        count = d.get("count")
        lines.append(
            f"  {f(d['target'])}: {f(d['action'])} ({f(d['declaration'])}, {f(d['loss_class'])}), "
            f"count {count if count is not None else 'unknown'}: {f(d['reason'])}"
        )
    if not s["drops"]:
        lines.append("  (none declared)")
    return "\n".join(lines) + "\n"
