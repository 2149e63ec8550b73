"""The graders' constructs of the expression language against plain-Python references:
regular expressions (Python's `re` on patterns where RE2 and re agree), column-valued
substring tests, if(), number(), canonical JSON (`json`), lists and comprehensions."""

from __future__ import annotations

import json
import re
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import ExpressionError
from rollout_cards.expr import parse_expression
from rollout_cards.expr._text import MAX_KERNEL_GROUPS

from ..fuzzing import cases

TEXT = st.text(alphabet="abAB :-01\n", max_size=12)


def run(text: str, table: pa.Table) -> list:
    return parse_expression(text).evaluate(table).to_pylist()


def error_of(text: str, schema: pa.Schema | None = None) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        expr = parse_expression(text, file="r.yaml", key="score")
        if schema is not None:
            expr.typecheck(schema)
    return info.value


# --------------------------------------------------------------------------- regex

# RE2 pattern -> the same in Python's re (`$` of re also matches before a final newline)
PATTERNS = {
    r"a+b": r"a+b",
    r"([ab])(\d)": r"([ab])(\d)",
    r"(?i)ab": r"(?i)ab",
    r"^a": r"^a",
    r"b$": r"b\Z",
    r"(a|ab)(b*)": r"(a|ab)(b*)",
    r"[A-B]+:?\s*(\d)?": r"[A-B]+:?\s*(\d)?",
    # capture groups among the syntax that also holds parentheses (one RE2 pass names them)
    r"(?P<x>a)(b)?": r"(?P<x>a)(b)?",
    r"(?:a|b)(:)": r"(?:a|b)(:)",
    r"[(]?(a)[)]?\(?": r"[(]?(a)[)]?\(?",
    r"[]a](b)": r"[]a](b)",
    r"[^]a](b)": r"[^]a](b)",
    r"(?i:A)(b)": r"(?i:A)(b)",
    r"[[:digit:]](a)": r"[0-9](a)",
    r"a.(b)": r"a.(b)",  # a dot does not cross a newline, as in regex_match
    # syntax the renaming leaves to the two-pass way
    r"\Qa:\E(b)": r"a:(b)",
    r"(?<n>a)(b)": r"(?P<n>a)(b)",
}


@settings(max_examples=cases(60), deadline=None)
@given(texts=st.lists(st.one_of(st.none(), TEXT), min_size=1, max_size=20))
def test_regex_functions_agree_with_python_re(texts):
    table = pa.table({"s": pa.array(texts, pa.string())})
    for pattern, python in PATTERNS.items():
        compiled = re.compile(python)
        groups = compiled.groups
        assert run(f"regex_match(s, r'{pattern}')", table) == [
            None if t is None else compiled.search(t) is not None for t in texts
        ]
        for g in range(groups + 1):
            expected = []
            for t in texts:
                m = None if t is None else compiled.search(t)
                expected.append(None if m is None else (m.group(g) or ""))
            assert run(f"regex_extract(s, r'{pattern}', {g})", table) == expected, (pattern, g)
        assert run(f"regex_replace(s, r'{pattern}', '<\\\\0>')", table) == [
            None if t is None else compiled.sub(lambda m: f"<{m.group(0)}>", t) for t in texts
        ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("regex_match(s, '(')", "RE2 rejects the pattern (missing ): ()"),
        ("regex_match(s, r'(a)\\1')", "RE2 rejects the pattern (invalid escape sequence: \\1)"),
        ("regex_match(s, 'a(?=b)')", "invalid perl operator"),
        ("regex_extract(s, '(a)', 2)", "regex_extract(): the pattern has no group 2"),
        ("regex_replace(s, '(a)', '\\\\2')", "requests 2 matches, but the regexp only has 1"),
        ("regex_extract(s, 'a', 9)", "between 0 and 8"),
        ("regex_replace(s, 'a', x)", "replacement of regex_replace() must be a string literal"),
        ("regex_match(s, x)", "the pattern of regex_match() must be a string literal"),
    ],
)
def test_patterns_re2_rejects_fail_when_the_rule_is_read(text, fragment):
    err = error_of(text)
    assert fragment in err.reason
    assert str(err).startswith("r.yaml: score: ")
    assert err.column is not None


