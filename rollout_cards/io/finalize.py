"""Turn a staging area into a finished card: used by `CardWriter.close()` and `rcard recover`.

One code path serves both, so a recovered card is exactly what a clean close of
the same calls would have produced, except that episodes still open become
`cancelled` and the drops manifest says so.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from ..errors import CardFormatError
from ..model.card import CardManifest, Drop, RuleRef, TableRef, Tables
from ..tables import ARROW_OF_KIND, episodes_schema
from ..yamldoc import load_strict_yaml
from . import staging
from .hashing import build_inventory
from .manifest import dump_manifest

__all__ = [
    "INTERRUPTED_ERROR_TYPE",
    "PARQUET_OPTIONS",
    "ROW_GROUP_ROWS",
    "card_files",
    "finalize_card",
    "recover_card",
    "refresh_manifest",
]

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True}
#: Rows per Parquet row group: small enough that a streaming reader's batches stay small
#: (readers buffer whole row groups), large enough for good compression.
ROW_GROUP_ROWS = 64 * 1024
#: ... and at most about this many bytes of Arrow data: converting holds a row group's batches
#: (pages of the staged parts, mapped) and the Parquet writer's buffers for it, so 64Ki rows of
#: large steps (a mini-swe-agent observation is ~3.5 KB) made a ~230 MB row group and most of an
#: import's peak RSS. A bound on memory, so also a bound on what a reader buffers per row group.
ROW_GROUP_BYTES = 32 << 20

#: error_type given to episodes that were open when the writer stopped.
INTERRUPTED_ERROR_TYPE = "WriterInterrupted"
_EPISODE_CHUNK = 10_000


def recover_card(path: str | os.PathLike[str], *, force: bool = False) -> CardManifest:
    """Finalize a card whose writer died: ended episodes are kept, open ones become `cancelled`.

    Refuses while the writing process is still alive, unless `force`.
    """
    root = Path(path)
    stage = root / staging.STAGING_DIR
    if not root.exists():
        raise CardFormatError(f"{root} does not exist")
    if not stage.is_dir():
        if (root / "card.json").is_file():
            raise CardFormatError(f"{root} is already a finished card; there is nothing to recover")
        raise CardFormatError(f"{root} has no {staging.STAGING_DIR}/ directory; it is not a card being written")
    owner = staging.read_owner(stage / staging.PID)
    if not force and staging.owner_alive(owner):
        raise CardFormatError(
            f"{root} is still being written by process {owner['pid']}; stop it first or pass --force"  # type: ignore[index]
        )
    if not (stage / staging.HEADER).is_file() and not (root / "card.json").is_file():
        raise CardFormatError(
            f"{root}: the writer stopped inside CardWriter(), before it wrote the card's header; no episode "
            "was written, so there is nothing to recover. Delete the directory, or write the card again with "
            "CardWriter(..., overwrite=True)"
        )
    return finalize_card(root, reason="the writing process stopped before the episode ended", interrupted=True)


def finalize_card(
    root: Path, *, reason: str, interrupted: bool = False, reconcile: bool | None = None
) -> CardManifest:
    """Write the tables and card.json from `root`'s staging area, then remove the staging area.

    `interrupted`: the writing process died (recover). `reconcile` (default: `interrupted`):
    the run stopped early, so bulk tables may disagree (episodes written, their steps not yet;
    steps written, their episode not yet) and are made consistent, with drops saying how."""
    reconcile = interrupted if reconcile is None else reconcile
    stage = root / staging.STAGING_DIR
    if (root / "card.json").is_file():
        # A previous finalize got as far as card.json: only the cleanup is left.
        shutil.rmtree(stage, ignore_errors=True)
        from .reader import open_card

        return open_card(root).manifest
    header = json.loads((stage / staging.HEADER).read_bytes())
    journal = staging.read_journal(stage / staging.JOURNAL)
    drops = [Drop.model_validate(d) for d in header["drops"]]
    open_ids = list(journal.open)

    known = (set(journal.open) | journal.ended | _bulk_episode_ids(stage)) if reconcile else None
    steps = _write_steps(root, stage, set(open_ids), known)
    episodes_rows, short = _write_episodes(root, stage, journal, steps.counts, reason, reconcile)

    if open_ids or short:
        detail = " (the journal's last line was torn and ignored)" if journal.torn_tail else ""
        what = [f"{len(open_ids)} episode(s) had not ended: {reason}{detail}"] if open_ids else []
        if short:
            what.append(f"{len(short)} episode(s) written through write_episodes had not all their steps written "
                        f"through write_steps (first: {', '.join(repr(e) for e in short[:3])})")
        drops.append(
            Drop(
                target="episodes",
                action="unobserved",
                declaration="author_declared",
                loss_class="interrupted_run",
                reason="; ".join(what) + "; recorded as cancelled",
                selector=f"error_type == '{INTERRUPTED_ERROR_TYPE}'",
                count=len(open_ids) + len(short),
            )
        )
    if steps.legacy_lost:
        # A Parquet file is readable only once closed (writers before bulk steps were staged
        # as parts): what write_steps wrote is gone, and the card says so.
        drops.append(_steps_lost(
            "the steps written through write_steps (the bulk path) were lost: the writing process stopped "
            "before their Parquet file was closed, and an unclosed Parquet file is unreadable"))
    if interrupted and (open_ids or steps.torn):
        # No selector: the steps table has no error_type column, and the steps that are
        # missing are not rows a selector could match. The episodes drop above selects them.
        drops.append(_steps_lost(
            "steps buffered in memory when the writing process stopped were never "
            f"written; the {len(open_ids)} cancelled episode(s) (error_type == '{INTERRUPTED_ERROR_TYPE}') "
            "keep only their steps flushed before the stop"
            + (" (a torn last batch was cut off)" if steps.torn else "")))
    if short:
        drops.append(_steps_lost(
            f"the run stopped before write_steps had written the steps of {len(short)} episode(s) written through "
            f"write_episodes; they are cancelled (error_type == '{INTERRUPTED_ERROR_TYPE}') and keep the steps "
            "that reached the card"))
    if steps.orphans:
        first = ", ".join(repr(e) for e in sorted(steps.orphans)[:3])
        drops.append(Drop(
            target="steps", action="omitted", declaration="author_declared", loss_class="interrupted_run",
            reason=f"the run stopped before write_episodes wrote the episodes of {sum(steps.orphans.values())} step "
            f"row(s) written through write_steps ({len(steps.orphans)} episode(s), first: {first}); a step needs "
            "its episode's row, so these steps are not in the card",
            count=sum(steps.orphans.values())))

    rules = _rule_refs(root)
    files = card_files(root)
    manifest = CardManifest.model_validate(
        {
            **{k: v for k, v in header.items() if k != "drops" and v is not None},
            "drops": [d.model_dump(mode="json", exclude_none=True) for d in drops],
            "rules": [r.model_dump(mode="json", exclude_none=True) for r in rules],
            "tables": Tables(
                episodes=TableRef(paths=["episodes.parquet"], rows=episodes_rows), steps=steps.ref
            ).model_dump(mode="json"),
            "inventory": build_inventory(root, files).model_dump(mode="json"),
        }
    )
    staging.write_atomic(stage, root / "card.json", dump_manifest(manifest), durable=True)
    shutil.rmtree(stage, ignore_errors=True)
    return manifest


def _steps_lost(reason: str) -> Drop:
    return Drop(target="steps", action="unobserved", declaration="author_declared", loss_class="interrupted_run",
                reason=reason)


def card_files(root: Path) -> list[str]:
    """Relative paths of the card's regular files, except card.json and the staging area."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not p.is_symlink() and rel.parts[0] != staging.STAGING_DIR and rel.as_posix() != "card.json":
            out.append(rel.as_posix())
    return out


