"""The release commands: exit codes, output, and nothing left behind on refusal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import FIXTURE_CARDS

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "fixtures" / "bad_archives"


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    result = invoke("pack", FIXTURE_CARDS / "synthetic", "-o", tmp_path / "s.rcard")
    assert result.exit_code == 0, result.output
    assert "4 members" in result.output
    return tmp_path / "s.rcard"


def test_pack_twice_gives_identical_bytes(packed: Path, tmp_path: Path) -> None:
    assert invoke("pack", FIXTURE_CARDS / "synthetic", "-o", tmp_path / "again.rcard").exit_code == 0
    assert (tmp_path / "again.rcard").read_bytes() == packed.read_bytes()
    assert invoke("pack", FIXTURE_CARDS / "synthetic", "-o", packed).exit_code == 2  # exists


def test_info_reads_a_packed_card(packed: Path) -> None:
    result = invoke("info", packed, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["episodes"] == 216 and data["status_by_agent"]["beta"]["skipped"] == 1


def test_unpack_round_trip(packed: Path, tmp_path: Path) -> None:
    result = invoke("unpack", packed, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "card.json").read_bytes() == (FIXTURE_CARDS / "synthetic" / "card.json").read_bytes()


@pytest.mark.parametrize("name", ["symlink.rcard", "parent-reference.rcard", "zstd-frame-64gib.rcard",
                                  "tampered-member.rcard", "trailing-garbage.rcard"])
def test_unpack_refuses_hostile_archives_with_exit_1(name: str, tmp_path: Path) -> None:
    expected = json.loads((CORPUS / "EXPECTED.json").read_text())[name]
    shutil.copyfile(CORPUS / name, tmp_path / name)
    result = invoke("unpack", tmp_path / name, "-o", tmp_path / "target")
    assert result.exit_code == 1
    assert f"[{expected['rule']}]" in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_redact_then_card(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.content\n    where: \"role == 'user'\"\n    reason: personal data\n")
    result = invoke("redact", FIXTURE_CARDS / "synthetic", "--spec", spec, "-o", tmp_path / "red")
    assert result.exit_code == 0, result.output
    assert "steps.content: " in result.output and "version 1.1.0" in result.output
    result = invoke("card", tmp_path / "red", "-o", tmp_path / "README.md")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("---\nlicense: cc-by-4.0\n") and "steps.content" in text
    assert invoke("card", tmp_path / "red", "--check", tmp_path / "README.md").exit_code == 0
    (tmp_path / "README.md").write_text(text.replace("license: cc-by-4.0", "license: nonsense-1.0"))
    result = invoke("card", tmp_path / "red", "--check", tmp_path / "README.md")
    assert result.exit_code == 1 and "SPDX" in result.output


def test_card_prints_to_stdout() -> None:
    result = invoke("card", FIXTURE_CARDS / "synthetic")
    assert result.exit_code == 0 and result.output.startswith("---\n")


def test_redact_refuses_a_bad_spec_with_a_message(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.nope\n    reason: r\n")
    result = invoke("redact", FIXTURE_CARDS / "synthetic", "--spec", spec, "-o", tmp_path / "red")
    assert result.exit_code == 2 and "no column 'nope'" in result.output
    assert not (tmp_path / "red").exists()


def test_keygen_sign_verify_and_a_flipped_byte(packed: Path, tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    k, pub = tmp_path / "k.pem", tmp_path / "k.pub"
    assert invoke("keygen", "--private", k, "--public", pub).exit_code == 0
    result = invoke("sign", packed, "--key", k)
    assert result.exit_code == 0, result.output
    result = invoke("verify", packed, "--pubkey", pub)
    assert result.exit_code == 0 and result.output.startswith("OK: synthetic-airline v1.0.0")
    data = bytearray(packed.read_bytes())
    data[20_000] ^= 0x40
    packed.write_bytes(bytes(data))
    result = invoke("verify", packed, "--pubkey", pub)
    assert result.exit_code == 1 and "rcard:" in result.output


def _has_command(name: str) -> bool:
    return any((c.name or c.callback.__name__) == name for c in app.registered_commands)


def test_validate_and_rescore_read_the_packed_file(packed: Path) -> None:
    if not (_has_command("validate") and _has_command("rescore")):
        pytest.skip("rcard validate / rescore are not registered in this checkout")
    result = invoke("validate", packed)
    assert result.exit_code == 0, result.output
    result = invoke("rescore", packed, "--format", "json")
    assert result.exit_code == 0, result.output
    values = {r["group"]["agent"]: r["value"] for r in json.loads(result.output)["results"]}
    assert round(values["alpha"], 4) == 0.3925 and round(values["beta"], 4) == 0.4393


@pytest.mark.parametrize("name", ["symlink.rcard", "tampered-member.rcard", "zstd-frame-64gib.rcard"])
def test_validate_flags_hostile_archives_with_exit_1(name: str) -> None:
    if not _has_command("validate"):
        pytest.skip("rcard validate is not registered in this checkout")
    result = invoke("validate", CORPUS / name)
    assert result.exit_code == 1, result.output
