"""Honest statistics for rollout cards: pure functions, arrays in, frozen results out.

- intervals: `Interval`, Wilson, Clopper–Pearson, zero-event bound, cluster-robust t
- units: `UnitStats`, mergeable per-unit sufficient statistics (n, Σy, Σy²)
- bootstrap: seeded percentile bootstrap over units, exact enumeration, paired
- aggregates: mean, median, IQM (rliable's definitions), stratum pooling
- attempts: pass@k, pass^k, expected maximum, best-of-k optimism
- paired: paired differences on shared units
- pvalues: exact McNemar, paired t and bootstrap p-values, Holm / Benjamini–Hochberg
- power: power, sample size, minimum detectable effect, seeds needed, variance split
- ranks: bootstrap intervals of ranks, tied sets
- runs_tasks: rliable's toolkit on runs × tasks matrices (stratified bootstrap,
  probability of improvement, performance profiles, optimality gap)

Inputs where a statistic is undefined by the caller's mistake raise
`rollout_cards.errors.StatisticsError`; intervals that the data cannot support
(no observations, one unit) come back with ``defined=False`` and a reason.
"""

from rollout_cards.stats.aggregates import (
    AGGREGATE_STATISTICS,
    STRATUM_WEIGHTS,
    StratifiedResult,
    StratumValue,
    aggregate,
    iqm,
    mean,
    median,
    pool_strata,
    stratified,
)
from rollout_cards.stats.attempts import (
    best_of_k_optimism,
    expected_max,
    pass_at_k,
    pass_at_k_many,
    pass_hat_k,
    pass_hat_k_many,
)
from rollout_cards.stats.bootstrap import (
    BOOTSTRAP_STATISTICS,
    BootstrapDistribution,
    bootstrap_interval,
    exact_bootstrap_distribution,
    exact_bootstrap_interval,
    paired_bootstrap_interval,
)
from rollout_cards.stats.intervals import (
    Interval,
    clopper_pearson_interval,
    cluster_t_interval,
    undefined_interval,
    wilson_interval,
    zero_event_upper_bound,
)
from rollout_cards.stats.paired import (
    PairedDifference,
    paired_cluster_difference,
    paired_difference,
    paired_difference_by_unit,
)
from rollout_cards.stats.units import UnitStats, align_units

__all__ = [
    "AGGREGATE_STATISTICS",
    "BOOTSTRAP_STATISTICS",
    "STRATUM_WEIGHTS",
    "BootstrapDistribution",
    "Interval",
    "PairedDifference",
    "StratifiedResult",
    "StratumValue",
    "UnitStats",
    "aggregate",
    "align_units",
    "best_of_k_optimism",
    "bootstrap_interval",
    "clopper_pearson_interval",
    "cluster_t_interval",
    "exact_bootstrap_distribution",
    "exact_bootstrap_interval",
    "expected_max",
    "iqm",
    "mean",
    "median",
    "paired_bootstrap_interval",
    "paired_cluster_difference",
    "paired_difference",
    "paired_difference_by_unit",
    "pass_at_k",
    "pass_at_k_many",
    "pass_hat_k",
    "pass_hat_k_many",
    "pool_strata",
    "stratified",
    "undefined_interval",
    "wilson_interval",
    "zero_event_upper_bound",
]
