"""Errors across processes: a rule or card error raised on a Ray worker travels back as data
(its class name, message and place) and is raised on the driver as the same exception."""

from __future__ import annotations

import json
from typing import Any

from .. import errors
from ..errors import RolloutCardError

__all__ = ["error_row", "raise_remote"]

#: Error attributes carried from a worker (the place an error names).
_ATTRS = ("file", "key", "line", "expected", "actual", "expression", "column", "reason")


def error_row(exc: RolloutCardError) -> dict[str, Any]:
    """`exc` as data: {kind, message, attrs (JSON)}."""
    attrs = {a: getattr(exc, a) for a in _ATTRS if isinstance(getattr(exc, a, None), str | int)}
    return {"kind": type(exc).__name__, "message": str(exc), "attrs": json.dumps(attrs)}


def raise_remote(row: dict[str, Any]) -> None:
    """Raise, on the driver, the error a worker returned as data (same class and message)."""
    cls = getattr(errors, row["kind"], None)
    if not (isinstance(cls, type) and issubclass(cls, RolloutCardError)):
        cls = RolloutCardError
    exc = cls.__new__(cls)
    Exception.__init__(exc, row["message"])
    exc.__dict__.update(json.loads(row["attrs"] or "{}"))
    raise exc
