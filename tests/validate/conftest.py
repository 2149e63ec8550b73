from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_CARDS, REPO

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402


@pytest.fixture(scope="session")
def bad_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The hostile corpus built fresh (hard links and FIFOs included) and its expected codes."""
    root = tmp_path_factory.mktemp("corpus") / "bad"
    return root, bad_cards.build(root, runtime=True)


@pytest.fixture
def minimal_copy(tmp_path: Path) -> Path:
    """A private copy of the minimal fixture card, with a license so that it validates cleanly."""
    dest = tmp_path / "minimal"
    shutil.copytree(FIXTURE_CARDS / "minimal", dest)
    bad_cards.edit_manifest(dest, lambda d: d["scope"].update(license="CC0-1.0"))
    return dest
