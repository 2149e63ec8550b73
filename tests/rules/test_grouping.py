"""Group codes: sorted labels, nulls last, multi-column tuples."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards.rules.grouping import factorize


def test_codes_and_sorted_labels_with_nulls_last():
    t = pa.table({"a": ["x", "y", None, "x"], "b": [2, 1, 1, 2], "c": pa.array(["u", "v", "u", "v"]).dictionary_encode()})
    f = factorize(t, ["a", "b"])
    assert f.labels == [("x", 2), ("y", 1), (None, 1)]
    assert f.codes.tolist() == [0, 1, 2, 0]
    assert factorize(t, ["c"]).labels == [("u",), ("v",)]
    assert factorize(t, []).labels == [()] and factorize(t, []).codes.tolist() == [0, 0, 0, 0]


@given(st.lists(st.tuples(st.sampled_from(["p", "q", None]), st.integers(-3, 3)), min_size=1, max_size=60))
def test_codes_round_trip_to_the_values(rows):
    t = pa.table({"s": [r[0] for r in rows], "i": [r[1] for r in rows]})
    f = factorize(t, ["s", "i"])
    assert [f.labels[c] for c in f.codes] == rows
    assert len(set(f.labels)) == len(f.labels) == len(set(rows))
