"""What the engine and rescoring return: headline results, comparisons, rank changes.

Every result states its denominator and its exclusions, the independent unit and
how many of them, the interval's method and level, and warnings. `to_dict()` gives
the JSON of the design brief, section 5 (documented in docs/rules.md): plain JSON
types, no NaN, stable key order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..stats import Interval, zero_event_upper_bound
from ..stats._common import jsonable

__all__ = [
    "GroupComparison",
    "GroupResult",
    "RankChange",
    "Ranking",
    "RescoreReport",
    "RuleDifference",
    "RuleRun",
    "format_value",
]


def format_value(value: float | None, digits: int = 4) -> str:
    """A number for people: `digits` significant decimals, "undefined" for None."""
    if value is None:
        return "undefined"
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:,.1f}"


def _label(mapping: Mapping[str, Any] | None) -> str:
    if not mapping:
        return "(all)"
    return ", ".join(f"{k}={v}" for k, v in mapping.items())


def _p_fields(interval: Interval, adjusted: float | None) -> dict[str, Any]:
    return {
        "p_value": interval.details.get("p_value"),
        "p_method": interval.details.get("p_method"),
        "p_adjusted": adjusted,
    }


def _interval_dict(interval: Interval, unit: str) -> dict[str, Any]:
    return {
        "method": interval.method,
        "level": interval.level,
        "unit": unit,
        "n_units": interval.n_units,
        "defined": interval.defined,
        "reason": interval.reason,
        "se": interval.se,
        "df": interval.df,
        "details": dict(interval.details),
    }


@dataclass(frozen=True)
class GroupResult:
    """One headline: a rule's statistic for one group (and stratum, or pooled over strata).

    `n` counts the observations the statistic is over (episodes, or reduced values
    after a `reduce`), `n_episodes` the episodes behind them. Exclusions are counted
    by cause: `excluded_by_status` (on_status: exclude), `n_missing` null/NaN scores
    (of which `n_missing_excluded` were excluded by on_missing), `n_selected_out`
    (removed by `select`). `stratum` is None for the headline of a rule without
    strata and for the pooled headline (then `pooled` says how strata were weighted).
    """

    rule: str
    version: int
    kind: str
    group: dict[str, Any]
    stratum: dict[str, Any] | None
    statistic: str
    value: float | None
    interval: Interval
    unit: str
    n: int
    n_episodes: int
    excluded_by_status: dict[str, int]
    n_missing: int
    n_missing_excluded: int
    n_selected_out: int
    successes: int | None = None
    reduce: dict[str, Any] | None = None
    pooled: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()

    @property
    def ci_low(self) -> float | None:
        """Lower bound of the interval (None when undefined)."""
        return self.interval.low

    @property
    def ci_high(self) -> float | None:
        """Upper bound of the interval (None when undefined)."""
        return self.interval.high

    @property
    def n_excluded(self) -> int:
        """Episodes excluded by status or by on_missing (not those removed by select)."""
        return sum(self.excluded_by_status.values()) + self.n_missing_excluded

    @property
    def label(self) -> str:
        """The group (and stratum) in words, e.g. "agent=alpha · cond.difficulty=hard"."""
        text = _label(self.group)
        if self.stratum is not None:
            text += " · " + _label(self.stratum)
        elif self.pooled is not None:
            text += f" · pooled ({self.pooled['weights']})"
        return text

    @property
    def display(self) -> str:
        """The headline as it should be printed: value and interval, "0/n (95% upper
        bound …)" for zero events, "undefined (n = 0)" for an empty selection."""
        level = f"{self.interval.level:.0%}"
        if self.value is None or self.n == 0:
            return "undefined (n = 0)"
        if self.zero_events:
            # Exact one-sided bound over the independent units (episodes for Wilson).
            units = self.interval.n_units or self.n
            bound = zero_event_upper_bound(units, self.interval.level)
            over = "" if units == self.n else f" over {units} units"
            if self.successes == 0:
                return f"0/{self.n} ({level} upper bound {bound:.4f}{over})"
            return f"{self.n}/{self.n} ({level} lower bound {1 - bound:.4f}{over})"
        if not self.interval.defined:
            return f"{format_value(self.value)}, interval {self.interval.reason}"
        return f"{format_value(self.value)} [{format_value(self.ci_low)}, {format_value(self.ci_high)}]"

    @property
    def zero_events(self) -> bool:
        """A 0/1 mean with no successes (or no failures): reported as an exact one-sided bound."""
        return (
            self.value is not None
            and self.n > 0
            and self.successes is not None
            and self.statistic == "mean"
            and self.successes in (0, self.n)
        )

    @property
    def method_label(self) -> str:
        """The interval method as printed: with its resample count, or the exact one-sided
        bound that replaces it for zero events."""
        level = f"{self.interval.level:.0%}"
        if self.zero_events:
            return f"exact one-sided {level}"
        if not self.interval.defined:
            return "none (undefined)"
        resamples = self.interval.details.get("resamples") if self.interval.details else None
        extra = f" ({resamples} resamples)" if resamples else ""
        return f"{self.interval.method} {level}{extra}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (design brief, section 5)."""
        return jsonable(
            {
                "rule": self.rule,
                "version": self.version,
                "kind": self.kind,
                "group": self.group,
                "stratum": self.stratum,
                "statistic": self.statistic,
                "value": self.value,
                "ci_low": self.ci_low,
                "ci_high": self.ci_high,
                "interval": _interval_dict(self.interval, self.unit),
                "n": self.n,
                "n_episodes": self.n_episodes,
                "n_excluded": self.n_excluded,
                "excluded_by_status": self.excluded_by_status,
                "n_missing": self.n_missing,
                "n_missing_excluded": self.n_missing_excluded,
                "n_selected_out": self.n_selected_out,
                "successes": self.successes,
                "reduce": self.reduce,
                "pooled": self.pooled,
                "display": self.display,
                "warnings": list(self.warnings),
            }
        )


