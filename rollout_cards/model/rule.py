"""Pydantic models of a reporting rule file (design brief, section 4).

A rule file is YAML read by `rollout_cards.rules.loader` (safe loader, size cap,
duplicate keys refused) and validated into `Rule`. Every field has a docstring that
pydantic copies into `schemas/rule-0.2.schema.json`. Expressions stay text here; the
loader parses each one so that a bad token is reported with its file, key and line.

Defaults make a rule with only `rule` and `score` work: completed episodes are
scored, error/timeout/limit count as 0, cancelled/skipped are excluded (and
counted), a null score counts as 0, and the headline is the mean over all episodes
with the episode as the unit and an `auto` interval.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .card import RULE_ID, empty_dict, empty_list
from .schemas import register_document

__all__ = [
    "DEFAULT_ON_STATUS",
    "Aggregate",
    "Compare",
    "Feature",
    "FeatureAgg",
    "IntervalMethod",
    "IntervalSpec",
    "OnStatus",
    "Reduce",
    "ReduceWith",
    "Reported",
    "Rule",
    "RuleKind",
    "Statistic",
    "StratumWeights",
]

#: A column or feature name as written in a rule (dotted names reach score.*, cond.*).
COLUMN = Annotated[str, Field(min_length=1, max_length=256)]
#: A feature name: usable as a plain name in expressions.
FEATURE_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
#: A value of a group or stratum column as written in `reported`, `compare` or a stratum key.
GroupValue = str | int | float | bool | None


def _not_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not the boolean {str(value).lower()} (YAML reads yes/no/on/off as "
                         "booleans); write 1 or 0")
    return value


#: An integer of a rule: an integer in the file (pydantic's lax mode also took 1.0, yes/true
#: and "1", so `version: yes` was version 1).
Integer = Annotated[int, Strict()]
#: A number of a rule: not a boolean (lax mode took `tolerance: yes` as 1.0). A string holding a
#: number stays one: YAML 1.1 reads `1e-4` as a string.
Number = Annotated[float, BeforeValidator(_not_boolean)]
#: A policy value: `score`, `exclude`, or a number the episode counts as.
StatusPolicy = Literal["score", "exclude"] | Number


def _once(columns: list[str], what: str) -> None:
    """ValueError naming the first column `what` lists twice (a key names each column once)."""
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            raise ValueError(f"{what} names a column more than once ({column[:80]!r}); list each column once")
        seen.add(column)


class _Model(BaseModel):
    # Validators compiled on first use, one per tree (see model/card.py's _Model).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class RuleKind(StrEnum):
    """Why a rule exists."""

    ORIGINAL = "original"
    RECOVERED = "recovered"
    REGRADE = "regrade"
    DIAGNOSTIC = "diagnostic"


class FeatureAgg(StrEnum):
    """How the steps of one episode are combined into a feature value."""

    COUNT = "count"
    SUM = "sum"
    MEAN = "mean"
    MIN = "min"
    MAX = "max"
    ANY = "any"
    ALL = "all"
    FIRST = "first"
    LAST = "last"
    LIST = "list"
    SET = "set"


#: Aggregations that may omit `value` (count counts the matching steps; any: is there one).
_VALUE_OPTIONAL = {FeatureAgg.COUNT, FeatureAgg.ANY}


class Feature(_Model):
    """A per-episode value computed from the episode's steps.

    `where` selects steps (it is pushed down into the Parquet scan); `value` is
    evaluated on the selected steps and combined with `agg`. Episodes without a
    selected step get count 0, sum 0, any false, all true, list/set empty and null
    for mean, min, max, first and last.
    """

    from_: Literal["steps"] = Field(default="steps", alias="from")
    """The table the feature is computed from; only `steps`."""
    where: str | None = None
    """Expression over step columns selecting the steps to use (default: all steps)."""
    value: str | None = None
    """Expression over step columns giving each selected step's value (count and any may omit it)."""
    agg: FeatureAgg
    """count, sum, mean, min, max, any, all, first, last (by seq), list (in seq order) or set (sorted, distinct)."""

    @model_validator(mode="after")
    def _value_needed(self) -> Feature:
        if self.value is None and self.agg not in _VALUE_OPTIONAL:
            raise ValueError(
                f"agg {self.agg.value!r} needs a `value` expression (only count and any may omit it)"
            )
        if self.value is not None and self.agg is FeatureAgg.COUNT:
            raise ValueError("agg 'count' counts the steps matched by `where`; remove `value`")
        return self


class OnStatus(_Model):
    """How each terminal state enters the score: `score` (use the score expression),
    a number (the episode counts as that value), or `exclude` (left out of the
    denominator, counted in `excluded_by_status`). Statuses not given keep their default."""

    completed: StatusPolicy = "score"
    """Episodes that ran to the end (default: score)."""
    error: StatusPolicy = 0.0
    """Episodes that crashed (default: 0, a failure)."""
    timeout: StatusPolicy = 0.0
    """Episodes that ran out of time (default: 0, a failure)."""
    limit: StatusPolicy = 0.0
    """Episodes stopped by a turn, token or cost limit (default: 0, a failure)."""
    cancelled: StatusPolicy = "exclude"
    """Episodes stopped by the operator (default: exclude)."""
    skipped: StatusPolicy = "exclude"
    """Planned episodes that never ran (default: exclude)."""

    def policy(self, status: str) -> StatusPolicy:
        """The policy of one status."""
        return getattr(self, status)