def test_regex_extraction_of_a_multiple_choice_letter():
    table = pa.table({"s": ["Reasoning...\nANSWER: C", "answer: b", "The answer is (D).", None]})
    got = run(r"upper(regex_extract(s, r'(?i)answer(?: is)?:?\s*\(?([A-D])\b', 1))", table)
    assert got == ["C", "B", "D", None]


# -------------------------------------------------------- column-valued substrings


@pytest.mark.parametrize("distinct", [3, MAX_KERNEL_GROUPS + 5])
def test_column_valued_substring_tests_agree_with_str_methods(distinct):
    rng = range(300)
    texts = [None if i % 17 == 0 else f"{i % 7} ANSWER: {i % distinct}" for i in rng]
    targets = [None if i % 23 == 0 else str((i * 5) % distinct) for i in rng]
    table = pa.table({"s": texts, "t": targets})

    def ref(fn):
        return [None if a is None or b is None else fn(a, b) for a, b in zip(texts, targets)]

    assert run("endswith(s, 'ANSWER: ' + t)", table) == ref(lambda a, b: a.endswith("ANSWER: " + b))
    assert run("startswith(s, t)", table) == ref(str.startswith)
    assert run("contains(s, t)", table) == ref(lambda a, b: b in a)
    # the same kernels serve dataset filters
    expr = parse_expression("contains(s, t)").to_arrow(table.schema)
    assert table.filter(expr).column("s").to_pylist() == [
        a for a, b in zip(texts, targets) if a is not None and b is not None and b in a
    ]


# ------------------------------------------------------------------- if, number


def test_if_number_and_their_errors():
    table = pa.table({"x": ["12", " -1.5e3 ", "1,000", "inf", "", None, "0x10", "+.5"], "n": [1, 2, 3, 4, 5, 6, 7, 8]})
    assert run("number(x)", table) == [12.0, -1500.0, None, None, None, None, None, 0.5]
    assert run("if(n > 4, n, 0.5)", table) == [0.5, 0.5, 0.5, 0.5, 5.0, 6.0, 7.0, 8.0]
    assert run("if(is_null(number(x)), 'no', x)", table)[:3] == ["12", " -1.5e3 ", "no"]
    schema = table.schema
    assert "the branches of if() must have the same type, got string and int64" in error_of("if(n > 1, x, 1)", schema).reason
    assert "the condition of if() must be a boolean" in error_of("if(n, 1, 2)", schema).reason


# ------------------------------------------------------------------ canonical JSON

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
)


def _normalized(value):
    if isinstance(value, float) and value == int(value):
        return int(value)
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


@settings(max_examples=cases(80), deadline=None)
@given(value=JSON_VALUES, indent=st.sampled_from([None, 2]))
def test_canonical_is_independent_of_key_order_whitespace_and_number_spelling(value, indent):
    def shuffled(v):
        if isinstance(v, dict):
            return {k: shuffled(v[k]) for k in reversed(list(v))}
        if isinstance(v, list):
            return [shuffled(x) for x in v]
        if isinstance(v, int) and not isinstance(v, bool):
            return float(v)  # 3 spelled 3.0
        return v

    a, b = json.dumps(value), json.dumps(shuffled(value), indent=indent)
    got = run("canonical(x)", pa.table({"x": [a, b]}))
    assert got[0] == got[1]
    assert json.loads(got[0]) == _normalized(value)
    assert " " not in got[0].replace(" ", "") and "\n" not in got[0]


def test_canonical_of_text_that_is_not_json_is_null():
    assert run("canonical(x)", pa.table({"x": ["{'a': 1}", "NaN", "[1,", "", None, '"s"']})) == [
        None, None, None, None, None, '"s"',
    ]  # fmt: skip


# -------------------------------------------------------------------------- lists

LISTS = st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.sampled_from("abc")), max_size=5)), min_size=1, max_size=12)


