"""Hostile files handed to importers, found by the trust pass (each failed on the old code):
a FIFO, a device or a directory where a file is expected, never a hang, an out-of-memory
internal error or a traceback; the error names the file and what it is."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.errors import SourceFormatError
from rollout_cards.importers import import_source
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


def test_a_source_that_changes_while_it_is_imported_is_refused(tmp_path, monkeypatch):
    # Before, the card recorded in provenance the sha256 the source had when it was hashed,
    # while its records were read later from other bytes (exit 0, a digest of nothing it holds).
    import rollout_cards.importers.chat_jsonl as chat

    source = tmp_path / "chat.jsonl"
    source.write_bytes((SOURCES / "chat" / "chat.jsonl").read_bytes())
    reader = chat.iter_records

    def growing(path):
        for i, item in enumerate(reader(path)):
            if i == 0:
                with open(path, "ab") as fh:  # another process appends a record meanwhile
                    fh.write(b'{"id": "late", "messages": [], "metadata": {"task": "t"}}\n')
            yield item

    monkeypatch.setattr(chat, "iter_records", growing)
    result = CliRunner().invoke(app, ["import", "chat-jsonl", str(source), "--mapping",
                                      str(SOURCES / "chat" / "mapping.yaml"), "-o", str(tmp_path / "card")])
    assert result.exit_code == 1, result.output
    assert f"{source}: changed while it was imported (" in result.output and " -> " in result.output, result.output
    assert not (tmp_path / "card").exists()


def test_a_source_rewritten_in_place_with_the_same_size_is_refused(tmp_path, monkeypatch):
    import rollout_cards.importers.chat_jsonl as chat

    source = tmp_path / "chat.jsonl"
    source.write_bytes((SOURCES / "chat" / "chat.jsonl").read_bytes())
    reader = chat.iter_records

    def rewritten(path):
        for i, item in enumerate(reader(path)):
            if i == 0:
                data = path.read_bytes()
                os.utime(path, ns=(0, 0))  # another mtime, same bytes count: a rewrite
                path.write_bytes(data.replace(b"found", b"FOUND"))
            yield item

    monkeypatch.setattr(chat, "iter_records", rewritten)
    with pytest.raises(SourceFormatError, match=r"changed while it was imported \([0-9,]+ bytes, rewritten\)"):
        import_source("chat-jsonl", [source], tmp_path / "card", options={"mapping": str(SOURCES / "chat" / "mapping.yaml")})


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_lm_eval_output_file_that_is_not_a_file_is_refused(tmp_path, kind):
    # The run directory's results file replaced by a FIFO or a directory was skipped in silence:
    # the import succeeded from the samples alone, without the results' reported numbers (exit 0).
    from tests.importers.test_importer_fuzz import SEEDS

    inputs = SEEDS["lm-eval"](tmp_path)
    results = next(f for f in inputs.files() if f.name.startswith("results_"))
    results.unlink()
    os.mkfifo(results) if kind == "fifo" else results.mkdir()
    with pytest.raises(SourceFormatError, match="is not a regular file") as err:
        import_source("lm-eval", inputs.sources, tmp_path / "card")
    assert str(results) in str(err.value)