#: The default status policy, spelled out (also in docs/rules.md).
DEFAULT_ON_STATUS = OnStatus()


class ReduceWith(StrEnum):
    """How the attempts of one reduce group are combined into one value."""

    MEAN = "mean"
    MAX = "max"
    MIN = "min"
    MEDIAN = "median"
    FIRST = "first"
    MODE = "mode"
    PASS_AT_K = "pass_at_k"  # noqa: S105 - an estimator name, not a password
    PASS_HAT_K = "pass_hat_k"  # noqa: S105


class Reduce(_Model):
    """Combine several attempts (episodes) into one value per `by` key, within each
    aggregate group and stratum."""

    by: list[COLUMN] = Field(min_length=1)
    """Episode columns identifying the attempts that belong together, e.g. [task_id]."""
    with_: ReduceWith = Field(alias="with")
    """mean, max (a best-of-k), min, median, first (smallest trial), mode (the most frequent value;
    ties go to the value seen first, by trial), pass_at_k or pass_hat_k."""
    k: Integer | None = Field(default=None, ge=1)
    """Attempts per draw of pass_at_k / pass_hat_k (required for those, not allowed otherwise)."""
    short: Literal["error", "exclude"] = "error"
    """pass_at_k / pass_hat_k: a key with fewer than k attempts is an error (default), or is
    left out and counted (`exclude`, as Inspect leaves out samples with fewer than k scored epochs)."""

    @model_validator(mode="after")
    def _k(self) -> Reduce:
        needs_k = self.with_ in (ReduceWith.PASS_AT_K, ReduceWith.PASS_HAT_K)
        if needs_k and self.k is None:
            raise ValueError(f"reduce with {self.with_.value} needs k (e.g. k: 2)")
        if not needs_k and self.k is not None:
            raise ValueError(
                f"k applies to pass_at_k and pass_hat_k only, not to {self.with_.value}"
            )
        if not needs_k and self.short != "error":
            raise ValueError(
                f"short applies to pass_at_k and pass_hat_k only, not to {self.with_.value}"
            )
        _once(self.by, "reduce.by")
        return self


class IntervalMethod(StrEnum):
    """How the uncertainty of a headline is computed."""

    AUTO = "auto"
    WILSON = "wilson"
    CLOPPER_PEARSON = "clopper_pearson"
    CLUSTER_T = "cluster_t"
    BOOTSTRAP = "bootstrap"
    EXACT_BOOTSTRAP = "exact_bootstrap"


class IntervalSpec(_Model):
    """The interval around each headline."""

    method: IntervalMethod = IntervalMethod.AUTO
    """auto, wilson, clopper_pearson, cluster_t, bootstrap or exact_bootstrap."""
    level: Number = Field(default=0.95, gt=0.0, lt=1.0)
    """Confidence level, strictly between 0 and 1."""
    resamples: Integer = Field(default=10_000, ge=100, le=1_000_000)
    """Bootstrap resamples (bootstrap only)."""
    seed: Integer | None = Field(default=None, ge=0)
    """Seed of the bootstrap's numpy Generator (default 0; `rcard rescore --seed` overrides it)."""
    quantile_method: Literal["linear", "inverted_cdf", "nearest", "lower", "higher", "midpoint"] = (
        "linear"
    )
    """numpy quantile rule of percentile bootstraps (reported with the interval)."""


class Statistic(StrEnum):
    """The point statistic of a headline."""

    MEAN = "mean"
    MEDIAN = "median"
    IQM = "iqm"
    STD = "std"
    VAR = "var"
    STDERR = "stderr"


class StratumWeights(StrEnum):
    """How per-stratum values are pooled."""

    EQUAL = "equal"
    BY_COUNT = "by_count"


class Aggregate(_Model):
    """How scores become headlines: statistic, groups, independent unit, interval, strata."""

    statistic: Statistic = Statistic.MEAN
    """mean (over observations), median or iqm (over per-unit values, rliable's definitions), or the
    spread of the per-unit values: std (divisor n − 1), var, stderr = std / √units (the standard
    error of the mean, as Inspect's stderr metric; undefined below 2 units)."""
    group_by: list[COLUMN] = Field(default_factory=empty_list)
    """Episode columns giving one headline per group (default: one headline)."""
    unit: COLUMN | list[COLUMN] | None = None
    """Independent unit of the interval (default: episode_id, or the reduce key after a reduce)."""
    interval: IntervalSpec = Field(default_factory=IntervalSpec)
    """Interval method and level."""
    strata: list[COLUMN] = Field(default_factory=empty_list)
    """Episode columns whose values form strata: results per stratum, and pooled."""
    weights: StratumWeights = StratumWeights.EQUAL
    """How strata are pooled: equal (each stratum 1/S) or by_count (by observations)."""
    higher_is_better: bool = True
    """Direction of the metric: false when lower is better (cost, error rate); rank 1 is then the lowest."""

    @field_validator("group_by", "strata")
    @classmethod
    def _distinct(cls, value: list[str], info: ValidationInfo) -> list[str]:
        # A group key names each column once (group_by: [agent, agent] was an internal error).
        _once(value, str(info.field_name))
        return value

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            if not value:
                raise ValueError("unit must name at least one column")
            _once(value, "unit")
        return value

    def unit_columns(self) -> list[str] | None:
        """The unit as a list of columns, or None for the default."""
        if self.unit is None:
            return None
        return [self.unit] if isinstance(self.unit, str) else list(self.unit)


