"""Replay: recompute every `reported` number of a card's rules and compare.

Each `reported` entry names a group (and optionally a stratum) and gives the
published `value`, and optionally `ci_low`, `ci_high` (within the same tolerance)
and `n` (exact). `replay_rule` returns one `ReplayCheck` per published number, with
both numbers, the tolerance and a JSON pointer into the rule file
(`/reported/<i>/<field>`), so the validator can report `reported-mismatch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.rule import Reported, Rule
from .engine import apply_rule
from .loader import declared_rules
from .results import GroupResult, RuleRun

__all__ = ["ReplayCheck", "check_reported", "replay_card", "replay_rule"]


@dataclass(frozen=True)
class ReplayCheck:
    """One published number against its recomputation."""

    rule: str
    file: str | None
    pointer: str
    group: dict[str, Any]
    stratum: dict[str, Any] | None
    field: str
    reported: float | int
    computed: float | int | None
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the published number, its recomputation and the verdict."""
        return {
            "rule": self.rule, "file": self.file, "pointer": self.pointer, "group": self.group,
            "stratum": self.stratum, "field": self.field, "reported": self.reported,
            "computed": self.computed, "tolerance": self.tolerance, "ok": self.ok,
        }

    @property
    def ok(self) -> bool:
        """True when the recomputed number is within the tolerance (exact for n)."""
        if self.computed is None:
            return False
        return abs(float(self.computed) - float(self.reported)) <= self.tolerance + 1e-12

    @property
    def message(self) -> str:
        """What was compared, with both numbers and the tolerance."""
        where = ", ".join(f"{k}={v}" for k, v in self.group.items()) or "(all)"
        if self.stratum:
            where += " · " + ", ".join(f"{k}={v}" for k, v in self.stratum.items())
        if self.computed is None:
            return (
                f"{self.rule}: reported {self.field} {self.reported} for {where}, but the rule "
                "gives no such number (no such group or stratum, or it is undefined)"
            )
        verdict = "matches" if self.ok else "does not match"
        return (
            f"{self.rule}: reported {self.field} {self.reported} for {where} {verdict} the "
            f"recomputed {self.computed:.10g} (tolerance {self.tolerance:g})"
        )


def _same(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    if b is None or set(a) != set(b):
        return False
    return all(a[k] == b[k] or str(a[k]) == str(b[k]) for k in a)


def _find(run: RuleRun, entry: Reported) -> GroupResult | None:
    for result in run.results:
        if not _same(entry.group, result.group):
            continue
        if entry.stratum is None and result.stratum is None:
            return result
        if entry.stratum is not None and _same(entry.stratum, result.stratum):
            return result
    return None


def replay_rule(card: Any, rule: Rule, *, file: str | None = None, step_features: Any = None) -> list[ReplayCheck]:
    """Recompute the `reported` numbers of one rule (RuleError if it cannot be applied)."""
    if not rule.reported:
        return []
    return check_reported(rule, apply_rule(card, rule, file=file, step_features=step_features), file=file)


def check_reported(rule: Rule, run: RuleRun, *, file: str | None = None) -> list[ReplayCheck]:
    """Compare the `reported` numbers of `rule` with an already computed run of it."""
    checks = []
    for i, entry in enumerate(rule.reported):
        result = _find(run, entry)
        fields: list[tuple[str, float | int, float | int | None, float]] = [
            ("value", entry.value, result.value if result else None, entry.tolerance)
        ]
        if entry.ci_low is not None:
            fields.append(
                ("ci_low", entry.ci_low, result.ci_low if result else None, entry.tolerance)
            )
        if entry.ci_high is not None:
            fields.append(
                ("ci_high", entry.ci_high, result.ci_high if result else None, entry.tolerance)
            )
        if entry.n is not None:
            fields.append(("n", entry.n, result.n if result else None, 0.0))
        for name, reported, computed, tolerance in fields:
            checks.append(
                ReplayCheck(
                    rule=rule.rule,
                    file=file,
                    pointer=f"/reported/{i}/{name}",
                    group=dict(entry.group),
                    stratum=dict(entry.stratum) if entry.stratum is not None else None,
                    field=name,
                    reported=reported,
                    computed=computed,
                    tolerance=tolerance,
                )
            )
    return checks


def replay_card(card: Any) -> list[ReplayCheck]:
    """Recompute every `reported` number of every rule the card declares."""
    checks: list[ReplayCheck] = []
    for rule, file in declared_rules(card):
        checks += replay_rule(card, rule, file=file)
    return checks
