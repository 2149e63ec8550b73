"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_the_two_commands():
    first = re.search(r"```sh\n(.*?)```", README, flags=re.S).group(1).strip().splitlines()
    assert len(first) == 2
    assert "pip install" in first[0] and "rcard validate" in first[0] and "rcard rescore" in first[0]
    assert "pytest" in first[1]


def test_writer_example_runs(tmp_path):
    result = subprocess.run([sys.executable, "-c", BLOCKS[0]], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "card" / "card.json").is_file()


def test_reader_example_runs():
    result = subprocess.run([sys.executable, "-c", BLOCKS[1]], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "synthetic.best_of_3 {'agent': 'alpha'} 0.86" in result.stdout
