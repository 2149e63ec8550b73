"""model/_construct.py: a manifest built without pydantic's validator is the one it would build.

The reference is pydantic itself: whatever `construct` accepts, `CardManifest.model_validate`
(lax, as the reader runs it) and `model_validate_json(strict=True)` (the JSON Schema stand-in of
`card_schema_problems`) must accept too, with a tree of identical values, types and fields set.
What it refuses goes the validated way, so refusing is always safe; the fixture cards and the
variants below must not be refused, or the start-up gain is silently lost.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from rollout_cards.errors import ManifestError
from rollout_cards.io.manifest import parse_manifest
from rollout_cards.model._construct import construct
from rollout_cards.model.card import CardManifest
from rollout_cards.model.schemas import card_schema_problems
from rollout_cards.validate import validate
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases
from tests.io.test_manifest_fuzz import _paths

BASES = {name: json.loads((FIXTURE_CARDS / name / "card.json").read_text()) for name in ("minimal", "synthetic")}


def _rich() -> dict[str, Any]:
    doc = copy.deepcopy(BASES["synthetic"])
    doc["created"] = "2026-01-15T12:00:00.25+05:30"
    doc["scope"].update(license="mit OR apache-2.0", access="gated", personal_data={"contains": "none"})
    doc["meta"] = {"a": {"b": [1, 2.5, None, True, "x", {"c": []}]}, "n": -3}
    doc["provenance"]["agents"] = [{"name": "a", "model": "m", "parameters": {"t": 0.5, "k": [1, 2]}}]
    doc["provenance"]["sources"] = [{"name": "s.json", "format": "tau-bench", "sha256": "0" * 64, "bytes": 3}]
    doc["authors"] = [{"name": "A", "email": "a@example.org"}]
    return doc


VARIANTS = {**BASES, "rich": _rich()}


def same(a: Any, b: Any, where: str = "", *, fields_set: bool = True) -> None:
    """Identical trees: types, values, fields set (unless told), datetimes down to their tzinfo class."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, BaseModel):
        assert not fields_set or a.model_fields_set == b.model_fields_set, where
        assert a.__dict__.keys() == b.__dict__.keys(), where
        assert a.__pydantic_extra__ == b.__pydantic_extra__ and a.__pydantic_private__ == b.__pydantic_private__
        for k in a.__dict__:
            same(a.__dict__[k], b.__dict__[k], f"{where}/{k}", fields_set=fields_set)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}/{i}", fields_set=fields_set)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same(a[k], b[k], f"{where}/{k}", fields_set=fields_set)
    elif isinstance(a, datetime):
        assert a == b and type(a.tzinfo) is type(b.tzinfo) and a.utcoffset() == b.utcoffset(), where
        assert (a.year, a.month, a.day, a.hour, a.minute, a.second, a.microsecond) == \
            (b.year, b.month, b.day, b.hour, b.minute, b.second, b.microsecond), where
    else:
        assert a == b, where


def agree(doc: Any) -> CardManifest | None:
    """construct(doc), checked against pydantic: anything it accepts pydantic accepts identically."""
    fast = construct(CardManifest, copy.deepcopy(doc))
    if fast is not None:
        validated = CardManifest.model_validate(doc)
        same(fast, validated)
        CardManifest.model_validate_json(json.dumps(doc), strict=True)
        assert card_schema_problems(doc) == []
    return fast


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_valid_manifests_are_constructed_as_pydantic_validates_them(name):
    fast = agree(VARIANTS[name])
    assert fast is not None, f"{name}: a valid card.json took the slow way"


def test_the_constructed_manifest_shares_no_container_with_the_document():
    doc = copy.deepcopy(VARIANTS["rich"])
    fast = construct(CardManifest, doc)
    doc["meta"]["a"]["b"].append("changed")
    doc["provenance"]["agents"][0]["parameters"]["k"].append(3)
    assert fast.meta["a"]["b"] == [1, 2.5, None, True, "x", {"c": []}]
    assert fast.provenance.agents[0].parameters["k"] == [1, 2]


def test_validators_transform_values_as_pydantic_does():
    fast = agree(VARIANTS["rich"])
    assert fast.scope.license == "MIT OR Apache-2.0"  # canonicalized by Scope._spdx
    assert fast.created.utcoffset() == timedelta(hours=5, minutes=30)
    assert fast.created.microsecond == 250000


# Refused (pydantic refuses them, or treats them in ways not reproduced): construct says None.
REFUSED = [
    ("created", "2026-01-15T12:00:00"), ("created", 1700000000), ("created", "2026-01-15 12:00:00Z"),
    ("version", "1.0.0\n"), ("version", "1.0"), ("id", "ok\n"), ("id", "bad id"), ("title", ""),
    ("format", "rollout-card/x"), ("extra", 1), ("plan", {"tasks": ["a", "a"], "agents": ["x"]}),
    ("plan", {"tasks": ["a"], "agents": ["x"], "trials": 2, "expected_episodes": 3}),
]


@pytest.mark.parametrize(("key", "value"), REFUSED)
def test_documents_pydantic_refuses_or_reads_otherwise_are_left_to_it(key, value):
    doc = copy.deepcopy(BASES["minimal"])
    doc[key] = value
    assert construct(CardManifest, doc) is None


