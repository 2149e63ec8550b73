from __future__ import annotations

import pytest

from rollout_cards.yamldoc import StrictYamlError, load_strict_yaml


def test_plain_document_and_key_lines():
    doc, lines = load_strict_yaml("a: 1\nb:\n  c: [x, y]\n")
    assert doc == {"a": 1, "b": {"c": ["x", "y"]}}
    assert lines[("b", "c")] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1]\nb: *x\n", "anchors"),
        ("a: 1\na: 2\n", r"duplicate key 'a' \(first on line 1\)"),
        ("? [1, 2]\n: v\n", "keys must be plain strings"),
        ("a: !!python/object:os.system x\n", "not valid YAML"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_refused(text, message):
    with pytest.raises(StrictYamlError, match=message):
        load_strict_yaml(text)


def test_no_base60_numbers_they_stay_strings():
    # YAML 1.1 read `1:30` as 90 and converted `1:1:1:...` in quadratic time (1 MiB: 201 s).
    doc, _ = load_strict_yaml("a: 1:30\nb: 1:30.5\nc: " + ":".join(["1"] * 30_000) + "\n")
    assert doc["a"] == "1:30" and doc["b"] == "1:30.5"
    assert isinstance(doc["c"], str) and len(doc["c"]) == 59_999


@pytest.mark.parametrize("text", ["a: !!int '1:30'", "a: !!float '1:30.5'"])
def test_explicit_base60_refused(text):
    with pytest.raises(StrictYamlError, match="base-60"):
        load_strict_yaml(text)


def test_scalar_length_cap_for_values_and_keys():
    from rollout_cards.yamldoc import MAX_SCALAR_CHARS

    assert load_strict_yaml("a: " + "x" * MAX_SCALAR_CHARS)[0]["a"] == "x" * MAX_SCALAR_CHARS
    for text in ("a: " + "1" * (MAX_SCALAR_CHARS + 1), "x" * (MAX_SCALAR_CHARS + 1) + ": 1",
                 "a: '" + "y" * (MAX_SCALAR_CHARS + 1) + "'"):
        with pytest.raises(StrictYamlError, match="longer than the limit") as info:
            load_strict_yaml(text)
        assert info.value.line == 1


@pytest.mark.parametrize(
    ("text", "value"),
    [("a: 9223372036854775807", 2**63 - 1), ("a: -9223372036854775808", -(2**63)), ("a: 0x10", 16),
     ("a: 1_000", 1000), ("a: 1.5e+3", 1500.0), ("a: 1e999", "1e999")],
)
def test_numbers_in_range(text, value):
    assert load_strict_yaml(text)[0]["a"] == value


@pytest.mark.parametrize(
    ("text", "message"),
    [("a: 9223372036854775808", "64-bit range"), ("a: -9223372036854775809", "64-bit range"),
     ("a: " + "9" * 5000, "64-bit range"), ("a: 1.0e+999", "range of a 64-bit float"),
     ("a: .inf", "not a finite number"), ("a: -.Inf", "not a finite number"), ("a: .nan", "not a finite number")],
)
def test_numbers_out_of_range_refused(text, message):
    with pytest.raises(StrictYamlError, match=message):
        load_strict_yaml(text)


@pytest.mark.parametrize("text", ['a: "\\ud800"', '"\\udfff": 1', "a: [ok, \"x\\uDC00y\"]"])
def test_lone_surrogate_escapes_refused(text):
    with pytest.raises(StrictYamlError, match="lone surrogate"):
        load_strict_yaml(text)


@pytest.mark.parametrize("char", ["\x1b", "\x00", "\ud800"])
def test_control_characters_are_a_located_error(char):
    with pytest.raises(StrictYamlError, match="not allowed") as info:
        load_strict_yaml(f"a: 1\nb: x{char}y\n")
    assert info.value.line == 2


@pytest.mark.parametrize("text", ["a: !!int synthetic..infbestof3", "a: !!int 0x", "a: !!float x", "a: !!bool maybe",
                                  "a: !!timestamp yesterday", "a: !!int \"\""])
def test_an_explicit_tag_on_a_malformed_scalar_is_a_located_error(text):
    """An explicit tag skips the resolver, so the constructor met text it cannot convert and raised
    ValueError/KeyError/AttributeError: an internal error (rule fuzzer at scale 20, seed 7)."""
    with pytest.raises(StrictYamlError, match=r"line 1: !!\w+ value .* is not a valid"):
        load_strict_yaml(text)
