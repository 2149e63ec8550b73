"""Rank intervals and tied sets."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import UnitStats
from rollout_cards.stats.ranks import bootstrap_ranks, point_ranks, tied_sets


def test_point_ranks_are_competition_ranks():
    v = [0.3, 0.9, 0.3, 0.1]
    assert point_ranks(v).tolist() == scipy.stats.rankdata([-x for x in v], method="min").astype(int).tolist()
    assert point_ranks(v, higher_is_better=False).tolist() == [2, 4, 2, 1]


def test_rank_intervals_resample_shared_units_jointly():
    rng = np.random.default_rng(1)
    tasks = np.arange(60)
    base = rng.normal(0, 1, 60)  # task difficulty shared by every group
    groups = [UnitStats.from_values(base + shift + rng.normal(0, 0.05, 60), tasks) for shift in (0.0, 0.1, 0.2)]
    joint = bootstrap_ranks(groups, statistic="mean", n_resamples=500, seed=3)
    assert joint.details["resampled"] == "shared units, jointly"
    assert joint.ranks.tolist() == [3, 2, 1]
    # Paired, the 0.1 steps are far beyond the noise: every rank is certain.
    assert joint.low.tolist() == joint.high.tolist() == [3, 2, 1]
    # The same data with unshared unit ids are resampled independently: the shared
    # difficulty then swamps the steps and ranks become uncertain.
    apart = [UnitStats.from_values(g.unit_means, [f"{i}-{t}" for t in tasks]) for i, g in enumerate(groups)]
    indep = bootstrap_ranks(apart, statistic="mean", n_resamples=500, seed=3)
    assert indep.details["resampled"] == "each group's units, independently"
    assert (indep.high - indep.low).max() >= 1
    again = bootstrap_ranks(apart, statistic="mean", n_resamples=500, seed=3)
    assert again.low.tolist() == indep.low.tolist() and again.high.tolist() == indep.high.tolist()


def test_tied_sets_partition_the_ranking():
    separated = {(0, 2), (2, 0), (0, 3), (3, 0), (1, 3), (3, 1)}
    assert tied_sets([0, 1, 2, 3], lambda i, j: (i, j) in separated) == [[0, 1], [2, 3]]
    assert tied_sets([0, 1], lambda i, j: True) == [[0], [1]]
    with pytest.raises(StatisticsError):
        bootstrap_ranks([])


def test_many_groups_cost_time_not_memory():
    """The rank cube was built whole (resamples x groups x groups): 214 groups over 9,345
    resamples asked 408 MiB, past the Parquet fuzzer's memory limit on a hostile agent column."""
    import tracemalloc

    from rollout_cards.stats.ranks import _min_ranks

    key = np.random.default_rng(3).integers(0, 50, (2_000, 300)).astype(np.float64)
    tracemalloc.start()
    got = _min_ranks(key)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20  # the whole cube: 180 MB
    assert (got == scipy.stats.rankdata(key, method="min", axis=1)).all()
