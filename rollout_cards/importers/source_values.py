"""Typed reads of source fields: a wrong type, a non-finite number or an integer beyond
int64 becomes a `SourceFormatError` naming the field, never a crash further down.

Each reader takes the `StepBuffer` of the record being mapped (its `error()` names the
file and record) and the field's path as the source spells it (`info.model_stats.api_calls`).
"""

from __future__ import annotations

import math
from typing import Any

from .steps import StepBuffer

__all__ = ["INT64_MAX", "integer", "literals", "number", "text"]

INT64_MAX = (1 << 63) - 1


def integer(steps: StepBuffer, value: Any, field: str, *, minimum: int | None = 0) -> int | None:
    """An integer field (None stays None); bools, floats and out-of-range values are refused."""
    if value is None:
        return None
    if type(value) is not int:
        raise steps.error(f"{field} is {_show(value)}, not an integer")
    if value > INT64_MAX or value < -INT64_MAX - 1 or (minimum is not None and value < minimum):
        bound = f"between {minimum} and {INT64_MAX}" if minimum is not None else "a 64-bit integer"
        raise steps.error(f"{field} is {_show(value)}, which is not {bound}")
    return value


def number(steps: StepBuffer, value: Any, field: str) -> float | None:
    """A finite number field (None stays None); bools, strings, NaN and infinities are refused."""
    if value is None:
        return None
    if type(value) is int:
        if abs(value) > 1 << 1000:  # float() of it would overflow
            raise steps.error(f"{field} is {_show(value)}, too large to be a number")
        return float(value)
    if type(value) is not float:
        raise steps.error(f"{field} is {_show(value)}, not a number")
    if not math.isfinite(value):
        raise steps.error(f"{field} is {value}, not a finite number")
    return value


def text(steps: StepBuffer, value: Any, field: str) -> str | None:
    """A string field (None stays None)."""
    if value is None or type(value) is str:
        return value
    raise steps.error(f"{field} is {_show(value)}, not a string")


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)[:60]


def literals(value: Any) -> Any:
    """`value` with each NaN / Infinity (which Python's json.dumps writes and JSON text cannot
    hold) replaced by the text of its literal, "NaN", "Infinity" or "-Infinity", so it can be
    kept as JSON text without losing what the source said."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: literals(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literals(v) for v in value]
    return value
