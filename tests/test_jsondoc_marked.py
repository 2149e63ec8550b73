"""Marked floats: values decoded with `fast_container(..., marked=True)` encode to `json_text`'s text
with no float rewritten (`fast_text(s)(marked=True)` skips the search for floats msgspec writes
unlike repr), and decode as the strict decoder decodes them, or fail as it fails.

References: the stdlib encoder (`importers.steps.json_text`) for the texts, the strict decoder
(`JsonStream(fast=False)`) for the values and errors. Floats at every magnitude and random bit
patterns; adversarial documents from tests/test_jsondoc_fast.py streamed with tiny buffers.
"""

from __future__ import annotations

import io
import json
import math
import random
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers import json_stream
from rollout_cards.importers.json_stream import JsonStream
from rollout_cards.importers.steps import json_text
from rollout_cards.jsondoc import MISS, ReprFloat, fast_container, fast_text, fast_texts
from tests.fuzzing import cases, seed
from tests.test_jsondoc_fast import _same, _utf8, documents
from tests.test_jsondoc_text import ODD_FLOATS, containers


def _floats(rng: random.Random, n: int) -> list[float]:
    bits = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(n)]
    powers = [sign * 10.0**e * m for e in range(-30, 30) for m in (1.0, 2.65, 9.99) for sign in (1, -1)]
    return [x for x in bits if math.isfinite(x)] + ODD_FLOATS + powers + [1e-4, -1e-4, 1e16, -1e16, 9.999e15]


def _marked(value):
    data = json.dumps(value).encode()
    got = fast_container(data, 0, len(data), marked=True)
    if got is MISS:  # 19 digits or more: decoded strictly (unmarked), as without marking
        return MISS
    decoded, end = got
    assert end == len(data)
    return decoded


def test_marked_floats_encode_as_repr_without_a_rewrite(monkeypatch):
    numbers = _floats(random.Random(seed()), 20000)
    decoded = _marked({"numbers": numbers, "nested": [{"cost": x} for x in numbers[:500]]})
    want = json_text({"numbers": numbers, "nested": [{"cost": x} for x in numbers[:500]]})
    from rollout_cards import jsondoc

    # no search for floats to rewrite may be needed: with it switched off the texts are still json_text's
    monkeypatch.setattr(jsondoc, "_candidates", lambda out: pytest.fail("searched for floats to rewrite"))
    assert fast_text(decoded, marked=True) == want
    assert fast_texts([decoded, decoded["nested"]], marked=True) == [want, json_text(decoded["nested"])]


def test_only_floats_msgspec_writes_unlike_repr_are_marked_and_they_are_floats():
    numbers = _floats(random.Random(seed() + 1), 5000)
    decoded = _marked(numbers)
    for x, y in zip(numbers, decoded, strict=True):
        assert x == y and math.copysign(1, x) == math.copysign(1, y)
        odd = x != 0 and not 1e-4 <= abs(x) < 1e16
        assert type(y) is (ReprFloat if odd else float), x
        assert type(float(y)) is float and json.dumps(y) == repr(x) and json_text([y]) == f"[{x!r}]"


@settings(max_examples=cases(100), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers)
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_any_decoded_value_encodes_as_json_text_when_marked(value):
    decoded = _marked(value)
    assume(decoded is not MISS)
    assert _same(json.loads(json.dumps(decoded)), json.loads(json.dumps(value)))
    got = fast_text(decoded, marked=True)
    want = json_text(value)
    assert got == want or (got is None and "null" in want)
    assert fast_texts([decoded], finite=True, marked=True) == [want]


def _stream(data: bytes, fast: bool, constants: bool):
    stream = JsonStream(io.BytesIO(data), "s.json", constants=constants, fast=fast, max_value_chars=200)
    stream.mark_floats = fast
    out = []
    try:
        for _, value in stream.document_items(label="items[{}]"):
            out.append((value, stream.marked))
    except SourceFormatError as exc:
        return "error", str(exc), out
    return "value", None, out


def _plain(value):
    """`value` with every ReprFloat as a plain float (to compare with the strict decoder's value bit for bit)."""
    if type(value) is ReprFloat:
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@settings(max_examples=cases(300), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents(), min_size=1, max_size=6), st.integers(1, 40), st.integers(1, 64), st.booleans())
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_a_marking_stream_decodes_alike_or_fails_alike(items, chunk, window, constants):
    data = _utf8("[" + ",".join(items) + "]")
    with pytest.MonkeyPatch().context() as m:
        m.setattr(json_stream, "_CHUNK", chunk)
        m.setattr(json_stream, "_MIN_WINDOW", window)
        fast = _stream(data, True, constants)
        strict = _stream(data, False, constants)
    assert fast[:2] == strict[:2], (fast, strict)
    assert _same([_plain(v) for v, _ in fast[2]], [v for v, _ in strict[2]])
    for value, marked in fast[2]:  # a value the strict decoder read (NaN, a scalar) is not marked
        if not marked:
            assert ReprFloat not in {type(x) for x in _leaves(value)}


def _leaves(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        else:
            yield item


@pytest.mark.parametrize("text", ["[1e999]", "[-1e400, 1]", '{"a": [1.5e308, 1e309]}'])
def test_a_float_out_of_range_is_left_to_the_strict_decoder(text):
    assert fast_container(text.encode(), 0, len(text), marked=True) is MISS
    stream = JsonStream(io.BytesIO(f"[{text}]".encode()), "s.json")
    stream.mark_floats = True
    with pytest.raises(SourceFormatError, match="outside the range of a 64-bit float"):
        list(stream.array_items())
