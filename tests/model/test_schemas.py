from __future__ import annotations

import json

import pytest

from rollout_cards.model.schemas import document_schemas, render, schema_problems
from tests.conftest import FIXTURE_CARDS, REPO


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
