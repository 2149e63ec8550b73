"""read_ahead hands out exactly what the iterator yields, in order, raises where it raised,
stays a bounded number of items ahead, and stops when the caller stops."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.io.read_ahead import read_ahead


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(), max_size=50), st.integers(1, 4))
def test_the_same_items_in_the_same_order(items, depth):
    assert list(read_ahead(iter(items), depth)) == items


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 8), st.integers(1, 3))
def test_an_exception_is_raised_after_the_items_before_it(fail_at, depth):
    def items():
        yield from range(fail_at)
        raise OSError(f"bad page at {fail_at}")

    got = []
    with pytest.raises(OSError, match=f"bad page at {fail_at}"):
        for item in read_ahead(items(), depth):
            got.append(item)
    assert got == list(range(fail_at))


def test_it_stays_at_most_depth_items_ahead():
    made = []

    def items():
        for i in range(100):
            made.append(i)
            yield i

    it = read_ahead(items(), depth=2)
    assert next(it) == 0
    time.sleep(0.3)  # plenty of time to run ahead, if it did
    # one handed out, two waiting in the queue, one made and waiting to get in
    assert len(made) <= 4
    it.close()


def test_a_caller_that_stops_early_stops_the_thread():
    finished = threading.Event()

    def items():
        try:
            yield from range(10**6)
        finally:
            finished.set()

    before = {t.ident for t in threading.enumerate()}
    for item in read_ahead(items(), depth=2):
        if item == 3:
            break
    assert finished.wait(5)  # the source was closed (its finally ran) ...
    time.sleep(0.05)
    alive = [t for t in threading.enumerate() if t.ident not in before and t.name == "rollout-cards-read-ahead"]
    assert not alive  # ... and no thread of ours is left


def test_a_generator_never_started_starts_no_thread():
    before = threading.active_count()
    it = read_ahead(iter([1, 2, 3]))
    assert threading.active_count() == before
    assert list(it) == [1, 2, 3]
