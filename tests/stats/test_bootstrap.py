"""Bootstraps over units: exact enumeration, seeded resampling, pairing, refusals."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import scipy.stats

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import (
    UnitStats,
    bootstrap_interval,
    exact_bootstrap_distribution,
    exact_bootstrap_interval,
    paired_bootstrap_interval,
)

TOL = 1e-6
D = [0.02, 0.05, -0.01]


# --- exact bootstrap (stats-vectors.md, "Paired differences") --------------------------


def test_exact_distribution_counts():
    dist = exact_bootstrap_distribution(D)
    assert dist.total == 27
    assert dist.values == pytest.approx([-0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05], abs=1e-12)
    assert dist.counts.tolist() == [1, 3, 6, 7, 6, 3, 1]
    assert dist.multisets == 10  # C(5, 3) multisets instead of 27 orderings


def test_exact_probability_at_or_below_zero():
    assert exact_bootstrap_distribution(D).cdf(0.0) == pytest.approx(4 / 27, abs=TOL)
    assert exact_bootstrap_interval(D).details["p_le_zero"] == pytest.approx(4 / 27, abs=TOL)


def test_exact_interval_linear_rule():
    iv = exact_bootstrap_interval(D, quantile_method="linear")
    assert iv.low == pytest.approx(-0.0035, abs=TOL)
    assert iv.high == pytest.approx(0.0435, abs=TOL)
    assert iv.details["quantile_method"] == "linear"
    assert iv.details["resamples"] == 27
    assert iv.estimate == pytest.approx(0.02)
    assert iv.method == "exact_bootstrap" and iv.n_units == 3


def test_exact_interval_inverted_cdf_rule():
    iv = exact_bootstrap_interval(D, quantile_method="inverted_cdf")
    assert iv.low == pytest.approx(-0.01, abs=TOL)
    assert iv.high == pytest.approx(0.05, abs=TOL)
    assert iv.details["quantile_method"] == "inverted_cdf"


def test_default_quantile_rule_is_numpys_default_and_is_named():
    assert exact_bootstrap_interval(D).details["quantile_method"] == "linear"
    assert bootstrap_interval(D).details["quantile_method"] == "linear"


def test_exact_matches_brute_force_enumeration():
    # 4 units: all 4⁴ = 256 ordered resamples by brute force, for the median.
    x = np.array([0.3, -1.2, 2.5, 0.7])
    grid = np.array(np.meshgrid(*[range(4)] * 4, indexing="ij")).reshape(4, -1).T
    brute = np.median(x[grid], axis=1)
    iv = exact_bootstrap_interval(x, statistic="median", quantile_method="hazen")
    low, high = np.quantile(brute, [0.025, 0.975], method="hazen")
    assert iv.low == pytest.approx(low, abs=1e-12)
    assert iv.high == pytest.approx(high, abs=1e-12)
    assert iv.se == pytest.approx(np.std(brute), abs=1e-12)


def test_exact_ten_units_is_fast():
    x = np.random.default_rng(7).normal(size=10)
    start = time.perf_counter()
    iv = exact_bootstrap_interval(x)
    assert time.perf_counter() - start < 5.0
    assert iv.details["resamples"] == 10**10
    assert iv.details["multisets"] == math.comb(19, 10)
    assert exact_bootstrap_distribution(x).counts.sum() == 10**10


def test_exact_cap_raises():
    with pytest.raises(StatisticsError, match="bootstrap_interval"):
        exact_bootstrap_interval(np.arange(12.0), max_multisets=200_000)
    # A raised cap still cannot overflow the integer weights.
    with pytest.raises(StatisticsError, match="at most 15 units"):
        exact_bootstrap_interval(np.arange(16.0), max_multisets=10**12)


def test_exact_ratio_weights_units_by_size():
    # Two units: 1/1 and 0/3. Ratio of sums is 0.25, mean of unit means 0.5.
    s = UnitStats.from_values([1.0, 0.0, 0.0, 0.0], ["a", "b", "b", "b"])
    assert exact_bootstrap_interval(s, statistic="ratio").estimate == pytest.approx(0.25)
    assert exact_bootstrap_interval(s, statistic="mean").estimate == pytest.approx(0.5)
    dist = exact_bootstrap_distribution(s, statistic="ratio")
    # Resamples {a,a}: 1, {a,b} ×2: 1/4, {b,b}: 0.
    assert dist.values == pytest.approx([0.0, 0.25, 1.0])
    assert dist.counts.tolist() == [1, 2, 1]


# --- random bootstrap -----------------------------------------------------------------


def _sample(n=40, seed=3):
    return np.random.default_rng(seed).normal(0.5, 0.2, size=n)


def test_same_seed_same_interval():
    a = bootstrap_interval(_sample(), seed=11, n_resamples=2000)
    b = bootstrap_interval(_sample(), seed=11, n_resamples=2000)
    assert (a.low, a.high, a.se) == (b.low, b.high, b.se)


def test_other_seed_other_interval():
    a = bootstrap_interval(_sample(), seed=11, n_resamples=2000)
    b = bootstrap_interval(_sample(), seed=12, n_resamples=2000)
    assert (a.low, a.high) != (b.low, b.high)


def test_details_report_resamples_seed_rule_statistic():
    iv = bootstrap_interval(_sample(), seed=5, n_resamples=1000, quantile_method="inverted_cdf")
    d = iv.details
    assert d["resamples"] == 1000 and d["seed"] == 5
    assert d["quantile_method"] == "inverted_cdf" and d["statistic"] == "mean"
    assert "default_rng" in d["generator"]
    json.dumps(iv.to_dict(), allow_nan=False)


def test_bootstrap_agrees_with_exact_for_few_units():
    # The percentiles of 27 atoms depend on the rule; the distribution itself does not.
    iv = bootstrap_interval(D, seed=0, n_resamples=200_000)
    exact = exact_bootstrap_distribution(D)
    assert iv.details["p_le_zero"] == pytest.approx(4 / 27, abs=5e-3)
    assert iv.se == pytest.approx(exact.std(), rel=1e-2)
    assert (iv.low, iv.high) == pytest.approx((-0.01, 0.05), abs=1e-9)


@pytest.mark.parametrize("statistic", ["mean", "ratio", "median", "iqm"])
def test_named_statistics_bracket_estimate(statistic):
    units = np.repeat(np.arange(30), 3)
    s = UnitStats.from_values(_sample(90), units)
    iv = bootstrap_interval(s, statistic=statistic, n_resamples=2000)
    assert iv.defined and iv.low <= iv.estimate <= iv.high
    assert iv.n == 90 and iv.n_units == 30


def test_callable_statistic():
    iv = bootstrap_interval(_sample(), statistic=lambda x: x.max(axis=-1), n_resamples=500)
    assert iv.estimate == pytest.approx(_sample().max())
    with pytest.raises(StatisticsError):
        bootstrap_interval(_sample(), statistic=lambda x: x.max(), n_resamples=500)


def test_one_unit_and_no_units_are_undefined():
    one = bootstrap_interval(UnitStats.from_values([1.0, 0.0, 1.0], ["t"] * 3))
    assert not one.defined and one.reason == "undefined (1 unit)"
    none = bootstrap_interval([])
    assert not none.defined and none.reason == "undefined (n = 0)"


@pytest.mark.parametrize(
    "fn", [bootstrap_interval, exact_bootstrap_interval, exact_bootstrap_distribution]
)
def test_zero_events_refused(fn):
    # A bootstrap of 32 zeros gives [0, 0]; the message points to the right tools.
    with pytest.raises(StatisticsError, match="wilson_interval") as err:
        fn(np.zeros(32) if fn is bootstrap_interval else np.zeros(5))
    assert "zero_event_upper_bound" in str(err.value)
    assert "clopper_pearson" in str(err.value)


def test_zero_events_refused_for_unit_stats_and_all_events_too():
    zeros = UnitStats.from_values(np.zeros(64), np.repeat(np.arange(8), 8))
    with pytest.raises(StatisticsError, match="zero events"):
        bootstrap_interval(zeros)
    ones = UnitStats.from_values(np.ones(64), np.repeat(np.arange(8), 8))
    with pytest.raises(StatisticsError, match="all events"):
        bootstrap_interval(ones)


def test_values_cancelling_within_units_are_not_zero_events():
    # Unit means are all 0 but observations vary: not zero events, just no variation.
    s = UnitStats.from_values([1.0, -1.0, 2.0, -2.0], ["a", "a", "b", "b"])
    iv = bootstrap_interval(s, n_resamples=100)
    assert not iv.defined and "same value" in iv.reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"level": 1.5},
        {"n_resamples": 1},
        {"seed": -1},
        {"quantile_method": "bogus"},
        {"statistic": "mode"},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(StatisticsError):
        bootstrap_interval(_sample(), **kwargs)


# --- paired bootstrap -----------------------------------------------------------------


def _paired_sample(m=60, seed=9):
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0, 1, size=m)  # shared per task, dominates the variance
    a = difficulty + rng.normal(0.05, 0.02, size=m)
    b = difficulty + rng.normal(0.0, 0.02, size=m)
    return a, b


def test_paired_bootstrap_resamples_units_jointly():
    a, b = _paired_sample()
    paired = paired_bootstrap_interval(a, b, seed=4, n_resamples=4000)
    # The same seed draws the same unit indices, so the paired mean difference is
    # exactly the bootstrap of the per-unit differences.
    single = bootstrap_interval(a - b, seed=4, n_resamples=4000)
    assert paired.low == pytest.approx(single.low, abs=1e-12)
    assert paired.high == pytest.approx(single.high, abs=1e-12)
    assert paired.details["resampled"] == "shared units, jointly"


def test_paired_bootstrap_is_far_narrower_than_independent_resampling():
    a, b = _paired_sample()
    paired = paired_bootstrap_interval(a, b, seed=4, n_resamples=4000)
    sep_a = bootstrap_interval(a, seed=1, n_resamples=4000)
    sep_b = bootstrap_interval(b, seed=2, n_resamples=4000)
    independent_se = math.hypot(sep_a.se, sep_b.se)
    assert paired.se < independent_se / 5
    assert paired.low > 0  # the real +0.05 shift is detected


def test_paired_bootstrap_median_difference_uses_joint_draws():
    a, b = _paired_sample()
    iv = paired_bootstrap_interval(a, b, statistic="median", n_resamples=2000)
    assert iv.estimate == pytest.approx(np.median(a) - np.median(b))
    assert iv.defined and iv.low <= iv.estimate <= iv.high


def test_paired_bootstrap_aligns_unit_stats_and_reports_drops():
    a = UnitStats.from_values([1.0, 0.0, 1.0, 1.0, 0.5], ["t1", "t2", "t3", "t4", "t5"])
    b = UnitStats.from_values([0.0, 0.0, 1.0, 0.0, 0.2], ["t1", "t2", "t3", "t4", "t9"])
    iv = paired_bootstrap_interval(a, b, n_resamples=500)
    assert iv.n_units == 4
    assert iv.details["dropped_only_in_a"] == 1 and iv.details["dropped_only_in_b"] == 1
    assert iv.estimate == pytest.approx(0.5)


def test_paired_bootstrap_refuses_zero_events_on_both_sides():
    with pytest.raises(StatisticsError, match="zero events"):
        paired_bootstrap_interval(np.zeros(10), np.zeros(10))
    # One zero-event side is fine: the difference still varies.
    iv = paired_bootstrap_interval(np.zeros(10), np.r_[np.ones(3), np.zeros(7)], n_resamples=500)
    assert iv.defined


def test_paired_bootstrap_rejects_misaligned_input():
    with pytest.raises(StatisticsError):
        paired_bootstrap_interval([1.0, 2.0], [1.0])


def test_exact_eleven_and_twelve_units_work_with_the_defaults():
    # Issue 13.2: 11 units needed 352,716 multisets, more than the old default cap of
    # 200,000 (exit 2), while the docs promised 15 units. 12 is now the real default.
    for c in (11, 12):
        x = np.random.default_rng(c).normal(size=c)
        dist = exact_bootstrap_distribution(x)
        assert dist.multisets == math.comb(2 * c - 1, c) and dist.counts.sum() == c**c
        # The exact mean of the resampled means is the sample mean; its variance is
        # the plug-in variance / c (a closed form, independent of the enumeration).
        p = dist.probabilities
        assert float(p @ dist.values) == pytest.approx(x.mean(), abs=1e-12)
        assert float(p @ (dist.values - x.mean()) ** 2) == pytest.approx(x.var() / c, rel=1e-9)
    with pytest.raises(StatisticsError, match="default allows 12 units"):
        exact_bootstrap_interval(np.arange(13.0))


@pytest.mark.parametrize("statistic", ["mean", "median", "iqm", "ratio"])
def test_exact_distribution_equals_brute_force_enumeration(statistic):
    # Hand enumeration: all 5⁵ = 3125 ordered resamples, with itertools.product.
    import itertools

    s = UnitStats.from_values([0.3, 1.0, 0.0, 2.5, 0.7, 0.7, 4.0], ["a", "b", "b", "c", "d", "e", "e"])
    means, sums, counts = s.unit_means, s.sums, s.counts
    values = []
    for draw in itertools.product(range(5), repeat=5):
        d = list(draw)
        if statistic == "ratio":
            values.append(sums[d].sum() / counts[d].sum())
        elif statistic == "mean":
            values.append(means[d].mean())
        elif statistic == "median":
            values.append(float(np.median(means[d])))
        else:
            values.append(float(scipy.stats.trim_mean(means[d], 0.25)))
    dist = exact_bootstrap_distribution(s, statistic=statistic)
    assert dist.total == 3125
    for q in (0.025, 0.5, 0.975):
        assert dist.quantile(q) == pytest.approx(float(np.quantile(values, q)), abs=1e-12)
