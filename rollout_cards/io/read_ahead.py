"""Record batches decoded on a thread while the caller works on the previous ones.

pyarrow's dataset scanner decodes a Parquet row group inside `next()` on the calling thread
(its `batch_readahead` prefetches I/O, not the decode): a scan then costs decode + work,
one after the other. Pulling the scanner from a thread of ours (pyarrow releases the GIL
while it decodes) overlaps the two: the 20M-step scan of benchmarks/bench_rescore.py took
the longer of the two instead of their sum.

    read_ahead(iterator, depth=2) -> the same items, in the same order

Bounded: at most `depth` items wait in the queue (plus the one being decoded). An exception
of the iterator is raised to the caller where the item would have come, after the items
before it. A caller that stops early (closing the generator) stops the thread at its next
item, and the thread never outlives the interpreter (daemon).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["read_ahead"]

T = TypeVar("T")

_END = object()
#: How often (s) a thread waiting on a full queue looks whether the caller stopped.
_POLL = 0.05


class _Raised:
    def __init__(self, exc: BaseException):
        self.exc = exc


def read_ahead(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """`items`, produced on a thread up to `depth` ahead of the caller."""
    slots: queue.Queue[object] = queue.Queue(max(1, depth))
    stop = threading.Event()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        source = iter(items)
        try:
            while not stop.is_set():  # (looked at before each item: a stopped caller costs no decode)
                item = next(source, _END)
                if not offer(item) or item is _END:
                    break
            close = getattr(source, "close", None)
            if close is not None and stop.is_set():  # the caller stopped: release the source here
                close()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            offer(_Raised(exc))

    thread = threading.Thread(target=produce, name="rollout-cards-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = slots.get()
            if item is _END:
                return
            if isinstance(item, _Raised):
                raise item.exc
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while True:  # make room, so that a thread waiting to put sees the stop at once
            try:
                slots.get_nowait()
            except queue.Empty:
                break
        thread.join()
