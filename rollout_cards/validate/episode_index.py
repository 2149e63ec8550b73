"""`EpisodeIndex`: episode_id -> row of the episodes table, vectorized, without a Python object per id.

Ids are hashed with a multilinear hash under a random key (an attacker who does not
know the key cannot aim for collisions), sorted by hash, and looked up with a binary
search; every match is confirmed by comparing the strings themselves, so results are
exact whatever the hashes. Should two different ids of the table share a hash, the
index falls back to `pyarrow.compute.index_in` (exact, slower). Memory: the ids as
one Arrow array plus 16 bytes per episode.
"""

from __future__ import annotations

import hashlib
import secrets

import numpy as np
import pyarrow as pa

from .. import arrow_compute as ac
from ..numpy_arrow import int64_array

__all__ = ["EpisodeIndex"]

_BLOCK_ROWS = 1 << 16


def _multipliers(n: int, key: int) -> np.ndarray:
    # Odd 64-bit multipliers drawn from SHAKE-256 under the key: as unpredictable as a seeded
    # numpy Generator, without importing numpy.random (~30 ms of every `rcard validate`).
    stream = hashlib.shake_256(key.to_bytes(8, "little")).digest(8 * max(n, 1))
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64) | np.uint64(1)


def string_hashes(values: pa.Array, key: int) -> np.ndarray:
    """A 64-bit hash of every string of `values` (anything for nulls), in blocks of rows."""
    values = ac.cast(values, pa.large_binary())
    out = np.zeros(len(values), dtype=np.uint64)
    if not len(values):
        return out
    lengths = ac.fill_null(ac.binary_length(values), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    mults = _multipliers(int(lengths.max(initial=0)), key)
    for start in range(0, len(values), _BLOCK_ROWS):
        block = values.slice(start, _BLOCK_ROWS)
        n = len(block)
        offsets = np.frombuffer(block.buffers()[1], dtype=np.int64)[block.offset: block.offset + n + 1]
        data = block.buffers()[2]
        raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
        lens = np.diff(offsets)
        total = int(offsets[-1] - offsets[0])
        if total:
            position = np.arange(total) - np.repeat(offsets[:-1] - offsets[0], lens)
            terms = raw[offsets[0]: offsets[-1]].astype(np.uint64) * mults[position]
            nonempty = lens > 0
            starts = (offsets[:-1] - offsets[0])[nonempty]
            sums = np.zeros(n, dtype=np.uint64)
            sums[nonempty] = np.add.reduceat(terms, starts)
        else:
            sums = np.zeros(n, dtype=np.uint64)
        out[start: start + n] = sums ^ (lens.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    return out


class EpisodeIndex:
    """Rows of the episodes table by episode_id; duplicates and unknown ids found exactly."""

    def __init__(self, ids: pa.Array):
        self.ids = ac.cast(ids, pa.large_string()) if not pa.types.is_large_string(ids.type) else ids
        self._key = secrets.randbits(63)
        valid = np.flatnonzero(ac.is_valid(self.ids).to_numpy(zero_copy_only=False))
        hashes = string_hashes(self.ids, self._key)[valid]
        order = np.argsort(hashes, kind="stable")
        self._rows = valid[order]
        self._hashes = hashes[order]
        self.exact = True
        #: Rows whose id occurred in an earlier row, and the row of that first occurrence.
        self.duplicate_rows = np.zeros(0, dtype=np.int64)
        self.first_rows = np.zeros(0, dtype=np.int64)
        same = np.flatnonzero(self._hashes[1:] == self._hashes[:-1])
        if len(same):
            a, b = self._rows[same], self._rows[same + 1]
            equal = self._equal(a, b)
            if not equal.all():
                self.exact = False  # two ids share a hash: use the exact (slower) path
            if self.exact:
                run_start = np.maximum.accumulate(np.where(np.r_[True, self._hashes[1:] != self._hashes[:-1]],
                                                           np.arange(len(self._hashes)), 0))
                dup = same[equal] + 1
                self._set_duplicates(self._rows[dup], self._rows[run_start[dup]])
            else:
                self._exact_duplicates()

    def _set_duplicates(self, rows: np.ndarray, first: np.ndarray) -> None:
        order = np.argsort(rows, kind="stable")
        self.duplicate_rows, self.first_rows = rows[order], first[order]

    def _exact_duplicates(self) -> None:
        encoded = ac.dictionary_encode(self.ids)
        index = ac.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        valid = index >= 0
        _, first = np.unique(index[valid], return_index=True)
        rows = np.flatnonzero(valid)
        first_row = np.full(len(encoded.dictionary), -1, dtype=np.int64)
        first_row[np.unique(index[valid])] = rows[first]
        dup = rows[first_row[index[valid]] != rows]
        self._set_duplicates(dup, first_row[index[dup]])

    def __len__(self) -> int:
        return len(self.ids)

    def name_of(self, row: int) -> str:
        """The episode_id of a row."""
        return self.ids[row].as_py() or ""

    def _equal(self, rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
        a = ac.take(self.ids, int64_array(rows_a))
        b = ac.take(self.ids, int64_array(rows_b))
        return np.asarray(ac.fill_null(ac.equal(a, b), False).to_numpy(zero_copy_only=False), dtype=bool)

    def lookup(self, values: pa.Array) -> np.ndarray:
        """Row of the first episode with each id of `values` (-1 for null or unknown ids)."""
        values = ac.cast(values, pa.large_string()) if not pa.types.is_large_string(values.type) else values
        if not self.exact:
            found = ac.index_in(values, value_set=self.ids, skip_nulls=True)
            return ac.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        codes = np.full(len(values), -1, dtype=np.int64)
        if not len(self._hashes) or not len(values):
            return codes
        hashes = string_hashes(values, self._key)
        order = np.argsort(hashes)  # a binary search for sorted queries stays in cache
        pos = np.empty(len(hashes), dtype=np.int64)
        pos[order] = np.minimum(np.searchsorted(self._hashes, hashes[order]), len(self._hashes) - 1)
        candidate = np.flatnonzero((self._hashes[pos] == hashes) & ac.is_valid(values).to_numpy(zero_copy_only=False))
        rows = self._rows[pos[candidate]]
        same = np.asarray(ac.fill_null(ac.equal(ac.take(self.ids, int64_array(rows)),
                                                ac.take(values, int64_array(candidate))), False)
                          .to_numpy(zero_copy_only=False), dtype=bool)
        codes[candidate[same]] = rows[same]
        return codes
