"""A differential fuzzer of the validator-free fast path (model/_construct.py, validate/report.py).

Two references, never the fast path itself:
- document level: whatever `construct` builds, pydantic builds identically (lax `model_validate`, as
  the reader runs it) and accepts in strict JSON mode (the JSON Schema stand-in), over mutations the
  plain fuzzer of test_construct.py does not make: one digit of a string changed, characters put into strings (a final newline,
  CR, NUL, U+2028, a combining mark, an astral character, a BOM), ints turned into floats, bools,
  strings or huge ints, list items duplicated, dropped or reordered (the model validators' sorted
  and unique rules), unknown keys in nested objects, and boundary values (lengths 256/257 counted
  in code points, enum values in other cases, versions and formats just outside the rules);
- end to end: `validate` (JSON and text) and `parse_manifest` of a card with the mutated card.json
  give the same output with the fast path as with it forced off (pydantic validates every manifest
  and report model, and the report is `model_dump(mode="json")`).
A review found one divergence this way (a created offset "+00:60", test_construct.py).
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_cards.errors import CardFormatError
from rollout_cards.io import manifest as io_manifest
from rollout_cards.model._construct import construct
from rollout_cards.model.card import CardManifest
from rollout_cards.validate import manifest as validate_manifest
from rollout_cards.validate import report as validate_report
from rollout_cards.validate import validate
from rollout_cards.validate.report import render_json, render_text
from tests.conftest import FIXTURE_CARDS
from tests.fuzzing import cases
from tests.io.test_manifest_fuzz import _paths
from tests.model.test_construct import VARIANTS, agree

INSERTS = ["\n", "\r", "\r\n", "\x00", " ", "\t", "\u2028", "\u0301", "é", "\U0001f600", "/", "\\", ".", "-", "_",
           "\x85", "\x0b", "\ufeff", "\u200d", "A"]
VALUES = [None, True, False, 0, 1, -1, 2**63 - 1, -(2**63), 1.0, 0.5, -0.0, 1e308, "", " ", "x", [], {}, [None],
          {"": None}, "public", "PUBLIC", "Public", "omitted", "Omitted", "author_declared", "none", "original",
          "rollout-card/0.2", "rollout-card/0.10", "rollout-card/00.2", "1.0.0", "1.0.0+a", "1.0.0-", "v1.0.0",
          "MIT", "mit", "MIT OR apache-2.0", "NOASSERTION", "a" * 64, "A" * 64, "x" * 256, "x" * 257, "é" * 256,
          "\U0001f600" * 256, "\U0001f600" * 257, "2026-01-15T12:00:00Z", "2026-01-15T12:00:00.123456789Z",
          "2026-01-15T12:00:00+00:60"]
KEYS = ["x", "name", "extra", "license", "plan", "kind", "id", "format", "Name"]


def mutate(rng: random.Random, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` changed in one to three places (in place)."""
    for _ in range(rng.randint(1, 3)):
        places = _paths(doc)[1:]  # lists: their first three items
        if not places:
            break
        place = rng.choice(places)
        parent = doc
        for part in place[:-1]:
            parent = parent[part]
        key, value, how = place[-1], parent[place[-1]], rng.random()
        digits = [i for i, c in enumerate(value) if c.isascii() and c.isdigit()] if isinstance(value, str) else []
        if how < 0.15 and digits:
            # one digit changed: dates, times and offsets out of range (minute 60), versions, digests
            i = rng.choice(digits)
            parent[key] = value[:i] + rng.choice("0123456789") + value[i + 1:]
        elif how < 0.35 and isinstance(value, str):
            s, half = rng.choice(INSERTS), len(value) // 2
            parent[key] = rng.choice([value + s, s + value, value[:half] + s + value[half:], value.upper(),
                                      value.lower(), value.strip(), value * 2, value[:-1]])
        elif how < 0.45 and type(value) is int:
            parent[key] = rng.choice([value + 1, value - 1, -value, float(value), str(value), bool(value),
                                      value * 2**40])
        elif how < 0.55 and isinstance(value, list) and value:
            j, what = rng.randrange(len(value)), rng.random()
            if what < 0.4:
                value.insert(j, copy.deepcopy(value[j]))
            elif what < 0.7:
                value.reverse()
            else:
                del value[j]
        elif how < 0.65 and isinstance(value, dict):
            value[rng.choice(KEYS)] = copy.deepcopy(rng.choice(VALUES))
        elif how < 0.75:
            del parent[key]
        else:
            parent[key] = copy.deepcopy(rng.choice(VALUES))
    return doc


