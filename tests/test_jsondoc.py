from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.jsondoc import DECODER, JsonValueError, may_hold_surrogate, surrogate_pointer


@pytest.mark.parametrize(
    "text",
    ["1e999", "1e400", "-1e999", "[1E+309]", "9223372036854775808", "-9223372036854775809", "9" * 5000,
     '{"a": NaN}', "Infinity", "-Infinity"],
)
def test_numbers_a_card_cannot_hold_are_refused(text):
    with pytest.raises(JsonValueError):
        DECODER.decode(text)


@pytest.mark.parametrize("text", ["9223372036854775807", "-9223372036854775808", "1.7976931348623157e308",
                                  "5e-324", "1e-999", "0", "-0.0"])
def test_numbers_at_the_edges_match_json(text):
    assert DECODER.decode(text) == json.loads(text)


def _has_lone_surrogate(value) -> bool:
    # Independent reference: UTF-8 cannot encode a lone surrogate.
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


pieces = st.sampled_from(["a", "\\ud800", "\\udfff", "\\ud83d\\ude00", "\\\\ud800", "\\u00e9", "\\uDBFF", "/", "~"])
strings = st.lists(pieces, max_size=5).map(lambda p: '"' + "".join(p) + '"')
documents = st.recursive(
    strings,
    lambda c: st.lists(c, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]")
    | st.lists(st.tuples(strings, c), max_size=3).map(lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_surrogate_pointer_agrees_with_utf8_encoding(text):
    value = json.loads(text)
    lone = _has_lone_surrogate(value)
    assert (surrogate_pointer(value) is not None) == lone
    if lone:  # (a duplicate key can drop a lone surrogate the text holds: then only the walk says None)
        assert may_hold_surrogate(text, from_utf8=True)


# Fragments that put escaped backslashes, pair halves and other escapes next to each other.
tricky = st.sampled_from(["\\ud83d", "\\ude00", "\\", "\\\\", "\\u0041", "\\ud800", "\\udc00", "\\uDBFF",
                          "\\uDFFF", "\\n", "ud83d", "x", "\\\\ud83d"])


@settings(max_examples=500, deadline=None)
@given(st.lists(tricky, max_size=8))
def test_may_hold_surrogate_is_exact_on_escape_sequences(parts):
    text = '["' + "".join(parts) + '"]'
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return
    assert may_hold_surrogate(text, from_utf8=True) == _has_lone_surrogate(value), text
    assert may_hold_surrogate(" " + text, 1, len(text) + 1, from_utf8=True) == _has_lone_surrogate(value)


def test_a_surrogate_character_in_text_not_from_utf8_is_found():
    assert may_hold_surrogate('["\udc00"]')
    assert not may_hold_surrogate('["\U0001F600 \\ud83d\\ude00"]')
    assert not may_hold_surrogate('["\udc00"]', from_utf8=True)  # the caller vouches UTF-8 could not hold one


def test_surrogate_pointer_is_a_json_pointer():
    assert surrogate_pointer(json.loads('{"a/b": [0, {"c~": "x\\ud800"}]}')) == "/a~1b/1/c~0"
    assert surrogate_pointer("\udc00") == "/"
    assert surrogate_pointer({"ok": "\U0001F600"}) is None
