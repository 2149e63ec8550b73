"""Decimal numbers read from untrusted text: ASCII digits only, bounded length.

`str.isdigit()`, `int()` and the regex `\\d` accept far more than `[0-9]`: superscripts
(`²`, which `int()` then refuses), Arabic-Indic and full-width digits (which `int()`
accepts, so `rollout-card/٠.١` read as 0.1 and a pax `size` of `١٠٢٤` meant something
GNU tar does not see), and thousands of digits (`int()` raises past 4,300). Every
number parsed from an archive, a format or version string, or a name goes through
`parse_decimal`, which accepts only `[0-9]{1,max_digits}`.
"""

from __future__ import annotations

import re

__all__ = ["DECIMAL", "MAX_DIGITS", "parse_decimal"]

#: 20 digits hold every unsigned 64-bit number.
MAX_DIGITS = 20
#: A regex fragment for a decimal field (ASCII digits; bounded by the caller's `{1,n}`).
DECIMAL = "[0-9]"
_CACHE: dict[int, re.Pattern[str]] = {}


def parse_decimal(text: str | bytes, *, max_digits: int = MAX_DIGITS) -> int | None:
    """The value of `text` when it is 1 to `max_digits` ASCII digits and nothing else, else None."""
    if isinstance(text, bytes | bytearray):
        if not (0 < len(text) <= max_digits) or not text.isascii() or not text.isdigit():
            return None
        return int(text)
    pattern = _CACHE.get(max_digits)
    if pattern is None:
        pattern = _CACHE[max_digits] = re.compile(f"[0-9]{{1,{max_digits}}}")
    return int(text) if pattern.fullmatch(text) else None
