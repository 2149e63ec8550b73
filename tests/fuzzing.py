"""One knob for every fuzzer in the suite.

CI runs each fuzzer at scale 1 (a few minutes for all of them together). A longer run sets
``RCARD_FUZZ_SCALE`` (an integer, e.g. 50) and every fuzzer multiplies its case count by it:

    RCARD_FUZZ_SCALE=50 python -m pytest -q -m fuzz

Every fuzzer is seeded (``RCARD_FUZZ_SEED``, default 0) so a failure reproduces; a
counterexample it finds becomes a plain regression test next to it.
"""

from __future__ import annotations

import os

import pytest


def _int_env(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    if not raw.isascii() or not raw.isdigit() or int(raw) < minimum:
        raise pytest.UsageError(f"{name} must be an integer >= {minimum}, got {raw!r}")
    return int(raw)


def scale() -> int:
    """How many times the CI case count each fuzzer runs (RCARD_FUZZ_SCALE, default 1)."""
    return _int_env("RCARD_FUZZ_SCALE", 1, 1)


def seed() -> int:
    """The base seed of every fuzzer (RCARD_FUZZ_SEED, default 0)."""
    return _int_env("RCARD_FUZZ_SEED", 0, 0)


def cases(ci_count: int) -> int:
    """The number of cases a fuzzer runs: its CI count times the scale."""
    return ci_count * scale()
