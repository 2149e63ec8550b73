"""`json_get` for rule expressions: a pyarrow scalar UDF (Arrow has no JSON kernel).

The function is registered once per process, under the namespaced name
`rollout_cards.json_get`, in pyarrow's global function registry, so that the same
kernel serves both `Expression.evaluate` and `Expression.to_arrow` (dataset filters
run it during the scan). Registration is idempotent and thread-safe; a function of
that name registered earlier (e.g. by another copy of this module) is reused.

Each call parses every *distinct* text of the batch once: the input is dictionary
encoded with `pyarrow.compute.dictionary_encode`, the dictionary is parsed with
`json.loads`, and the results are spread back with `take`. Texts that cannot hold the
first key (no backslash and no quoted key in them, checked with the vectorized
`match_substring`) are not parsed at all. Parsing costs a few microseconds per distinct
text (a million distinct `args` take a few seconds). Text that is not valid JSON, a
missing key, an index out of range or a JSON `null` gives null.

Rendering of the value found (always a string): strings as they are, numbers in their
JSON form (`3`, `2.5`, `1e+100`), booleans as `true` / `false`, objects and arrays as
compact JSON text (`{"a":1}`).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["UDF_NAME", "ensure_registered", "extract", "json_get_array"]

UDF_NAME = "rollout_cards.json_get"

_lock = threading.Lock()
_registered = False


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def extract(text: str | None, keys: list[str | int]) -> str | None:
    """The value at `keys` in the JSON `text`, rendered as a string (None if absent)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    for key in keys:
        if isinstance(key, str):
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        else:
            if not isinstance(value, list) or not -len(value) <= key < len(value):
                return None
            value = value[key]
    return _render(value)


def json_get_array(texts: pa.Array, keys: list[str | int]) -> pa.Array:
    """`extract` over a string array, parsing each distinct text once."""
    if len(texts) == 0:
        return pa.array([], pa.string())
    encoded = pc.dictionary_encode(texts)
    dictionary = encoded.dictionary
    distinct = dictionary.to_pylist()
    if keys and isinstance(keys[0], str):
        # A text without a backslash writes its keys literally, so if it does not
        # contain the quoted first key it cannot have it: skip the parse.
        quoted = json.dumps(keys[0], ensure_ascii=False)
        maybe = pc.or_(
            pc.match_substring(dictionary, quoted), pc.match_substring(dictionary, "\\")
        ).to_pylist()
        found = [extract(t, keys) if m else None for t, m in zip(distinct, maybe, strict=True)]
    else:
        found = [extract(text, keys) for text in distinct]
    return pa.array(found, pa.string()).take(encoded.indices)


def _udf(ctx: Any, texts: pa.Array | pa.Scalar, path: pa.Array | pa.Scalar) -> pa.Array:
    if isinstance(path, pa.Array):
        path = path[0]
    keys = json.loads(path.as_py())
    if isinstance(texts, pa.Scalar):
        return pa.repeat(pa.scalar(extract(texts.as_py(), keys), pa.string()), ctx.batch_length)
    return json_get_array(texts, keys)


def ensure_registered() -> str:
    """Register the UDF if needed; returns its name."""
    global _registered
    if _registered:
        return UDF_NAME
    with _lock:
        if not _registered:
            try:
                pc.get_function(UDF_NAME)
            except (KeyError, pa.ArrowKeyError):
                pc.register_scalar_function(
                    _udf,
                    UDF_NAME,
                    {
                        "summary": "rollout_cards: value at a key path in JSON text",
                        "description": (
                            "json_get(text, path) where path is a JSON array of keys "
                            "(strings) and indexes (integers); returns the value as a "
                            "string, null when absent or when text is not valid JSON."
                        ),
                    },
                    {"text": pa.string(), "path": pa.string()},
                    pa.string(),
                )
            _registered = True
    return UDF_NAME
