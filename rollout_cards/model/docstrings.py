"""Field docstrings of the models, for their JSON Schemas.

The models document each field with the string under it. pydantic's
`use_attribute_docstrings` reads those by re-parsing the module's source once per class, at
import — about a fifth of `rcard validate`'s start-up. Only the JSON Schemas need them, so
they are read here, once per module, when a schema is generated, and placed where pydantic
places a field's description (a property's `description`, an explicit one kept).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import typing
from typing import Any

from pydantic import BaseModel

__all__ = ["attribute_docs", "describe"]


@functools.cache
def _module_docs(module: str) -> dict[str, dict[str, str]]:
    """Class qualname -> {field: docstring} for every class of `module`."""
    tree = ast.parse(inspect.getsource(sys.modules[module]))
    found: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if not isinstance(node, ast.ClassDef):
                continue
            docs = {}
            for stmt, after in zip(node.body, node.body[1:], strict=False):
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    docs[stmt.target.id] = inspect.cleandoc(after.value.value)
            found[prefix + node.name] = docs
            visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """{field: docstring} of `model`, inherited fields included (the nearest class wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass.__module__ in sys.modules:
            try:
                docs.update(_module_docs(klass.__module__).get(klass.__qualname__, {}))
            except (OSError, TypeError):  # no source (a frozen or generated module)
                continue
    return {name: doc for name, doc in docs.items() if name in model.model_fields}


def _models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from `model`'s fields, by class name (the schema's `$defs` keys)."""
    seen: dict[str, type[BaseModel]] = {}

    def walk(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ not in seen:
                seen[tp.__name__] = tp
                for field in tp.model_fields.values():
                    walk(field.annotation)
            return
        for arg in typing.get_args(tp):
            walk(arg)

    walk(model)
    return seen


def _fill(definition: dict[str, Any], model: type[BaseModel], defs: dict[str, Any]) -> None:
    properties = definition.get("properties", {})
    for field, doc in attribute_docs(model).items():
        name = model.model_fields[field].alias or field
        spec = properties.get(name)
        if not isinstance(spec, dict) or "description" in spec:
            continue
        ref = spec.get("$ref", "")
        if ref.startswith("#/$defs/") and defs.get(ref.removeprefix("#/$defs/"), {}).get("description") == doc:
            continue  # as pydantic: a reference is not described again with its target's own words
        spec["description"] = doc


def describe(schema: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """`schema` (from `model.model_json_schema()`) with each field's docstring as its description."""
    models = _models(model)
    defs = schema.get("$defs", {})
    _fill(schema, model, defs)
    for name, definition in defs.items():
        if name in models and isinstance(definition, dict):
            _fill(definition, models[name], defs)
    return schema

