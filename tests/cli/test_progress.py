"""Progress on a terminal, nothing in a pipe: `rcard` run on a pseudo-terminal's stderr."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys

import pytest

from rollout_cards.cli.progress import wanted
from tests.conftest import FIXTURE_CARDS, REPO

CARD = str(FIXTURE_CARDS / "synthetic")


def _run_with_tty_stderr(args: list[str], env: dict[str, str]) -> tuple[int, str, bytes]:
    """Exit code, stdout (a pipe) and what reached the terminal on stderr."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "rollout_cards", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=follower, env={**os.environ, **env})
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode()
    proc.wait(timeout=60)
    os.close(leader)
    return proc.returncode, out, seen


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_progress_is_drawn_on_a_terminal_and_removed_before_the_output():
    code, out, tty = _run_with_tty_stderr(["validate", CARD], {"RCARD_PROGRESS_DELAY": "0", "TERM": "xterm"})
    assert code == 0
    assert b"validate: " in tty  # the checks' names as they ran
    # The report on stdout is the same as in a pipe: nothing of the display leaks into it.
    piped = subprocess.run([sys.executable, "-m", "rollout_cards", "validate", CARD], cwd=REPO,
                           capture_output=True, text=True, check=False)
    assert out == piped.stdout and "\x1b" not in out


def test_nothing_on_stderr_in_a_pipe():
    piped = subprocess.run([sys.executable, "-m", "rollout_cards", "validate", CARD], cwd=REPO,
                           capture_output=True, text=True, check=False, env={**os.environ, "RCARD_PROGRESS_DELAY": "0"})
    assert piped.returncode == 0 and piped.stderr == ""


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
@pytest.mark.parametrize("env", [{"RCARD_PROGRESS": "0"}, {"TERM": "dumb"}])
def test_switched_off_on_a_terminal(env):
    code, _, tty = _run_with_tty_stderr(["validate", CARD], {"RCARD_PROGRESS_DELAY": "0", "TERM": "xterm", **env})
    assert code == 0 and b"validate: " not in tty


def test_wanted_only_for_terminals(monkeypatch):
    class Stream:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("RCARD_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert wanted(Stream(True)) and not wanted(Stream(False))
    monkeypatch.setenv("RCARD_PROGRESS", "0")
    assert not wanted(Stream(True))


def test_amounts_say_their_unit():
    from rollout_cards.cli.progress import _amount

    assert _amount(1_500_000, 4_000_000, "B") == "1.5 MB / 4.0 MB"
    assert _amount(1234, 5000, "rows") == "1,234 / 5,000 rows"
    assert _amount(1234, None, "episodes") == "1,234 episodes"
    assert _amount(3, None, "") == ""


def test_a_description_is_shown_as_text_not_rich_markup(monkeypatch):
    """A task names files and cards: rich read '[/x]' in one as a closing tag and raised
    MarkupError on a terminal (the command died), '[red]' as a style, and a newline broke the line."""
    import io

    from rollout_cards.cli.progress import _Renderer

    monkeypatch.setenv("RCARD_PROGRESS_DELAY", "3600")  # never drawn by the timer: the column renders by hand
    renderer = _Renderer(io.StringIO())
    try:
        renderer.open("sha256 runs/[/x]/[red]card\nline2\x1b[2J", 10, "B")
        [task] = renderer._progress.tasks
        shown = renderer._progress.columns[1].render(task)
    finally:
        renderer.stop()
    assert shown.plain == "sha256 runs/[/x]/[red]card\\nline2\\x1b[2J" and not shown.spans
