from __future__ import annotations

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
