"""rliable's toolkit: rliable's own test values (google-research/rliable tests/rliable/
metrics_test.py and library_test.py, re-stated here), scipy's Mann–Whitney, and the two
faults of rliable's bootstrap that ours must not have (global random state, lost pairing)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from rollout_cards.stats.runs_tasks import (
    iqm_of,
    mean_of,
    median_of,
    optimality_gap,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap,
)

# rliable metrics_test: runs x tasks
X = np.array([[1, 2], [2, 2], [1, 1], [2, 1]], dtype=float)
Y = np.array([[1, 1], [2, 2], [3, 3]], dtype=float)
# rliable library_test
LX = np.arange(5 * 16, dtype=float).reshape(5, 16)
LY = np.flip(LX, axis=0)


def test_rliable_metric_values():
    assert median_of(X) == mean_of(X) == iqm_of(X) == 1.5
    assert median_of(Y) == mean_of(Y) == iqm_of(Y) == 2
    assert probability_of_improvement(X, Y) == pytest.approx(1 / 3)


def test_probability_of_improvement_is_mann_whitney_per_task():
    rng = np.random.default_rng(4)
    x, y = rng.integers(0, 5, (6, 9)).astype(float), rng.integers(0, 5, (4, 9)).astype(float)
    ref = np.mean([scipy.stats.mannwhitneyu(x[:, t], y[:, t]).statistic / (6 * 4) for t in range(9)])
    assert probability_of_improvement(x, y) == pytest.approx(ref)


def _metrics(a):
    return np.stack([iqm_of(a), mean_of(a), median_of(a), optimality_gap(a)], axis=-1)


@pytest.mark.parametrize("task_bootstrap", [False, True])
def test_rliable_interval_estimation(task_bootstrap):
    for scores in (LX, LY):
        r = stratified_bootstrap([scores], _metrics, n_resamples=100, task_bootstrap=task_bootstrap)
        np.testing.assert_array_equal(r.estimate, _metrics(scores[None])[0])
        assert np.all(r.low < r.estimate) and np.all(r.estimate < r.high)
    poi = stratified_bootstrap([LX, LY], probability_of_improvement, n_resamples=100)
    assert poi.estimate == probability_of_improvement(LX, LY) and poi.low < poi.estimate < poi.high


@pytest.mark.parametrize("average", [False, True])
def test_rliable_performance_profiles(average):
    taus = [0.0, 0.25, 0.5, 1.0]
    for scores in (LX, LY):
        r = stratified_bootstrap([scores], lambda a: performance_profile(a, taus, average=average), n_resamples=100)
        assert r.estimate.shape == r.low.shape == r.high.shape == (4,)
        assert list(r.estimate) == sorted(r.estimate, reverse=True)
    # By hand: the fraction of the 80 scores above 0.5 is 79/80.
    assert performance_profile(LX, [0.5]).tolist() == [79 / 80]


def test_seeded_not_global_state():
    a = stratified_bootstrap([LX], iqm_of, n_resamples=200, seed=5)
    np.random.seed(1)  # rliable's bootstrap would change with this; ours must not
    b = stratified_bootstrap([LX], iqm_of, n_resamples=200, seed=5)
    np.random.seed(2)
    c = stratified_bootstrap([LX], iqm_of, n_resamples=200, seed=6)
    assert (a.low, a.high) == (b.low, b.high) and (a.low, a.high) != (c.low, c.high)
    assert a.details["generator"].startswith("numpy.random.default_rng")


def test_pairing_is_kept_for_a_difference():
    # B is A plus 0.1 on every run of every task; tasks differ a lot in difficulty.
    rng = np.random.default_rng(0)
    a = rng.normal(0, 1, (1, 40)) * 5 + rng.normal(0, 0.01, (5, 40))
    b = a + 0.1
    paired = stratified_bootstrap([b, a], lambda p, q: mean_of(p) - mean_of(q), task_bootstrap=True, paired_runs=True, n_resamples=500)
    assert paired.low == pytest.approx(0.1) and paired.high == pytest.approx(0.1)
    # rliable draws each method separately: the task heterogeneity swamps the 0.1.
    ia = stratified_bootstrap([a], mean_of, task_bootstrap=True, n_resamples=500, seed=1)
    ib = stratified_bootstrap([b], mean_of, task_bootstrap=True, n_resamples=500, seed=2)
    assert (ib.high - ia.low) > 10 * (paired.high - paired.low + 0.01)
