"""card.json from raw bytes to a validated `CardManifest`, in one place.

The bytes are size-capped, decoded as strict UTF-8, parsed with duplicate keys
rejected, checked for a readable format version, then checked against the JSON
Schema and the pydantic models. Every problem is collected into one ManifestError.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError

from ..errors import ManifestError, Problem, UnsupportedFormatError
from ..jsondoc import BOM_PROBLEM, decoder, may_hold_surrogate, surrogate_pointer
from ..model._construct import construct
from ..model.card import CardManifest
from ..model.schemas import card_schema_problems
from ..tables import FORMAT, FORMAT_VERSION, parse_format

__all__ = [
    "MAX_MANIFEST_BYTES",
    "dump_manifest",
    "load_json_document",
    "parse_manifest",
    "pydantic_problems",
]

#: card.json larger than this is refused before it is read (rules live in their own files).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


_DECODER = decoder(object_pairs_hook=_no_duplicates)


def load_json_document(data: bytes, source: str, *, max_bytes: int = MAX_MANIFEST_BYTES) -> Any:
    """Parse strict JSON: size-capped, UTF-8, no duplicate keys, no NaN/Infinity, numbers
    that fit int64 or a finite float, no lone surrogates (see `jsondoc`).

    Raises ManifestError naming `source` and the place of the problem.
    """
    if len(data) > max_bytes:
        raise ManifestError(
            source, [Problem("", f"is {len(data)} bytes, more than the limit of {max_bytes}")]
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            source, [Problem(f"byte {exc.start}", "is not valid UTF-8; save the file as UTF-8")]
        ) from None
    if text.startswith("\ufeff"):
        raise ManifestError(source, [Problem("byte 0", BOM_PROBLEM)])
    try:
        document = _DECODER.decode(text)
    except _DuplicateKey as exc:
        raise ManifestError(
            source, [Problem("", f"duplicate key {str(exc)[:80]!r}; each key may appear once per object")]
        ) from None
    except json.JSONDecodeError as exc:
        raise ManifestError(
            source, [Problem(f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}")]
        ) from None
    except (ValueError, RecursionError) as exc:
        detail = str(exc)[:200] if isinstance(exc, ValueError) else "nested too deeply"
        raise ManifestError(source, [Problem("", f"invalid JSON: {detail}")]) from None
    if may_hold_surrogate(text, from_utf8=True):
        pointer = surrogate_pointer(document)
        if pointer is not None:
            raise ManifestError(source, [Problem(pointer, "holds a lone surrogate (a \\uD800-\\uDFFF escape that "
                                                          "is not half of a pair), which is not text; remove it")])
    return document


def pydantic_problems(exc: ValidationError) -> list[Problem]:
    """Pydantic errors as problems located by JSON pointer."""
    out = []
    for err in exc.errors(include_url=False):
        loc = "/" + "/".join(str(p) for p in err["loc"]) if err["loc"] else "/"
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        out.append(Problem(loc, msg))
    return out


def parse_manifest(data: bytes, source: str = "card.json") -> CardManifest:
    """Validate the raw bytes of a card.json into a CardManifest.

    Raises UnsupportedFormatError for another major format version and
    ManifestError listing every other problem.
    """
    document = load_json_document(data, source)
    if not isinstance(document, dict):
        raise ManifestError(source, [Problem("/", "must be a JSON object")])
    fmt = document.get("format")
    version = parse_format(fmt) if isinstance(fmt, str) else None
    if version is None:
        raise ManifestError(
            source, [Problem("/format", f"must be {FORMAT!r}, found {str(fmt)[:60]!r}")]
        )
    if version[0] != FORMAT_VERSION[0] or version > FORMAT_VERSION:
        raise UnsupportedFormatError(
            f"{source}: format {fmt} found; this version of rollout-cards reads {FORMAT} "
            f"(and earlier {FORMAT_VERSION[0]}.x); upgrade rollout-cards to read it"
        )
    # What the models certainly accept is built without compiling their validator (the JSON
    # Schema and the models would find nothing); anything else is validated and described.
    manifest = construct(CardManifest, document)
    if manifest is not None:
        return manifest
    problems = card_schema_problems(document)
    try:
        manifest = CardManifest.model_validate(document)
    except ValidationError as exc:
        seen = {p.location for p in problems}
        problems += [p for p in pydantic_problems(exc) if p.location not in seen]
        raise ManifestError(source, problems) from None
    if problems:
        raise ManifestError(source, problems)
    return manifest


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("card.json cannot hold NaN or infinite numbers")
    return value


def dump_manifest(manifest: CardManifest) -> bytes:
    """The canonical bytes of card.json (sorted keys, two-space indent, final newline)."""
    return (json.dumps(manifest.to_json_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
