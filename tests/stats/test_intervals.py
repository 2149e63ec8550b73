"""Intervals against the reference values in design/stats-vectors.md."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import (
    Interval,
    UnitStats,
    clopper_pearson_interval,
    cluster_t_interval,
    wilson_interval,
    zero_event_upper_bound,
)

TOL = 1e-6

# k, n, Wilson [low, high], Clopper–Pearson [low, high] (stats-vectors.md, 95% two-sided)
PROPORTIONS = [
    (3, 10, (0.1077912674, 0.6032218525), (0.0667395112, 0.6524528501)),
    (0, 32, (0.0, 0.1071791983), (0.0, 0.1088811607)),
    (32, 32, (0.8928208017, 1.0), (0.8911188393, 1.0)),
    (7, 50, (0.0695083343, 0.2618619371), (0.0581917003, 0.2673960025)),
    (0, 10, (0.0, 0.2775327999), (0.0, 0.3084971078)),
    (717, 1024, (0.6714270635, 0.7274671399), (0.6710976619, 0.7281370268)),
]


@pytest.mark.parametrize(("k", "n", "wilson", "cp"), PROPORTIONS)
def test_wilson_reference_table(k, n, wilson, cp):
    iv = wilson_interval(k, n)
    assert iv.defined and iv.method == "wilson" and iv.level == 0.95
    assert iv.low == pytest.approx(wilson[0], abs=TOL)
    assert iv.high == pytest.approx(wilson[1], abs=TOL)
    assert iv.n == n and iv.estimate == pytest.approx(k / n)


@pytest.mark.parametrize(("k", "n", "wilson", "cp"), PROPORTIONS)
def test_clopper_pearson_reference_table(k, n, wilson, cp):
    iv = clopper_pearson_interval(k, n)
    assert iv.defined and iv.method == "clopper_pearson"
    assert iv.low == pytest.approx(cp[0], abs=TOL)
    assert iv.high == pytest.approx(cp[1], abs=TOL)


def test_boundaries_are_exact_zero_and_one():
    assert wilson_interval(0, 32).low == 0.0
    assert wilson_interval(32, 32).high == 1.0
    assert clopper_pearson_interval(0, 32).low == 0.0
    assert clopper_pearson_interval(32, 32).high == 1.0


@pytest.mark.parametrize(("n", "bound"), [(10, 0.258866), (32, 0.0893681990), (100, 0.029513)])
def test_zero_event_upper_bound(n, bound):
    assert zero_event_upper_bound(n) == pytest.approx(bound, abs=TOL)


@pytest.mark.parametrize("fn", [wilson_interval, clopper_pearson_interval])
@pytest.mark.parametrize(("n", "bound"), [(10, 0.258866), (32, 0.0893681990), (100, 0.029513)])
def test_zero_events_carry_one_sided_bound(fn, n, bound):
    # So a report can print "0/n (95% upper bound …)" instead of "0%".
    iv = fn(0, n)
    assert iv.details["zero_events"] is True
    assert iv.details["one_sided_upper"] == pytest.approx(bound, abs=TOL)
    assert iv.details["one_sided_level"] == 0.95


def test_all_events_carry_one_sided_lower_bound():
    iv = wilson_interval(32, 32)
    assert iv.details["one_sided_lower"] == pytest.approx(1 - 0.0893681990, abs=TOL)


def test_zero_event_bound_needs_observations():
    with pytest.raises(StatisticsError):
        zero_event_upper_bound(0)


@pytest.mark.parametrize("fn", [wilson_interval, clopper_pearson_interval])
def test_n_zero_is_undefined_not_nan(fn):
    iv = fn(0, 0)
    assert not iv.defined
    assert iv.low is None and iv.high is None
    assert iv.reason == "undefined (n = 0)"
    json.dumps(iv.to_dict(), allow_nan=False)


@pytest.mark.parametrize("fn", [wilson_interval, clopper_pearson_interval])
@pytest.mark.parametrize(
    ("k", "n", "level"),
    [(11, 10, 0.95), (-1, 10, 0.95), (1, 10, 1.0), (1, 10, 0.0), (1.5, 10, 0.95)],
)
def test_caller_mistakes_raise(fn, k, n, level):
    with pytest.raises(StatisticsError):
        fn(k, n, level)


# --- the independent unit: 4 runs × 256 episodes ----------------------------------------

RUN_SUCCESSES = (160, 164, 191, 202)


def _four_runs() -> UnitStats:
    values = np.concatenate([np.r_[np.ones(s), np.zeros(256 - s)] for s in RUN_SUCCESSES])
    runs = np.repeat(["run-1", "run-2", "run-3", "run-4"], 256)
    return UnitStats.from_values(values, runs)


def test_four_runs_binomial_se():
    iv = wilson_interval(717, 1024)
    assert iv.estimate == pytest.approx(0.700195, abs=TOL)
    assert iv.se == pytest.approx(0.014318, abs=TOL)


def test_four_runs_run_level_se():
    # One value per run: the cluster machinery reduces to sd(rates, ddof=1)/√4.
    rates = np.array(RUN_SUCCESSES) / 256
    iv = cluster_t_interval(UnitStats.from_values(rates))
    assert iv.se == pytest.approx(0.040007, abs=TOL)


def test_four_runs_cluster_t():
    iv = cluster_t_interval(_four_runs())
    assert iv.defined and iv.method == "cluster_t"
    assert iv.estimate == pytest.approx(0.700195, abs=TOL)
    assert iv.se == pytest.approx(0.040007, abs=TOL)
    assert iv.df == 3
    assert iv.n == 1024 and iv.n_units == 4
    assert iv.low == pytest.approx(0.572874, abs=TOL)
    assert iv.high == pytest.approx(0.827516, abs=TOL)
    # Treating 1024 episodes as independent understates the SE by almost 3×.
    assert iv.details["se_iid"] < iv.se / 2.5


def test_inspect_ai_clustered_stderr():
    values = np.arange(20)
    iv = cluster_t_interval(UnitStats.from_values(values, values % 4))
    assert iv.estimate == pytest.approx(9.5)
    assert iv.se == pytest.approx(0.645497, abs=TOL)
    assert iv.low == pytest.approx(7.445740, abs=TOL)
    assert iv.high == pytest.approx(11.554260, abs=TOL)


def test_one_cluster_is_undefined_not_zero_width():
    # inspect_ai returns SE 0 here; we say why there is no interval.
    iv = cluster_t_interval(UnitStats.from_values(np.arange(20), [0] * 20))
    assert not iv.defined
    assert iv.reason == "undefined (1 unit)"
    assert iv.low is None and iv.high is None and iv.se is None
    assert iv.estimate == pytest.approx(9.5)
    assert iv.n == 20 and iv.n_units == 1


def test_no_observations_is_undefined():
    iv = cluster_t_interval(UnitStats.empty())
    assert not iv.defined and iv.reason == "undefined (n = 0)"
    assert iv.n == 0 and iv.n_units == 0


def test_no_variation_between_units_is_undefined():
    iv = cluster_t_interval(UnitStats.from_values([0.0] * 6, [1, 1, 2, 2, 3, 3]))
    assert not iv.defined and "no variation" in iv.reason


def test_to_dict_is_plain_json():
    iv = cluster_t_interval(_four_runs())
    d = iv.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text) == d
    assert set(d) >= {
        "low",
        "high",
        "method",
        "level",
        "n",
        "n_units",
        "defined",
        "reason",
        "se",
        "df",
        "details",
    }
    assert type(d["n"]) is int and type(d["low"]) is float


def test_interval_is_frozen_and_details_copied():
    details = {"a": 1}
    iv = Interval(0.1, 0.2, "x", 0.95, 10, 10, details=details)
    details["a"] = 2
    assert iv.details["a"] == 1
    with pytest.raises(AttributeError):
        iv.low = 0.0  # type: ignore[misc]


def test_interval_invariants():
    with pytest.raises(StatisticsError):
        Interval(None, 0.2, "x", 0.95, 10, 10)
    with pytest.raises(StatisticsError):
        Interval(None, None, "x", 0.95, 10, 10, defined=False)  # no reason


@settings(deadline=None)  # scipy warm-up can exceed the default on a busy machine
@given(n=st.integers(2, 5000), data=st.data(), level=st.floats(0.5, 0.999))
def test_wilson_within_unit_interval_and_contains_estimate(n, data, level):
    k = data.draw(st.integers(0, n))
    iv = wilson_interval(k, n, level)
    assert 0.0 <= iv.low <= k / n <= iv.high <= 1.0


@settings(deadline=None)  # scipy warm-up can exceed the default on a busy machine
@given(n=st.integers(2, 2000), data=st.data())
def test_clopper_pearson_contains_estimate(n, data):
    k = data.draw(st.integers(0, n))
    iv = clopper_pearson_interval(k, n)
    assert 0.0 <= iv.low <= k / n <= iv.high <= 1.0


@pytest.mark.parametrize("fn", [wilson_interval, clopper_pearson_interval])
@pytest.mark.parametrize("k", [0, 1])
def test_one_observation_has_no_interval(fn, k):
    # Issue 13.1: 1/1 used to report [0.2065, 1.0] (Wilson) as defined, while the
    # headline's own warning said the interval was undefined.
    iv = fn(k, 1)
    assert not iv.defined and iv.low is None and iv.high is None
    assert iv.reason == "undefined (1 unit)" and iv.n_units == 1 and iv.estimate == k
    assert fn(k, 2).defined  # two observations do have one
