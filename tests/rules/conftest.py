"""Small cards for rule tests, built with the bulk writer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import rollout_cards as rc
from rollout_cards.io.writer import CardWriter
from tests.conftest import FIXTURE_CARDS


def build_card(path: Path, episodes: Sequence[dict[str, Any]], steps: Sequence[dict[str, Any]] = (), **kw: Any) -> rc.Card:
    """Write a card from episode (and step) rows and open it."""
    with CardWriter(path, id=kw.pop("id", "test-card"), title="rule test card", timestamps=False, **kw) as w:
        w.write_episodes(pa.Table.from_pylist(list(episodes)))
        if steps:
            w.write_steps(pa.Table.from_pylist(list(steps)))
    return rc.open(path)


def episode(i: int, **fields: Any) -> dict[str, Any]:
    """One completed episode row with defaults."""
    row = {"episode_id": f"ep-{i:05d}", "task_id": f"task-{i % 10}", "status": "completed", "agent": "a"}
    row.update(fields)
    return row


@pytest.fixture(scope="session")
def synthetic() -> rc.Card:
    return rc.open(FIXTURE_CARDS / "synthetic")


@pytest.fixture(scope="session")
def synthetic_rows(synthetic: rc.Card) -> list[dict[str, Any]]:
    """The synthetic fixture's episodes as plain dicts, for independent reference computations."""
    return synthetic.episodes().to_pylist()
