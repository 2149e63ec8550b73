"""The staging area a card is written through, shared by the writer, close and recover.

While a card is being written, `<card>/.rcard-staging/` holds:

- `header.json`: identity, plan, scope, provenance and drops given to the writer;
- `journal.jsonl`: one line per episode begin (its identity) and per episode end
  (its full row), flushed at each line so an ended episode survives a SIGKILL;
- `steps.arrows`: an Arrow IPC stream of steps, a batch appended at every episode
  end and whenever the buffer fills, so a killed process loses at most the
  unflushed steps of episodes that were still open;
- `bulk-episodes-*.arrow` and `bulk-steps-*.arrow`: tables given to the bulk path, one
  Arrow IPC file per table, each written under a `tmp-` name and renamed once complete
  (a part is whole or absent), converted to Parquet once, at close;
- `writer.pid`: the writing process (an owner marker, below), so recovery does not race
  a live writer;
- `tmp-*`: files being written; each is renamed into place (rules/, artifacts/,
  card.json) only once complete, so a kill never leaves a half file in the card.

Every write is atomic (a rename of a complete file) or recoverable (the journal and the
steps stream are append-only, and a torn tail is cut off), and no temporary file ever
lives outside the staging area, so a killed writer's card is finished by `rcard recover`
with nothing half-written published. Finalizing turns these into the card's tables and
card.json, then removes the staging directory.

Sibling directories of a card, named `.<name>.rcard-import-<hex>` (an import being
written) and `.<name>.rcard-replaced-<hex>` (a card being overwritten), each come with an
owner marker `<dir>.owner`; `sweep_stale` removes those whose owner is gone.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import socket
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
#: What writers before the bulk steps were staged as parts left (one Parquet file, readable
#: only once closed); recover still reads it.
LEGACY_BULK_STEPS = "bulk-steps.parquet"
PID = "writer.pid"
BULK_EPISODES_GLOB = "bulk-episodes-*.arrow"
BULK_STEPS_GLOB = "bulk-steps-*.arrow"
OWNER_SUFFIX = ".owner"
_SIBLING = re.compile(r"^\.(?P<name>.+)\.rcard-(?P<kind>import|replaced)-[0-9a-f]{12}$")
_tmp_names = itertools.count()


# -- atomic writes ------------------------------------------------------------------------
def write_atomic(stage: Path, dest: Path, data: bytes, *, durable: bool = False) -> None:
    """Write `data` to `dest` through a temporary file in the staging area `stage` and a
    rename: `dest` is absent or complete, and a leftover temporary file is never part of
    the card. `durable` also fsyncs the data before the rename (card.json, the header)."""
    tmp = stage / f"tmp-{os.getpid()}-{next(_tmp_names)}"
    with open(tmp, "wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, dest)


# -- owner markers ------------------------------------------------------------------------
def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def owner_record(kind: str) -> bytes:
    """The marker naming this process as the owner of a staging area or sibling directory."""
    pid = os.getpid()
    return json.dumps({"rcard": kind, "pid": pid, "start": _start_time(pid),
                       "host": socket.gethostname()}).encode()


def read_owner(path: Path) -> dict[str, Any] | None:
    """The owner marker at `path` (a bare pid, as older writers wrote, is accepted); None when
    it is absent or unreadable — a marker torn by a kill has no live owner."""
    try:
        raw = path.read_bytes()[:4096]
        value = json.loads(raw)
    except (OSError, ValueError):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return {"pid": value}
    return value if isinstance(value, dict) else None


def owner_alive(owner: dict[str, Any] | None) -> bool:
    """Whether the process a marker names still runs (same pid, same start time). A marker
    written on another host cannot be checked here and counts as alive."""
    if owner is None:
        return False
    if owner.get("host") not in (None, socket.gethostname()):
        return True
    pid = owner.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OverflowError:
        return False
    start = owner.get("start")
    return start is None or _start_time(pid) in (None, start)


def claim_sibling(parent: Path, name: str, kind: str, token: str) -> Path:
    """The path of a sibling directory `.<name>.rcard-<kind>-<token>` of `parent/name`, after
    writing its owner marker (so a sweep can tell it is ours before the directory exists)."""
    path = parent / f".{name}.rcard-{kind}-{token}"
    marker = path.with_name(path.name + OWNER_SUFFIX)
    marker.write_bytes(owner_record(kind))
    return path


def release_sibling(path: Path) -> None:
    """Remove a sibling directory's owner marker once the directory is gone or renamed."""
    path.with_name(path.name + OWNER_SUFFIX).unlink(missing_ok=True)


def sweep_stale(parent: Path) -> list[Path]:
    """Remove the sibling directories in `parent` that a killed import or overwrite left:
    only ours (the name pattern and an owner marker saying so) and only when their owner no
    longer runs. A card that was being replaced is renamed back when nothing took its place.
    Returns what was removed or restored."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    done = []
    for entry in entries:
        name = entry.name
        if not name.endswith(OWNER_SUFFIX):
            continue
        match = _SIBLING.match(name[: -len(OWNER_SUFFIX)])
        marker = Path(entry.path)
        owner = read_owner(marker)
        if match is None or (owner is not None and owner.get("rcard") != match["kind"]) or owner_alive(owner):
            continue  # not ours, or its owner still runs (a marker torn by a kill reads as None)
        target = marker.with_name(name[: -len(OWNER_SUFFIX)])
        if target.is_dir() and not target.is_symlink():
            original = parent / match["name"]
            if match["kind"] == "replaced" and not os.path.lexists(original):
                os.rename(target, original)
            else:
                shutil.rmtree(target, ignore_errors=True)
            done.append(target)
        marker.unlink(missing_ok=True)
    return done


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


def write_ipc_part(stage: Path, kind: str, number: int, table: pa.Table) -> None:
    """Stage one bulk table as `bulk-<kind>-<number>.arrow`: written under a `tmp-` name and
    renamed, so a kill leaves the part whole or absent (never a torn file recover must guess at)."""
    path = stage / f"bulk-{kind}-{number:05d}.arrow"
    tmp = path.with_name(f"tmp-{path.name}")
    # lz4: as fast as an uncompressed write here, and a tenth of the disk for text-heavy steps.
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=options) as out:
        out.write_table(table)
    os.replace(tmp, path)


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
