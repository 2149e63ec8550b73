"""Generated parts of the docs are current."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_format_tables_are_current():
    result = subprocess.run([sys.executable, "docs/make_tables.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_standard_column_is_documented():
    from rollout_cards.tables import EPISODE_COLUMNS, STEP_COLUMNS

    text = (REPO / "docs" / "format.md").read_text(encoding="utf-8")
    for column in (*EPISODE_COLUMNS, *STEP_COLUMNS):
        assert f"| `{column.name}` |" in text
