"""Replay each rule the Inspect import declares, on the imported episodes, before declaring it.

An Inspect log's header `results` were computed when the eval (or `inspect score`) ran; the
samples in the file can say otherwise: a log re-scored and its header left as it was, sample
members lost from an archive, samples left out under --keep-going, a hand-edited log. A
`reported` number that does not replay makes a fresh card fail `rcard validate`; so every
candidate rule is applied — by the rule engine `rcard validate` uses — to the columns the
card will hold, and Inspect's number is declared `reported` only where it replays. Where
it does not, the rule is still declared, and the import records both numbers and why.

    scores = ImportedScores(); scores.add(row)       # each episode row added to the card
    verdict = replay(scores, rule_document)           # Replayed(ok, value, n, problem)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import RolloutCardError
from ..tables import ARROW_OF_KIND, EPISODE_COLUMNS

__all__ = ["ImportedScores", "Replayed", "replay"]

#: The episode columns an Inspect rule reads (select, score, status, reduce, group, unit).
_FIXED = ("episode_id", "task_id", "status", "agent", "trial", "meta.inspect_log")
_TYPES = {c.name: (pa.string() if pa.types.is_dictionary(c.type) else c.type) for c in EPISODE_COLUMNS}
_TYPES["meta.inspect_log"] = ARROW_OF_KIND["str"]


class ImportedScores:
    """The columns the declared rules read, of every episode added to the card (column-wise:
    a few values per episode), to replay the rules on before they are declared."""

    def __init__(self) -> None:
        self.rows = 0
        self._columns: dict[str, list[Any]] = {name: [] for name in _FIXED}

    def add(self, row: dict[str, Any]) -> None:
        """Keep one episode row's rule columns (after the card accepted the row)."""
        for name, values in self._columns.items():
            values.append(row.get(name))
        for name, value in row.items():
            if value is not None and name.startswith("score.") and name not in self._columns:
                self._columns[name] = [None] * self.rows + [value]
        self.rows += 1

    def table(self) -> pa.Table:
        """The columns as the card's episodes table types them (scores: value_to_float's floats)."""
        return pa.table({name: pa.array(values, _TYPES.get(name, pa.float64()))
                         for name, values in self._columns.items()})


class _Episodes:
    """What the rule engine reads of a card, over the imported rule columns only."""

    def __init__(self, table: pa.Table):
        self._table = table
        self.manifest = _NoDrops()

    def schema(self, name: str) -> pa.Schema:
        if name != "episodes":
            raise RolloutCardError("an Inspect rule reads no step features")
        return self._table.schema

    def episodes(self, columns: list[str] | None = None) -> pa.Table:
        return self._table if columns is None else self._table.select(columns)


class _NoDrops:
    drops: tuple[()] = ()


@dataclass(frozen=True)
class Replayed:
    """A rule applied to the imported episodes: whether its `reported` numbers replay (`ok`),
    what the rule gives (`value`, `n`; None when undefined), or why it cannot be applied."""

    ok: bool
    value: float | None = None
    n: int | None = None
    problem: str | None = None


def replay(scores: ImportedScores, doc: dict[str, Any], table: pa.Table | None = None) -> Replayed:
    """Apply the rule document `doc` to the imported episodes and compare its `reported` numbers
    (exactly as `rcard validate` compares them). `table` reuses `scores.table()` across rules."""
    from ..model.rule import Rule
    from ..rules.engine import apply_rule
    from ..rules.replay import check_reported

    doc = copy.deepcopy(doc)
    interval = doc.get("aggregate", {}).get("interval")
    if isinstance(interval, dict) and "resamples" in interval:
        interval["resamples"] = 100  # only the point value and n are compared; the interval is not
    try:
        rule = Rule.model_validate(doc)
        run = apply_rule(_Episodes(scores.table() if table is None else table), rule)
    except (RolloutCardError, ValueError) as exc:
        return Replayed(False, problem=str(exc).splitlines()[0])
    checks = check_reported(rule, run)
    group = {k: str(v) for k, v in rule.reported[0].group.items()} if rule.reported else {}
    headline = next((r for r in run.results if r.stratum is None
                     and {k: str(v) for k, v in r.group.items()} == group), None)
    if headline is None:
        return Replayed(False, problem="the rule gives no number for " + (
            ", ".join(f"{k}={v}" for k, v in group.items()) or "the card"))
    return Replayed(all(c.ok for c in checks), headline.value, headline.n)
