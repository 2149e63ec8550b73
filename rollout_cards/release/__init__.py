"""Releases: pack and unpack (in `io.archive`), redaction, dataset cards, signatures."""

from __future__ import annotations

from ..io.archive import ArchiveSource, PackResult, pack_card, unpack_card
from .dataset_card import check_dataset_card, render_dataset_card, write_dataset_card
from .redact import RedactionResult, RedactionSpec, load_redaction_spec, redact_card
from .signing import check_signature, generate_keypair, sign_card, verify_card

__all__ = [
    "ArchiveSource",
    "PackResult",
    "RedactionResult",
    "RedactionSpec",
    "check_dataset_card",
    "check_signature",
    "generate_keypair",
    "load_redaction_spec",
    "pack_card",
    "redact_card",
    "render_dataset_card",
    "sign_card",
    "unpack_card",
    "verify_card",
    "write_dataset_card",
]
