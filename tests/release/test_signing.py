"""Signatures: keygen, sign, verify round trip; any changed byte fails; wrong key fails."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="signatures need the rollout-cards[sign] extra")

import rollout_cards as rc
from rollout_cards.errors import CardFormatError, RolloutCardError, SignatureError
from rollout_cards.io.archive import pack_card
from rollout_cards.release.signing import (
    check_signature,
    default_signature_path,
    generate_keypair,
    sign_card,
    signed_message,
    verify_card,
)
from tests.conftest import FIXTURE_CARDS


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("keys")
    generate_keypair(d / "k.pem", d / "k.pub")
    return d / "k.pem", d / "k.pub"


def test_keygen_writes_pem_files_with_a_private_mode(keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    with pytest.raises(RolloutCardError, match="exists"):
        generate_keypair(private, public)


def test_sign_and_verify_a_directory_and_a_packed_card(keys, synthetic_copy: Path, tmp_path: Path) -> None:
    private, public = keys
    sig = sign_card(synthetic_copy, private)
    assert sig == default_signature_path(synthetic_copy)
    doc = json.loads(sig.read_text())
    assert doc["algorithm"] == "ed25519" and doc["card_id"] == "synthetic-airline" and len(doc["key_id"]) == 64
    check = verify_card(synthetic_copy, public)
    assert check.card_id == "synthetic-airline" and check.key_id == doc["key_id"]
    # card.json and therefore the signature survive packing: the same signature verifies the .rcard.
    pack_card(synthetic_copy, tmp_path / "s.rcard")
    assert verify_card(tmp_path / "s.rcard", public, sig).card_json_sha256 == check.card_json_sha256


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("rel", ["card.json", "episodes.parquet", "steps.parquet",
                                 "rules/synthetic.success_rate.yaml"])
def test_a_flipped_byte_in_any_file_fails_verification(keys, tmp_path: Path, rel: str) -> None:
    private, public = keys
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    sig = sign_card(card, private, tmp_path / "card.sig")
    for offset in (0, 77, -1):
        target = card / rel
        original = target.read_bytes()
        _flip(target, offset)
        with pytest.raises((SignatureError, CardFormatError)):
            verify_card(card, public, sig)
        target.write_bytes(original)
    assert verify_card(card, public, sig).card_id == "synthetic-airline"


def test_a_changed_title_in_card_json_fails_verification(keys, tmp_path: Path) -> None:
    private, public = keys
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    sig = sign_card(card, private)
    text = (card / "card.json").read_text()
    (card / "card.json").write_text(text.replace("Synthetic airline", "Synthetic airlinE"))
    with pytest.raises(SignatureError, match="does not match this card"):
        verify_card(card, public, sig)


def test_a_flipped_byte_in_the_packed_file_fails(keys, tmp_path: Path) -> None:
    private, public = keys
    pack_card(FIXTURE_CARDS / "synthetic", tmp_path / "s.rcard")
    sig = sign_card(tmp_path / "s.rcard", private)
    _flip(tmp_path / "s.rcard", 6000)  # inside episodes.parquet
    with pytest.raises(SignatureError, match="episodes.parquet"):
        verify_card(tmp_path / "s.rcard", public, sig)


def test_another_key_or_a_tampered_signature_fails(keys, tmp_path: Path) -> None:
    private, public = keys
    generate_keypair(tmp_path / "other.pem", tmp_path / "other.pub")
    sig = sign_card(FIXTURE_CARDS / "minimal", private, tmp_path / "m.sig")
    with pytest.raises(SignatureError, match="not with the given public key"):
        verify_card(FIXTURE_CARDS / "minimal", tmp_path / "other.pub", sig)
    doc = json.loads(sig.read_text())
    doc["signature"] = doc["signature"][:-4] + ("AAA=" if not doc["signature"].endswith("AAA=") else "BBB=")
    sig.write_text(json.dumps(doc))
    with pytest.raises(SignatureError, match="does not match"):
        verify_card(FIXTURE_CARDS / "minimal", public, sig)
    sig.write_text("not json")
    with pytest.raises(SignatureError):
        verify_card(FIXTURE_CARDS / "minimal", public, sig)


def test_the_message_is_domain_separated_and_pins_id_version_and_digest() -> None:
    base = signed_message("a", "1.0.0", "0" * 64)
    assert base.startswith(b"rollout-cards card signature v1\n")
    assert len({base, signed_message("b", "1.0.0", "0" * 64), signed_message("a", "1.1.0", "0" * 64),
                signed_message("a", "1.0.0", "1" * 64)}) == 4


def test_check_signature_works_on_a_card_source_without_rehashing(keys, tmp_path: Path) -> None:
    private, public = keys
    sig = sign_card(FIXTURE_CARDS / "minimal", private, tmp_path / "m.sig")
    card = rc.open(FIXTURE_CARDS / "minimal")
    assert check_signature(card.source, sig, public, check_files=False).card_id == "minimal"