@dataclass(frozen=True)
class GroupComparison:
    """A rule's `compare`: one group minus the baseline group, paired on shared units."""

    rule: str
    group: dict[str, Any]
    baseline: dict[str, Any]
    statistic: str
    difference: float | None
    interval: Interval
    unit: str
    n_units: int
    dropped_only_in_group: int
    dropped_only_in_baseline: int
    se_unpaired: float | None = None
    warnings: tuple[str, ...] = ()
    #: The p-value adjusted over the report's family (`RescoreReport.adjust`); None alone.
    p_adjusted: float | None = None

    @property
    def p_value(self) -> float | None:
        """Two-sided p-value of H0: no difference (`interval.details["p_method"]` says how)."""
        return self.interval.details.get("p_value")

    def to_dict(self) -> dict[str, Any]:
        """JSON form; `type` is "group"."""
        return jsonable(
            {
                "type": "group",
                "rule": self.rule,
                "group": self.group,
                "baseline": self.baseline,
                "statistic": self.statistic,
                "difference": self.difference,
                "ci_low": self.interval.low,
                "ci_high": self.interval.high,
                "interval": _interval_dict(self.interval, self.unit),
                "n_units": self.n_units,
                "dropped_only_in_group": self.dropped_only_in_group,
                "dropped_only_in_baseline": self.dropped_only_in_baseline,
                "se_unpaired": self.se_unpaired,
                **_p_fields(self.interval, self.p_adjusted),
                "warnings": list(self.warnings),
            }
        )


@dataclass(frozen=True)
class RuleDifference:
    """An alternative rule minus a declared rule for one group, paired on shared units.

    `difference` is value − against_value (the two headlines); the interval is
    computed over the units both rules observed for this group (`unit`), and its
    `estimate` can differ from `difference` when units are dropped or strata pooled
    equally (a warning then says so).
    """

    rule: str
    against: str
    group: dict[str, Any]
    statistic: str
    value: float | None
    against_value: float | None
    difference: float | None
    interval: Interval
    unit: str
    n_units: int
    dropped_only_in_rule: int
    dropped_only_in_against: int
    warnings: tuple[str, ...] = ()
    #: Why `unit` was paired on (e.g. "the coarser of run_id and episode_id").
    pairing: str = ""
    p_adjusted: float | None = None

    @property
    def p_value(self) -> float | None:
        """Two-sided p-value of H0: no difference (`interval.details["p_method"]` says how)."""
        return self.interval.details.get("p_value")

    def to_dict(self) -> dict[str, Any]:
        """JSON form; `type` is "rule"."""
        return jsonable(
            {
                "type": "rule",
                "rule": self.rule,
                "against": self.against,
                "group": self.group,
                "statistic": self.statistic,
                "value": self.value,
                "against_value": self.against_value,
                "difference": self.difference,
                "ci_low": self.interval.low,
                "ci_high": self.interval.high,
                "interval": _interval_dict(self.interval, self.unit),
                "n_units": self.n_units,
                "dropped_only_in_rule": self.dropped_only_in_rule,
                "dropped_only_in_against": self.dropped_only_in_against,
                "pairing": self.pairing,
                **_p_fields(self.interval, self.p_adjusted),
                "warnings": list(self.warnings),
            }
        )


@dataclass(frozen=True)
class RankChange:
    """A group whose rank among the groups differs between two rules (1 = best, in each
    rule's direction `higher_is_better`).

    `swapped_with` lists each group it changed places with, with the interval of
    (this group − that group) under each rule; `noise` is "beyond the noise" only when
    every one of those intervals excludes zero, else "inside the noise".
    """

    rule: str
    against: str
    group: dict[str, Any]
    rank: int
    against_rank: int
    value: float | None
    against_value: float | None
    noise: str = "inside the noise"
    swapped_with: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return jsonable(
            {
                "rule": self.rule,
                "against": self.against,
                "group": self.group,
                "rank": self.rank,
                "against_rank": self.against_rank,
                "value": self.value,
                "against_value": self.against_value,
                "noise": self.noise,
                "swapped_with": list(self.swapped_with),
            }
        )


