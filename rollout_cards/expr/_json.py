"""`json_get` for rule expressions: a pyarrow scalar UDF (Arrow has no JSON kernel).

The function is registered once per process, under the namespaced name
`rollout_cards.json_get`, in pyarrow's global function registry, so that the same
kernel serves both `Expression.evaluate` and `Expression.to_arrow` (dataset filters
run it during the scan). Registration is idempotent and thread-safe; a function of
that name registered earlier (e.g. by another copy of this module) is reused.

Each call parses every *distinct* text of the batch once: the input is dictionary
encoded with `pyarrow.compute.dictionary_encode`, the dictionary is parsed with
the strict decoder of `jsondoc` (numbers in int64 / finite float, no NaN or Infinity, no
lone surrogates: such text counts as not JSON), and the results are spread back with `take`. Texts that cannot hold the
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

from ..jsondoc import DECODER, may_hold_surrogate, surrogate_pointer

__all__ = [
    "CANONICAL_NAME",
    "UDF_NAME",
    "canonical_array",
    "canonical_text",
    "ensure_canonical_registered",
    "ensure_registered",
    "ensure_udf",
    "extract",
    "json_get_array",
    "json_list_array",
]

UDF_NAME = "rollout_cards.json_get"
CANONICAL_NAME = "rollout_cards.canonical"

_lock = threading.Lock()


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


_MISSING = object()


def _at(value: Any, keys: list[str | int]) -> Any:
    """The value at the key path, or _MISSING."""
    for key in keys:
        if isinstance(key, str):
            if not isinstance(value, dict) or key not in value:
                return _MISSING
        elif not isinstance(value, list) or not -len(value) <= key < len(value):
            return _MISSING
        value = value[key]
    return value


def _load(text: str) -> Any:
    """The strict JSON value of package text (jsondoc: int64, finite numbers, no NaN/Infinity,
    no lone surrogates), or _MISSING: what a card holds is never trusted to be well formed."""
    try:
        value = DECODER.decode(text)
    except (ValueError, RecursionError):
        return _MISSING
    if may_hold_surrogate(text) and surrogate_pointer(value) is not None:
        return _MISSING
    return value


def extract(text: str | None, keys: list[str | int]) -> str | None:
    """The value at `keys` in the JSON `text`, rendered as a string (None if absent)."""
    if text is None:
        return None
    value = _load(text)
    if value is _MISSING:
        return None
    value = _at(value, keys)
    if value is _MISSING:
        return None
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


def _normalize(value: Any) -> Any:
    """Numbers normalized: an integral float is the integer (1.0 -> 1, -0.0 -> 0)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def _strict_load(text: str | None) -> Any:
    """The JSON value of `text`, or _MISSING for null or text that is not strict JSON."""
    if text is None:
        return _MISSING
    return _load(text)


def canonical_text(text: str | None) -> str | None:
    """Canonical JSON of `text`: keys sorted, no whitespace, numbers normalized, strings
    as JSON strings; None for null or text that is not JSON (NaN and Infinity are not)."""
    value = _strict_load(text)
    if value is _MISSING:
        return None
    return json.dumps(
        _normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def _per_distinct(texts: pa.Array, fn: Any, out_type: pa.DataType) -> pa.Array:
    """fn over each distinct text once, spread back over the rows."""
    if len(texts) == 0:
        return pa.array([], out_type)
    encoded = pc.dictionary_encode(texts)
    found = [fn(t) for t in encoded.dictionary.to_pylist()]
    return pa.array(found, out_type).take(encoded.indices)


def canonical_array(texts: pa.Array) -> pa.Array:
    """`canonical_text` over a string array, parsing each distinct text once."""
    return _per_distinct(texts, canonical_text, pa.string())


def json_list_array(texts: pa.Array, keys: list[str | int]) -> pa.Array:
    """The JSON array at `keys` of each text as a list of strings, each item rendered as
    json_get renders values; null when absent, not an array, or not JSON."""

    def items(text: str | None) -> list[str | None] | None:
        value = _strict_load(text)
        value = value if value is _MISSING else _at(value, keys)
        return [_render(v) for v in value] if isinstance(value, list) else None

    return _per_distinct(texts, items, pa.list_(pa.string()))


def _udf(ctx: Any, texts: pa.Array | pa.Scalar, path: pa.Array | pa.Scalar) -> pa.Array:
    if isinstance(path, pa.Array):
        path = path[0]
    keys = json.loads(path.as_py())
    if isinstance(texts, pa.Scalar):
        return pa.repeat(pa.scalar(extract(texts.as_py(), keys), pa.string()), ctx.batch_length)
    return json_get_array(texts, keys)


_done: set[str] = set()


def ensure_udf(
    name: str, fn: Any, inputs: dict[str, pa.DataType], output: pa.DataType, doc: dict[str, str]
) -> str:
    """Register the scalar UDF `name` once per process (reusing one registered earlier)."""
    if name in _done:
        return name
    with _lock:
        if name not in _done:
            try:
                pc.get_function(name)
            except (KeyError, pa.ArrowKeyError):
                pc.register_scalar_function(fn, name, doc, inputs, output)
            _done.add(name)
    return name


def ensure_registered() -> str:
    """Register the json_get UDF if needed; returns its name."""
    return ensure_udf(
        UDF_NAME,
        _udf,
        {"text": pa.string(), "path": pa.string()},
        pa.string(),
        {
            "summary": "rollout_cards: value at a key path in JSON text",
            "description": (
                "json_get(text, path) where path is a JSON array of keys "
                "(strings) and indexes (integers); returns the value as a "
                "string, null when absent or when text is not valid JSON."
            ),
        },
    )


def _canonical_udf(ctx: Any, texts: pa.Array | pa.Scalar) -> pa.Array:
    if isinstance(texts, pa.Scalar):
        return pa.repeat(pa.scalar(canonical_text(texts.as_py()), pa.string()), ctx.batch_length)
    return canonical_array(texts)


def ensure_canonical_registered() -> str:
    """Register the canonical UDF if needed; returns its name."""
    return ensure_udf(
        CANONICAL_NAME,
        _canonical_udf,
        {"text": pa.string()},
        pa.string(),
        {
            "summary": "rollout_cards: canonical JSON",
            "description": "keys sorted, no whitespace, integral numbers as integers; null if not JSON",
        },
    )
