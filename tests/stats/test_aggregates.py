"""Aggregates (rliable's definitions) and stratum pooling, from stats-vectors.md."""

from __future__ import annotations

import json

import pytest

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import aggregate, iqm, mean, median, pool_strata, stratified

TOL = 1e-6
X = [[0.1, 0.9, 0.2], [0.4, 1.5, 0.3], [0.2, 0.8, 5.0]]  # runs × tasks


def test_iqm_mean_median_example():
    assert iqm(X) == pytest.approx(0.52, abs=TOL)
    assert mean(X) == pytest.approx(1.0444444, abs=TOL)
    assert median(X) == pytest.approx(1.0666667, abs=TOL)  # median of per-task means


def test_rliable_test_case():
    x = [[1, 2], [2, 2], [1, 1], [2, 1]]
    assert mean(x) == pytest.approx(1.5, abs=TOL)
    assert median(x) == pytest.approx(1.5, abs=TOL)
    assert iqm(x) == pytest.approx(1.5, abs=TOL)


def test_heavy_tail_flips_ranking():
    a, b = [0, 0, 0, 0, 100], [5, 5, 5, 5, 5]
    assert (mean(a), median(a), iqm(a)) == pytest.approx((20, 0, 0), abs=TOL)
    assert (mean(b), median(b), iqm(b)) == pytest.approx((5, 5, 5), abs=TOL)
    assert mean(a) > mean(b) and median(a) < median(b) and iqm(a) < iqm(b)


def test_aggregate_by_name():
    assert aggregate(X, "iqm") == pytest.approx(0.52, abs=TOL)
    with pytest.raises(StatisticsError):
        aggregate(X, "mode")


@pytest.mark.parametrize("fn", [mean, median, iqm])
def test_empty_and_nan_raise(fn):
    with pytest.raises(StatisticsError):
        fn([])
    with pytest.raises(StatisticsError):
        fn([1.0, float("nan")])


# Kidney stones (Simpson's paradox): A = 81/87 small, 192/263 large; B = 234/270, 55/80.
A_RATES = {"small": 81 / 87, "large": 192 / 263}
A_COUNTS = {"small": 87, "large": 263}
B_RATES = {"small": 234 / 270, "large": 55 / 80}
B_COUNTS = {"small": 270, "large": 80}


def test_kidney_stones_by_count():
    a = pool_strata(A_RATES, A_COUNTS, weights="by_count")
    b = pool_strata(B_RATES, B_COUNTS, weights="by_count")
    assert a.pooled == pytest.approx(0.7800, abs=5e-5)
    assert b.pooled == pytest.approx(0.8257, abs=5e-5)
    assert b.pooled > a.pooled  # B wins when pooled by count


def test_kidney_stones_equal_weight():
    a = pool_strata(A_RATES, A_COUNTS, weights="equal")
    b = pool_strata(B_RATES, B_COUNTS, weights="equal")
    assert a.pooled == pytest.approx(0.8305, abs=5e-5)
    assert b.pooled == pytest.approx(0.7771, abs=5e-5)
    assert a.pooled > b.pooled  # A wins, as it does in every stratum


def test_per_stratum_values_are_reported():
    a = pool_strata(A_RATES, A_COUNTS, weights="by_count")
    assert [s.key for s in a.strata] == ["small", "large"]
    assert [s.n for s in a.strata] == [87, 263]
    assert a.strata[0].value == pytest.approx(81 / 87)
    assert sum(s.weight for s in a.strata) == pytest.approx(1.0)
    assert a.n == 350 and a.weights == "by_count"
    json.dumps(a.to_dict(), allow_nan=False)


def test_stratified_from_raw_values_matches_counts():
    values = [1.0] * 81 + [0.0] * 6 + [1.0] * 192 + [0.0] * 71
    labels = ["small"] * 87 + ["large"] * 263
    r = stratified(values, labels, weights="by_count")
    assert r.pooled == pytest.approx(0.7800, abs=5e-5)
    assert [s.key for s in r.strata] == ["large", "small"]  # sorted labels
    r_eq = stratified(values, labels, weights="equal")
    assert r_eq.pooled == pytest.approx(0.8305, abs=5e-5)


def test_pooling_errors():
    with pytest.raises(StatisticsError):
        pool_strata(A_RATES, A_COUNTS, weights="by_size")
    with pytest.raises(StatisticsError):
        pool_strata(A_RATES, {"small": 87})
    with pytest.raises(StatisticsError, match="no observations"):
        pool_strata(A_RATES, {"small": 87, "large": 0})


@pytest.mark.parametrize("values", [[0.1, 0.9, 0.2, 0.4], [1, 0, 1, 1, 0], [3.5, -2.0]])
def test_spread_statistics_are_the_n_minus_1_formulas(values):
    import math
    import statistics

    n = len(values)
    assert aggregate(values, "std") == pytest.approx(statistics.stdev(values), rel=1e-12)
    assert aggregate(values, "var") == pytest.approx(statistics.variance(values), rel=1e-12)
    assert aggregate(values, "stderr") == pytest.approx(statistics.stdev(values) / math.sqrt(n), rel=1e-12)


@pytest.mark.parametrize("name", ["std", "var", "stderr"])
def test_spread_of_one_value_is_undefined_not_zero(name):
    with pytest.raises(StatisticsError, match="undefined"):
        aggregate([0.7], name)