def refresh_manifest(root: Path, *, files: Mapping[str, bytes] | None = None, **changes: Any) -> CardManifest:
    """Rewrite card.json after files of a finished card changed: rule list and inventory are
    recomputed, `changes` (manifest fields) are applied. `files` (card-relative path ->
    bytes, e.g. a README) are written first, through the same staging area as card.json."""
    from .manifest import parse_manifest

    manifest = parse_manifest((root / "card.json").read_bytes(), f"{root}/card.json")
    # Temporary files live in a staging area for the moment of the write: a kill leaves
    # `.rcard-staging/` (which `rcard recover` clears), never a stray file in the card.
    stage = root / staging.STAGING_DIR
    stage.mkdir(exist_ok=True)
    for rel, data_bytes in (files or {}).items():
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or ".." in parts or parts[0] in (staging.STAGING_DIR, "card.json"):
            raise ValueError(f"{rel!r} is not a file name inside the card")
        staging.write_atomic(stage, root.joinpath(*parts), data_bytes)
    data = manifest.model_dump(mode="json", exclude_none=True)
    data.update(changes)
    data["rules"] = [r.model_dump(mode="json", exclude_none=True) for r in _rule_refs(root)]
    data["inventory"] = build_inventory(root, card_files(root)).model_dump(mode="json")
    manifest = CardManifest.model_validate(data)
    staging.write_atomic(stage, root / "card.json", dump_manifest(manifest), durable=True)
    shutil.rmtree(stage, ignore_errors=True)
    return manifest