@dataclass(frozen=True)
class Ranking:
    """One rule's ranking of its groups: ranks with bootstrap intervals, and tied sets.

    `entries` are best first: group, value, rank (ties share the smallest), and the
    bounds of the rank's bootstrap interval (None when not computed; `details` says
    why). `tied_sets` partition the ranking into runs of groups that no pairwise
    interval separates.
    """

    rule: str
    statistic: str
    higher_is_better: bool
    entries: tuple[dict[str, Any], ...]
    tied_sets: tuple[tuple[dict[str, Any], ...], ...]
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return jsonable(
            {
                "rule": self.rule,
                "statistic": self.statistic,
                "higher_is_better": self.higher_is_better,
                "entries": list(self.entries),
                "tied_sets": [list(t) for t in self.tied_sets],
                "details": self.details,
            }
        )


@dataclass(frozen=True)
class RuleRun:
    """Everything one rule produced on one card: headlines, comparisons, warnings.

    `results` hold, per group, one entry per stratum and the pooled one (or a single
    entry without strata), groups in sorted order. `n_selected_out` and
    `n_episodes_total` count over the whole card. `observations` is the engine's
    per-observation data kept for pairing with other rules (not serialized).
    """

    rule: str
    version: int
    kind: str
    file: str | None
    statistic: str
    group_by: tuple[str, ...]
    results: tuple[GroupResult, ...]
    comparisons: tuple[GroupComparison, ...]
    n_episodes_total: int
    n_selected_out: int
    warnings: tuple[str, ...] = ()
    observations: Any = field(default=None, repr=False, compare=False)

    def headlines(self) -> dict[tuple[Any, ...], GroupResult]:
        """Group label tuple -> the group's headline (pooled over strata, if any)."""
        return {tuple(r.group.values()): r for r in self.results if r.stratum is None}

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the whole run."""
        return {
            "rule": self.rule,
            "version": self.version,
            "kind": self.kind,
            "file": self.file,
            "statistic": self.statistic,
            "group_by": list(self.group_by),
            "n_episodes_total": self.n_episodes_total,
            "n_selected_out": self.n_selected_out,
            "warnings": list(self.warnings),
            "results": [r.to_dict() for r in self.results],
            "comparisons": [c.to_dict() for c in self.comparisons],
        }


@dataclass(frozen=True)
class RescoreReport:
    """The card's declared rules and the alternatives, run on the same episodes.

    `differences` pair each alternative with each declared `original` rule (all
    declared rules when none is marked original), per shared group; `rank_changes`
    list every group whose rank moves between such a pair.
    """

    card: str
    card_path: str
    seed: int | None
    runs: tuple[RuleRun, ...]
    sources: dict[str, str]
    differences: tuple[RuleDifference, ...]
    rank_changes: tuple[RankChange, ...]
    #: The card's published numbers against their recomputation (ReplayCheck objects).
    reported: tuple[Any, ...] = ()
    rankings: tuple[Ranking, ...] = ()
    #: How p-values were adjusted: method (holm, bh, none), family size m and the family.
    adjust: dict[str, Any] = field(default_factory=dict)

    @property
    def results(self) -> list[GroupResult]:
        """Every headline of every rule, declared rules first."""
        return [r for run in self.runs for r in run.results]

    @property
    def comparisons(self) -> list[GroupComparison | RuleDifference]:
        """Rule differences, then the group comparisons declared by `compare`."""
        return [*self.differences, *(c for run in self.runs for c in run.comparisons)]

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `rcard rescore --format json` (design brief, section 5)."""
        return {
            "card": self.card,
            "path": self.card_path,
            "seed": self.seed,
            "rules": [
                {
                    "rule": run.rule,
                    "version": run.version,
                    "kind": run.kind,
                    "source": self.sources.get(run.rule, "card"),
                    "file": run.file,
                    "statistic": run.statistic,
                    "group_by": list(run.group_by),
                    "n_episodes_total": run.n_episodes_total,
                    "n_selected_out": run.n_selected_out,
                    "warnings": list(run.warnings),
                }
                for run in self.runs
            ],
            "results": [r.to_dict() for r in self.results],
            "comparisons": [c.to_dict() for c in self.comparisons],
            "rank_changes": [c.to_dict() for c in self.rank_changes],
            "rankings": [r.to_dict() for r in self.rankings],
            "adjust": jsonable(self.adjust),
            "reported": [c.to_dict() for c in self.reported],
        }
