from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline anywhere: CI machines are shared and a slow example is not a bug.
settings.register_profile("rcard", deadline=None)
settings.load_profile("rcard")

REPO = Path(__file__).resolve().parents[1]
FIXTURE_CARDS = REPO / "fixtures" / "cards"
SHARED = REPO.parent / "shared"
EXTERNAL = SHARED / "data" / "external"


@pytest.fixture
def synthetic_copy(tmp_path: Path) -> Path:
    """A private copy of the synthetic fixture card that a test may change."""
    dest = tmp_path / "synthetic"
    shutil.copytree(FIXTURE_CARDS / "synthetic", dest)
    return dest


def external(rel: str) -> Path:
    """A file of ../shared/data/external, or skip the test when ../shared is absent."""
    path = EXTERNAL / rel
    if not path.exists():
        pytest.skip(f"../shared/data/external/{rel} is not available (../shared is absent beside the repo)")
    return path