@dataclass
class _StepsWritten:
    ref: TableRef
    counts: Counter[str]  # stored steps per episode: of the open ones, and of all when reconciling
    torn: bool  # the streamed steps' last batch was torn and cut off
    legacy_lost: bool  # an old writer's unclosed bulk-steps.parquet was unreadable
    orphans: Counter[str] = field(default_factory=Counter)  # bulk steps left out: their episode was never written


def _write_steps(root: Path, stage: Path, open_ids: set[str], known: set[str] | None) -> _StepsWritten:
    """Streamed steps become one part, bulk steps another; one part is named steps.parquet.
    With `known` (the card's episode ids; when reconciling after a stop), every episode's
    stored steps are counted and bulk steps of episodes never written are left out."""
    # The parts are read one batch at a time when they are converted: all of them read at once
    # held the whole steps table in memory (3.3 GB of RSS for a 1 GB Inspect log).
    sources: list[Any] = sorted(stage.glob(staging.BULK_STEPS_GLOB))
    schemas = [_ipc_schema(p) for p in sources]
    legacy, legacy_lost = stage / staging.LEGACY_BULK_STEPS, False
    if legacy.exists():
        try:
            sources.insert(0, pq.read_table(legacy))
            schemas.insert(0, sources[0].schema)
        except (pa.ArrowInvalid, OSError):
            legacy.unlink()  # the process died while writing it; nothing in it is readable
            legacy_lost = True
    bulk_schema = schemas[0] if schemas else None
    for other in schemas[1:]:
        if other != bulk_schema:
            raise CardFormatError(f"{stage}: the bulk steps parts have different columns; write_steps refuses that")
    stream = staging.StepStream(stage / staging.STEPS_STREAM)
    schema = bulk_schema or stream_schema()
    count_open = pa.array(sorted(open_ids), pa.string())
    streamed = stage / "final-steps-stream.parquet"
    rows, counts, _ = _convert(streamed, schema, stream, count=None if known is not None else count_open)
    parts = [streamed] if rows or bulk_schema is None else []
    out = _StepsWritten(TableRef(paths=["steps.parquet"], rows=0), counts, stream.torn, legacy_lost)
    if bulk_schema is not None:
        batches = (b for src in sources for b in (src.to_batches() if isinstance(src, pa.Table) else _ipc_batches(src)))
        keep = pa.array(sorted(known), pa.string()) if known is not None else None
        bulk = stage / "final-steps-bulk.parquet"
        bulk_rows, bulk_counts, out.orphans = _convert(bulk, schema, batches, keep=keep)
        counts.update(bulk_counts)
        if bulk_rows or not parts:
            parts.append(bulk)
        rows += bulk_rows
    names = ["steps.parquet"] if len(parts) == 1 else [f"steps/part-{i:05d}.parquet" for i in range(len(parts))]
    for src, name in zip(parts, names, strict=True):
        dest = root / name
        dest.parent.mkdir(exist_ok=True)
        # Link rather than move: if we die before card.json exists, the staging area is intact.
        if dest.exists():
            dest.unlink()
        os.link(src, dest)
    out.ref = TableRef(paths=names, rows=rows)
    return out


