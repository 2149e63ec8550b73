"""Digests on read (issue 9 item 4): every file a Card reads is checked against the inventory
before anything from it is returned; a clear refusal (IntegrityError -> exit 1 naming the file
and the fix) and an explicit opt-out (verify=False, --no-verify-digests)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import CardFormatError, IntegrityError
from rollout_cards.io.archive import pack_card
from rollout_cards.io.reader import DirectorySource, open_card

RULE = "rules/synthetic.success_rate.yaml"


def flip(path: Path, at: float = 0.4) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_steps_is_refused_before_any_row_is_returned(synthetic_copy):
    flip(synthetic_copy / "steps.parquet")
    card = rc.open(synthetic_copy)
    assert card.episodes().num_rows == 216  # episodes.parquet is intact
    with pytest.raises(IntegrityError) as info:
        card.steps(columns=["seq"])
    assert info.value.file == "steps.parquet" and "verify=False" in str(info.value)
    assert info.value.actual != info.value.expected == _listed(synthetic_copy, "steps.parquet")
    with pytest.raises(IntegrityError):
        next(card.iter_steps(columns=["seq"]))
    with pytest.raises(IntegrityError):  # refused again, not only the first time
        card.steps()
    assert rc.open(synthetic_copy, verify=False).steps(columns=["seq"]).num_rows == 1494


def _listed(card: Path, rel: str) -> str:
    doc = json.loads((card / "card.json").read_text())
    return next(f["sha256"] for f in doc["inventory"]["files"] if f["path"] == rel)


def test_an_appended_byte_is_refused_though_the_prefix_matches(synthetic_copy):
    with open(synthetic_copy / "episodes.parquet", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(IntegrityError, match="more than"):
        rc.open(synthetic_copy).episodes()


def test_rule_text_is_checked(synthetic_copy):
    path = synthetic_copy / RULE
    path.write_text(path.read_text() + "# edited\n")
    with pytest.raises(IntegrityError, match=RULE):
        rc.open(synthetic_copy).rule_files()


def test_a_packed_card_is_checked_too(synthetic_copy, tmp_path):
    pack_card(synthetic_copy, tmp_path / "s.rcard")
    raw = bytearray((tmp_path / "s.rcard").read_bytes())
    steps = (synthetic_copy / "steps.parquet").read_bytes()
    at = bytes(raw).index(steps) + len(steps) // 2
    raw[at] ^= 0x01
    (tmp_path / "t.rcard").write_bytes(bytes(raw))
    card = open_card(tmp_path / "t.rcard")
    with pytest.raises(IntegrityError, match="steps.parquet"):
        card.steps()
    assert open_card(tmp_path / "s.rcard").steps().num_rows == 1494


def test_artifacts_are_checked_against_their_name(tmp_path):
    with rc.CardWriter(tmp_path / "c", id="a", title="artifact") as w:
        sha = w.add_artifact(b"screenshot bytes")
        with w.episode(task_id="t", agent="a") as ep:
            ep.message("user", "hi")
    card = rc.open(tmp_path / "c")
    assert card.read_artifact(sha) == b"screenshot bytes"
    (tmp_path / "c" / "artifacts" / sha).write_bytes(b"screenshot bytez")
    with pytest.raises(IntegrityError, match=f"artifacts/{sha}"):
        rc.open(tmp_path / "c").read_artifact(sha)


def test_each_part_is_hashed_once_per_card(synthetic_copy, monkeypatch):
    opened: list[str] = []
    real = DirectorySource.open_binary
    monkeypatch.setattr(DirectorySource, "open_binary", lambda self, rel: opened.append(rel) or real(self, rel))
    card = rc.open(synthetic_copy)
    for _ in range(3):
        card.steps(columns=["seq"])
        list(card.iter_steps(columns=["kind"]))
        card.episodes()
    assert sorted(opened) == ["episodes.parquet", "steps.parquet"]


def test_a_file_not_in_the_inventory_is_not_read_unchecked(synthetic_copy):
    (synthetic_copy / "notes.txt").write_text("hello")
    card = rc.open(synthetic_copy)
    with pytest.raises(IntegrityError, match="not listed"):
        card.read_text("notes.txt")
    assert rc.open(synthetic_copy, verify=False).read_text("notes.txt") == "hello"
    assert issubclass(IntegrityError, CardFormatError)


@pytest.mark.parametrize("command", [["info"], ["rescore"], ["card"]])
def test_cli_refuses_a_tampered_table_it_does_not_even_read_and_can_opt_out(synthetic_copy, command):
    flip(synthetic_copy / "steps.parquet")  # the synthetic rule reads no steps, info neither
    result = CliRunner().invoke(app, [*command, str(synthetic_copy)])
    assert result.exit_code == 1, result.output
    assert "steps.parquet" in result.output and "--no-verify-digests" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(app, [*command, str(synthetic_copy), "--no-verify-digests"])
    assert result.exit_code == 0, result.output


def test_validate_hashes_each_file_once(synthetic_copy, monkeypatch):
    opened: list[str] = []
    real = DirectorySource.open_binary
    monkeypatch.setattr(DirectorySource, "open_binary", lambda self, rel: opened.append(rel) or real(self, rel))
    assert rc.validate(synthetic_copy).valid
    assert sorted(opened) == sorted(set(opened))
    assert hashlib.sha256((synthetic_copy / "steps.parquet").read_bytes()).hexdigest() == _listed(
        synthetic_copy, "steps.parquet")
