"""`RowFindings`: findings about table rows, listed in table order whatever order they were found in.

The table scans find problems chunk by chunk, episode by episode or partition by partition
(and the Ray engine block by block on many workers), so the order in which findings are
found depends on how the work was cut. The report must not: per code, the `cap` findings
listed are the first in table order — by (table, row, column) — and the others are
counted; all of them are then listed in that order (ties between codes of one cell in
catalogue order). Collectors of pieces of a table merge (`merge`, in any order) to the
collector of the whole table, and travel between processes as plain tuples (`entries`).
Memory: at most 2 × cap entries per code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .report import CODES, Findings

if TYPE_CHECKING:
    from .context import TableState

__all__ = ["Entry", "RowFindings"]

_CODE_RANK = {code: i for i, code in enumerate(CODES)}

#: (table rank, global row, column, code rank, code, file, row in file, message)
Entry = tuple[int, int, str, int, str, str, int, str]


class RowFindings:
    """Row findings of one check over `tables` (their order is the listing order)."""

    def __init__(self, cap: int, tables: tuple[str, ...] = ("episodes", "steps")):
        self.cap = cap
        self.tables = tables
        self._entries: dict[str, list[Entry]] = {}
        self._total: dict[str, int] = {}

    def room(self, code: str) -> int:
        """How many findings of one report the caller should describe (the first `cap` rows)."""
        return self.cap

    def add_rows(self, code: str, state: TableState, rows: np.ndarray, column: str | None,
                 describe: Callable[[int], str]) -> None:
        """Findings of `code` for the rows `rows` (global indexes, any order) of `state`'s table:
        the `cap` first by row are described (`describe(i)` for the i-th of `rows`), all counted."""
        n = len(rows)
        if not n:
            return
        CODES[code]  # noqa: B018 - an unknown code is a bug, caught here
        self._total[code] = self._total.get(code, 0) + n
        rows = np.asarray(rows, dtype=np.int64)
        ascending = n == 1 or bool((rows[1:] >= rows[:-1]).all())
        picked = range(min(n, self.cap)) if ascending else np.argsort(rows, kind="stable")[: self.cap]
        rank, col, code_rank = self.tables.index(state.name), column or "", _CODE_RANK[code]
        entries = self._entries.setdefault(code, [])
        for i in picked:
            i = int(i)
            file, local = state.locate(int(rows[i]))
            entries.append((rank, int(rows[i]), col, code_rank, code, file, local, describe(i)))
        self._trim(code, 2 * self.cap)

    def _trim(self, code: str, limit: int) -> None:
        entries = self._entries[code]
        if len(entries) > limit:
            entries.sort()
            del entries[self.cap:]

    def totals(self) -> dict[str, int]:
        """Findings per code so far, listed or not."""
        return dict(self._total)

    def entries(self) -> tuple[list[Entry], dict[str, int]]:
        """(the kept entries, the count per code): what a worker sends for its piece."""
        for code in self._entries:
            self._trim(code, self.cap)
        return [e for entries in self._entries.values() for e in entries], dict(self._total)

    def merge(self, other: RowFindings | tuple[list[Entry], dict[str, int]]) -> None:
        """Add the findings of another piece of the same tables."""
        entries, totals = other.entries() if isinstance(other, RowFindings) else other
        for code, n in totals.items():
            self._total[code] = self._total.get(code, 0) + n
        for entry in entries:
            self._entries.setdefault(entry[4], []).append(entry)
        for code in {e[4] for e in entries}:
            self._trim(code, 2 * self.cap)

    def flush(self, findings: Findings) -> None:
        """List the kept findings in table order into `findings`, count the rest; then empty."""
        kept, totals = self.entries()
        listed = Counter(e[4] for e in kept)
        for _, _, column, _, code, file, row, message in sorted(kept):
            findings.add(code, message, file=file, row=row, column=column or None)
        for code, n in totals.items():
            findings.omit(code, n - listed[code])
        self._entries, self._total = {}, {}

