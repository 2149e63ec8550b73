from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_cards import yamldoc
from rollout_cards.yamldoc import (
    FAST_MIN_CHARS,
    MAX_SCALAR_CHARS,
    StrictYamlError,
    load_strict_yaml,
)
from tests.fuzzing import cases


def test_plain_document_and_key_lines():
    doc, lines = load_strict_yaml("a: 1\nb:\n  c: [x, y]\n")
    assert doc == {"a": 1, "b": {"c": ["x", "y"]}}
    assert lines[("b", "c")] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1]\nb: *x\n", "anchors"),
        ("a: 1\na: 2\n", r"duplicate key 'a' \(first on line 1\)"),
        ("? [1, 2]\n: v\n", "keys must be plain strings, found a sequence; quote the key$"),
        ("? {a: 1}\n: v\n", "keys must be plain strings, found a mapping; quote the key$"),
        ("1: v\n", "keys must be plain strings, found int '1'; quote the key$"),
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


@pytest.mark.parametrize("text", ['a: "\\U0011FFFF"', 'a: "\\UFFFFFFFF"', 'b: 1\na: ["\\U00110000"]'])
def test_an_escape_past_the_last_character_is_a_located_error(text):
    with pytest.raises(StrictYamlError, match="escape is not a character") as err:
        load_strict_yaml(text)
    assert err.value.line == text.count("\n") + 1


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


# -- the libyaml fast path (large documents) agrees with the pure-Python loader -----------------


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                     st.text(max_size=12), st.sampled_from(["1:30", "0x1F", "0b101", "017", ".inf", "-.nan", "yes",
                                                            "~", "null", "1e999", "2001-12-14", "a: b", "- x"]))
_DOCS = st.recursive(_SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                     max_leaves=20)
_EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["\t", ":", " ", "\n", "- ", "'", '"', "#", "a",
                                                                  "\ud800", "\x1b", "{", "]", "?", "|", ">", "\u00e9",
                                                                  "\x85", "\u2028", "\ufeff", "\r", "...", "---", "\\"]),
                            st.booleans()), max_size=4)


@pytest.mark.fuzz
@given(doc=st.dictionaries(st.text(min_size=1, max_size=8), _DOCS, max_size=5), flow=st.booleans(), edits=_EDITS)
@settings(max_examples=cases(400), deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True, database=None)
def test_the_fast_path_gives_the_pure_python_loaders_answer_or_none(doc, flow, edits):
    """Documents of any size take the fast path here (the size threshold only keeps small files on
    the path they always took); wherever libyaml gets through, the answer is the strict loader's."""
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True, sort_keys=False)
    for at, piece, replace in edits:  # mutations: the documents a parser disagreement would hide in
        at %= len(text)
        text = text[:at] + piece + text[at + (1 if replace else 0):]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(yamldoc, "FAST_MIN_CHARS", 0)
        fast = yamldoc._fast_load(text)
    try:
        expected = yamldoc._python_load(text)
    except StrictYamlError:
        assert fast is None, "libyaml accepted a document the strict loader refuses"
        return
    if fast is not None:
        assert fast == expected
        assert [type(v) for v in _leaves(fast[0])] == [type(v) for v in _leaves(expected[0])]


def _leaves(value):
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in (k, *_leaves(v))]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def test_the_fast_path_reads_a_large_exit_statuses_file_and_leaves_the_rest_to_the_strict_loader():
    ids = [f"django__django-{i}" for i in range(6000)]
    text = yaml.safe_dump({"instances_by_exit_status": {"Submitted": ids[:4000], "LimitsExceeded": ids[4000:]}},
                          sort_keys=False)
    assert len(text) > FAST_MIN_CHARS
    fast = yamldoc._fast_load(text)
    assert fast is not None and fast == yamldoc._python_load(text) == load_strict_yaml(text)
    assert fast[1][("instances_by_exit_status", "LimitsExceeded")] == 4003
    # what only the strict loader may answer: anchors, aliases, tags, over-long scalars, deep nesting, errors
    for bad in (text + "x: &a 1\ny: *a\n", text + "x: !!int 1\n", text + "x: " + "y" * (MAX_SCALAR_CHARS + 1),
                text + "x: " + "[" * 150 + "]" * 150 + "\n", text + "instances_by_exit_status: {}\n",
                text + "x: '\\ud800'\n", text + "x: \"\\ud800\"\n", text + "x: 1:30:00\n"):
        assert yamldoc._fast_load(bad) is None or yamldoc._fast_load(bad) == yamldoc._python_load(bad)
    with pytest.raises(StrictYamlError, match="duplicate key"):
        load_strict_yaml(text + "instances_by_exit_status: {}\n")
    with pytest.raises(StrictYamlError, match="nested too deeply"):
        load_strict_yaml(text + "x:\n" + "- " * 5000 + "y\n")
