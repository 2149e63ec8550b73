"""Search every byte a card holds for values that must not be there (redaction leaks).

Parquet pages are compressed, so raw bytes are not enough: every file is searched as
bytes (that covers card.json, rule files, artifacts, and each Parquet footer with its
statistics and key-value metadata, which are stored uncompressed), and every Parquet
file is also decoded — every cell of every column, every row group's min/max
statistics, the schema metadata — and searched as text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq


def forms(value: str) -> list[bytes]:
    """The byte forms a copy of `value` takes: raw UTF-8 and JSON-escaped (ASCII or not)."""
    out = {value.encode("utf-8", "surrogatepass"), json.dumps(value)[1:-1].encode(),
           json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")}
    return sorted(out)


def _texts(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, bytes):
        out.append(value.decode("utf-8", "replace"))
    elif isinstance(value, dict):
        for k, v in value.items():
            _texts(k, out)
            _texts(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _texts(v, out)


def find_leaks(root: Path, secrets: list[str]) -> list[str]:
    """Where each secret appears under `root`: 'file: how' strings (empty when none leaked)."""
    needles = {s: forms(s) for s in secrets}
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        for secret, options in needles.items():
            if any(o in data for o in options):
                found.append(f"{rel}: raw bytes hold {secret!r}")
        if path.suffix != ".parquet":
            continue
        texts: list[str] = []
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                stats = meta.row_group(g).column(c).statistics
                if stats is not None and stats.has_min_max:
                    _texts([stats.min, stats.max], texts)
        _texts({k.decode("utf-8", "replace"): v for k, v in (meta.metadata or {}).items()}, texts)
        _texts(pq.read_table(path).to_pylist(), texts)
        blob = "\n".join(texts).encode("utf-8", "surrogatepass")
        for secret, options in needles.items():
            if any(o in blob for o in options):
                found.append(f"{rel}: decoded cells or statistics hold {secret!r}")
    return found
