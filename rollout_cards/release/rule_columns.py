"""Which table columns a reporting rule reads, from its YAML alone (no rule engine needed).

Used by redaction to fill a drop's `affects` and by the dataset card. Episode-level
keys (`select`, `score`, `aggregate`, `reduce`, `compare`) read the episodes table;
a feature's `where` / `value` read the table named by its `from` (steps by default).
Feature names are not columns. A rule that cannot be parsed is reported as reading
everything, so a redaction never under-reports what it limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from ..errors import ExpressionError
from ..rules.expressions import parse_expression

__all__ = ["ALL_COLUMNS", "columns_read_by_rule", "columns_read_by_rules"]

#: Returned for a rule that cannot be read: it may read any column.
ALL_COLUMNS = frozenset({"*"})


def _names(text: Any, key: str) -> set[str]:
    if text is None:
        return set()
    return set(parse_expression(str(text) if not isinstance(text, str) else text, key=key).names)


def _listed(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    if isinstance(value, Mapping):
        return {k for k in value if isinstance(k, str)}
    return set()


def columns_read_by_rule(document: Mapping[str, Any]) -> set[str]:
    """`<table>.<column>` names a parsed rule document reads (raises ExpressionError on a bad expression)."""
    features = document.get("features") or {}
    if not isinstance(features, Mapping):
        features = {}
    episode_names = _names(document.get("select"), "select") | _names(document.get("score"), "score")
    for section, keys in (("aggregate", ("group_by", "unit", "strata")), ("reduce", ("by",)),
                          ("compare", ("pair_on", "baseline"))):
        block = document.get(section)
        if isinstance(block, Mapping):
            for k in keys:
                episode_names |= _listed(block.get(k))
    out = {f"episodes.{n}" for n in episode_names - set(features)}
    for name, feature in features.items():
        if not isinstance(feature, Mapping):
            continue
        table = feature.get("from", "steps")
        for k in ("where", "value"):
            out |= {f"{table}.{n}" for n in _names(feature.get(k), f"features.{name}.{k}")}
    return out


def columns_read_by_rules(rule_files: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """Rule id -> the columns it reads, for rule YAML texts keyed by id; ALL_COLUMNS when unreadable."""
    out: dict[str, frozenset[str]] = {}
    for rule_id, text in rule_files.items():
        try:
            document = yaml.safe_load(text)
            out[rule_id] = (frozenset(columns_read_by_rule(document)) if isinstance(document, Mapping)
                            else ALL_COLUMNS)
        except (yaml.YAMLError, ExpressionError):
            out[rule_id] = ALL_COLUMNS
    return out
