"""Reported numbers an import that left records out (--keep-going) can no longer give back.

A rule's `reported` value is the source's own number, computed over every record of the
source; `rcard validate` recomputes it over the card's episodes. Once --keep-going left a
record out that the number counts, the two differ, and a fresh card would fail validation
with `reported-mismatch`, for any importer. So when records were left out, each reported
number is replayed — by the engine `rcard validate` uses — on the finished card, and one
that does not replay is taken out of `reported`: the rule stays, its description and a
warning give the source's number, what the card gives and the records left out, and the
`source_malformed` drop names the rule in `affects`. A number that still replays stays
(the records left out are not among those it counts).

    failed = replay_reported(card, docs)   # rule id -> {entry index: why}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import RolloutCardError

if TYPE_CHECKING:
    from ..io.reader import Card

__all__ = ["replay_reported", "without_unreplayed"]


def replay_reported(card: Card, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[int, str]]:
    """The reported entries of the rule documents `docs` (rule id -> document) that `card` does not
    give back: rule id -> {entry index: why (both numbers)}."""
    import pyarrow as pa

    from ..model.rule import Rule
    from ..rules.replay import replay_rule

    out: dict[str, dict[int, str]] = {}
    for rule_id, doc in docs.items():
        if not doc.get("reported"):
            continue
        try:
            checks = replay_rule(card, Rule.model_validate(dict(doc)), file=f"rules/{rule_id}.yaml")
        except (RolloutCardError, ValueError, pa.ArrowException) as exc:
            out[rule_id] = {i: f"the rule cannot be applied to the card: {str(exc).splitlines()[0][:200]}"
                            for i in range(len(doc["reported"]))}
            continue
        for check in checks:
            if not check.ok:
                index = int(check.pointer.split("/")[2])
                out.setdefault(rule_id, {}).setdefault(index, check.message.split(": ", 1)[-1])
    return out


def without_unreplayed(doc: Mapping[str, Any], failed: Mapping[int, str], left_out: str) -> dict[str, Any]:
    """`doc` with the reported entries `failed` taken out; the description says what they were
    and why (`left_out`: the records the import left out)."""
    kept = [r for i, r in enumerate(doc["reported"]) if i not in failed]
    out = {k: v for k, v in doc.items() if k != "reported"}
    out["description"] = (f"{doc.get('description', '')} Not declared as reported: "
                          + "; ".join(failed.values()) + f"; {left_out}.").lstrip()
    if kept:
        out["reported"] = kept
    return out
