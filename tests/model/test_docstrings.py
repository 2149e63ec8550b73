"""Field docstrings reach the JSON Schemas exactly as pydantic's own use_attribute_docstrings
puts them there (the reference), without paying for it at import."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rollout_cards.model.card import CardManifest
from rollout_cards.model.docstrings import attribute_docs, describe
from rollout_cards.model.rule import Rule
from rollout_cards.validate.report import Report

DOCS = ConfigDict(use_attribute_docstrings=True)


class Inner(BaseModel):
    """Inner's own words."""

    x: int
    """An x."""


class Base(BaseModel):
    kept: str = Field("k", description="explicit, kept")
    """a docstring that loses to the explicit description"""
    inherited: int = 0
    """From the base class."""


class Plain(Base):
    inner: Inner
    """Inner's own words."""
    other: Inner | None = None
    """Another inner."""
    named: list[int] = Field(default_factory=list, alias="the-name")
    """Under an alias."""
    undocumented: bool = False


class InnerDoc(BaseModel):
    """Inner's own words."""

    model_config = DOCS
    x: int
    """An x."""


class BaseDoc(BaseModel):
    model_config = DOCS
    kept: str = Field("k", description="explicit, kept")
    """a docstring that loses to the explicit description"""
    inherited: int = 0
    """From the base class."""


class PlainDoc(BaseDoc):
    model_config = DOCS
    inner: InnerDoc
    """Inner's own words."""
    other: InnerDoc | None = None
    """Another inner."""
    named: list[int] = Field(default_factory=list, alias="the-name")
    """Under an alias."""
    undocumented: bool = False


def _renamed(schema: dict) -> dict:
    import json

    return json.loads(json.dumps(schema).replace("InnerDoc", "Inner").replace("PlainDoc", "Plain"))


def test_same_schema_as_pydantic_use_attribute_docstrings():
    assert describe(Plain.model_json_schema(), Plain) == _renamed(PlainDoc.model_json_schema())


def test_attribute_docs_include_inherited_fields_and_skip_undocumented():
    docs = attribute_docs(Plain)
    assert docs["inherited"] == "From the base class." and docs["named"] == "Under an alias."
    assert "undocumented" not in docs


def test_every_field_of_the_shipped_documents_is_described():
    for model in (CardManifest, Rule, Report):
        schema = describe(model.model_json_schema(mode="validation"), model)
        for name, definition in [(model.__name__, schema), *schema.get("$defs", {}).items()]:
            for field, spec in definition.get("properties", {}).items():
                assert spec.get("description") or "$ref" in spec, f"{name}.{field}"
