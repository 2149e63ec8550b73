"""pass@k, pass^k, expected maximum and best-of-k optimism, from stats-vectors.md."""

from __future__ import annotations

import numpy as np
import pytest

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import (
    best_of_k_optimism,
    expected_max,
    pass_at_k,
    pass_at_k_many,
    pass_hat_k,
    pass_hat_k_many,
)

TOL = 1e-6


@pytest.mark.parametrize(("k", "expected"), [(1, 0.25), (2, 0.5), (4, 1.0)])
def test_pass_at_k(k, expected):
    assert pass_at_k(4, 1, k) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize(("k", "expected"), [(1, 0.75), (2, 0.5), (3, 0.25), (4, 0.0)])
def test_pass_hat_k(k, expected):
    assert pass_hat_k(4, 3, k) == pytest.approx(expected, abs=TOL)


def test_vectorized_versions():
    n = np.array([4, 4, 4])
    c = np.array([1, 3, 0])
    assert pass_at_k_many(n, c, 2) == pytest.approx([0.5, 1.0, 0.0], abs=TOL)
    assert pass_hat_k_many(n, c, 2) == pytest.approx([0.0, 0.5, 0.0], abs=TOL)


def test_large_n_does_not_overflow():
    assert 0.0 < pass_at_k(2000, 3, 100) < 1.0
    assert pass_hat_k(2000, 1990, 100) > 0.5


@pytest.mark.parametrize("fn", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (4, 5, 2), (4, 1, 0), (-1, 0, 1)])
def test_invalid_attempts_raise(fn, n, c, k):
    with pytest.raises(StatisticsError):
        fn(n, c, k)


def test_vectorized_raises_when_any_task_has_too_few_attempts():
    with pytest.raises(StatisticsError, match="k=3"):
        pass_at_k_many([4, 2], [1, 1], 3)
    with pytest.raises(StatisticsError):
        pass_at_k_many([4.0, 2.0], [1, 1], 1)


@pytest.mark.parametrize(("n", "expected"), [(1, 0.75), (2, 0.8125), (3, 0.84375), (4, 0.861719)])
def test_expected_max(n, expected):
    assert expected_max([0.6, 0.7, 0.8, 0.9], n) == pytest.approx(expected, abs=TOL)


def test_expected_max_order_free_and_errors():
    assert expected_max([0.9, 0.6, 0.8, 0.7], 2) == pytest.approx(0.8125, abs=TOL)
    with pytest.raises(StatisticsError):
        expected_max([], 2)
    with pytest.raises(StatisticsError):
        expected_max([0.5], 0)


@pytest.mark.parametrize(("k", "expected"), [(3, 0.846284), (5, 1.162964), (10, 1.538753)])
def test_best_of_k_optimism(k, expected):
    assert best_of_k_optimism(k) == pytest.approx(expected, abs=TOL)


def test_best_of_one_has_no_optimism():
    assert best_of_k_optimism(1) == 0.0
    with pytest.raises(StatisticsError):
        best_of_k_optimism(0)
