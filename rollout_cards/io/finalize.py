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
from collections.abc import Mapping
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


def finalize_card(root: Path, *, reason: str, interrupted: bool = False) -> CardManifest:
    """Write the tables and card.json from `root`'s staging area, then remove the staging area."""
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

    steps_ref, open_step_counts, steps_torn, bulk_lost = _write_steps(root, stage, set(open_ids))
    episodes_rows = _write_episodes(root, stage, journal, open_step_counts, reason)

    if open_ids:
        detail = " (the journal's last line was torn and ignored)" if journal.torn_tail else ""
        drops.append(
            Drop(
                target="episodes",
                action="unobserved",
                declaration="author_declared",
                loss_class="interrupted_run",
                reason=f"{len(open_ids)} episode(s) had not ended: {reason}; recorded as "
                f"cancelled{detail}",
                selector=f"error_type == '{INTERRUPTED_ERROR_TYPE}'",
                count=len(open_ids),
            )
        )
    if bulk_lost:
        # A Parquet file is readable only once closed: what write_steps wrote is gone, and the
        # card says so (its episodes' n_steps will not match; `rcard validate` names them).
        drops.append(_steps_lost(
            "the steps written through write_steps (the bulk path) were lost: the writing process stopped "
            "before their Parquet file was closed, and an unclosed Parquet file is unreadable"))
    if interrupted and (open_ids or steps_torn):
        # No selector: the steps table has no error_type column, and the steps that are
        # missing are not rows a selector could match. The episodes drop above selects them.
        drops.append(_steps_lost(
            "steps buffered in memory when the writing process stopped were never "
            f"written; the {len(open_ids)} cancelled episode(s) (error_type == '{INTERRUPTED_ERROR_TYPE}') "
            "keep only their steps flushed before the stop"
            + (" (a torn last batch was cut off)" if steps_torn else "")))

    rules = _rule_refs(root)
    files = card_files(root)
    manifest = CardManifest.model_validate(
        {
            **{k: v for k, v in header.items() if k != "drops" and v is not None},
            "drops": [d.model_dump(mode="json", exclude_none=True) for d in drops],
            "rules": [r.model_dump(mode="json", exclude_none=True) for r in rules],
            "tables": Tables(
                episodes=TableRef(paths=["episodes.parquet"], rows=episodes_rows), steps=steps_ref
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


def _write_steps(root: Path, stage: Path, open_ids: set[str]) -> tuple[TableRef, Counter[str], bool, bool]:
    """Streamed steps become one part, bulk steps another; one part is named steps.parquet."""
    bulk = stage / staging.BULK_STEPS
    bulk_schema = None
    bulk_lost = False
    if bulk.exists():
        try:
            bulk_schema = pq.read_schema(bulk)
        except (pa.ArrowInvalid, OSError):
            bulk.unlink()  # the process died while writing it; nothing in it is readable
            bulk_lost = True
    stream = staging.StepStream(stage / staging.STEPS_STREAM)
    schema = bulk_schema or stream_schema()
    streamed = stage / "final-steps-stream.parquet"
    counts: Counter[str] = Counter()
    rows = 0
    with pq.ParquetWriter(streamed, schema, **PARQUET_OPTIONS) as out:
        pending: list[pa.RecordBatch] = []
        pending_rows = 0
        for batch in stream:
            if open_ids:
                ids = batch.column("episode_id")
                mask = pc.is_in(ids, value_set=pa.array(sorted(open_ids), pa.string()))
                counts.update(pc.filter(ids, mask).to_pylist())
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= ROW_GROUP_ROWS:
                rows += _flush(out, pending, schema)
                pending, pending_rows = [], 0
        rows += _flush(out, pending, schema)
    parts = []
    if rows or bulk_schema is None:
        parts.append(streamed)
    if bulk_schema is not None:
        parts.append(bulk)
        rows += pq.ParquetFile(bulk).metadata.num_rows
    names = ["steps.parquet"] if len(parts) == 1 else [f"steps/part-{i:05d}.parquet" for i in range(len(parts))]
    for src, name in zip(parts, names, strict=True):
        dest = root / name
        dest.parent.mkdir(exist_ok=True)
        # Link rather than move: if we die before card.json exists, the staging area is intact.
        if dest.exists():
            dest.unlink()
        os.link(src, dest)
    return TableRef(paths=names, rows=rows), counts, stream.torn, bulk_lost


def stream_schema() -> pa.Schema:
    from ..tables import steps_schema

    return steps_schema()


def _flush(out: pq.ParquetWriter, batches: list[pa.RecordBatch], schema: pa.Schema) -> int:
    if not batches:
        return 0
    table = pa.Table.from_batches(batches)
    table = _align(table, schema)
    out.write_table(table, row_group_size=ROW_GROUP_ROWS)
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


def _write_episodes(
    root: Path, stage: Path, journal: staging.Journal, open_counts: Counter[str], reason: str
) -> int:
    bulk_parts = sorted(stage.glob(staging.BULK_EPISODES_GLOB))
    schema = _episode_schema(journal, bulk_parts)
    tmp = stage / "final-episodes.parquet"
    rows = 0
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
                    "n_steps": open_counts.get(eid, 0),
                }
                for eid, row in journal.open.items()
            ]
            out.write_table(pa.Table.from_pylist(cancelled, schema=schema))
            rows += len(cancelled)
        for part in bulk_parts:
            table = _align(staging.read_ipc_file(part), schema)
            out.write_table(table)
            rows += table.num_rows
    dest = root / "episodes.parquet"
    if dest.exists():
        dest.unlink()
    os.link(tmp, dest)
    return rows


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
