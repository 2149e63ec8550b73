from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

import rollout_cards as rc
from rollout_cards.importers import import_source
from tests.conftest import REPO

SOURCES = REPO / "fixtures" / "sources"
CREATED = "2026-01-01T00:00:00+00:00"


def run_import(fmt: str, sources: list[Path], out: Path, **kw):
    """Import and open the card; returns (ImportResult, Card)."""
    from datetime import datetime

    result = import_source(fmt, sources, out, created=datetime.fromisoformat(CREATED), **kw)
    return result, rc.open(out)


def assert_valid(path: Path) -> None:
    """The card passes `rcard validate` (no errors)."""
    from rollout_cards.validate import validate

    report = validate(path)
    errors = [f for f in report.findings if f.severity == "error"]
    assert report.valid, errors


@pytest.fixture
def sources() -> Path:
    return SOURCES


def zstd_zip(path: Path, members: dict[str, bytes]) -> Path:
    """A zip whose members are zstd-compressed (method 93), as Inspect writes .eval logs."""
    import zstandard

    out, central = bytearray(), []
    for filename, data in members.items():
        packed, crc, name = zstandard.ZstdCompressor().compress(data), zlib.crc32(data), filename.encode()
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 63, 0, 93, 0, 0x21, crc, len(packed), len(data), len(name), 0)
        out += name + packed
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 63, 63, 0, 93, 0, 0x21, crc, len(packed),
                                   len(data), len(name), 0, 0, 0, 0, 0, offset) + name)
    cd_start = len(out)
    for entry in central:
        out += entry
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(out) - cd_start, cd_start, 0)
    path.write_bytes(bytes(out))
    return path
