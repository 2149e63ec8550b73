"""rollout_cards._threads.Background: one call on a daemon thread, its result or error later."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from rollout_cards._threads import Background


def test_the_result_and_the_error_reach_the_caller():
    assert Background(lambda a, b: a + b, 2, 3).result() == 5

    def fails() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        Background(fails).result()


def test_the_thread_is_a_daemon_with_its_name():
    seen = {}

    def where() -> None:
        seen["thread"] = threading.current_thread()

    Background(where, name="rollout-cards-test").result()
    assert seen["thread"].daemon and seen["thread"].name == "rollout-cards-test"
    assert seen["thread"] is not threading.current_thread()


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
def test_nice_lowers_only_the_background_thread():
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def mine() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert Background(mine, nice=10).result() == min(19, base + 10)
    assert Background(mine).result() == base
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the caller's is unchanged
