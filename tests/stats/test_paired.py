"""Paired differences on shared units, from stats-vectors.md."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import (
    UnitStats,
    paired_cluster_difference,
    paired_difference,
    paired_difference_by_unit,
)

TOL = 1e-6
A = [1, 1, 0, 1, 0, 1, 1, 0]
B = [1, 0, 0, 1, 0, 1, 0, 0]


def test_reference_example():
    r = paired_difference(A, B)
    assert r.difference == pytest.approx(0.25, abs=TOL)
    assert r.se_paired == pytest.approx(0.163663, abs=TOL)
    assert r.se_unpaired == pytest.approx(0.258775, abs=TOL)
    assert r.n_units == 8 and r.interval.df == 7
    assert r.interval.method == "paired_t"


def test_t_interval_on_m_minus_one_df():
    r = paired_difference(A, B)
    half = stats.t.ppf(0.975, 7) * 0.163663
    assert r.interval.low == pytest.approx(0.25 - half, abs=1e-5)
    assert r.interval.high == pytest.approx(0.25 + half, abs=1e-5)
    json.dumps(r.to_dict(), allow_nan=False)


def test_by_unit_aligns_and_counts_dropped():
    a = {f"t{i}": v for i, v in enumerate(A)} | {"only-a": 1.0}
    b = {f"t{i}": v for i, v in enumerate(B)} | {"only-b1": 0.0, "only-b2": 1.0}
    r = paired_difference_by_unit(a, b)
    assert r.difference == pytest.approx(0.25, abs=TOL)
    assert r.se_paired == pytest.approx(0.163663, abs=TOL)
    assert (r.dropped_only_in_a, r.dropped_only_in_b) == (1, 2)
    assert r.interval.details["dropped_only_in_a"] == 1


def test_cluster_version_with_one_episode_per_unit_equals_simple():
    sa = UnitStats.from_values(A, [f"t{i}" for i in range(8)])
    sb = UnitStats.from_values(B, [f"t{i}" for i in range(8)])
    r = paired_cluster_difference(sa, sb)
    assert r.se_paired == pytest.approx(0.163663, abs=TOL)
    assert r.se_unpaired == pytest.approx(0.258775, abs=TOL)


def test_cluster_version_with_equal_episodes_per_unit_equals_unit_means():
    # Equal sizes: the cluster-robust paired SE is the paired SE of the unit means.
    rng = np.random.default_rng(5)
    tasks = np.repeat(np.arange(12), 4)
    a = rng.normal(size=48) + tasks * 0.3
    b = rng.normal(size=48) + tasks * 0.3
    r = paired_cluster_difference(UnitStats.from_values(a, tasks), UnitStats.from_values(b, tasks))
    ma, mb = a.reshape(12, 4).mean(1), b.reshape(12, 4).mean(1)
    simple = paired_difference(ma, mb)
    assert r.interval.method == "paired_cluster_t"
    assert r.difference == pytest.approx(simple.difference, abs=1e-12)
    assert r.se_paired == pytest.approx(simple.se_paired, abs=1e-12)
    assert r.n_a == 48 and r.n_units == 12


def test_one_shared_unit_is_undefined():
    r = paired_difference_by_unit({"t1": 1.0, "t2": 0.0}, {"t1": 0.0, "t3": 1.0})
    assert r.n_units == 1 and r.difference == 1.0
    assert not r.interval.defined and r.interval.reason == "undefined (1 unit)"
    assert r.se_paired is None


def test_no_shared_units_is_undefined():
    r = paired_difference_by_unit({"t1": 1.0}, {"t2": 0.0})
    assert r.difference is None and r.n_units == 0
    assert r.interval.reason == "undefined (n = 0)"
    json.dumps(r.to_dict(), allow_nan=False)


def test_identical_systems_have_no_variation():
    r = paired_difference([0.1, 0.5, 0.9], [0.1, 0.5, 0.9])
    assert r.difference == 0.0 and r.se_paired == 0.0
    # A constant shift, summed with rounding noise, is still no variation.
    r = paired_difference([0.3, 0.7, 1.1], [0.2, 0.6, 1.0])
    assert r.difference == pytest.approx(0.1) and r.se_paired == 0.0
    assert not r.interval.defined and "no variation" in r.interval.reason


def test_misaligned_arrays_raise():
    with pytest.raises(StatisticsError):
        paired_difference([1, 0], [1])
