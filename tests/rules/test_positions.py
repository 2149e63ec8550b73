"""Positions' per-batch checks that the runs of a step batch are the next episodes: the ids
compared from their buffers (`_same_text`) and the repeated neighbours looked up in
positions found once (`_repeat_within`) must say what the value-by-value comparisons say,
for slices (offsets), empty strings, nulls and every text type."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.rules._feature_partials import Positions, _same_text

TEXT = st.text(alphabet="ab\u00e9", max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=12), st.lists(TEXT, max_size=12), st.integers(0, 3), st.integers(0, 3),
       st.sampled_from([pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]))
def test_same_text_is_value_by_value_equality(a, b, cut_a, cut_b, t):
    enc = (lambda v: v.encode()) if pa.types.is_binary(t) or pa.types.is_large_binary(t) else (lambda v: v)
    x = pa.array([enc(v) for v in ["pad"] * cut_a + a], t).slice(cut_a)
    for y in (pa.array([enc(v) for v in ["pad"] * cut_b + b], t).slice(cut_b),
              pa.array([enc(v) for v in ["pad"] * cut_b + a], t).slice(cut_b)):
        want = len(x) == len(y) and bool(pc.all(pc.equal(x, y)).as_py() if len(x) else True)
        assert _same_text(x, y) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["e1", "e2", "e3", None]), max_size=20), st.integers(0, 20), st.integers(1, 20))
def test_repeat_within_finds_equal_neighbours(ids, first, m):
    positions = Positions(pa.chunked_array([pa.array(ids, pa.string())]))
    window = ids[first:first + m]
    want = any(p is not None and p == q for p, q in zip(window, window[1:], strict=False))
    assert positions._repeat_within(first, m) == want
