"""Rule documents declared by importers, in the key order of the rule-file format.

Importers state the source's own published numbers as `reported` values; this module
only lays the document out (`rule`, `version`, `kind`, `description`, `select`,
`features`, `score`, `on_status`, `on_missing`, `reduce`, `aggregate`, `reported`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TOLERANCE", "rule_document", "rule_id_part"]

#: Tolerance of reported values computed exactly from the source's own numbers.
TOLERANCE = 1e-6


#: Longest segment `rule_id_part` makes: a rule id is at most 128 characters and importers
#: join three or four segments taken from the source's names.
MAX_PART = 32


def rule_id_part(text: str) -> str:
    """`text` made into one segment of a dotted rule id (letters, digits, _ and -); a longer
    one keeps its first characters and ends with 8 hex digits of its sha256 (so it stays unique)."""
    part = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-") or "x"
    part = part if re.match(r"[A-Za-z0-9_]", part) else f"_{part}"
    if len(part) > MAX_PART:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        part = f"{part[:MAX_PART - 9]}_{digest}"
    return part


def rule_document(
    *,
    rule: str,
    kind: str,
    description: str,
    score: str,
    on_status: Mapping[str, Any],
    on_missing: Any,
    aggregate: Mapping[str, Any],
    reported: Sequence[Mapping[str, Any]] = (),
    select: str | None = None,
    features: Mapping[str, Any] | None = None,
    reduce: Mapping[str, Any] | None = None,
    version: int = 1,
) -> dict[str, Any]:
    """A rule as a dict whose insertion order is the rule-file layout (optional keys left out)."""
    doc: dict[str, Any] = {"rule": rule, "version": version, "kind": kind, "description": description}
    if select is not None:
        doc["select"] = select
    if features:
        doc["features"] = dict(features)
    doc["score"] = score
    doc["on_status"] = dict(on_status)
    doc["on_missing"] = on_missing
    if reduce is not None:
        doc["reduce"] = dict(reduce)
    doc["aggregate"] = dict(aggregate)
    if reported:
        doc["reported"] = [
            {"group": dict(r["group"]), "value": r["value"], "tolerance": r.get("tolerance", TOLERANCE),
             **{k: r[k] for k in ("n", "ci_low", "ci_high") if r.get(k) is not None}}
            for r in reported
        ]
    return doc