@settings(max_examples=cases(400), suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(VARIANTS)), st.randoms(use_true_random=False))
def test_whatever_is_constructed_from_a_mutated_card_pydantic_validates_identically(name, rng):
    agree(mutate(rng, copy.deepcopy(VARIANTS[name])))


# RFC 3339's shape with any digits (and unicode digits, lowercase t/z, a space, a newline), and
# one with each part drawn around its range (month 13, day 32, hour 24, minute or second 60,
# offset minute 60-99): datetime.fromisoformat and pydantic do not refuse all of these alike
# (fromisoformat reads an offset "+00:60" as an hour; this fails on the code before a38fbdb).
_CREATED = r"\A\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,8})?)?([Zz]|[+-]\d{2}(:?\d{2}(:\d{2})?)?)?\n?\Z"


def _two(top: int) -> st.SearchStrategy[str]:
    return st.integers(0, top).map(lambda n: f"{n:02d}")


_PARTS = st.tuples(st.sampled_from(["0000", "0001", "1970", "2024", "2026", "9999"]), _two(13), _two(32), _two(25),
                   _two(61), _two(61), st.sampled_from(["", ".5", ".123456", ".1234567"]),
                   st.sampled_from("+-"), _two(25), _two(99))
created_texts = st.one_of(
    st.from_regex(_CREATED.replace("\\d", "[0-9]")), st.from_regex(_CREATED),
    _PARTS.map(lambda p: f"{p[0]}-{p[1]}-{p[2]}T{p[3]}:{p[4]}:{p[5]}{p[6]}{p[7]}{p[8]}:{p[9]}"),
)


@settings(max_examples=cases(300))
@given(created_texts)
def test_created_strings_of_the_rfc3339_shape_are_read_as_pydantic_reads_them_or_left_to_it(text):
    agree({**VARIANTS["minimal"], "created": text})


def _outputs(card) -> str:
    report = validate(card)
    out = render_json(report) + render_text(report)
    try:
        manifest = io_manifest.parse_manifest((card / "card.json").read_bytes())
    except CardFormatError as exc:
        return out + f"refused: {exc}"
    return out + json.dumps(manifest.to_json_dict(), sort_keys=True) + repr(manifest)


def _fast_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every manifest and report model validated by pydantic, the report dumped by pydantic."""
    monkeypatch.setattr(validate_manifest, "construct", lambda cls, data: None)
    monkeypatch.setattr(io_manifest, "construct", lambda cls, data: None)
    monkeypatch.setattr(validate_manifest, "construct_or_validate", lambda cls, data: cls.model_validate(data))
    for cls in (validate_report.Location, validate_report.Finding, validate_report.CheckRun,
                validate_report.Report):
        monkeypatch.setattr(cls, "model_construct", classmethod(lambda cls, _fields_set=None, **kw: cls(**kw)))
    monkeypatch.setattr(validate_report.Report, "to_json_dict", lambda self: self.model_dump(mode="json"))


@settings(max_examples=cases(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["minimal", "synthetic"]), st.randoms(use_true_random=False), st.booleans())
def test_validate_and_the_reader_say_the_same_with_the_fast_path_and_without_it(tmp_path, name, rng, ascii_only):
    card = tmp_path / name
    if not card.exists():
        shutil.copytree(FIXTURE_CARDS / name, card)
    doc = mutate(rng, json.loads((FIXTURE_CARDS / name / "card.json").read_text()))
    (card / "card.json").write_text(json.dumps(doc, ensure_ascii=ascii_only), encoding="utf-8")
    fast = _outputs(card)
    with pytest.MonkeyPatch.context() as patch:
        _fast_path_off(patch)
        slow = _outputs(card)
    assert fast == slow, json.dumps(doc)[:400]


def test_the_end_to_end_comparison_sees_the_fast_path(tmp_path, monkeypatch):
    """The harness itself: a fast path that accepts what pydantic refuses is told apart."""
    card = tmp_path / "minimal"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    doc = json.loads((card / "card.json").read_text())
    doc["title"] = ""  # min_length=1
    (card / "card.json").write_text(json.dumps(doc))
    assert construct(CardManifest, doc) is None
    good = _outputs(card)
    lax = CardManifest.model_construct
    monkeypatch.setattr(validate_manifest, "construct", lambda cls, data: lax(**data) if cls is CardManifest else None)
    assert _outputs(card) != good
