"""Digests checked on read: every file a `Card` reads is compared with card.json's inventory
before anything read from it is handed out.

A Parquet reader reads a footer and then only the column chunks it needs, in any
order, so a whole-file sha256 cannot be computed "while reading" (nor would it cover
the bytes that were skipped). Each table part is therefore hashed once per `Card`,
streamed 1 MiB at a time, in a background thread that starts when the table is
first touched; the read proceeds meanwhile (pyarrow releases the GIL, so on two
cores the hash mostly hides behind decoding), and no table or batch is returned
before its part verified. Small files (rules, artifacts) are hashed from the bytes
read, so they are read once.

What this proves: each file matched the inventory when it was hashed. A file changed
while a card is being read (after its hash, before pyarrow reads a chunk) is not
detected; nor is an inventory edited together with card.json — that is what the
root digest and signatures are for (docs/release.md).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..errors import IntegrityError
from .hashing import MAX_LFS_POINTER, lfs_pointer_note, sha256_stream

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from ..model.card import CardManifest, FileEntry

__all__ = ["FileVerifier"]

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    # One worker hashes the parts in the order they are first touched. concurrent.futures (and
    # the logging it imports) loads when a card first reads a verified table, not with the
    # reader: `rcard validate` hashes through its own checks and never needs it (issue 14).
    from concurrent.futures import ThreadPoolExecutor

    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rcard-verify")
        return _POOL


class _Check(Protocol):
    def result(self) -> None: ...


class FileVerifier:
    """Checks files of one card against its inventory, each at most once.

    `source` is the card's `CardSource`, `card` its name in messages. A failed check
    raises `IntegrityError` (a `CardFormatError`) naming the file, both digests
    and the fix, every time that file is asked for again.
    """

    def __init__(self, source: object, manifest: CardManifest, card: str):
        self._source = source
        self._card = card
        self._listed: dict[str, FileEntry] = {f.path: f for f in manifest.inventory.files}
        self._lock = threading.Lock()
        self._pending: dict[str, _Check] = {}

    def start(self, rel: str) -> None:
        """Begin verifying `rel` in the background (no-op when begun already)."""
        with self._lock:
            if rel not in self._pending:
                self._pending[rel] = _pool().submit(self._hash_file, rel)

    def wait(self, rel: str) -> None:
        """Block until `rel` is verified; raise IntegrityError if it does not match."""
        self.start(rel)
        self._pending[rel].result()

    def delegate(self, rel: str, fetch: Callable[[], tuple[str, int]]) -> None:
        """Take `fetch()` — (sha256, size) computed elsewhere (an engine's workers hash the
        parts, rollout_cards.scale) — as `rel`'s check instead of hashing it here; called once,
        when `rel` is first waited for. No-op when `rel`'s check has begun already."""
        with self._lock:
            if rel not in self._pending:
                self._pending[rel] = _Delegated(self, rel, fetch)

    def check_bytes(self, rel: str, data: bytes) -> bytes:
        """`data`, the content just read of `rel`, if it matches the inventory."""
        entry = self._entry(rel)
        self._compare(entry, hashlib.sha256(data).hexdigest(), len(data), data)
        return data

    def _entry(self, rel: str) -> FileEntry:
        entry = self._listed.get(rel)
        if entry is None:
            raise IntegrityError(
                f"{self._card}: {rel} is not listed in card.json's inventory, so its content cannot be "
                f"checked; run `rcard validate {self._card}`, or open the card with verify=False "
                "(--no-verify-digests) to read it unchecked", file=rel)
        return entry

    def _hash_file(self, rel: str) -> None:
        entry = self._entry(rel)
        with self._source.open_binary(rel) as fh:  # type: ignore[attr-defined]
            # One byte more than listed: a longer file must not pass as its prefix.
            digest, size = sha256_stream(fh, limit=entry.bytes + 1, label=rel, size=entry.bytes)
        head = b""
        if size != entry.bytes and size <= MAX_LFS_POINTER:  # the failure path: a Git LFS pointer?
            with self._source.open_binary(rel) as fh:  # type: ignore[attr-defined]
                head = fh.read(MAX_LFS_POINTER + 1)
        self._compare(entry, digest, size, head)

    def _compare(self, entry: FileEntry, digest: str, size: int, data: bytes = b"") -> None:
        if size != entry.bytes:
            what = f"is {'more than ' if size > entry.bytes else ''}{size:,} bytes, the inventory lists {entry.bytes:,}"
        elif digest != entry.sha256:
            what = f"has sha256 {digest[:12]}…, the inventory lists {entry.sha256[:12]}…"
        else:
            return
        fix = (f"the file changed after the card was written (or is corrupt); restore it, run `rcard validate "
               f"{self._card}` for a full report, or open the card with verify=False (--no-verify-digests) to read "
               "it unchecked")
        if size != entry.bytes and (note := lfs_pointer_note(data, entry.sha256)) is not None:
            fix = note  # a checkout without its LFS content: nothing was changed, the content is elsewhere
        raise IntegrityError(f"{self._card}: {entry.path} {what}: {fix}", file=entry.path, expected=entry.sha256,
                             actual=digest)


class _Delegated:
    """A check whose digest another process computes: fetched and compared on first `result`,
    whose outcome (None, or the error it raised) every later `result` repeats."""

    def __init__(self, verifier: FileVerifier, rel: str, fetch: Callable[[], tuple[str, int]]):
        self._verifier, self._rel, self._fetch = verifier, rel, fetch
        self._once = threading.Lock()
        self._done = False
        self._error: BaseException | None = None

    def result(self) -> None:
        with self._once:
            if not self._done:
                try:
                    digest, size = self._fetch()
                    self._verifier._compare(self._verifier._entry(self._rel), digest, size)
                except BaseException as exc:  # IntegrityError, or the engine's own error
                    self._error = exc
                self._done = True
        if self._error is not None:
            raise self._error