class Compare(_Model):
    """Paired differences of every group against a baseline group, on shared units."""

    baseline: dict[COLUMN, GroupValue] = Field(min_length=1)
    """The baseline group, by its group_by values, e.g. {agent: gpt-4o}."""
    pair_on: list[COLUMN] | None = None
    """Columns identifying the units both groups share (default: the aggregate unit)."""


class Reported(_Model):
    """A number as published, which `rcard validate` recomputes."""

    group: dict[COLUMN, GroupValue] = Field(default_factory=empty_dict)
    """The group, by its group_by values (empty for a rule without groups)."""
    stratum: dict[COLUMN, GroupValue] | None = None
    """A stratum, by its strata values (default: the pooled headline)."""
    value: Number
    """The published headline value."""
    tolerance: Number = Field(default=1e-9, ge=0.0)
    """Largest accepted |published − recomputed| (state the rounding you published with)."""
    ci_low: Number | None = None
    """The published lower interval bound, if any (same tolerance)."""
    ci_high: Number | None = None
    """The published upper interval bound, if any (same tolerance)."""
    n: Integer | None = Field(default=None, ge=0)
    """The published number of observations, if any (must match exactly)."""


class Rule(_Model):
    """A reporting rule: how stored episodes become a published number."""

    rule: RULE_ID
    """Dotted id, unique within a card (the file is rules/<id>.yaml)."""
    version: Integer = Field(default=1, ge=1)
    """Version of the rule; bump it when its meaning changes."""
    kind: RuleKind = RuleKind.DIAGNOSTIC
    """original (produced a published number), recovered, regrade or diagnostic."""
    description: str = ""
    """What the rule does and why, in words."""
    select: str | None = None
    """Expression over episode columns and features; episodes where it is not true are removed (and counted)."""
    features: dict[Annotated[str, Field(pattern=FEATURE_NAME)], Feature] = Field(
        default_factory=empty_dict
    )
    """Per-episode values computed from steps, usable by name in select and score."""
    score: str
    """Per-episode score expression: a number, or a boolean counted as 0/1."""
    on_status: OnStatus = Field(default_factory=OnStatus)
    """How each terminal state enters the score."""
    on_missing: Number | Literal["exclude", "error"] = 0.0
    """What a null (or NaN) score becomes: a number, exclude (counted), or error."""
    reduce: Reduce | None = None
    """Combine several attempts per task (or other key) before aggregating."""
    aggregate: Aggregate = Field(default_factory=Aggregate)
    """Statistic, groups, unit, interval and strata of the headline."""
    compare: Compare | None = None
    """Paired comparison of groups against a baseline group."""
    reported: list[Reported] = Field(default_factory=empty_list)
    """In a card's own rules: the numbers as published."""

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        agg = self.aggregate
        if self.compare is not None:
            missing = sorted(set(self.compare.baseline) - set(agg.group_by))
            if missing or not agg.group_by:
                raise ValueError(
                    "compare.baseline must name group_by columns "
                    f"(group_by is {agg.group_by or '[]'}; baseline names {sorted(self.compare.baseline)})"
                )
        overlap = set(agg.group_by) & set(agg.strata)
        if overlap:
            raise ValueError(f"{sorted(overlap)} is both a group_by and a strata column")
        for i, entry in enumerate(self.reported):
            if set(entry.group) != set(agg.group_by):
                raise ValueError(
                    f"reported[{i}].group must give a value for each group_by column "
                    f"{agg.group_by or '(none)'}, got {sorted(entry.group) or '(none)'}"
                )
            if entry.stratum is not None and set(entry.stratum) != set(agg.strata):
                raise ValueError(
                    f"reported[{i}].stratum must give a value for each strata column {agg.strata}"
                )
        return self

    def expressions(self) -> list[tuple[str, str]]:
        """Every expression of the rule as (key, text), e.g. ("features.n.where", "...")."""
        out: list[tuple[str, str]] = []
        if self.select is not None:
            out.append(("select", self.select))
        for name, feature in self.features.items():
            for part in ("where", "value"):
                text = getattr(feature, part)
                if text is not None:
                    out.append((f"features.{name}.{part}", text))
        out.append(("score", self.score))
        return out

    def to_json_dict(self) -> dict[str, Any]:
        """The rule as plain JSON data, with the file's key names (from, with)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


register_document("rule", lambda: Rule)
