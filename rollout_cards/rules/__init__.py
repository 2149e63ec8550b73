"""Reporting rules as data: load rule files, apply them to a card, rescore, replay.

    load_rule(path) -> Rule                      safe YAML, errors name file, key, line
    apply_rule(card, rule) -> RuleRun            headlines per group/stratum, comparisons
    rescore(card, [alt.yaml, ...]) -> RescoreReport
    replay_card(card) -> [ReplayCheck]           every `reported` number recomputed
    render(report, "table" | "markdown" | "csv" | "json") -> str
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import install

# Loaded on first use: a validator that meets no rule, or an expression parser, does not
# pay for the engine. Public name -> (submodule, attribute).
_NAMES = {
    "apply_rule": (".engine", "apply_rule"),
    "declared_rules": (".loader", "declared_rules"),
    "load_rule": (".loader", "load_rule"),
    "parse_rule": (".loader", "parse_rule"),
    "render": (".render", "render"),
    "ReplayCheck": (".replay", "ReplayCheck"),
    "replay_card": (".replay", "replay_card"),
    "replay_rule": (".replay", "replay_rule"),
    "rescore": (".rescore", "rescore"),
    **{name: (".results", name) for name in
       ("GroupComparison", "GroupResult", "RankChange", "RescoreReport", "RuleDifference", "RuleRun")},
}
install(__name__, _NAMES)

if TYPE_CHECKING:
    from .engine import apply_rule
    from .loader import declared_rules, load_rule, parse_rule
    from .render import render
    from .replay import ReplayCheck, replay_card, replay_rule
    from .rescore import rescore
    from .results import (
        GroupComparison,
        GroupResult,
        RankChange,
        RescoreReport,
        RuleDifference,
        RuleRun,
    )


__all__ = [
    "GroupComparison",
    "GroupResult",
    "RankChange",
    "ReplayCheck",
    "RescoreReport",
    "RuleDifference",
    "RuleRun",
    "apply_rule",
    "declared_rules",
    "load_rule",
    "parse_rule",
    "render",
    "replay_card",
    "replay_rule",
    "rescore",
]
