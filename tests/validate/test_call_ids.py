"""Stored tool-call ids are unique within an episode (issue 10 item 5, validator side): the
finding is exact whether the repeat is in one chunk, across chunks, or in steps stored out of order."""

from __future__ import annotations

import numpy as np
import pytest

import rollout_cards as rc
from rollout_cards.validate import Severity, semantics
from tests.validate.conftest import bad_cards


def _reuse(card, order=None):
    def change(t):
        episode, ids = t.column("episode_id").to_pylist(), t.column("call_id").to_pylist()
        for row in range(t.num_rows):
            if episode[row] == "alpha-task-00-1" and ids[row] == "c1":
                t = bad_cards.set_cell(t, "call_id", row, "c0")
        return t.take(order(t.num_rows)) if order else t
    bad_cards.edit_table(card, "steps.parquet", change)


def _duplicates(report):
    return [f for f in report.findings if f.code == "tool-call-id-duplicate"]


@pytest.mark.parametrize("chunk_rows", [None, 4, 7])
def test_a_reused_id_is_found_once_in_any_chunking(synthetic_copy, monkeypatch, chunk_rows):
    _reuse(synthetic_copy)
    if chunk_rows:
        monkeypatch.setattr(semantics, "CHUNK_ROWS", chunk_rows)
    report = rc.validate(synthetic_copy)
    (finding,) = _duplicates(report)
    assert finding.location.row == 9 and "alpha-task-00-1" in finding.message
    assert report.codes(Severity.ERROR) == {"tool-call-id-duplicate"}


def test_steps_stored_out_of_order_are_checked_exactly(synthetic_copy):
    _reuse(synthetic_copy, order=lambda n: np.random.default_rng(7).permutation(n))
    (finding,) = _duplicates(rc.validate(synthetic_copy))
    assert "'c0'" in finding.message


def test_the_same_id_in_two_episodes_is_fine():
    # Every episode of the fixture starts its ids at c0.
    assert not _duplicates(rc.validate(bad_cards.CARDS / "synthetic"))
