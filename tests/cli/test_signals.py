"""Signals: SIGINT and SIGTERM stop `rcard` with 128 + n, and an interrupted import leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

RCARD = [sys.executable, "-c", "import sys; from rollout_cards.cli import main; sys.exit(main(sys.argv[1:]))"]


def _big_source(path, n=200_000):
    # Large enough that the import is still running 0.3 s after its staging directory appears,
    # however fast the importer gets (a finished import is not the case under test).
    return _write_source(path, n)


def _write_source(path, n):
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"e{i}", "task_id": "t", "messages": [{"role": "user", "content": "hi"}]}) + "\n")


def _litter(parent):
    return sorted(p.name for p in parent.iterdir() if ".rcard-" in p.name)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_import_cleans_up_and_exits_128_plus_n(tmp_path, signum, code):
    """SIGTERM (what CI timeouts send) left `.X.rcard-import-…` behind; SIGINT exited 2."""
    _big_source(tmp_path / "big.jsonl")
    out = tmp_path / "out" / "card"
    proc = subprocess.Popen([*RCARD, "import", "chat-jsonl", str(tmp_path / "big.jsonl"), "-o", str(out)],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out.parent.is_dir() and any(p.is_dir() for p in out.parent.iterdir())):
            assert proc.poll() is None and time.monotonic() < deadline, "the import ended before the signal"
            time.sleep(0.01)
        time.sleep(0.3)  # well inside the import: episodes are being written
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert f"stopped by {signal.Signals(signum).name}" in err and "Traceback" not in err
    assert not out.parent.exists() or _litter(out.parent) == [], _litter(out.parent)
    assert not out.exists()


def test_stale_import_directories_of_a_killed_import_are_swept(tmp_path):
    """A SIGKILLed import cannot clean up; the next import beside it does, and only what is ours."""
    from rollout_cards.io import staging

    source = tmp_path / "s.jsonl"
    _big_source(source, n=3)
    stale = tmp_path / f".old.rcard-import-{'a' * 12}"
    (stale / ".rcard-staging").mkdir(parents=True)
    (tmp_path / f"{stale.name}.owner").write_text('{"rcard": "import", "pid": 999999999}')
    other = tmp_path / ".mine.rcard-import-bbbbbbbbbbbb"  # no owner marker: not provably ours
    other.mkdir()
    result = subprocess.run([*RCARD, "import", "chat-jsonl", str(source), "-o", str(tmp_path / "card")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _litter(tmp_path) == [other.name]
    assert staging.sweep_stale(tmp_path) == []
