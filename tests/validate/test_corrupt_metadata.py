"""Corrupt Parquet metadata behind a valid inventory (re-hashed) never aborts the process.

pyarrow terminates the interpreter when Python code touches a column chunk's metadata
whose size statistics are corrupt; the validator must report `parquet-unreadable`
instead. The mutations run in a child process so an abort fails the test, not pytest.
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

    base = Path({repo!r}) / "fixtures" / "cards" / "synthetic"
    work = Path(sys.argv[1])
    random.seed(3)
    for it in range(42):
        rel = random.choice(["episodes.parquet", "steps.parquet"])
        size = (base / rel).stat().st_size
        flips = [(random.randrange(size), random.randint(1, 255)) for _ in range(random.randint(1, 3))]
        if it < 30:   # replay the generator; check the last mutations (41 aborted pyarrow once)
            continue
        card = work / f"m{{it}}"
        shutil.copytree(base, card)
        data = bytearray((card / rel).read_bytes())
        for i, mask in flips:
            data[i] ^= mask
        (card / rel).write_bytes(bytes(data))
        bad_cards.rehash(card)
        report = rc.validate(card)
        assert report.outcome in ("invalid", "valid"), [f.message for f in report.findings]
    print("ok")
    """
)


READERS = textwrap.dedent(
    """
    import random, shutil, sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from fixtures import bad_cards
    from rollout_cards.cli import main

    base = Path({repo!r}) / "fixtures" / "cards" / "synthetic"
    work = Path(sys.argv[1])
    random.seed(7)
    for it in range(77):
        rel = random.choice(["episodes.parquet", "steps.parquet"])
        size = (base / rel).stat().st_size
        flips = [(random.randrange(size), random.randint(1, 255)) for _ in range(random.randint(1, 3))]
        if it not in (60, 76):   # these two decoded into column names that are not UTF-8
            continue
        card = work / f"m{{it}}"
        shutil.copytree(base, card)
        data = bytearray((card / rel).read_bytes())
        for i, mask in flips:
            data[i] ^= mask
        (card / rel).write_bytes(bytes(data))
        bad_cards.rehash(card)
        for command in ("info", "rescore"):
            assert main([command, str(card)]) in (0, 1), (it, command)
    print("ok")
    """
)


def test_corrupt_tables_behind_a_valid_inventory_are_invalid_input(tmp_path, capfd):
    result = subprocess.run([sys.executable, "-c", READERS.format(repo=str(REPO)), str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "internal error" not in result.stderr


def test_corrupt_metadata_is_a_finding_not_an_abort(tmp_path):
    result = subprocess.run([sys.executable, "-c", CHILD.format(repo=str(REPO)), str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"
