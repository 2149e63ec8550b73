"""EpisodeIndex: exact id -> first row lookups and duplicates, whatever the hashes do."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards.validate import episode_index
from rollout_cards.validate.episode_index import EpisodeIndex, string_hashes

ids_strategy = st.lists(st.one_of(st.none(), st.text(max_size=6), st.sampled_from(["a", "a\x00", "", "é", "e\u0301"])),
                        max_size=40)


def _reference(ids: list[str | None]) -> tuple[dict[str, int], list[tuple[int, int]]]:
    first: dict[str, int] = {}
    dups = []
    for i, v in enumerate(ids):
        if v is None:
            continue
        if v in first:
            dups.append((i, first[v]))
        else:
            first[v] = i
    return first, dups


def _check(ids: list[str | None], queries: list[str | None]) -> None:
    index = EpisodeIndex(pa.array(ids, pa.string()))
    first, dups = _reference(ids)
    assert list(zip(index.duplicate_rows.tolist(), index.first_rows.tolist(), strict=True)) == dups
    got = index.lookup(pa.array(queries, pa.string())).tolist()
    assert got == [first.get(q, -1) if q is not None else -1 for q in queries]


@given(ids=ids_strategy, queries=st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=20))
def test_lookup_and_duplicates_match_a_dictionary(ids, queries):
    _check(ids, queries + [v for v in ids if v is not None][:10])


@given(ids=ids_strategy, queries=st.lists(st.text(max_size=4), max_size=10))
def test_colliding_hashes_fall_back_to_exact_lookups(ids, queries):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(episode_index, "string_hashes", lambda values, key: np.zeros(len(values), np.uint64))
        _check(ids + ["x", "y"], queries + [None] + [v for v in ids if v is not None][:10])
        assert not EpisodeIndex(pa.array(["x", "y"])).exact


def test_hashes_distinguish_trailing_nuls_and_lengths():
    values = pa.array(["a", "a\x00", "a\x00\x00", "", "\x00"])
    hashes = string_hashes(values, key=12345)
    assert len(set(hashes.tolist())) == len(values)


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_sliced_and_large_arrays_are_hashed_by_their_own_bytes(type_):
    values = pa.array([f"id-{i}" for i in range(100)], type_)
    assert string_hashes(values.slice(10, 5), 7).tolist() == string_hashes(values, 7)[10:15].tolist()
