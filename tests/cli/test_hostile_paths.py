"""Paths the file system cannot use, and output targets that are links: exit 1 with the path
and the fix, never an internal error (exit 2), never a write through a link (issue 9 item 14)."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import ManifestError, WriterError
from rollout_cards.io.finalize import refresh_manifest
from rollout_cards.io.manifest import parse_manifest
from rollout_cards.io.ustar import ArchiveLimits, name_problem
from tests.conftest import FIXTURE_CARDS

LONG_NAME = "a" * 300  # > NAME_MAX (255)
LONG_PATH = "/".join(["b" * 200] * 25)  # > PATH_MAX (4,096)


@pytest.fixture
def packed(tmp_path):
    out = tmp_path / "m.rcard"
    rc.pack_card(FIXTURE_CARDS / "minimal", out)
    return out


def _invoke(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return result


@pytest.mark.parametrize("bad", [LONG_NAME, LONG_PATH])
def test_paths_longer_than_the_os_allows_are_exit_1(tmp_path, packed, bad):
    target = tmp_path / bad
    for args in (["info", target], ["unpack", packed, "-o", target], ["pack", FIXTURE_CARDS / "minimal", "-o", target],
                 ["recover", target], ["import", "chat-jsonl", target, "-o", tmp_path / "out"],
                 ["rescore", FIXTURE_CARDS / "minimal", "--rule", target]):
        result = _invoke(*args)
        assert result.exit_code in (1, 2), (args, result.output)
        if args[0] != "rescore":  # a --rule file that cannot be read stays a usage error (exit 2)
            assert result.exit_code == 1, (args, result.output)
        assert "too long" in result.output or "does not exist" in result.output, (args, result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.rcard"]


def test_unpack_onto_a_link_is_refused_and_writes_nothing_through_it(tmp_path, packed):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "to-dir").symlink_to(elsewhere)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "a-file").write_text("x")
    for target in ("to-dir", "dangling"):
        result = _invoke("unpack", packed, "-o", tmp_path / target)
        assert result.exit_code == 1 and "is a symbolic link" in result.output, result.output
        assert (tmp_path / target).is_symlink()
    for target in ("dangling/card", "a-file/card"):
        result = _invoke("unpack", packed, "-o", tmp_path / target)
        assert result.exit_code == 1 and "cannot create" in result.output, result.output
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "nowhere").exists()
    # A link among the parents is the user's own layout (macOS /tmp is one): followed.
    assert _invoke("unpack", packed, "-o", tmp_path / "to-dir" / "card").exit_code == 0
    assert (elsewhere / "card" / "card.json").is_file()


def test_other_outputs_are_never_written_through_a_link(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.content\n    reason: r\n")
    for args in (["pack", FIXTURE_CARDS / "minimal", "-o", tmp_path / "dangling"],
                 ["import", "chat-jsonl", FIXTURE_CARDS / "minimal" / "card.json", "-o", tmp_path / "dangling"],
                 ["redact", FIXTURE_CARDS / "minimal", "--spec", spec, "-o", tmp_path / "dangling"]):
        result = _invoke(*args)
        assert result.exit_code == 1 and "is a symbolic link" in result.output, (args, result.output)
        assert (tmp_path / "dangling").is_symlink() and not (tmp_path / "nowhere").exists()


def test_card_paths_with_a_name_longer_than_name_max_are_refused(tmp_path):
    doc = json.loads((FIXTURE_CARDS / "minimal" / "card.json").read_text())
    doc["tables"]["steps"]["paths"] = ["steps/" + "\u00e9" * 128 + ".parquet"]  # 256 + 8 bytes, 136 characters
    with pytest.raises(ManifestError, match="NAME_MAX"):
        parse_manifest(json.dumps(doc).encode(), "card.json")
    assert name_problem("rules/" + "x" * 256, "file", ArchiveLimits())[0] == "name-too-long"
    assert name_problem("rules/" + "x" * 255, "file", ArchiveLimits()) is None


def test_negative_counts_are_refused_by_the_writer_and_found_by_the_validator(tmp_path):
    card = rc.CardWriter(tmp_path / "c", id="n", title="N", timestamps=False)
    with pytest.raises(WriterError, match="'n_steps' holds -3"):
        card.write_episodes(pa.table({"episode_id": ["e"], "task_id": ["t"], "agent": ["a"],
                                      "status": ["completed"], "n_steps": [-3]}))
    card.close()
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURE_CARDS / "minimal", bad)
    os.chmod(bad, 0o755)
    table = pq.read_table(bad / "episodes.parquet")
    i = table.schema.get_field_index("trial")
    trials = table.column(i).to_pylist()
    table = table.set_column(i, table.schema.field(i), pa.array([-1, *trials[1:]], pa.int64()))
    pq.write_table(table, bad / "episodes.parquet")
    refresh_manifest(bad)  # a re-hashed inventory: only the value is wrong
    result = _invoke("validate", bad)
    assert result.exit_code == 1 and "value-negative" in result.output and "trial is -1" in result.output


def _snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("packed_input", [False, True])
def test_no_output_is_written_into_the_card_it_is_made_from(tmp_path, packed_input):
    """A report, signature, dataset card or export named inside its input card (or as the
    packed card itself) would replace the card's data or make it invalid: refused before any
    work, the card byte for byte unchanged. Before: `report -o CARD/steps.parquet --overwrite`,
    `sign -o CARD/card.json`, `card -o CARD/card.json --overwrite` replaced those files, and
    `report -o CARD.rcard --overwrite` the packed card."""
    src = tmp_path / "c"
    shutil.copytree(FIXTURE_CARDS / "synthetic", src)
    keys = tmp_path / "k.pem", tmp_path / "k.pub"
    assert _invoke("keygen", "--private", keys[0], "--public", keys[1]).exit_code == 0
    card = src
    if packed_input:
        card = tmp_path / "c.rcard"
        rc.pack_card(src, card)
    targets = [card] if packed_input else [card / "steps.parquet", card / "card.json", card / "new.html", card]
    before = card.read_bytes() if packed_input else _snapshot(card)
    rule = "synthetic.success_rate"
    for target in targets:
        for args in (["report", card, "-o", target, "--overwrite", "--no-check"],
                     ["sign", card, "--key", keys[0], "-o", target],
                     ["card", card, "-o", target, "--overwrite"],
                     ["export", "inspect-scores", card, "--rule", rule, "-o", target],
                     ["export", "eee", card, "-o", target]):
            result = _invoke(*args)
            assert result.exit_code == 2, (args, result.output)
            assert str(target) in result.output, (args, result.output)
    assert (card.read_bytes() if packed_input else _snapshot(card)) == before
    assert _invoke("validate", card, "--no-replay").exit_code == 0


def test_output_files_are_checked_before_any_work(tmp_path):
    """Outputs that cannot be written are usage errors with the path, never an internal error:
    an existing file where `export eee` wants a directory, one key path for both keys."""
    (tmp_path / "e").write_text("x")
    result = _invoke("export", "eee", FIXTURE_CARDS / "synthetic", "-o", tmp_path / "e")
    assert result.exit_code == 2 and "exists and is not a directory" in result.output, result.output
    result = _invoke("keygen", "--private", tmp_path / "k", "--public", tmp_path / "k")
    assert result.exit_code == 2 and "the same file" in result.output, result.output
    assert not (tmp_path / "k").exists()
    (tmp_path / "victim").write_text("v")
    (tmp_path / "s.sig").symlink_to(tmp_path / "victim")
    keys = tmp_path / "k.pem", tmp_path / "k.pub"
    assert _invoke("keygen", "--private", keys[0], "--public", keys[1]).exit_code == 0
    result = _invoke("sign", FIXTURE_CARDS / "minimal", "--key", keys[0], "-o", tmp_path / "s.sig")
    assert result.exit_code == 1 and "is a symbolic link" in result.output, result.output
    assert (tmp_path / "victim").read_text() == "v"


@pytest.mark.parametrize("args", [["power", "--delta", "nan"], ["power", "--delta", "-inf"],
                                  ["rliable", "--tau", "nan"], ["rliable", "--gamma", "inf"]])
def test_non_finite_numeric_options_are_usage_errors(args):
    result = _invoke(args[0], FIXTURE_CARDS / "synthetic", "--rule", "synthetic.success_rate", *args[1:])
    assert result.exit_code == 2 and "is not a finite number" in result.output, result.output


def test_an_output_that_is_a_fifo_or_device_is_refused_and_left_in_place(tmp_path):
    """The new file is renamed onto the output path, which would replace a FIFO or a device
    node by a regular file: `rcard pack CARD -o /dev/null --overwrite`, run as root, replaced
    the system's /dev/null. Refused (exit 1, the kind of file named), the node left as it was."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    keys = tmp_path / "k.pem", tmp_path / "k.pub"
    assert _invoke("keygen", "--private", keys[0], "--public", keys[1]).exit_code == 0
    card = FIXTURE_CARDS / "synthetic"
    for args in (["pack", card, "-o", fifo, "--overwrite"], ["report", card, "-o", fifo, "--overwrite", "--no-check"],
                 ["sign", card, "--key", keys[0], "-o", fifo], ["card", card, "-o", fifo, "--overwrite"],
                 ["export", "inspect-scores", card, "--rule", "synthetic.success_rate", "-o", fifo],
                 ["export", "eee", card, "-o", fifo]):
        result = _invoke(*args)
        assert result.exit_code == 1 and "is a FIFO (named pipe), not a regular file" in result.output, (args,
                                                                                                     result.output)
        assert fifo.is_fifo()
