"""Detached Ed25519 signatures of cards (optional extra `rollout-cards[sign]`).

The signed message is a domain-separated text over the card's id, version and the
sha256 of its canonical card.json bytes (`manifest.dump_manifest`); card.json holds
the inventory (every file's size and sha256) and the root digest, so the signature
pins every byte of the card. `check_signature` therefore also checks every file
against the inventory, unless the caller (the validator) does that itself.

What a signature proves, and what it does not: see docs/release.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CardFormatError, RolloutCardError, SignatureError
from ..io.hashing import root_digest, sha256_stream
from ..io.manifest import MAX_MANIFEST_BYTES, dump_manifest, load_json_document, parse_manifest
from ..io.reader import CardSource, open_card
from ..io.targets import file_target, write_output
from ._files import read_small_file

__all__ = [
    "DOMAIN",
    "SIGNATURE_FORMAT",
    "SignatureCheck",
    "check_signature",
    "default_signature_path",
    "generate_keypair",
    "key_id",
    "sign_card",
    "signed_message",
    "verify_card",
]

SIGNATURE_FORMAT = "rollout-card-signature/1"
DOMAIN = "rollout-cards card signature v1"
_MAX_SIGNATURE_BYTES = 64 * 1024
_MAX_KEY_BYTES = 64 * 1024


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ModuleNotFoundError:
        raise RolloutCardError(
            "signatures need the `cryptography` package: pip install 'rollout-cards[sign]'"
        ) from None
    return serialization, ed25519


def key_id(public_key: Any) -> str:
    """sha256 hex of the raw 32-byte Ed25519 public key."""
    serialization, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def default_signature_path(card: str | os.PathLike[str]) -> Path:
    """Where a card's detached signature goes by default: `<card>.sig` beside it."""
    path = Path(card)
    return path.with_name(path.name + ".sig")


def signed_message(card_id: str, version: str, card_json_sha256: str) -> bytes:
    """The exact bytes that are signed."""
    return (f"{DOMAIN}\nid: {card_id}\nversion: {version}\ncard.json sha256: {card_json_sha256}\n").encode()


def generate_keypair(private_path: str | os.PathLike[str], public_path: str | os.PathLike[str]) -> str:
    """Write a new Ed25519 key pair as PEM (the private key file mode 0600); returns the key id.

    Refuses to overwrite either file.
    """
    serialization, ed25519 = _crypto()
    private = ed25519.Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    if os.path.abspath(private_path) == os.path.abspath(public_path):
        raise RolloutCardError(f"--private and --public are the same file ({private_path}); give two paths")
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise RolloutCardError(f"{path} exists; refusing to overwrite a key")
        file_target(path, what="a key")
    write_output(private_path, private_pem, what="the private key", permissions=0o600)
    write_output(public_path, public_pem, what="the public key")
    return key_id(private.public_key())


def _load_key(path: str | os.PathLike[str], private: bool) -> Any:
    serialization, ed25519 = _crypto()
    data = read_small_file(path, _MAX_KEY_BYTES, "private key" if private else "public key", SignatureError)
    try:
        key = (serialization.load_pem_private_key(data, password=None) if private
               else serialization.load_pem_public_key(data))
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{path}: not an unencrypted PEM {'private' if private else 'public'} key: {exc}") from None
    wanted = ed25519.Ed25519PrivateKey if private else ed25519.Ed25519PublicKey
    if not isinstance(key, wanted):
        raise SignatureError(f"{path}: not an Ed25519 key")
    return key


def _card_digest(source: CardSource, name: str, check_files: bool) -> tuple[str, str, str]:
    """(id, version, sha256 of the canonical card.json); with `check_files`, every file is
    checked against the inventory first, so what is signed or verified is what is there."""
    data = source.read_bytes("card.json", limit=MAX_MANIFEST_BYTES)
    manifest = parse_manifest(data, f"{name}/card.json")
    if check_files:
        if root_digest(manifest.inventory.files) != manifest.inventory.root_digest:
            raise SignatureError(f"{name}: the inventory's root digest does not match its files")
        for f in manifest.inventory.files:
            try:
                with source.open_binary(f.path) as fh:
                    got = sha256_stream(fh, limit=f.bytes + 1, label=f.path, size=f.bytes)
            except CardFormatError as exc:
                raise SignatureError(f"{name}: {f.path}: {exc}") from None
            if got != (f.sha256, f.bytes):
                raise SignatureError(f"{name}: {f.path} differs from its inventory entry (sha256 or size); "
                                     "the card was changed after it was written")
    return manifest.id, manifest.version, hashlib.sha256(dump_manifest(manifest)).hexdigest()


