"""The msgspec fast path gives exactly what the strict decoder gives, or the strict decoder's own error.

Differential: adversarial JSON (numbers at and past the int64 / float edges, NaN / Infinity, lone
and paired surrogate escapes, control characters, non-JSON whitespace, duplicate keys, syntax
errors, invalid UTF-8, deep nesting) decoded with the fast path and with the strict path alone
(`fast=False`), whole documents and value by value through `JsonStream` with tiny buffers.
"""

from __future__ import annotations

import io
import math
import random
import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers import json_stream
from rollout_cards.importers.json_stream import JsonStream, parse_json, parse_json_items
from rollout_cards.jsondoc import (
    MISS,
    TRUNCATED,
    _long_integer,
    fast_container,
    fast_decode,
    fast_items,
)
from tests.fuzzing import cases, seed

NUMBERS = ["0", "-0", "1", "-1", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
           "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1" * 19, "1" * 25, "9" * 400,
           "0." + "1" * 25, "1" * 20 + ".5", "1.5e" + "1" * 20, "1e-" + "1" * 20, "1e308", "1.7976931348623157e308",
           "1.7976931348623159e308", "1e309", "1e-400", "-1e-400", "5e-324", "2.4e-324", "2.5e-324", "1E+2", "-0.0",
           "0.1", "2.2250738585072011e-308", "123456789012345678.9e5", "NaN", "Infinity", "-Infinity", "1.", ".5",
           "01", "-", "+1", "1.0e", "0x10", "1e5", "3.141592653589793238462643383279"]
PIECES = ["a", "é", "😀", "\\ud800", "\\udfff", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "\\\\ud800", "\\u00e9",
          "\\uDBFF\\uDFFF", "\\u0000", "\\n", "\\/", '\\"', "\\\\", "\x01", "\x7f", "\u2028", "\\x41", "\\u12", "/", "~"]
SPACE = ["", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\xa0", "\u3000"]
GARBAGE = [",", ":", "]", "}", "[", "{", "tru", "nul", "true", "null", "false", "'a'", "//", "\ufeff"]

space = st.sampled_from(SPACE)
strings = st.lists(st.sampled_from(PIECES), max_size=4).map(lambda p: '"' + "".join(p) + '"')
keys = st.sampled_from(['"a"', '"b"', '"a"', '"\\u0061"', '"\\ud800"', '""', '"events"', '"ev\\u0065nts"'])
scalars = st.sampled_from(NUMBERS) | strings | st.sampled_from(["true", "false", "null"])


def _array(items):
    return "[" + ",".join(items) + "]"


def _object(pairs):
    return "{" + ",".join(f"{w}{k}{w}:{v}" for w, k, v in pairs) + "}"


values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=4).map(_array)
    | st.lists(st.tuples(space, keys, c), max_size=4).map(_object),
    max_leaves=12,
)


@st.composite
def documents(draw, containers_only=False):
    text = draw(values.filter(lambda v: v[0] in "[{") if containers_only else values)
    if draw(st.integers(0, 5)) == 0:  # a syntax error or a stray character somewhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(GARBAGE + SPACE)) + text[at:]
    return draw(space) + text + draw(space)


def _outcome(fn):
    try:
        return "value", fn()
    except SourceFormatError as exc:
        return "error", str(exc)


