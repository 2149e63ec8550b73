"""Signals: SIGINT and SIGTERM stop `rcard` with 128 + n and one line, wherever they arrive, and
an interrupted import leaves nothing.

Each signal is sent when the child is provably at the point under test (a file it wrote, or a
hook in the child that signals itself there), never after a fixed sleep a fast machine outruns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

RCARD = [sys.executable, "-c", "import sys; from rollout_cards.cli import main; sys.exit(main(sys.argv[1:]))"]
CARD = str(REPO / "fixtures" / "cards" / "synthetic")


def _big_source(path, n=200_000):
    # Large enough that the import is still running long after its first chunk is staged,
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
        # Well inside the import: its first chunk of episodes is staged.
        while not (out.parent.is_dir() and any(out.parent.glob("*/.rcard-staging/bulk-episodes-*.arrow"))):
            assert proc.poll() is None and time.monotonic() < deadline, "the import ended before the signal"
            time.sleep(0.01)
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert err.splitlines() == [f"rcard: stopped by {signal.Signals(signum).name}; nothing was left half-written"]
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


def _console(args, *, setup=""):
    """Run the console script's entry point in a child, after `setup` (Python code)."""
    code = f"import os, signal, sys\n{setup}\nfrom rollout_cards.__main__ import main\nsys.exit(main({args!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


_SIGNALS = [(signal.SIGTERM, 143), (signal.SIGINT, 130)]


@pytest.mark.parametrize(("signum", "code"), _SIGNALS)
def test_a_signal_while_the_command_line_loads_exits_128_plus_n_with_one_line(signum, code):
    """Before, the handlers were installed only once every command module was imported: a
    SIGTERM then killed rcard silently, a Ctrl-C printed a traceback."""
    hook = f"""
import importlib.abc
class _Signal(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "rollout_cards.cli.validate":
            os.kill(os.getpid(), {int(signum)})
        return None
sys.meta_path.insert(0, _Signal())"""
    result = _console(["validate", CARD], setup=hook)
    assert result.returncode == code, result.stderr
    assert result.stderr.splitlines() == [
        f"rcard: stopped by {signal.Signals(signum).name}; nothing was left half-written"]
    assert result.stdout == ""


@pytest.mark.parametrize(("signum", "code"), _SIGNALS)
def test_a_signal_while_the_result_is_printed_exits_128_plus_n_with_one_line(signum, code):
    """A signal at the final echo (after run() returned) exited 143 / 130 without a word."""
    hook = f"""
import typer
_echo = typer.echo
def _signalling_echo(*args, **kwargs):
    os.kill(os.getpid(), {int(signum)})
    return _echo(*args, **kwargs)
typer.echo = _signalling_echo"""
    result = _console(["info", CARD], setup=hook)
    assert result.returncode == code, result.stderr
    assert result.stderr.splitlines() == [
        f"rcard: stopped by {signal.Signals(signum).name}; nothing was left half-written"]


def test_a_second_signal_does_not_cut_the_cleanup_short_and_a_late_one_changes_nothing():
    script = """
import os, signal, sys
from rollout_cards import interrupts
interrupts.install()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    raise SystemExit("the first signal did not raise")
except KeyboardInterrupt:
    os.kill(os.getpid(), signal.SIGINT)  # recorded only: this cleanup runs to its end
    print("cleaned up")
code = interrupts.finish(0)
os.kill(os.getpid(), signal.SIGTERM)  # after the outcome is decided: no traceback, same code
print("finished", code)
sys.exit(code)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 143, result.stderr
    assert result.stdout.split("\n")[:2] == ["cleaned up", "finished 143"]
    assert result.stderr.splitlines() == ["rcard: stopped by SIGTERM; nothing was left half-written"]


def test_the_console_script_and_python_m_run_the_same_entry_point():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rcard"] == "rollout_cards.__main__:main"
    result = subprocess.run([sys.executable, "-m", "rollout_cards", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("rcard (rollout-cards)"), result.stderr
