"""`validate(..., public_key=...)` / `rcard validate --pubkey` verify the detached signature."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.validate import validate

pytest.importorskip("cryptography", reason="signatures need the rollout-cards[sign] extra")

from rollout_cards.release.signing import generate_keypair, sign_card  # noqa: E402


@pytest.fixture
def signed(synthetic_copy, tmp_path):
    generate_keypair(tmp_path / "key.pem", tmp_path / "key.pub")
    sign_card(synthetic_copy, tmp_path / "key.pem")
    return synthetic_copy, tmp_path / "key.pub"


def test_valid_signature(signed):
    card, pub = signed
    report = validate(card, public_key=pub)
    assert report.valid
    assert [r.status for r in report.checks if r.name == "signature"] == ["passed"]


def test_no_key_skips_the_check(signed):
    card, _ = signed
    run = [r for r in validate(card).checks if r.name == "signature"][0]
    assert run.status == "skipped" and "--pubkey" in run.note


def test_changed_manifest_fails_the_signature(signed):
    card, pub = signed
    doc = json.loads((card / "card.json").read_text())
    doc["title"] = "A different title"
    (card / "card.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    report = validate(card, public_key=pub)
    assert report.codes() == {"signature-invalid"}
    assert not report.valid


def test_other_key_fails(signed, tmp_path):
    card, _ = signed
    generate_keypair(tmp_path / "other.pem", tmp_path / "other.pub")
    result = CliRunner().invoke(app, ["validate", str(card), "--pubkey", str(tmp_path / "other.pub")])
    assert result.exit_code == 1
    assert "signature-invalid" in result.output


def test_missing_signature_file(synthetic_copy, tmp_path):
    generate_keypair(tmp_path / "key.pem", tmp_path / "key.pub")
    report = validate(synthetic_copy, public_key=tmp_path / "key.pub")
    assert report.codes() == {"signature-invalid"}