# -- mutated documents ---------------------------------------------------------------------------

TRICKY = [
    None, True, False, 0, 1, -1, 2**63 - 1, 1.0, 0.5, "", " ", "x", "x" * 300, "\n", "a\n", "é" * 70, [], {}, [1],
    {"name": "x"}, ["a", "a"], "A" * 64, "a" * 64, "a" * 64 + "\n", "0" * 63, "../x", "/abs", "a\\b", "C:x", "a//b",
    "a/./b", "x" * 256, "public", "gated", "secret", "omitted", "redacted", "author_declared", "none", "sensitive",
    "original", "regrade", "rollout-card/0.2", "rollout-card/0.1", "rollout-card/1.0", "rollout-card/0.02",
    "1.0.0", "1.0.0-rc.1+b", "01.0.0", "MIT", "mit", "not a license", "steps.t", "rules/x.yaml", "x.y", "-x",
    "2026-01-15T12:00:00Z", "2026-01-15T12:00:00+05:30", "2026-01-15T12:00:00-00:00", "2026-01-15T12:00:00.1234567Z",
    "2026-02-30T00:00:00Z", "2026-01-15T24:00:00Z", "2026-01-15T12:00:60Z", "2026-01-15T12:00:00+24:00",
    "0000-01-01T00:00:00Z", "2026-01-15t12:00:00z", "2026-01-15T12:00:00+0530", "2026-01-15T12:00Z",
]

values = st.one_of(st.sampled_from(TRICKY), st.text(max_size=12), st.integers(-3, 2**64),
                   st.floats(allow_nan=False, allow_infinity=False),
                   st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()))


@st.composite
def mutated(draw) -> dict[str, Any]:
    doc = copy.deepcopy(VARIANTS[draw(st.sampled_from(sorted(VARIANTS)))])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        how = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        if how == "delete":
            del parent[path[-1]]
        elif how == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["x", "name", "extra", "license", "plan", "kind"]))] = draw(values)
        else:
            parent[path[-1]] = draw(values)
    return doc


@settings(max_examples=cases(300), suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_whatever_is_constructed_pydantic_validates_identically(doc):
    agree(doc)


@settings(max_examples=cases(200))
@given(st.datetimes(timezones=st.one_of(st.timezones(), st.builds(
    lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439)))),
       st.sampled_from(["auto", "seconds", "milliseconds", "microseconds", "minutes"]), st.booleans())
def test_created_datetimes_are_read_as_pydantic_reads_them(moment, timespec, zulu):
    text = moment.isoformat(timespec=timespec)
    if zulu:
        text = text.replace("+00:00", "Z")
    agree({**BASES["minimal"], "created": text})


@pytest.mark.parametrize("text", [t for t in TRICKY if isinstance(t, str) and t[:2] in ("20", "00")])
def test_each_tricky_datetime_is_read_as_pydantic_reads_it_or_left_to_it(text):
    agree({**BASES["minimal"], "created": text})


HOURS = (0, 1, 5, 12, 22, 23, 24)  # 24: every minute refused


def test_every_offset_and_only_ascii_digits_are_read_as_pydantic_reads_them_or_left_to_it():
    """Offsets +-HH:MM with minutes 00-99: datetime.fromisoformat reads "+00:60" as +01:00 where
    pydantic refuses it, and the old code built such a card without a finding (fails on it)."""
    refused = 0
    for sign in "+-":
        for hours in HOURS:
            for minutes in range(100):
                refused += agree({**BASES["minimal"], "created": f"2026-01-15T12:00:00{sign}{hours:02d}:{minutes:02d}"}) \
                    is None
    assert refused == 2 * len(HOURS) * 100 - 2 * (len(HOURS) - 1) * 60  # exactly those pydantic refuses
    for text in ("\u0662\u0660\u0662\u0666-01-15T12:00:00Z", "2026-01-15T12:00:00+\uff10\uff10:00"):
        assert agree({**BASES["minimal"], "created": text}) is None


def test_a_created_offset_of_sixty_minutes_is_a_finding_of_validate_and_the_reader(tmp_path):
    """End to end: `validate` and `read_manifest` refuse it as the validating path does (old code: valid)."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    doc = json.loads((card / "card.json").read_text())
    doc["created"] = "2026-01-15T12:00:00+00:60"
    (card / "card.json").write_text(json.dumps(doc))
    report = validate(card, replay=False)
    assert not report.valid
    assert [(f.code, f.location.pointer) for f in report.findings] == [("manifest-schema", "/created")]
    with pytest.raises(ManifestError, match="/created"):
        parse_manifest((card / "card.json").read_bytes())


def test_validating_the_minimal_card_compiles_no_manifest_validator():
    """The point of it (issue 14, start-up): fails on the code that validated card.json with pydantic."""
    probe = (
        "import sys, pydantic\n"
        "from pydantic._internal._mock_val_ser import MockValSer\n"
        "from rollout_cards.validate import validate\n"
        f"report = validate({str(FIXTURE_CARDS / 'minimal')!r})\n"
        "assert report.valid\n"
        "from rollout_cards.model import card\n"
        "print(sorted(n for n, c in vars(card).items() if isinstance(c, type) and issubclass(c, pydantic.BaseModel)"
        " and not isinstance(c.__dict__.get('__pydantic_validator__'), MockValSer)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
