"""`rcard pack`, `unpack`, `redact`, `card`, `keygen`, `sign`, `verify`."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import SignatureError
from . import EXIT_INVALID, app, fail, printable, run


def _verify_or_fail(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`run`, with a signature that does not verify reported as invalid input (exit 1)."""

    def call() -> Any:
        try:
            return fn(*args, **kwargs)
        except SignatureError as exc:
            fail(str(exc), EXIT_INVALID)

    return run(call)


@app.command()
def pack(
    card: Annotated[Path, typer.Argument(help="Card directory to pack.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The .rcard file to write.")],
    overwrite: Annotated[bool, typer.Option(help="Replace an existing output file.")] = False,
    verify: Annotated[bool, typer.Option(help="Hash every file against the inventory while packing "
                                               "(--no-verify checks sizes only; readers still check digests).")] = True,
) -> None:
    """Pack a card directory into one reproducible .rcard file (uncompressed POSIX tar)."""
    from ..release import pack_card as _pack

    result = run(_pack, card, output, overwrite=overwrite, verify=verify)
    typer.echo(f"packed {card} into {result.path}: {result.members} members, {result.bytes} bytes")


@app.command()
def unpack(
    archive: Annotated[Path, typer.Argument(help="The .rcard file to unpack.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="New directory to unpack into.")],
) -> None:
    """Unpack a .rcard file safely: every member checked, hashed, and renamed into place at the end."""
    from ..release import unpack_card as _unpack

    manifest = run(_unpack, archive, output)
    typer.echo(f"unpacked {manifest.id} v{manifest.version} into {output}: "
               f"{len(manifest.inventory.files) + 1} files, root digest {manifest.inventory.root_digest}")


@app.command(name="redact")
def redact_command(
    card: Annotated[Path, typer.Argument(help="Card directory or .rcard file to redact.")],
    spec: Annotated[Path, typer.Option("--spec", help="Redaction spec (YAML with a `redact:` list).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="New directory for the redacted card.")],
    key: Annotated[Path | None, typer.Option("--key", help="File whose bytes key the HMAC of `action: digest`.")] = None,
) -> None:
    """Write a redacted copy of a card: values replaced, digests kept, drops and version updated."""
    from ..release import redact

    key_bytes = run(redact.read_key, key) if key is not None else None
    result = run(redact.redact_card, card, spec, output, key=key_bytes)
    for drop in result.drops:
        affects = f"; affects rules {', '.join(drop.affects)}" if drop.affects else ""
        typer.echo(f"{drop.target}: {drop.count} value(s) redacted{affects}")
    typer.echo(f"wrote {result.path} (version {result.manifest.version})")


@app.command(name="card")
def card_command(
    card: Annotated[Path, typer.Argument(help="Card directory or .rcard file.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the README here (default: stdout).")] = None,
    check: Annotated[Path | None, typer.Option("--check", help="Check this existing README instead.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing output file.")] = False,
    into: Annotated[bool, typer.Option("--into", help="Write it as CARD/README.md and list it in the card's inventory (the Hugging Face layout).")] = False,
    no_verify_digests: Annotated[
        bool, typer.Option("--no-verify-digests", help="Read the tables without checking them against the inventory.")
    ] = False,
) -> None:
    """Generate a dataset card (README.md with Hugging Face front matter) and check its front matter.

    Example: rcard card out/card --into   (then: rcard validate out/card)
    """
    from ..release import dataset_card

    result = run(dataset_card.write_dataset_card, card, output, check=check, overwrite=overwrite, into=into,
                 verify=not no_verify_digests)
    if into:
        typer.echo(f"wrote {card}/README.md and listed it in {card}/card.json")
    elif output is None and check is None:
        typer.echo(printable(result.text), nl=False)
    for problem in result.problems:
        typer.echo(printable(f"rcard: {check or output or f'the README of {card}'}: {problem}"), err=True)
    if result.problems:
        raise typer.Exit(EXIT_INVALID)


@app.command()
def keygen(
    private: Annotated[Path, typer.Option("--private", help="Where to write the private key (PEM, mode 0600).")] = Path("rcard-signing.pem"),
    public: Annotated[Path, typer.Option("--public", help="Where to write the public key (PEM).")] = Path("rcard-signing.pub.pem"),
) -> None:
    """Create an Ed25519 key pair for signing cards (needs the `sign` extra of rollout-cards)."""
    from ..release import signing

    kid = run(signing.generate_keypair, private, public)
    typer.echo(f"wrote {private} (keep it secret) and {public}; key id {kid}")


@app.command()
def sign(
    card: Annotated[Path, typer.Argument(help="Card directory or .rcard file.")],
    key: Annotated[Path, typer.Option("--key", help="Private key (PEM) from `rcard keygen`.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Signature file (default: <card>.sig).")] = None,
) -> None:
    """Check the card against its inventory and write a detached Ed25519 signature."""
    from ..release import signing

    path = _verify_or_fail(signing.sign_card, card, key, output)
    typer.echo(f"signed {card}: {path}")


@app.command()
def verify(
    card: Annotated[Path, typer.Argument(help="Card directory or .rcard file.")],
    pubkey: Annotated[Path, typer.Option("--pubkey", help="Public key (PEM) of the expected signer.")],
    signature: Annotated[Path | None, typer.Option("--signature", help="Signature file (default: <card>.sig).")] = None,
) -> None:
    """Verify a card's detached signature and every file against its inventory (exit 1 if it fails)."""
    from ..release import signing

    check = _verify_or_fail(signing.verify_card, card, pubkey, signature)
    typer.echo(f"OK: {check.card_id} v{check.card_version} signed by key {check.key_id}")
