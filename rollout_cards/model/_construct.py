"""A model tree built from JSON data the model certainly accepts, without a pydantic validator.

Compiling a model's pydantic validator is the largest cost of a small `rcard validate`
(~45 ms of CPU for CardManifest, its sections and the report models, plus the
`importlib.metadata` import pydantic's plugin loader pays on the first one; issue 14: start-up
within 2x the baseline). Nearly every card.json a command reads is valid, so `construct`
checks the plain JSON data against the rules read off the model classes themselves (field
types, length and range constraints, patterns, after-validators, model validators) and
builds the tree with `model_construct`: the same values, types and fields set as
`model_validate` would give.

It answers only when it is sure. Anything it does not know exactly how pydantic treats
(another type or constraint, a before/wrap validator, a config option, an ambiguous value
such as a pattern-checked string ending in a newline) makes it return None, and the caller
runs the pydantic validator, which then also describes every problem. So a finding is never
decided here: a refused document always goes the validated way.
tests/model/test_construct.py checks, over mutated documents, that whatever this accepts
pydantic accepts too (lax and strict JSON mode), with an identical tree.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, TypeVar, Union

import annotated_types
from pydantic import AfterValidator, AwareDatetime, BaseModel, JsonValue
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, TzInfo

__all__ = ["construct", "construct_or_validate"]

M = TypeVar("M", bound=BaseModel)


class _Unsure(Exception):
    """The data may be something pydantic refuses or converts differently: validate instead."""


class _Unsupported(Exception):
    """A model uses a feature this module does not reproduce: always validate it."""


Check = Callable[[Any], Any]

#: JSON values nested deeper than this are left to pydantic (its own recursion guard decides).
_MAX_JSON_DEPTH = 64
#: Model config keys that do not change what validation accepts or produces.
_NEUTRAL_CONFIG = {"extra", "validate_assignment", "defer_build", "title"}
# RFC 3339 as pydantic's parser reads it to the same instant: ASCII digits, seconds present, at
# most six fractional digits (pydantic rounds more), an explicit offset in hours and minutes
# (0-59: datetime.fromisoformat reads "+00:60" as an hour, pydantic refuses it) or Z.
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
                       r"(?:Z|[+-][0-9]{2}:[0-5][0-9])")


def _unsure() -> Any:
    raise _Unsure


def _exact(kind: type) -> Check:
    # Exact types only: bool is not taken for int, nor int for float (strict JSON mode refuses both).
    def check(value: Any) -> Any:
        return value if type(value) is kind else _unsure()

    return check


def _none(value: Any) -> None:
    return None if value is None else _unsure()


def _aware_datetime(value: Any) -> datetime:
    if type(value) is not str or not _DATETIME.fullmatch(value):
        _unsure()
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        _unsure()
    offset = parsed.utcoffset()
    if offset is None or offset.microseconds or abs(offset.total_seconds()) >= 86400:
        _unsure()
    # pydantic's own tzinfo class, so the value is the one model_validate gives, not only equal.
    return parsed.replace(tzinfo=TzInfo(int(offset.total_seconds())))


def _json_value(value: Any, depth: int = 0) -> Any:
    # A copy, as pydantic returns one: the manifest must not share containers with the document.
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if depth >= _MAX_JSON_DEPTH:
        _unsure()
    if kind is list:
        return [_json_value(v, depth + 1) for v in value]
    if kind is dict:
        return {k if type(k) is str else _unsure(): _json_value(v, depth + 1) for k, v in value.items()}
    return _unsure()


def _enum(cls: type[Enum]) -> Check:
    if not all(type(m.value) is str for m in cls):
        raise _Unsupported(cls)
    members = {m.value: m for m in cls}

    def check(value: Any) -> Any:
        return members[value] if type(value) is str and value in members else _unsure()

    return check


def _constrained(check: Check, metadata: list[Any]) -> Check:
    steps: list[Check] = [check]
    for item in metadata:
        if isinstance(item, FieldInfo):
            # Field(...) inside Annotated: its constraints, nothing else.
            if item.alias or item.validation_alias or item.default is not PydanticUndefined \
                    or item.default_factory is not None:
                raise _Unsupported(item)
            steps.append(_constrained(lambda v: v, list(item.metadata)))
        elif isinstance(item, annotated_types.MinLen):
            steps.append(lambda v, n=item.min_length: v if len(v) >= n else _unsure())
        elif isinstance(item, annotated_types.MaxLen):
            steps.append(lambda v, n=item.max_length: v if len(v) <= n else _unsure())
        elif isinstance(item, annotated_types.Ge):
            steps.append(lambda v, n=item.ge: v if v >= n else _unsure())
        elif type(item).__name__ == "_PydanticGeneralMetadata" and set(vars(item)) == {"pattern"}:
            pattern = re.compile(item.pattern)
            # pydantic's regex engine (Rust) reads `$` as the end of the text; Python's `$` also
            # matches before a final newline: such a value is left to pydantic.
            steps.append(lambda v, p=pattern: v if not v.endswith("\n") and p.search(v) else _unsure())
        elif isinstance(item, AfterValidator):
            steps.append(_call(item.func))
        else:
            raise _Unsupported(item)

    def run(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return run if len(steps) > 1 else check


def _call(func: Callable[[Any], Any]) -> Check:
    """An after-validator taking only the value; what it refuses, pydantic reports."""
    params = [p for p in inspect.signature(func).parameters.values()
              if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != 1:
        raise _Unsupported(func)

    def check(value: Any) -> Any:
        try:
            return func(value)
        except Exception:  # noqa: BLE001 - the validated path raises or reports it as before
            raise _Unsure from None

    return check


def _checker(annotation: Any) -> Check:
    """How one annotation's value is checked and converted, read off the type."""
    if annotation is JsonValue:
        return _json_value
    if annotation is AwareDatetime:
        return _aware_datetime
    if annotation in (str, int, bool):
        return _exact(annotation)
    if annotation is type(None):
        return _none
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _constrained(_checker(args[0]), list(annotation.__metadata__))
    if origin in (Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if len(others) != 1 or len(args) != 2:
            raise _Unsupported(annotation)  # pydantic's smart unions: not reproduced
        inner = _checker(others[0])
        return lambda v: None if v is None else inner(v)
    if origin is list and len(args) == 1:
        item = _checker(args[0])
        return lambda v: [item(x) for x in v] if type(v) is list else _unsure()
    if origin is dict and len(args) == 2 and args[0] is str:
        value = _checker(args[1])
        return lambda v: {k if type(k) is str else _unsure(): value(x) for k, x in v.items()} \
            if type(v) is dict else _unsure()
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return _enum(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return lambda v: _model(annotation, v)
    raise _Unsupported(annotation)


def _optional_arm(annotation: Any) -> Any:
    """X of `X | None`, else None."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return None


def _field_checker(field: FieldInfo) -> Check:
    metadata = list(field.metadata)
    arm = _optional_arm(field.annotation)
    if arm is None or not metadata:
        return _constrained(_checker(field.annotation), metadata)
    # pydantic applies a nullable field's constraints to the value, not to None.
    if any(isinstance(m, (AfterValidator, FieldInfo)) for m in metadata):
        raise _Unsupported(field)
    inner = _constrained(_checker(arm), metadata)
    return lambda v: None if v is None else inner(v)


class _Plan:
    """What `_model` needs of one model class, read once."""

    def __init__(self, cls: type[BaseModel]):
        config = dict(cls.model_config)
        if not set(config) <= _NEUTRAL_CONFIG or config.get("extra") != "forbid" or cls.__private_attributes__ \
                or cls.__pydantic_post_init__ or getattr(cls, "__pydantic_root_model__", False):
            raise _Unsupported(cls)
        decorators = cls.__pydantic_decorators__
        if decorators.validators or decorators.root_validators:
            raise _Unsupported(cls)  # pydantic v1-style validators
        field_validators: dict[str, list[Check]] = {}
        for dec in decorators.field_validators.values():
            if dec.info.mode != "after":
                raise _Unsupported(dec)
            for name in dec.info.fields:
                field_validators.setdefault(name, []).append(_call(dec.func))
        self.model_validators: list[Callable[[Any], Any]] = []
        for dec in decorators.model_validators.values():
            if dec.info.mode != "after" or len(inspect.signature(dec.func).parameters) != 1:
                raise _Unsupported(dec)
            self.model_validators.append(dec.func)
        self.fields: dict[str, Check] = {}
        self.required: set[str] = set()
        self.model_defaults: dict[str, type[BaseModel]] = {}
        for name, field in cls.model_fields.items():
            if field.alias or field.validation_alias or field.discriminator or field.validate_default:
                raise _Unsupported(field)
            steps = [_field_checker(field), *field_validators.get(name, ())]
            self.fields[name] = steps[0] if len(steps) == 1 else _chain(steps)
            factory = field.default_factory
            if field.is_required():
                self.required.add(name)
            elif isinstance(factory, type) and issubclass(factory, BaseModel):
                # pydantic calls the factory, which validates an empty model: built here without that.
                self.model_defaults[name] = factory
            elif factory is not None and inspect.signature(factory).parameters:
                raise _Unsupported(field)  # a factory of the validated data
        if set(field_validators) - set(self.fields):
            raise _Unsupported(cls)


def _chain(steps: list[Check]) -> Check:
    def run(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return run


_plans: dict[type[BaseModel], _Plan | None] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    try:
        plan = _plans[cls]
    except KeyError:
        try:
            plan = _Plan(cls)
        except _Unsupported:
            plan = None
        _plans[cls] = plan
    if plan is None:
        raise _Unsure
    return plan


def _model(cls: type[M], data: Any) -> M:
    plan = _plan(cls)
    if type(data) is not dict or not plan.required <= data.keys() or not data.keys() <= plan.fields.keys():
        _unsure()
    values = {name: plan.fields[name](value) for name, value in data.items()}
    fields_set = set(values)
    for name, factory in plan.model_defaults.items():
        if name not in values:
            values[name] = _model(factory, {})
    instance = cls.model_construct(fields_set, **values)
    for validator in plan.model_validators:
        try:
            result = validator(instance)
        except Exception:  # noqa: BLE001 - the validated path reports it
            raise _Unsure from None
        if result is not instance:
            _unsure()
    return instance


def construct(cls: type[M], data: Any) -> M | None:
    """`cls` built from the JSON data `data` (parsed JSON: dicts, lists, str, int, float, bool,
    None) when `cls.model_validate(data)` certainly succeeds with this very tree; else None."""
    try:
        return _model(cls, data)
    except _Unsure:
        return None


def construct_or_validate(cls: type[M], data: Any) -> M:
    """`construct(cls, data)`, or else `cls.model_validate(data)` (which raises ValidationError)."""
    built = construct(cls, data)
    return built if built is not None else cls.model_validate(data)
