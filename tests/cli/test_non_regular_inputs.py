"""A FIFO or device given as any CLI input is refused at once, never read or waited on."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.regular_files import NotRegularFileError, open_regular
from tests.conftest import FIXTURE_CARDS

CARD = str(FIXTURE_CARDS / "synthetic")
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")


class _Blocked(Exception):
    pass


def _alarm(signum, frame):
    raise _Blocked("the command blocked on a non-regular file")


def _rcard(*args: str):
    # An alarm interrupts a blocking open() (the bug was a process waiting forever on a FIFO).
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)
    try:
        return CliRunner().invoke(app, list(args), catch_exceptions=False)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _commands(bad: str, tmp: Path) -> dict[str, list[str]]:
    return {
        "validate": ["validate", bad],
        "info": ["info", bad],
        "unpack": ["unpack", bad, "-o", str(tmp / "out")],
        "rescore --rule": ["rescore", CARD, "--rule", bad],
        "redact --spec": ["redact", CARD, "--spec", bad, "-o", str(tmp / "red")],
        "import": ["import", "chat-jsonl", bad, "-o", str(tmp / "imp")],
    }


@pytest.mark.parametrize("name", list(_commands("x", Path("."))))
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_non_regular_input_is_refused_without_blocking(tmp_path, name, kind):
    if kind == "fifo":
        bad = tmp_path / "pipe"
        os.mkfifo(bad)
    else:
        bad = Path("/dev/zero")
        if not bad.exists():
            pytest.skip("no /dev/zero")
    result = _rcard(*_commands(str(bad), tmp_path)[name])
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert str(bad) in result.output
    said = result.output.lower()
    assert "fifo" in said or "device" in said or "not a regular file" in said, said
    assert not any((tmp_path / d).exists() for d in ("out", "red", "imp"))


def test_open_regular_names_what_the_file_is(tmp_path):
    pipe = tmp_path / "p"
    os.mkfifo(pipe)
    with pytest.raises(NotRegularFileError, match="FIFO") as info:
        open_regular(pipe)
    assert info.value.filename == str(pipe)
    with pytest.raises(IsADirectoryError):
        open_regular(tmp_path)
    (tmp_path / "f").write_bytes(b"ok")
    with open_regular(tmp_path / "f") as fh:
        assert fh.read() == b"ok"
