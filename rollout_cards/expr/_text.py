"""`contains` / `startswith` / `endswith` with a column-valued pattern, as a pyarrow UDF.

Arrow's substring kernels take their pattern as an option (one literal per call). With
a pattern that varies by row (`endswith(answer, 'ANSWER: ' + task.target)`) the rows
are grouped by distinct pattern and each group runs the kernel once; when nearly every
row has its own pattern (more than MAX_KERNEL_GROUPS distinct ones) the rows are
matched with Python's `str` methods, which for valid UTF-8 give the same answers as
Arrow's byte-wise kernels. Registered as `rollout_cards.str_match(text, pattern, mode)`
so that it also works inside dataset filters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._json import ensure_udf

__all__ = ["UDF_NAME", "ensure_registered", "str_match"]

UDF_NAME = "rollout_cards.str_match"

#: Distinct patterns up to which one kernel call per pattern is used.
MAX_KERNEL_GROUPS = 64

_KERNELS = {"contains": "match_substring", "startswith": "starts_with", "endswith": "ends_with"}
_METHODS = {
    "contains": lambda t, p: p in t,
    "startswith": str.startswith,
    "endswith": str.endswith,
}


def str_match(texts: pa.Array, patterns: pa.Array, mode: str) -> pa.Array:
    """Per row: does text contain / start with / end with the row's pattern (null if either is)."""
    n = len(texts)
    if n == 0:
        return pa.array([], pa.bool_())
    encoded = pc.dictionary_encode(patterns)
    dictionary = encoded.dictionary.to_pylist()
    if len(dictionary) <= MAX_KERNEL_GROUPS:
        out = np.zeros(n, dtype=bool)
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        for code, pattern in enumerate(dictionary):
            rows = np.flatnonzero(codes == code)
            hit = pc.call_function(
                _KERNELS[mode], [texts.take(pa.array(rows))], pc.MatchSubstringOptions(pattern)
            )
            out[rows] = np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)
        result = pa.array(out)
    else:
        method = _METHODS[mode]
        result = pa.array(
            [
                None if t is None or p is None else method(t, p)
                for t, p in zip(texts.to_pylist(), patterns.to_pylist(), strict=True)
            ],
            pa.bool_(),
        )
    valid = pc.and_(pc.is_valid(texts), pc.is_valid(patterns))
    return pc.if_else(valid, result, pa.scalar(None, pa.bool_()))


def _udf(ctx: Any, texts: Any, patterns: Any, mode: Any) -> pa.Array:
    n = ctx.batch_length
    mode = mode.as_py() if isinstance(mode, pa.Scalar) else mode[0].as_py()
    if isinstance(texts, pa.Scalar):
        texts = pa.repeat(texts, n)
    if isinstance(patterns, pa.Scalar):
        patterns = pa.repeat(patterns, n)
    return str_match(texts, patterns, mode)


def ensure_registered() -> str:
    """Register the UDF if needed; returns its name."""
    return ensure_udf(
        UDF_NAME,
        _udf,
        {"text": pa.string(), "pattern": pa.string(), "mode": pa.string()},
        pa.bool_(),
        {
            "summary": "rollout_cards: substring tests with a per-row pattern",
            "description": "str_match(text, pattern, mode), mode contains|startswith|endswith",
        },
    )
