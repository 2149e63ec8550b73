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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for `pytest -n` (pytest-xdist, `--dist loadgroup`): a module's tests share one
    worker (its module-scoped fixtures, such as logs written by Inspect, are built once), and
    the Ray tests share one so that two local Ray clusters never run at once (they watch their
    workers through /proc)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        module = item.nodeid.split("::", 1)[0]
        group = "ray" if module.startswith("tests/scale/") else module
        item.add_marker(pytest.mark.xdist_group(group))
