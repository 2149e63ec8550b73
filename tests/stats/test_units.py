"""UnitStats: per-unit sufficient statistics that merge across batches."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import UnitStats, align_units, cluster_t_interval


def test_from_values_groups_by_unit():
    s = UnitStats.from_values([1.0, 2.0, 3.0, 4.0], ["b", "a", "b", "a"])
    assert s.units.tolist() == ["a", "b"]
    assert s.counts.tolist() == [2, 2]
    assert s.sums.tolist() == [6.0, 4.0]
    assert s.sumsq.tolist() == [20.0, 10.0]
    assert s.n == 4 and s.n_units == 2 and s.mean == 2.5


def test_without_units_each_value_is_a_unit():
    s = UnitStats.from_values([0.5, 1.5, 2.5])
    assert s.n_units == 3 and s.counts.tolist() == [1, 1, 1]


def test_int_and_str_ids_are_not_conflated():
    # numpy would turn [1, "1"] into two "1" strings; they are different units.
    s = UnitStats.from_values([1.0, 2.0], [1, "1"])
    assert s.n_units == 2


def test_tuple_ids_stay_whole():
    s = UnitStats.from_values([1.0, 0.0, 1.0], [("t1", 0), ("t1", 1), ("t1", 0)])
    assert s.n_units == 2
    assert s.counts.tolist() == [2, 1]


def test_merge_pools_the_same_unit():
    a = UnitStats.from_values([1.0, 0.0], ["x", "y"])
    b = UnitStats.from_values([1.0, 1.0], ["y", "z"])
    m = a.merge(b)
    assert m.units.tolist() == ["x", "y", "z"]
    assert m.counts.tolist() == [1, 2, 1]
    assert m.sums.tolist() == [1.0, 1.0, 1.0]


def test_merge_with_empty_is_identity():
    a = UnitStats.from_values([1.0, 0.0], ["x", "y"])
    assert a.merge(UnitStats.empty()).same_as(a)
    assert UnitStats.empty().merge(a).same_as(a)
    assert UnitStats.empty().merge(UnitStats.empty()).n_units == 0


def test_arrays_are_read_only():
    s = UnitStats.from_values([1.0, 2.0], ["a", "b"])
    with pytest.raises(ValueError):
        s.sums[0] = 5.0


def test_to_dict_round_trip():
    s = UnitStats.from_values([1.0, 0.0, 1.0], [("t1", 0), ("t1", 1), ("t2", 0)])
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert UnitStats.from_dict(d).same_as(s)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"units": ["a", "a"], "counts": [1, 1], "sums": [0, 0], "sumsq": [0, 0]},  # duplicate ids
        {"units": ["a"], "counts": [0], "sums": [0], "sumsq": [0]},  # empty unit
        {"units": ["a"], "counts": [1, 2], "sums": [0], "sumsq": [0]},  # ragged
        {"units": ["a"], "counts": [1], "sums": [float("nan")], "sumsq": [0]},
        {"units": ["a"], "counts": [1.5], "sums": [1], "sumsq": [1]},
    ],
)
def test_invalid_unit_stats_raise(kwargs):
    with pytest.raises(StatisticsError):
        UnitStats(**{k: np.asarray(v) for k, v in kwargs.items()})


def test_nan_values_are_refused():
    with pytest.raises(StatisticsError, match="NaN"):
        UnitStats.from_values([1.0, float("nan")], ["a", "b"])


def test_length_mismatch_raises():
    with pytest.raises(StatisticsError):
        UnitStats.from_values([1.0, 2.0], ["a"])


def test_constant_decimal_values_have_no_variation_whichever_way_summed():
    values = [0.1] * 30
    units = [i % 3 for i in range(30)]
    whole = UnitStats.from_values(values, units)
    merged = UnitStats.from_values(values[:7], units[:7]).merge(
        UnitStats.from_values(values[7:], units[7:])
    )
    for s in (whole, merged):
        iv = cluster_t_interval(s)
        assert not iv.defined and "no variation" in iv.reason


def test_align_units_counts_dropped():
    a = UnitStats.from_values([1.0, 2.0, 3.0], ["t1", "t2", "t3"])
    b = UnitStats.from_values([4.0, 5.0], ["t3", "t9"])
    sa, sb, only_a, only_b = align_units(a, b)
    assert sa.units.tolist() == sb.units.tolist() == ["t3"]
    assert (only_a, only_b) == (2, 1)


@settings(deadline=None)  # scipy warm-up can exceed the default on a busy machine
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 6),
            # Repeated 0.1s sum differently per split: "no variation" must survive that.
            st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.just(0.1)),
        ),
        min_size=0,
        max_size=60,
    ),
    cuts=st.lists(st.integers(0, 60), max_size=4),
)
def test_merging_any_split_equals_the_whole(rows, cuts):
    units = [u for u, _ in rows]
    values = [v for _, v in rows]
    whole = UnitStats.from_values(values, units)
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    parts = [
        UnitStats.from_values(values[lo:hi], units[lo:hi])
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    merged = parts[0].merge(*parts[1:])
    assert merged.same_as(whole, rtol=1e-9, atol=1e-6)
    a, b = cluster_t_interval(merged), cluster_t_interval(whole)
    assert a.defined == b.defined and a.reason == b.reason
    if a.defined:
        assert a.low == pytest.approx(b.low, rel=1e-6, abs=1e-6)
        assert a.high == pytest.approx(b.high, rel=1e-6, abs=1e-6)
