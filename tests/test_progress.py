"""rollout_cards.progress: what the library reports while it works (tests/cli/test_progress.py
has the terminal display)."""

from __future__ import annotations

import shutil
import threading

import rollout_cards as rc
from rollout_cards import progress
from tests.conftest import FIXTURE_CARDS


class Recorder:
    def __init__(self) -> None:
        self.tasks: dict[int, dict] = {}
        self.lock = threading.Lock()

    def open(self, description, total, unit):
        with self.lock:
            handle = len(self.tasks)
            self.tasks[handle] = {"description": description, "total": total, "unit": unit, "done": 0,
                                  "closed": False}
            return handle

    def advance(self, handle, n):
        with self.lock:
            self.tasks[handle]["done"] += n

    def close(self, handle):
        self.tasks[handle]["closed"] = True

    def named(self, prefix):
        return [t for t in self.tasks.values() if t["description"].startswith(prefix)]


def test_nothing_listens_by_default():
    with progress.task("work", total=3) as t:
        t.advance(2)
    assert t is progress.IDLE


def test_tasks_are_opened_advanced_and_closed_even_on_errors():
    rec = Recorder()
    with progress.rendering(rec):
        with progress.task("a", total=10, unit="B") as t:
            t.advance(4)
            t.advance(6)
        try:
            with progress.task("b"):
                raise ValueError("x")
        except ValueError:
            pass
    with progress.task("after"):  # the renderer is gone again
        pass
    assert [(t["description"], t["done"], t["total"], t["closed"]) for t in rec.tasks.values()] == [
        ("a", 10, 10, True), ("b", 0, None, True)]


def test_validate_reports_each_check_and_the_bytes_it_hashes():
    card = FIXTURE_CARDS / "synthetic"
    rec = Recorder()
    with progress.rendering(rec):
        report = rc.validate(card)
    assert report.valid
    checks = [t["description"].removeprefix("validate: ") for t in rec.named("validate: ")]
    assert checks == [c.name for c in report.checks]
    hashed = {t["description"].removeprefix("sha256 "): t for t in rec.named("sha256 ")}
    steps = (card / "steps.parquet").stat().st_size
    assert hashed["steps.parquet"]["total"] == steps == hashed["steps.parquet"]["done"]
    assert all(t["closed"] for t in rec.tasks.values())


def test_pack_unpack_and_import_count_their_work(tmp_path):
    card = FIXTURE_CARDS / "synthetic"
    rec = Recorder()
    with progress.rendering(rec):
        packed = rc.pack_card(card, tmp_path / "c.rcard")
        rc.unpack_card(packed.path, tmp_path / "u")
    manifest = rc.open(card).manifest
    files = sum(f.bytes for f in manifest.inventory.files)
    [pack] = rec.named("pack ")
    assert pack["total"] == pack["done"] == files
    [unpack] = rec.named("unpack ")
    assert unpack["done"] == unpack["total"] > files  # card.json too
    shutil.rmtree(tmp_path / "u")


def test_import_counts_episodes(tmp_path):
    rec = Recorder()
    source = FIXTURE_CARDS.parent / "sources" / "tau-bench" / "synthetic-agent.json"
    with progress.rendering(rec):
        result = rc.import_source("tau-bench", [source], tmp_path / "card")
    [imported] = rec.named("import ")
    assert imported["done"] == result.episodes > 0 and imported["unit"] == "episodes"
    assert rec.named("writing the card")
