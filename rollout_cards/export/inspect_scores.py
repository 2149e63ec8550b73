"""A rule's per-sample scores as the records Inspect's `precomputed_scores` scorer reads.

Inspect (`inspect_ai.scorer.precomputed_scores`, 0.3.285) reads a JSON array or JSON
Lines of `{id, value, epoch?, answer?, explanation?, metadata?}` and attaches each value
to the sample with that id and epoch; a record without `epoch` applies to every epoch.
So a regrade made here shows up in Inspect's own viewer:

    rcard export inspect-scores CARD --rule R -o scores.jsonl
    inspect score LOG.eval --scorer precomputed_scores -S scores=scores.jsonl

`id` is the sample id: for a card imported from Inspect, `task_id` without its
`<task>/` prefix (the importer's `task_id` is `<task>/<sample id>`), else `task_id`.
`epoch` is `meta.epoch`, else `trial` + 1. A rule with a `reduce` gives one value per
reduce key: records without an epoch. Episodes the rule excludes are left out (Inspect
leaves those samples unscored).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ..errors import CardFormatError, RuleError
from ..io.targets import file_target, local_paths, open_output
from ..rules.engine import apply_rule
from ..rules.loader import declared_rules, read_rule

__all__ = ["export_inspect_scores", "score_records"]


def _rule(card: Any, rule: str) -> tuple[Any, str | None]:
    for declared, file in declared_rules(card):
        if declared.rule == rule:
            return declared, file
    return read_rule(rule)


def _epoch(card: Any, row: dict[str, Any]) -> int:
    """The Inspect epoch of an episode's `meta.epoch`: a whole number from 1. The column is the
    card's, of any type: int() of "abc", NaN or inf raised (an internal error), and of 1.5 made
    epoch 1 (then "two values" for a sample that has one per epoch)."""
    value = row["meta.epoch"]
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) <= 2**53)
    if isinstance(value, bool) or not whole or value < 1:
        shown = repr(value) if not isinstance(value, str) else repr(value[:40])
        raise CardFormatError(f"{card.path}: episode {str(row.get('episode_id'))[:80]!r} has meta.epoch {shown}; "
                              "Inspect epochs are whole numbers from 1 (fix the column, or give a rule with a reduce)")
    return int(value)


def score_records(card: Any, rule: str) -> list[dict[str, Any]]:
    """The precomputed-score records of `rule` (a declared rule id or a rule file) on `card`."""
    parsed, file = _rule(card, rule)
    names = set(card.schema("episodes").names)
    keep = [c for c in ("episode_id", "task_id", "trial", "meta.epoch") if c in names]
    run = apply_rule(card, parsed, file=file, keep_columns=keep)
    obs = run.observations
    identity = obs.identity
    columns = identity.column_names
    inspect_card = (card.manifest.meta or {}).get("import", {}).get("format") == "inspect"
    reduced = parsed.reduce is not None
    records: list[dict[str, Any]] = []
    seen: set[tuple[str, int | None]] = set()
    rows = identity.to_pylist()
    for i, value in enumerate(np.asarray(obs.values, dtype=float)):
        row = rows[i]
        task = row.get("task_id") if "task_id" in columns else None
        if task is None:
            raise RuleError(f"rule {parsed.rule}: its observations carry no task_id (reduce by task_id or "
                            "leave the reduce out)", file=file)
        sample = task.split("/", 1)[1] if inspect_card and "/" in task else task
        epoch = None
        if not reduced:
            if row.get("meta.epoch") is not None:
                epoch = _epoch(card, row)
            elif row.get("trial") is not None:
                epoch = int(row["trial"]) + 1  # int64, never negative (the reader checks)
        key = (sample, epoch)
        if key in seen:
            raise RuleError(f"rule {parsed.rule}: sample {sample!r}" + (f" epoch {epoch}" if epoch else "")
                            + " has two values (several models or logs in the card?); give a rule whose select "
                            "keeps one Inspect log", file=file)
        seen.add(key)
        record: dict[str, Any] = {"id": sample}
        if epoch is not None:
            record["epoch"] = epoch
        record["value"] = float(value) if math.isfinite(value) else None
        meta = {"rule": parsed.rule, "rule_version": parsed.version, "card": card.manifest.id}
        if not reduced and row.get("episode_id") is not None:
            meta["episode_id"] = row["episode_id"]
        record["metadata"] = meta
        records.append(record)
    return records


def export_inspect_scores(card: Any, rule: str, out: str | os.PathLike[str]) -> int:
    """Write `rule`'s scores on `card` to `out` (JSON Lines for .jsonl, else a JSON array); returns the count."""
    inputs = local_paths(card.source)
    path = file_target(out, overwrite=True, inputs=inputs, what="the scores")
    records = score_records(card, rule)
    with open_output(path, overwrite=True, inputs=inputs, what="the scores") as fh:
        if path.suffix.lower() == ".jsonl":
            for r in records:
                fh.write(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n")
        else:
            json.dump(records, fh, ensure_ascii=False, allow_nan=False, indent=1)
            fh.write("\n")
    return len(records)
