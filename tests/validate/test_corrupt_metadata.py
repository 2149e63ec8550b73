"""Corrupt Parquet behind a valid inventory (re-hashed) is invalid input, never an abort or a bug.

pyarrow terminates the interpreter when Python code touches a column chunk's metadata
whose size statistics are corrupt, and corrupt column names are not UTF-8; the validator
must report `parquet-unreadable` and the readers must exit 1. The mutations (found by
fuzzing) replay a seeded generator and run in a child process, so an abort fails the
test, not pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO

CHILD = textwrap.dedent(
    """
    import random, shutil, sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from fixtures import bad_cards
    import rollout_cards as rc
    from rollout_cards.cli import main

    base = Path({repo!r}) / "fixtures" / "cards" / "synthetic"
    work, seed, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    wanted = {{int(i) for i in sys.argv[4].split(",")}}
    random.seed(seed)
    for it in range(max(wanted) + 1):
        rel = random.choice(["episodes.parquet", "steps.parquet"])
        size = (base / rel).stat().st_size
        flips = [(random.randrange(size), random.randint(1, 255)) for _ in range(random.randint(1, 3))]
        if it not in wanted:
            continue
        card = work / f"m{{it}}"
        shutil.copytree(base, card)
        data = bytearray((card / rel).read_bytes())
        for i, mask in flips:
            data[i] ^= mask
        (card / rel).write_bytes(bytes(data))
        bad_cards.rehash(card)
        if mode == "validate":
            report = rc.validate(card)
            assert report.outcome in ("invalid", "valid"), [f.message for f in report.findings]
        else:
            for command in ("info", "rescore"):
                assert main([command, str(card)]) in (0, 1), (it, command)
    print("ok")
    """
)


def _run(tmp_path, seed: int, mode: str, iterations: range | tuple[int, ...]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO)), str(tmp_path), str(seed), mode,
         ",".join(map(str, iterations))],
        capture_output=True, text=True, timeout=300,
    )


def test_corrupt_metadata_is_a_finding_not_an_abort(tmp_path):
    result = _run(tmp_path, 3, "validate", range(30, 42))  # iteration 41 aborted pyarrow once
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


def test_corrupt_tables_behind_a_valid_inventory_are_invalid_input(tmp_path):
    result = _run(tmp_path, 7, "cli", (60, 76))  # these decoded into column names that are not UTF-8
    assert result.returncode == 0, result.stderr[-2000:]
    assert "internal error" not in result.stderr
