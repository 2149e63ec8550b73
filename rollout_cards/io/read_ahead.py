"""Record batches decoded on a thread while the caller works on the previous ones.

pyarrow's dataset scanner decodes a Parquet row group inside `next()` on the calling thread
(its `batch_readahead` prefetches I/O, not the decode): a scan then costs decode + work,
one after the other. Pulling the scanner from a thread of ours (pyarrow releases the GIL
while it decodes) overlaps the two: the 20M-step scan of benchmarks/bench_rescore.py took
the longer of the two instead of their sum.

    read_ahead(iterator, depth=2, ahead_bytes=0, size=None) -> the same items, in the same order
    head_start(iterator) -> the same items; the first one asked for on a thread right away

Bounded: at most `depth` items wait in the queue (plus the one being decoded), or more while
they hold at most `ahead_bytes` together (`size(item)`), so that small batches can be decoded
far ahead while the caller does something else (the rule engine reads the episodes table
while the steps table decodes) and large ones are not. An exception of the iterator is
raised to the caller where the item would have come, after the items before it. A caller
that stops early (closing the generator) stops the thread at its next item, and the thread
never outlives the interpreter (daemon).

Only the decode belongs on the thread: Python work there (checking each batch) competes for
the GIL with the caller's, and moving the reader's per-batch checks onto it made the 1M-episode
rescore slower (6.0 s against 3.4-5.2 s, interleaved, load 8).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = ["head_start", "read_ahead"]

T = TypeVar("T")

_END = object()
_TAKEN = object()  # head_start's first item was handed out


class _Raised:
    def __init__(self, exc: BaseException):
        self.exc = exc


class _Slots:
    """The queue between the thread and the caller, bounded by items and by bytes."""

    def __init__(self, depth: int, ahead_bytes: int):
        self.depth, self.ahead_bytes = max(1, depth), max(0, ahead_bytes)
        self.items: deque[tuple[object, int]] = deque()
        self.bytes = 0
        self.stopped = False
        self.changed = threading.Condition()

    def _room(self, size: int) -> bool:
        return len(self.items) < self.depth or (self.ahead_bytes > 0 and self.bytes + size <= self.ahead_bytes)

    def put(self, item: object, size: int) -> bool:
        """Wait for room; False when the caller stopped (the item is dropped)."""
        with self.changed:
            while not self.stopped and not self._room(size):
                self.changed.wait()
            if self.stopped:
                return False
            self.items.append((item, size))
            self.bytes += size
            self.changed.notify_all()
            return True

    def get(self) -> object:
        with self.changed:
            while not self.items:
                self.changed.wait()
            item, size = self.items.popleft()
            self.bytes -= size
            self.changed.notify_all()
            return item

    def stop(self) -> None:
        with self.changed:
            self.stopped = True
            self.items.clear()
            self.bytes = 0
            self.changed.notify_all()


def read_ahead(items: Iterable[T], depth: int = 2, *, ahead_bytes: int = 0,
               size: Callable[[T], int] | None = None) -> Iterator[T]:
    """`items`, produced on a thread up to `depth` items (or `ahead_bytes` by `size`) ahead."""
    slots = _Slots(depth, ahead_bytes if size is not None else 0)

    def produce() -> None:
        source = iter(items)
        try:
            while not slots.stopped:  # (looked at before each item: a stopped caller costs no decode)
                item = next(source, _END)
                weight = size(item) if size is not None and item is not _END else 0  # type: ignore[arg-type]
                if not slots.put(item, weight) or item is _END:
                    break
            close = getattr(source, "close", None)
            if close is not None and slots.stopped:  # the caller stopped: release the source here
                close()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            slots.put(_Raised(exc), 0)

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
        slots.stop()  # wakes a thread waiting for room, which then sees the stop
        thread.join()


class head_start(Iterator[T]):  # noqa: N801 - used as a function
    """`items`, whose first item is asked for now, on a thread, while the caller does something
    else (a scan's first `next()` opens the files, waits for their digests and starts its
    read-ahead); the rest come on the caller's thread as usual. Its exception is raised where
    the first item would have come. `close()` (also at the end) closes `items`: call it when
    the items are not wanted after all, so that the scan's thread ends."""

    def __init__(self, items: Iterator[T]):
        self.items = items
        self.first: list[object] = []
        self.thread: threading.Thread | None = threading.Thread(
            target=self._ask, name="rollout-cards-head-start", daemon=True)
        self.thread.start()

    def _ask(self) -> None:
        try:
            self.first.append(next(self.items, _END))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            self.first.append(_Raised(exc))

    def _joined(self) -> object:
        """The first item once (then _TAKEN)."""
        if self.thread is None:
            return _TAKEN
        self.thread.join()
        self.thread = None
        return self.first.pop()

    def __next__(self) -> T:
        item = self._joined()
        if item is _TAKEN:
            return next(self.items)
        if isinstance(item, _Raised):
            self.close()
            raise item.exc
        if item is _END:
            raise StopIteration
        return item  # type: ignore[return-value]

    def close(self) -> None:
        self._joined()
        close = getattr(self.items, "close", None)
        if close is not None:
            close()
