"""The committed fixtures are what fixtures/make.py produces (compared logically)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_fixtures_match_the_generator():
    result = subprocess.run([sys.executable, "fixtures/make.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_fixtures_are_small():
    total = sum(p.stat().st_size for p in (REPO / "fixtures").rglob("*") if p.is_file() and not p.is_symlink())
    assert total < 5 * 1024 * 1024