def _same(a, b) -> bool:
    """Equal values of the same types, floats bit for bit (the sign of zero, NaN), keys in order."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, float):
            if not (math.isnan(x) and math.isnan(y)) and (x != y or math.copysign(1, x) != math.copysign(1, y)):
                return False
        elif isinstance(x, dict):
            if list(x) != list(y):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


def _agree(fast, strict):
    assert fast[0] == strict[0], (fast, strict)
    assert _same(fast[1], strict[1]) if fast[0] == "value" else fast[1] == strict[1]


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a raw surrogate becomes invalid UTF-8, as in a hostile file


@settings(max_examples=cases(400), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.booleans(), st.booleans(), st.sampled_from([b"", b"\xff", b"\xed\xa0\x80", b"\xef\xbb\xbf"]))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_whole_documents_decode_alike_or_fail_alike(text, constants, as_bytes, junk):
    data: bytes | str = text
    if as_bytes:
        data = _utf8(text)
        if junk:
            data = data[: len(data) // 2] + junk + data[len(data) // 2 :]
    fast = _outcome(lambda: parse_json(data, "f.json", "r", constants=constants))
    strict = _outcome(lambda: parse_json(data, "f.json", "r", constants=constants, fast=False))
    _agree(fast, strict)


@settings(max_examples=cases(400), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(space, keys, values | st.lists(values, max_size=4).map(lambda xs: "[ " + " ,".join(xs) + "\n]")),
                max_size=5).map(_object), st.booleans(), st.booleans())
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_a_document_and_the_texts_of_its_items_decode_alike_or_fail_alike(text, constants, as_bytes):
    data = _utf8(text) if as_bytes else text
    fast = _outcome(lambda: parse_json_items(data, "f.eval", "m", key="events", constants=constants))
    strict = _outcome(lambda: parse_json_items(data, "f.eval", "m", key="events", constants=constants, fast=False))
    assert fast[0] == strict[0], (fast, strict)
    if fast[0] == "value":
        assert _same(fast[1][0], strict[1][0]) and fast[1][1] == strict[1][1], (fast, strict)
    else:
        assert fast[1] == strict[1]


def _read_stream(data: bytes, fast: bool, constants: bool, cap: int = 200):
    stream = JsonStream(io.BytesIO(data), "s.json", constants=constants, fast=fast, max_value_chars=cap)
    out = []
    try:
        for index, value in stream.document_items(label="items[{}]"):
            out.append((index, value))
    except SourceFormatError as exc:
        return "error", (str(exc), out)
    return "value", out


@settings(max_examples=cases(300), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents(), min_size=1, max_size=6), st.integers(1, 40), st.integers(1, 64), st.booleans(),
       st.sampled_from([1 << 25, 64, 8]))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_streamed_values_decode_alike_or_fail_alike(items, chunk, window, constants, raw_max):
    # Tiny chunks and windows: values cut by the buffer, windows that grow, the cap of 200 characters;
    # the file's bytes kept for the fast path dropped and taken up again (raw_max).
    data = _utf8("[" + ",".join(items) + "]")
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(json_stream, "_CHUNK", chunk)
        m.setattr(json_stream, "_MIN_WINDOW", window)
        m.setattr(json_stream, "_RAW_MAX", raw_max)
        fast = _read_stream(data, True, constants)
        strict = _read_stream(data, False, constants)
    assert fast[0] == strict[0], (fast, strict)
    if fast[0] == "error":
        assert fast[1][0] == strict[1][0]
        assert _same([v for _, v in fast[1][1]], [v for _, v in strict[1][1]])
    else:
        assert _same([v for _, v in fast[1]], [v for _, v in strict[1]])


@pytest.mark.parametrize("depth", [50, 900, 990, 995, 999, 1000, 5000])
def test_deep_nesting_decodes_alike_or_fails_alike(depth):
    text = "[" * depth + "]" * depth
    _agree(_outcome(lambda: parse_json(text, "f")), _outcome(lambda: parse_json(text, "f", fast=False)))
    data = ("[" + text + "]").encode()
    fast, strict = _read_stream(data, True, False, 1 << 20), _read_stream(data, False, False, 1 << 20)
    assert fast[0] == strict[0] and (fast[0] == "value" or fast[1][0] == strict[1][0])


@pytest.mark.parametrize("text", ["9223372036854775808", "[18446744073709551616]", '{"a": -9223372036854775809}',
                                  "[" + "9" * 5000 + "]", "[1e999]", "[NaN]", '["\\ud800"]', '{"a": "\\udc00\\ud800"}'])
def test_what_the_strict_decoder_refuses_is_never_taken_from_msgspec(text):
    assert fast_decode(text) is MISS
    if text.startswith(("[", "{")):
        assert fast_container(text.encode(), 0, len(text)) in (MISS, TRUNCATED)


def test_a_fraction_of_many_digits_takes_the_fast_path_and_a_19_digit_integer_the_strict_one():
    text = '[0.0042899999999999995, 999999999999999999, -999999999999999999, "a😀"]'
    assert fast_decode(text) == [0.0042899999999999995, 10**18 - 1, -(10**18 - 1), "a😀"]
    data = (text + ", 5").encode()
    value, end = fast_container(data, 0, len(data))
    assert end == len(text.encode()) and value[3] == "a😀"  # the end in bytes
    assert fast_decode("[9223372036854775807]") is MISS  # 19 digits: maybe beyond int64, left to the strict one
    assert parse_json("[9223372036854775807]", "f") == [2**63 - 1]


def _long_run_reference(data: bytes) -> bool:
    """Plain regex over the text: a maximal run of >= 19 digits whose byte before is not '.'."""
    return any(m.end() - m.start() >= 19 and (m.start() == 0 or data[m.start() - 1] != ord("."))
               for m in re.finditer(rb"[0-9]+", data))


@pytest.mark.parametrize("run", [18, 19, 20, 25, 37, 64])
def test_a_long_digit_run_is_found_at_every_alignment_of_the_sampled_search(run):
    # _long_integer looks at every 6th byte first: every offset of the run (and of what is around
    # it: a '.', a fraction, a second run, a short run just before) must be judged as a plain scan
    # over every byte judges it.
    for lead in range(14):
        for before in (b"", b".", b"1.", b"12345.", b"0.5,", b"123,", b'"a":'):
            for after in (b"", b",", b".5", b"e5", b"," + b"7" * 19):
                data = b" " * lead + before + b"9" * run + after
                expected = _long_run_reference(data)
                assert _long_integer(data) is expected, data  # short: every byte is scanned
                # long (as a document is): only the bytes around the sampled places are
                padded = data + b" " * 4096
                assert _long_integer(padded) is expected, data
                assert _long_integer(memoryview(b"[" + padded)[1:]) is expected, data
                assert _long_integer(b"x" * 4096 + data + b"x" * 4096) is expected, data


def test_the_sampled_search_agrees_with_a_plain_scan_on_random_digit_texts():
    rng = random.Random(12)
    for _ in range(4000):
        data = bytes(rng.choice(b"0123456789" * 4 + b".,e -") for _ in range(rng.randint(0, 90)))
        assert _long_integer(data) is _long_run_reference(data), data
        # in a long text of few digits, as the sampled windows see it
        spaced = b" ".join([data, b"a" * rng.randint(0, 3000), data[::-1], b"b" * 3000])
        assert _long_integer(spaced) is _long_run_reference(spaced), spaced


def test_an_inspect_like_sample_takes_the_fast_path_with_its_event_texts():
    text = '{"id": 1, "events": [{"event": "model", "n": 0.5} , {"event": "tool", "x": "é"}], "scores": {}}'
    value, texts = fast_items(text, "events")
    assert texts == ['{"event": "model", "n": 0.5}', '{"event": "tool", "x": "é"}']
    assert (value, texts) == parse_json_items(text, "f", key="events", fast=False)


def test_without_msgspec_every_document_is_decoded_strictly():
    # An environment installed before msgspec was a dependency keeps working (strict decoder only).
    import subprocess
    import sys

    code = ("import sys; sys.modules['msgspec'] = None\n"
            "from rollout_cards.jsondoc import MISS, fast_container, fast_decode, fast_items\n"
            "from rollout_cards.importers.json_stream import parse_json_items\n"
            "assert fast_decode('[1]') is MISS and fast_container(b'[1]', 0, 3) is MISS and fast_items('{}', 'e') is MISS\n"
            "assert parse_json_items('{\"e\": [ 1 ,{}]}', 'f', key='e') == ({'e': [1, {}]}, ['1', '{}'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_text_over_the_fast_paths_size_limit_is_decoded_strictly(monkeypatch):
    # The fast path copies its text; a large document must not add those copies to the peak memory.
    from rollout_cards import jsondoc

    monkeypatch.setattr(jsondoc, "_FAST_MAX", 8)
    text = '{"events": [1, 2, 3]}'
    assert fast_decode(text) is MISS and fast_items(text, "events") is MISS
    assert fast_container(text.encode(), 0, len(text)) is MISS and fast_container(b"[1, 2]", 0, 6) == ([1, 2], 6)
    assert parse_json_items(text, "f", key="events") == ({"events": [1, 2, 3]}, ["1", "2", "3"])


def test_msgspec_is_imported_by_the_first_fast_call_only():
    """jsondoc imports msgspec on the first fast call (~10-18 ms of start-up otherwise, for
    commands that never make one); the call then gives msgspec's value, and so do later ones."""
    import subprocess
    import sys

    code = ("import sys\nfrom rollout_cards import jsondoc\n"
            "print('msgspec' in sys.modules)\n"
            "print(jsondoc.fast_decode(b'{\"a\": [1, 2.5, null]}'))\n"
            "print('msgspec' in sys.modules, jsondoc.fast_text({'b': 1, 'a': 0.5}))\n"
            "print(jsondoc.fast_container(b'[1],2', 0, 5))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["False", "{'a': [1, 2.5, None]}", 'True {"a":0.5,"b":1}', "([1], 3)"]


class _AB(msgspec.Struct, forbid_unknown_fields=True):
    """A typed decode's target (importers.tau2_bench's Structs are of this kind): every value Any."""

    a: Any = None
    b: Any = msgspec.UNSET  # present (even null) or not


def _typed_stream(data: bytes, typed: Any):
    stream = JsonStream(io.BytesIO(data), "s.json", max_value_chars=200)
    out = []
    try:
        for _, value in stream.array_items(label="items[{}]", typed=typed):
            out.append(value)
        stream.end()
    except SourceFormatError as exc:
        return "error", (str(exc), out)
    return "value", out


def _as_decoded(value: Any) -> Any:
    """A decoded _AB as the dict the strict decoder gives for it (b left out when absent)."""
    if type(value) is not _AB:
        return value
    return {"a": value.a} | ({} if value.b is msgspec.UNSET else {"b": value.b})


@settings(max_examples=cases(300), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents(containers_only=True), min_size=1, max_size=6), st.integers(1, 40))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_a_typed_decode_gives_the_strict_decoders_values_or_falls_back_to_them(items, chunk):
    # `typed`: an object of the Struct's keys becomes the Struct, anything else (another key, an
    # array, a number out of range) the plain values; a bad value fails as the strict decoder fails.
    data = _utf8("[" + ",".join(items) + "]")
    with pytest.MonkeyPatch().context() as m:
        m.setattr(json_stream, "_CHUNK", chunk)
        typed = _typed_stream(data, _AB)
        strict = _read_stream(data, False, False)
    assert typed[0] == strict[0], (typed, strict)
    got, want = (typed[1][1], strict[1][1]) if typed[0] == "error" else (typed[1], strict[1])
    want = [v for _, v in want]
    if typed[0] == "error":
        assert typed[1][0] == strict[1][0]
    for t, s in zip(got, want, strict=True):
        if type(t) is _AB:  # the strict decoder's object had only keys a and b; null a is absent a
            assert type(s) is dict and set(s) <= {"a", "b"}, (t, s)
            assert _same(_as_decoded(t), {"a": s.get("a")} | ({"b": s["b"]} if "b" in s else {}))
        else:
            assert _same(t, s), (t, s)


def test_a_typed_decode_refuses_what_the_strict_decoder_refuses_and_keeps_other_keys():
    for text in ['{"a": 1e999}', '{"b": [1, -1e400]}', '{"a": "\\ud800"}', '{"a": 9223372036854775808}']:
        assert fast_container(text.encode(), 0, len(text), typed=_AB) in (MISS, TRUNCATED), text
    text = '{"a": [1, {"x": 2.5}], "b": null}'
    value, end = fast_container(text.encode(), 0, len(text), typed=_AB)
    assert type(value) is _AB and (value.a, value.b, end) == ([1, {"x": 2.5}], None, len(text))
    text = '{"a": 1, "c": 2}'  # another key: the plain object
    assert fast_container(text.encode(), 0, len(text), typed=_AB) == ({"a": 1, "c": 2}, len(text))
