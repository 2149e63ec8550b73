"""Hostile files handed to importers, found by the trust pass (each failed on the old code):
a FIFO, a device or a directory where a file is expected, never a hang, an out-of-memory
internal error or a traceback; the error names the file and what it is."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.importers.conftest import SOURCES


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "too-large"])
def test_a_mapping_file_that_is_not_a_small_regular_file_is_refused(tmp_path, kind):
    # A FIFO blocked `rcard import chat-jsonl --mapping` forever; /dev/zero read until a
    # MemoryError ("internal error", 3.3 GB).
    mapping = tmp_path / "mapping.yaml"
    if kind == "fifo":
        os.mkfifo(mapping)
    elif kind == "device":
        mapping = "/dev/zero"
    elif kind == "directory":
        mapping.mkdir()
    else:
        mapping.write_text("task: metadata.task\n" + "# padding\n" * 200_000)
    result = CliRunner().invoke(app, ["import", "chat-jsonl", str(SOURCES / "chat" / "chat.jsonl"), "--mapping",
                                      str(mapping), "-o", str(tmp_path / "card")])
    assert result.exit_code == 2, result.output  # a file named by an option: a usage error, by design
    expected = {"fifo": "is a FIFO (named pipe), not a regular file", "device": "is a device, not a regular file",
                "directory": "is a directory", "too-large": "larger than 1024 KiB"}[kind]
    assert f"{mapping}: " in result.output and expected in result.output, result.output
    assert "internal error" not in result.output
