"""The staging area a card is written through, shared by the writer, close and recover.

While a card is being written, `<card>/.rcard-staging/` holds:

- `header.json`: identity, plan, scope, provenance and drops given to the writer;
- `journal.jsonl`: one line per episode begin (its identity) and per episode end
  (its full row), flushed at each line so an ended episode survives a SIGKILL;
- `steps.arrows`: an Arrow IPC stream of steps, a batch appended at every episode
  end and whenever the buffer fills, so a killed process loses at most the
  unflushed steps of episodes that were still open;
- `bulk-episodes-*.arrow` (Arrow IPC files, rewritten once at close) and
  `bulk-steps.parquet` (kept as a part as it is): tables given to the bulk path;
- `writer.pid`: the writing process, so recovery does not race a live writer.

Finalizing turns these into the card's tables and card.json, then removes the
staging directory. Files are only renamed into place once complete.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..tables import SCALAR_KINDS, merge_kind

STAGING_DIR = ".rcard-staging"
HEADER = "header.json"
JOURNAL = "journal.jsonl"
STEPS_STREAM = "steps.arrows"
BULK_STEPS = "bulk-steps.parquet"
PID = "writer.pid"
BULK_EPISODES_GLOB = "bulk-episodes-*.arrow"


@dataclass
class Journal:
    """A pass over the journal: which episodes ended, the identity rows of those still
    open, and the types seen in extra columns. Ended rows are not kept (see `iter_ended`)."""

    ended: set[str] = field(default_factory=set)
    open: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra_types: dict[str, str] = field(default_factory=dict)
    torn_tail: bool = False


def _records(path: Path, journal: Journal | None = None) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                # A torn last line (the process died while writing it) ends the journal.
                if not raw.endswith(b"\n"):
                    raise ValueError
                record = json.loads(raw)
            except ValueError:
                if journal is not None:
                    journal.torn_tail = True
                return
            yield record


def read_ipc_file(path: Path) -> pa.Table:
    """An Arrow IPC file of the staging area, memory-mapped."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def read_journal(path: Path) -> Journal:
    """One streaming pass over the journal."""
    journal = Journal()
    for record in _records(path, journal):
        row = record.get("begin") or record.get("end")
        for key, value in row.items():
            if value is not None and key.startswith(("score.", "cond.", "task.", "meta.")):
                kind = SCALAR_KINDS[type(value)]
                merged = merge_kind(journal.extra_types.get(key), kind)
                if merged is None:
                    raise ValueError(f"journal column {key} holds values of more than one type")
                journal.extra_types[key] = merged
        if "begin" in record:
            journal.open[row["episode_id"]] = row
        else:
            journal.open.pop(row["episode_id"], None)
            journal.ended.add(row["episode_id"])
    return journal


def iter_ended(path: Path, chunk: int) -> Iterator[list[dict[str, Any]]]:
    """The rows of ended episodes in the order they ended, `chunk` rows at a time."""
    rows: list[dict[str, Any]] = []
    for record in _records(path):
        if "end" in record:
            rows.append(record["end"])
            if len(rows) >= chunk:
                yield rows
                rows = []
    if rows:
        yield rows


class StepStream:
    """Lazily iterate the batches of the steps stream; `torn` tells whether a torn tail was cut off."""

    def __init__(self, path: Path):
        self.path = path
        self.torn = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with pa.OSFile(str(self.path), "rb") as source:
            try:
                reader = pa.ipc.open_stream(source)
            except (pa.ArrowInvalid, OSError):
                self.torn = True
                return
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except (pa.ArrowInvalid, OSError):
                    # The process died while appending this batch: keep what came before.
                    self.torn = True
                    return
                yield batch
