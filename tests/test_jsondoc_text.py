"""`jsondoc.fast_text` / `fast_texts` give exactly `json_text`'s text (the stdlib encoder), or None.

Differential against `importers.steps.json_text` (json.JSONEncoder, sort_keys, compact): decoded-JSON
values with floats at every magnitude (msgspec writes 1e16 / 0.00001 where repr writes 1e+16 /
1e-05), strings that look like numbers after a delimiter (`":0.00001,"`), escapes and quotes, and
any characters. The fast path must also really be taken (a None for everything would pass the
equality): it is None only where json_text's text holds `null` (msgspec writes NaN as null).
"""

from __future__ import annotations

import math
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from rollout_cards import jsondoc
from rollout_cards.importers.steps import json_text
from rollout_cards.jsondoc import fast_text, fast_texts
from tests.fuzzing import cases, seed

ODD_FLOATS = [1e16, 1e15, 9999999999999998.0, 1.2345678901234568e17, 1e22, 1.7976931348623157e308, 1e-4, 9.9e-5,
              0.0000265, 1e-5, -1e-5, 1.5e-7, 5e-324, 2.2250738585072014e-308, 0.00011834999997972773, 10.00001,
              0.0, -0.0, 0.5, 1.0, 123456780000000.0, 8.099999999999999e-05]
# Fragments that look like JSON numbers after a delimiter, quotes and escapes (a string is no number).
FRAGMENTS = [':0.00001,', '[1e16]', ',1e-7}', '"', '\\', '\\"', ':', ',', '[', '0.0000', '7e6', '0e-0', 'null', 'é',
             '😀', '\n', '\u2028', '\x00', '\x1f', '\x7f', 'a']

floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(ODD_FLOATS)
texts = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=5).map("".join)
scalars = floats | st.integers(-(2**63), 2**63 - 1) | st.booleans() | texts | st.none()
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(texts, c, max_size=4),
                      max_leaves=15)
containers = st.lists(values, max_size=4) | st.dictionaries(texts, values, max_size=4)


def _check(value, got) -> None:
    want = json_text(value)
    if got is None:
        assert "null" in want, f"the fast path was not taken for {want[:200]}"
    else:
        assert got == want


@settings(max_examples=cases(150), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers)
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_fast_text_is_json_text(value):
    _check(value, fast_text(value))


@settings(max_examples=cases(80), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(containers | values, max_size=6))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_fast_texts_are_the_items_json_texts(items):
    got = fast_texts(items)
    assert got is not None and len(got) == len(items)
    for item, text in zip(items, got, strict=True):
        _check(item, text)


@settings(max_examples=cases(80), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(containers | values, max_size=6))
@hypothesis_seed(seed())
@pytest.mark.fuzz
def test_fast_texts_of_values_known_finite_are_all_fast(items):
    # no NaN or Infinity in the values (`floats` has none): a null in a text is a JSON null
    assert fast_texts(items, finite=True) == [json_text(item) for item in items]


def test_a_float_after_a_quote_is_placed_by_the_quotes_that_delimit_strings():
    # an escaped quote (\") does not end a string; an escaped backslash before a quote (\\") does
    for value in (["a\\", 1e-05], ['\\"', 1e-05], ['\\":1e-05,"', 1e-05], ['"', ':0.00001,', 2.5e-07],
                  {"k\\": 1e16, '":1e-05,': 1e-05}, ['\\\\"', '\\"1e-05', 7e-05]):
        assert fast_text(value) == json_text(value)
        assert fast_texts([value, 1e-05, "1e-05"]) == [json_text(value), "1e-05", '"1e-05"']


def test_floats_of_every_exponent_are_written_as_repr_writes_them():
    rng = random.Random(seed())
    numbers = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    numbers = [x for x in numbers if math.isfinite(x)] + ODD_FLOATS + [10.0**e for e in range(-30, 30)]
    assert fast_text(numbers) == json_text(numbers)
    assert fast_texts(numbers) == [json_text(x) for x in numbers]
    assert fast_text({"cost": 0.0000265}) == '{"cost":2.65e-05}'


def test_non_finite_floats_and_null_take_the_slow_path():
    for value in ([math.nan], {"a": [math.inf]}, [-math.inf], {"a": None}):
        assert fast_text(value) is None
    assert fast_texts([{"a": math.nan}, {"b": 1}]) == [None, '{"b":1}']


def test_what_msgspec_refuses_or_json_text_treats_otherwise_takes_the_slow_path():
    assert fast_text({1: "a"}) is None  # non-str keys: json_text converts them
    assert fast_text("text") is None and fast_text(1.5e-7) is None  # scalars: json_text is as fast
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert fast_text(deep) is None


def test_without_msgspec_there_is_no_fast_text(monkeypatch):
    monkeypatch.setattr(jsondoc, "msgspec", None)
    assert fast_text({"a": 1}) is None and fast_texts([{"a": 1}]) is None
