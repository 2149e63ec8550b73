"""Which table columns each rule of a card reads, for a redaction's `affects`.

A rule that cannot be read is reported as reading everything, so a redaction never
under-reports the rules it limits.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import RuleError
from ..rules.loader import columns_read, parse_rule

__all__ = ["ALL_COLUMNS", "columns_read_by_rules"]

#: Returned for a rule that cannot be read: it may read any column.
ALL_COLUMNS = frozenset({"*"})


def columns_read_by_rules(rule_files: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """Rule id -> the columns it reads, for rule YAML texts keyed by id; ALL_COLUMNS when unreadable."""
    out: dict[str, frozenset[str]] = {}
    for rule_id, text in rule_files.items():
        try:
            out[rule_id] = columns_read(parse_rule(text, file=f"rules/{rule_id}.yaml"))
        except RuleError:
            out[rule_id] = ALL_COLUMNS
    return out
