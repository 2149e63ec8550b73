"""Signature check (`rcard validate --pubkey KEY [--signature FILE]`).

The signature covers card.json's bytes (id, version, and through the inventory every
file's digest); the inventory checks verify the files themselves, so this check
verifies only the signature over card.json.
"""

from __future__ import annotations

from ..errors import SignatureError
from .context import CheckContext


def check_signature(ctx: CheckContext) -> None:
    """signature-invalid when the detached signature does not verify with the given key."""
    if ctx.public_key is None:
        ctx.skip("no public key given (--pubkey)")
    from ..release.signing import check_signature as verify
    from ..release.signing import default_signature_path

    signature = ctx.signature or default_signature_path(ctx.source.name)
    try:
        verify(ctx.source, signature, ctx.public_key, check_files=False)
    except SignatureError as exc:
        ctx.findings.add("signature-invalid", f"{exc}; re-sign the card (rcard sign) or check the key",
                         file=str(signature))
