from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.model.schemas import (
    card_schema_problems,
    document_schemas,
    render,
    schema_problems,
)
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases


def test_committed_schemas_match_the_models():
    """Fails when a model changed without `python -m rollout_cards.model.schemas --write schemas`."""
    committed = {p.name for p in (REPO / "schemas").glob("*.schema.json")}
    generated = document_schemas()
    assert committed == set(generated), "schemas/ holds other files than the models generate"
    for name, schema in generated.items():
        text = (REPO / "schemas" / name).read_text(encoding="utf-8")
        assert text == render(schema), f"schemas/{name} is stale: regenerate it"


@pytest.mark.parametrize("card", sorted(p.name for p in FIXTURE_CARDS.iterdir()))
def test_fixture_manifests_satisfy_the_json_schema(card):
    document = json.loads((FIXTURE_CARDS / card / "card.json").read_text())
    assert schema_problems("card", document) == []


def test_schema_problems_are_located_by_json_pointer():
    document = json.loads((FIXTURE_CARDS / "synthetic" / "card.json").read_text())
    document["inventory"]["files"][0]["bytes"] = -1
    document["scope"]["access"] = "everyone"
    locations = {p.location for p in schema_problems("card", document)}
    assert "/inventory/files/0/bytes" in locations
    assert "/scope/access" in locations


def test_schemas_have_no_remote_refs():
    for schema in document_schemas().values():
        refs = [v for v in _walk(schema) if isinstance(v, str) and v.startswith("http") and "$ref" in v]
        assert not refs
        text = json.dumps(schema)
        assert '"$ref": "http' not in text


def _walk(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{k}:{v}" if k == "$ref" else v
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


_CARDS = [json.loads((FIXTURE_CARDS / card / "card.json").read_text()) for card in sorted(
    p.name for p in FIXTURE_CARDS.iterdir())]


def _places(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _places(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from _places(v, (*prefix, i))


_PLACES = [(i, place) for i, card in enumerate(_CARDS) for place in _places(card) if place]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | st.sampled_from(["", "x", "2026-01-01T00:00:00Z", "2026-01-01", "sha256", "a" * 64,
                                             "CC-BY-4.0", "public", "completed", "steps", "../x", "omitted"]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3), max_leaves=6)


def _mutate(document, place, how, value):
    node = document
    for part in place[:-1]:
        node = node[part]
    last = place[-1]
    if how == "delete":
        del node[last]
    elif how == "extra" and isinstance(node, dict):
        node[f"{last}_extra"] = value
    else:
        node[last] = value


@pytest.mark.fuzz
@settings(max_examples=cases(300), deadline=None, derandomize=True)
@given(st.sampled_from(_PLACES), st.sampled_from(["replace", "delete", "extra"]), _JSON)
def test_what_the_strict_model_accepts_the_schema_accepts(where, how, value):
    """card_schema_problems skips jsonschema for a card the model accepts strictly: that is only
    sound if the schema never finds a problem in such a card. Any fixture card, any field,
    replaced by any JSON value, deleted, or joined by an unknown sibling."""
    i, place = where
    document = json.loads(json.dumps(_CARDS[i]))
    _mutate(document, place, how, value)
    assert card_schema_problems(document) == schema_problems("card", document)


def test_a_valid_card_is_checked_without_importing_jsonschema():
    import subprocess
    import sys

    code = ("import json, sys; from rollout_cards.io.manifest import parse_manifest; "
            f"parse_manifest(open({str(FIXTURE_CARDS / 'synthetic' / 'card.json')!r}, 'rb').read()); "
            "print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
