"""The exact bootstrap's quantile rules reproduce np.quantile on the repeated sample."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._quantiles import QUANTILE_METHODS, repeated_quantile


@settings(deadline=None)  # scipy warm-up can exceed the default on a busy machine
@given(
    atoms=st.lists(
        st.tuples(st.integers(-20, 20), st.integers(1, 9)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[0],
    ),
    q=st.one_of(st.sampled_from([0.0, 0.025, 0.5, 0.975, 1.0]), st.floats(0, 1)),
    method=st.sampled_from(QUANTILE_METHODS),
)
def test_matches_numpy_on_the_repeated_array(atoms, q, method):
    atoms.sort()
    values = np.array([v / 7 for v, _ in atoms])
    counts = np.array([c for _, c in atoms])
    expected = np.quantile(np.repeat(values, counts), q, method=method)
    assert repeated_quantile(values, counts, q, method) == expected


def test_stats_vectors_example():
    values = np.array([-0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05])
    counts = np.array([1, 3, 6, 7, 6, 3, 1])
    assert repeated_quantile(values, counts, 0.025, "linear") == pytest.approx(-0.0035, abs=1e-12)
    assert repeated_quantile(values, counts, 0.975, "linear") == pytest.approx(0.0435, abs=1e-12)
    assert repeated_quantile(values, counts, 0.025, "inverted_cdf") == -0.01
    assert repeated_quantile(values, counts, 0.975, "inverted_cdf") == 0.05


def test_unknown_method_raises():
    with pytest.raises(StatisticsError):
        repeated_quantile(np.array([1.0]), np.array([1]), 0.5, "weird")