def _ipc_schema(path: Path) -> pa.Schema:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).schema


def _ipc_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """The record batches of one staged Arrow IPC part, decoded one at a time."""
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    for i in range(reader.num_record_batches):
        yield reader.get_batch(i)


def _convert(
    dest: Path, schema: pa.Schema, batches: Iterable[pa.RecordBatch], *, count: pa.Array | None = None,
    keep: pa.Array | None = None,
) -> tuple[int, Counter[str], Counter[str]]:
    """Write `batches` to the Parquet file `dest` in row groups of ROW_GROUP_ROWS rows and at most
    about ROW_GROUP_BYTES (`_flush`). Returns the
    rows written, the rows per episode (of the ids in `count`; of every episode when `count` is
    None) and, with `keep`, the rows per episode left out because their id is not in `keep`."""
    counts: Counter[str] = Counter()
    left_out: Counter[str] = Counter()
    rows = 0
    with pq.ParquetWriter(dest, schema, **PARQUET_OPTIONS) as out:
        pending: list[pa.RecordBatch] = []
        pending_rows = pending_bytes = 0
        for batch in batches:
            ids = batch.column("episode_id")
            if keep is not None:
                kept = pc.is_in(ids, value_set=keep)
                if not pc.all(kept).as_py():
                    left_out.update(_per_episode(pc.filter(ids, pc.invert(kept))))
                    batch = batch.filter(kept)
                    ids = batch.column("episode_id")
            counts.update(_per_episode(ids if count is None else pc.filter(ids, pc.is_in(ids, value_set=count))))
            pending.append(batch)
            pending_rows += batch.num_rows
            pending_bytes += batch.nbytes
            if pending_rows >= ROW_GROUP_ROWS or pending_bytes >= ROW_GROUP_BYTES:
                rows += _flush(out, pending, schema)
                pending, pending_rows, pending_bytes = [], 0, 0
        rows += _flush(out, pending, schema)
    return rows, counts, left_out


def _per_episode(ids: pa.Array) -> Counter[str]:
    if pa.types.is_dictionary(ids.type):
        ids = ids.dictionary_decode()
    if not len(ids):
        return Counter()
    vc = pc.value_counts(ids)
    return Counter(dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True)))


def stream_schema() -> pa.Schema:
    from ..tables import steps_schema

    return steps_schema()


def _flush(out: pq.ParquetWriter, batches: list[pa.RecordBatch], schema: pa.Schema) -> int:
    if not batches:
        return 0
    table = pa.Table.from_batches(batches)
    table = _align(table, schema)
    # Rows of the average size that fit in ROW_GROUP_BYTES (one batch may hold more than that).
    fit = table.num_rows * ROW_GROUP_BYTES // max(1, table.nbytes)
    out.write_table(table, row_group_size=max(1, min(ROW_GROUP_ROWS, fit)))
    return table.num_rows


