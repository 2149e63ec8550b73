"""read_ahead hands out exactly what the iterator yields, in order, raises where it raised,
stays a bounded number of items (or bytes) ahead, and stops when the caller stops; head_start
asks for the first item on a thread at once."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.io.read_ahead import head_start, read_ahead


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


def _counting(made: list[int], n: int = 100):
    for i in range(n):
        made.append(i)
        yield i


def test_small_items_run_ahead_up_to_the_bytes_and_no_further():
    made: list[int] = []
    # items of 10 bytes, 100 bytes ahead: ten wait in the queue (depth 2 alone would allow two)
    it = read_ahead(_counting(made), depth=2, ahead_bytes=100, size=lambda item: 10)
    assert next(it) == 0
    time.sleep(0.3)
    # one handed out, ten waiting, one made and waiting to get in
    assert 10 <= len(made) <= 12
    assert list(it) == list(range(1, 100))


def test_large_items_stay_at_depth_whatever_the_bytes():
    made: list[int] = []
    it = read_ahead(_counting(made), depth=2, ahead_bytes=100, size=lambda item: 1000)
    assert next(it) == 0
    time.sleep(0.3)
    assert len(made) <= 4
    it.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 3), st.integers(0, 200))
def test_the_same_items_whatever_the_bounds(items, depth, ahead):
    assert list(read_ahead(iter(items), depth, ahead_bytes=ahead, size=lambda item: item)) == items


def test_head_start_asks_for_the_first_item_at_once():
    asked = threading.Event()

    def items():
        asked.set()
        yield from range(5)

    it = head_start(items())
    assert asked.wait(5)  # before the caller asked for anything
    assert list(it) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("fail_at", [0, 1, 3])
def test_head_start_raises_where_the_items_raised(fail_at):
    def items():
        yield from range(fail_at)
        raise OSError("bad page")

    got = []
    with pytest.raises(OSError, match="bad page"):
        for item in head_start(items()):
            got.append(item)
    assert got == list(range(fail_at))


def test_head_start_of_nothing_and_close_closes_the_source():
    assert list(head_start(iter([]))) == []
    closed = threading.Event()

    def items():
        try:
            yield from range(10)
        finally:
            closed.set()

    it = head_start(items())
    it.close()  # never read: the source is closed all the same
    assert closed.is_set()


def test_a_scan_with_a_head_start_ends_its_thread_when_closed():
    before = {t.ident for t in threading.enumerate()}
    it = head_start(read_ahead(iter(range(10**6)), depth=2))
    time.sleep(0.05)
    it.close()
    time.sleep(0.05)
    alive = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("rollout-cards")]
    assert not alive
