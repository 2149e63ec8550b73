"""Hostile card.json documents: parse_manifest returns a manifest that round-trips, or raises
ManifestError / UnsupportedFormatError; never another exception, never silent change."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import ManifestError, UnsupportedFormatError
from rollout_cards.io.manifest import dump_manifest, parse_manifest
from tests.conftest import FIXTURE_CARDS
from tests.fuzzing import cases, seed

GOOD = json.loads((FIXTURE_CARDS / "synthetic" / "card.json").read_text())
# Raw JSON texts of hostile values (kept as text so 1e999 and escapes reach the parser as written).
HOSTILE = ["1e999", "-1e400", "9223372036854775808", "-9223372036854775809", "9" * 5000, '"\\ud800"',
           '"a\\udfffb"', '"\\u0000"', "[" * 5000 + "]" * 5000, '{"a": ' * 3000 + "1" + "}" * 3000, "-1", "0",
           "1.5", "true", "null", '""', "[]", "{}", '"' + "x" * 100_000 + '"', '"rollout-card/\\u0660.\\u0661"',
           '"1.' + "1" * 5000 + '.0"', '"9999-12-31T23:59:59Z"', '"2026-13-45T99:00:00Z"', '"../../etc/passwd"',
           '"\\u202e"', "-0.0", "1E+308", "[null]", '{"": 1}',
           # longer than NAME_MAX (255 bytes) / PATH_MAX (4,096) where a path goes
           '"' + "a" * 256 + '"', '"rules/' + "\u00e9" * 128 + '"', '"' + "/".join(["b" * 200] * 25) + '"']


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            out += _paths(v, (*prefix, i))
    return out


PATHS = [p for p in _paths(GOOD) if p]
_MARK = "__hostile_value__"


def _document(path: tuple, raw: str) -> bytes:
    doc = json.loads(json.dumps(GOOD))
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = _MARK
    return json.dumps(doc).replace(json.dumps(_MARK), raw, 1).encode()


def _check(data: bytes) -> None:
    try:
        manifest = parse_manifest(data, "card.json")
    except (ManifestError, UnsupportedFormatError) as exc:
        assert str(exc).encode("utf-8")  # the message is printable text (no lone surrogates)
        return
    again = dump_manifest(manifest)
    assert parse_manifest(again, "card.json") == manifest  # accepted means it survives a rewrite unchanged


@pytest.mark.fuzz
def test_a_hostile_value_at_any_place():
    rng = random.Random(seed())
    for _ in range(cases(400)):
        _check(_document(rng.choice(PATHS), rng.choice(HOSTILE)))


@pytest.mark.fuzz
@settings(max_examples=cases(150), deadline=None, derandomize=True)
@given(st.sampled_from(PATHS), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=10), c, max_size=3), max_leaves=10))
def test_hypothesis_values_of_any_type_at_any_place(path, value):
    raw = json.dumps(value, allow_nan=True)  # NaN / Infinity and huge ints reach the parser as text
    _check(_document(path, raw))