def _align(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in order, absent ones as nulls."""
    arrays = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _episode_schema(journal: staging.Journal, bulk_parts: list[Path]) -> pa.Schema:
    base = episodes_schema()
    extras: dict[str, pa.DataType] = {k: ARROW_OF_KIND[v] for k, v in journal.extra_types.items()}
    for part in bulk_parts:
        for f in staging.read_ipc_file(part).schema:
            if base.get_field_index(f.name) >= 0:
                continue
            seen = extras.get(f.name)
            if seen is None or seen == f.type:
                extras[f.name] = f.type
            elif {seen, f.type} <= {pa.int64(), pa.float64()}:
                extras[f.name] = pa.float64()
            else:
                raise CardFormatError(f"episodes column {f.name!r} is {seen} in one part and {f.type} in another")
    fields = list(base) + [pa.field(name, extras[name]) for name in sorted(extras)]
    return pa.schema(fields, metadata=base.metadata)


def _bulk_episode_ids(stage: Path) -> set[str]:
    ids: set[str] = set()
    for part in sorted(stage.glob(staging.BULK_EPISODES_GLOB)):
        ids.update(staging.read_ipc_file(part).column("episode_id").to_pylist())
    return ids


def _write_episodes(
    root: Path, stage: Path, journal: staging.Journal, step_counts: Counter[str], reason: str, reconcile: bool
) -> tuple[int, list[str]]:
    """Write episodes.parquet; returns its rows and, when reconciling, the bulk episodes whose
    steps did not all reach the card (recorded as cancelled, like episodes left open)."""
    bulk_parts = sorted(stage.glob(staging.BULK_EPISODES_GLOB))
    schema = _episode_schema(journal, bulk_parts)
    tmp = stage / "final-episodes.parquet"
    rows = 0
    short: list[str] = []
    with pq.ParquetWriter(tmp, schema, **PARQUET_OPTIONS) as out:
        for chunk in staging.iter_ended(stage / staging.JOURNAL, _EPISODE_CHUNK):
            table = pa.Table.from_pylist(chunk, schema=schema)
            out.write_table(table)
            rows += table.num_rows
        if journal.open:
            cancelled = [
                {
                    **row,
                    "status": "cancelled",
                    "error_type": INTERRUPTED_ERROR_TYPE,
                    "error_message": reason,
                    "n_steps": step_counts.get(eid, 0),
                }
                for eid, row in journal.open.items()
            ]
            out.write_table(pa.Table.from_pylist(cancelled, schema=schema))
            rows += len(cancelled)
        for part in bulk_parts:
            table = _align(staging.read_ipc_file(part), schema)
            if reconcile:
                table = _cancel_short(table, step_counts, short)
            out.write_table(table)
            rows += table.num_rows
    dest = root / "episodes.parquet"
    if dest.exists():
        dest.unlink()
    os.link(tmp, dest)
    return rows, short


def _cancel_short(table: pa.Table, step_counts: Counter[str], short: list[str]) -> pa.Table:
    """Bulk episode rows whose n_steps exceeds the steps that reached the card (the stop came
    before write_steps wrote them) become cancelled with n_steps = the stored steps; what the
    row said (status, error, n_steps) is kept in error_message."""
    ids = table.column("episode_id").to_pylist()
    declared = table.column("n_steps").to_pylist()
    bad = [i for i, (eid, n) in enumerate(zip(ids, declared, strict=True))
           if n is not None and n != step_counts.get(eid, 0)]
    if not bad:
        return table
    columns = {name: table.column(name).to_pylist() for name in ("status", "error_type", "error_message", "n_steps")}
    for i in bad:
        was = f"status {columns['status'][i]!r}, n_steps {declared[i]}"
        if columns["error_type"][i] or columns["error_message"][i]:
            was += f", error {columns['error_type'][i] or ''}: {columns['error_message'][i] or ''}"
        columns["error_message"][i] = (
            f"the writing process stopped before write_steps had written all this episode's steps "
            f"({step_counts.get(ids[i], 0)} reached the card); its row said {was}")
        columns["status"][i] = "cancelled"
        columns["error_type"][i] = INTERRUPTED_ERROR_TYPE
        columns["n_steps"][i] = step_counts.get(ids[i], 0)
        short.append(ids[i])
    for name, values in columns.items():
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
    return table


def _rule_refs(root: Path) -> list[RuleRef]:
    from .hashing import sha256_file

    refs = []
    for path in sorted((root / "rules").glob("*.yaml")) if (root / "rules").is_dir() else []:
        try:
            doc: Any = load_strict_yaml(path.read_text(encoding="utf-8"))[0]
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise CardFormatError(f"{path}: rule file is not valid YAML: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("rule"), str):
            raise CardFormatError(f"{path}: rule file needs a `rule:` id")
        kind = doc.get("kind") if doc.get("kind") in ("original", "recovered", "regrade", "diagnostic") else None
        sha, _ = sha256_file(path)
        refs.append(RuleRef(id=doc["rule"], path=path.relative_to(root).as_posix(), sha256=sha, kind=kind))
    return refs
