"""Argument values typer would pass through unchanged, taken without building pydantic adapters.

typer 0.29 coerces every parameter of the invoked command through a pydantic `TypeAdapter`,
built on first use, also for a value left at its default: that imports pydantic's fields,
types and schema generator and compiles a validator per parameter, even for `rcard CMD --help`
(the root's options are coerced first: 0.62 -> 0.41 s CPU for `rcard validate --help`). A
command that builds our own models loads most of that anyway, so `rcard validate` of a small
card gains little (within noise, issue 14 item 5). Most values on a command line need no
conversion: an option not given (None, handled before any adapter), a default enum member,
a string, a list of strings. For those the value typer would return is known; every other
value (a number, a path, a choice typed as text, anything unexpected) goes to the adapter
typer builds, so its conversions and its error messages are typer's own.

Applied when the installed typer has the lazily built runtime parameter this relies on; on a
typer without it the tree is left as typer made it (slower, same behaviour).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

try:  # typer's coercion layer (0.29); a typer without it keeps its own path
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
except ImportError:  # pragma: no cover - depends on the installed typer
    RuntimeParam = None  # type: ignore[assignment,misc]

__all__ = ["defer_coercion"]

_NOT_TRIVIAL = object()


def _unchanged(descriptor: Any, value: Any, ctx: Any) -> Any:
    """What typer's adapter returns for `value` when that is known without it, else _NOT_TRIVIAL."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return _NOT_TRIVIAL
    if annotation is str and type(value) is str:
        return value  # _parse_cli_str: str(value)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if type(value) is annotation:
            return value  # coerce_cli_choice: a member of the enum is returned as it is
        if type(value) is str and info.case_sensitive and getattr(ctx, "token_normalize_func", None) is None:
            # coerce_cli_choice without normalisation: the first member whose value's text is `value`
            return next((m for m in annotation if str(m.value) == value), _NOT_TRIVIAL)
    if descriptor.is_list and getattr(annotation, "__args__", None) == (str,) and isinstance(value, tuple | list) \
            and all(type(item) is str for item in value):
        return list(value)  # build_adapter's parse_list over the str leaf
    return _NOT_TRIVIAL


if RuntimeParam is not None:

    class _Deferred(RuntimeParam):  # type: ignore[misc,valid-type]
        """typer's runtime parameter, built only for a value that needs it. Not a dataclass of its
        own: the parameter it serves carries the descriptor, and a dataclass costs ~1 ms to create."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            known = _unchanged(param.type_descriptor, value, ctx)
            if known is not _NOT_TRIVIAL:
                return known
            built = build_runtime_param(param.type_descriptor)
            param._runtime_param = built  # later values go straight to typer's adapter
            return built._coerce_value(value, param=param, ctx=ctx)


def defer_coercion(param: Any) -> None:
    """Give a typer parameter the deferred runtime parameter (other parameters are left alone)."""
    descriptor = getattr(param, "type_descriptor", None)
    if RuntimeParam is not None and isinstance(descriptor, TypeDescriptor) \
            and getattr(param, "_runtime_param", False) is None:
        param._runtime_param = _Deferred(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
