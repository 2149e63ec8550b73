from __future__ import annotations

import gc

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers import import_source
from rollout_cards.importers.registry import get_importer
from tests.importers.conftest import SOURCES

TAU = SOURCES / "tau-bench" / "synthetic-agent.json"


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever the test run set
    yield
    gc.set_threshold(*before)


def _spy(monkeypatch, fail: bool = False) -> list[tuple[int, int, int]]:
    cls = type(get_importer("tau-bench"))
    seen: list[tuple[int, int, int]] = []
    read = cls.read

    def spied(self, request, session):
        seen.append(gc.get_threshold())
        if fail:
            raise SourceFormatError("broken on purpose", file=str(TAU))
        read(self, request, session)

    monkeypatch.setattr(cls, "read", spied)
    return seen


def test_an_import_collects_less_often_and_restores_the_thresholds(tmp_path, monkeypatch, thresholds):
    seen = _spy(monkeypatch)
    assert import_source("tau-bench", [TAU], tmp_path / "card").episodes > 0
    assert seen == [(5000, 50, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_a_failed_import_restores_the_thresholds(tmp_path, monkeypatch, thresholds):
    _spy(monkeypatch, fail=True)
    with pytest.raises(SourceFormatError, match="broken on purpose"):
        import_source("tau-bench", [TAU], tmp_path / "card")
    assert gc.get_threshold() == (700, 10, 10)
    assert not (tmp_path / "card").exists()


def test_a_switched_off_collector_stays_off(tmp_path, monkeypatch, thresholds):
    gc.set_threshold(0)
    seen = _spy(monkeypatch)
    import_source("tau-bench", [TAU], tmp_path / "card")
    assert seen[0][0] == 0 and gc.get_threshold()[0] == 0