def sign_card(card: str | os.PathLike[str], private_key: str | os.PathLike[str],
              out: str | os.PathLike[str] | None = None) -> Path:
    """Check the card's files against its inventory, then write a detached signature (JSON)
    to `out` (default `<card>.sig`); returns its path."""
    path = Path(out) if out is not None else default_signature_path(card)
    file_target(path, overwrite=True, inputs=[card], what="the signature")
    key = _load_key(private_key, private=True)
    opened = open_card(card)
    card_id, version, digest = _card_digest(opened.source, opened.path, check_files=True)
    signature = key.sign(signed_message(card_id, version, digest))
    document = {
        "format": SIGNATURE_FORMAT,
        "algorithm": "ed25519",
        "key_id": key_id(key.public_key()),
        "card_id": card_id,
        "card_version": version,
        "card_json_sha256": digest,
        "root_digest": opened.manifest.inventory.root_digest,
        "signature": base64.b64encode(signature).decode("ascii"),
    }
    return write_output(path, json.dumps(document, indent=2, sort_keys=True) + "\n", overwrite=True, inputs=[card],
                        what="the signature")


@dataclass(frozen=True)
class SignatureCheck:
    """A verified signature: which key signed which card version."""

    key_id: str
    card_id: str
    card_version: str
    card_json_sha256: str


def check_signature(source: CardSource, signature: str | os.PathLike[str], public_key: str | os.PathLike[str],
                    *, check_files: bool = True, name: str | None = None) -> SignatureCheck:
    """Verify a detached signature of the card read through `source` (a directory or packed card).

    For `rcard validate --pubkey`: a validator that hashes the files itself passes
    `check_files=False`. Raises SignatureError saying what failed.
    """
    name = name or source.name
    key = _load_key(public_key, private=False)
    raw = read_small_file(signature, _MAX_SIGNATURE_BYTES, "signature", SignatureError)
    try:
        document = load_json_document(raw, str(signature), max_bytes=_MAX_SIGNATURE_BYTES)
    except CardFormatError as exc:
        raise SignatureError(str(exc)) from None
    if not isinstance(document, dict) or document.get("format") != SIGNATURE_FORMAT:
        raise SignatureError(f"{signature}: not a {SIGNATURE_FORMAT} document")
    if document.get("algorithm") != "ed25519":
        raise SignatureError(f"{signature}: algorithm {str(document.get('algorithm'))[:40]!r} is not supported")
    if document.get("key_id") != key_id(key):
        raise SignatureError(f"{signature}: made with key {str(document.get('key_id'))[:16]}…, "
                             f"not with the given public key {key_id(key)[:16]}…")
    try:
        sig = base64.b64decode(str(document.get("signature", "")), validate=True)
    except ValueError:
        raise SignatureError(f"{signature}: the signature is not base64") from None
    card_id, version, digest = _card_digest(source, name, check_files)
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(sig, signed_message(card_id, version, digest))
    except InvalidSignature:
        raise SignatureError(
            f"{name}: the signature does not match this card (id {card_id}, version {version}, "
            f"card.json sha256 {digest[:16]}…); the card or the signature was changed"
        ) from None
    return SignatureCheck(key_id(key), card_id, version, digest)


def verify_card(card: str | os.PathLike[str], public_key: str | os.PathLike[str],
                signature: str | os.PathLike[str] | None = None) -> SignatureCheck:
    """Verify the detached signature (default `<card>.sig`) of a card directory or .rcard file,
    including every file against the inventory."""
    opened = open_card(card)
    return check_signature(opened.source, signature or default_signature_path(card), public_key,
                           name=opened.path)