@settings(max_examples=cases(60), deadline=None)
@given(a=LISTS, b=LISTS)
def test_list_operations_agree_with_python(a, b):
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    x = ["a", "b", None, "c"] * n
    table = pa.table({"a": pa.array(a, pa.list_(pa.string())), "b": pa.array(b, pa.list_(pa.string())), "x": x[:n]})

    def per_row(fn, *cols):
        return [None if any(c is None for c in row) else fn(*row) for row in zip(*cols)]

    def key(v):
        return (v is None, v or "")

    assert run("len(a)", table) == per_row(len, a)
    assert run("sort(a)", table) == per_row(lambda v: sorted(v, key=key), a)
    assert run("distinct(a)", table) == per_row(lambda v: sorted({i for i in v if i is not None}), a)
    assert run("a == b", table) == per_row(lambda u, v: u == v, a, b)
    assert run("a != b", table) == per_row(lambda u, v: u != v, a, b)
    assert run("sort(a) == sort(b)", table) == per_row(lambda u, v: Counter(u) == Counter(v), a, b)
    assert run("x in a", table) == per_row(lambda v, items: v in items, x[:n], a)
    assert run("x not in a", table) == per_row(lambda v, items: v not in items, x[:n], a)
    # a comprehension is null only for a null list; an item whose condition is null is left out
    assert run("[upper(i) + x for i in a if not is_null(i) and i != x]", table) == [
        None if items is None else [i.upper() + v for i in items if i is not None and v is not None and i != v]
        for items, v in zip(a, x[:n])
    ]


def test_gold_actions_of_write_tools_as_name_plus_canonical_kwargs():
    actions = [
        json.dumps([{"name": "get_user", "kwargs": {"id": 1}}, {"name": "book", "kwargs": {"b": 2.0, "a": [1, {"y": 1, "x": 2}]}}]),
        json.dumps([]),
        "not json",
    ]
    table = pa.table({"task.actions": actions})
    expr = (
        "[json_get(a, 'name') + canonical(json_get(a, 'kwargs')) for a in json_list(task.actions) "
        "if not regex_match(json_get(a, 'name'), r'^(get_|search_|list_)|^(calculate|think)$')]"
    )
    expected = []
    for text in actions:
        try:
            gold = json.loads(text)
        except ValueError:
            expected.append(None)
            continue
        expected.append(
            [
                g["name"] + json.dumps(_normalized(g["kwargs"]), sort_keys=True, separators=(",", ":"))
                for g in gold
                if not g["name"].startswith(("get_", "search_", "list_")) and g["name"] not in ("calculate", "think")
            ]
        )
    assert run(expr, table) == expected == [['book{"a":[1,{"x":2,"y":1}],"b":2}'], [], None]
    assert parse_expression(expr).names == {"task.actions"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("l == s", "cannot compare list<string> with string using '=='"),
        ("lower(l)", "lower() expects a string, got list<string>"),
        ("s in s", "the right side of 'in' must be a list"),
        ("1 in l", "cannot look for int64 in list<string>"),
        ("l + l", "cannot apply '+' to list<string> and list<string>"),
        ("[l for x in l]", "the items of a comprehension must be scalars"),
        ("[x for x in s]", "a comprehension iterates over a list, got string"),
        ("sort(s)", "sort() expects a list, got string"),
        ("json_list(n)", "json_list() expects JSON text (a string), got int64"),
    ],
)
def test_list_type_errors(text, fragment):
    schema = pa.schema([("l", pa.list_(pa.string())), ("s", pa.string()), ("n", pa.int64())])
    assert fragment in error_of(text, schema).reason


def test_list_operations_are_not_pushed_into_scans_but_their_siblings_are():
    schema = pa.schema([("kind", pa.string()), ("l", pa.list_(pa.string()))])
    expr = parse_expression("kind == 'x' and 'a' in l")
    assert not expr.pushable(schema)
    with pytest.raises(ExpressionError, match="cannot be part of a scan filter"):
        expr.to_arrow(schema)
    table = pa.table({"kind": ["x", "y", "x"], "l": [["a"], ["a"], ["b"]]})
    assert table.filter(expr.prefilter(schema)).num_rows == 2
    assert parse_expression("'a' in l").prefilter(schema) is None


@settings(max_examples=cases(40), deadline=None)
@given(a=LISTS, i=st.integers(-6, 6))
def test_at_index_of_and_list_literals_agree_with_python(a, i):
    x = (["a", "b", None, "c"] * len(a))[: len(a)]
    table = pa.table({"a": pa.array(a, pa.list_(pa.string())), "x": x})
    assert run(f"at(a, {i})", table) == [None if v is None or not -len(v) <= i < len(v) else v[i] for v in a]
    assert run("index_of(a, x)", table) == [
        None if v is None or y is None or y not in v else v.index(y) for v, y in zip(a, x)
    ]
    assert run("a == ['a', 'b']", table) == [None if v is None else v == ["a", "b"] for v in a]
    assert "cannot mix strings and numbers" in error_of("['a', 1]", pa.schema([])).reason
