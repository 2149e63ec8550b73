"""Type checking and compilation of rule expressions to Arrow kernels.

Private to `rollout_cards.rules.expressions` (see its docstring for the language).
`Checker` infers a type for every node of a parsed tree; `Emitter` turns the checked
tree into `pyarrow.compute` calls on a backend: `ArrayBackend` computes over a
RecordBatch / Table, `ExpressionBackend` builds a `pyarrow.compute.Expression`. Both
go through the same code, so `evaluate` and `to_arrow` cannot disagree.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rollout_cards.errors import ExpressionError
from rollout_cards.rules import _expr_json
from rollout_cards.rules._expr_lexer import ErrorFactory
from rollout_cards.rules._expr_parser import (
    Binary,
    BoolOp,
    Call,
    Column,
    Compare,
    InList,
    Neg,
    Node,
    Not,
)
from rollout_cards.rules._expr_parser import Literal as Lit

__all__ = ["ArrayBackend", "Checker", "Emitter", "ExpressionBackend", "type_name"]

#: How many column names an "unknown column" error lists before abbreviating.
_MAX_LISTED = 30

NULL, BOOL, INT, FLOAT, STR = pa.null(), pa.bool_(), pa.int64(), pa.float64(), pa.string()
_NUMERIC = frozenset({"int", "float", "bool"})

# ------------------------------------------------------------------------- types


def _is_string(t: pa.DataType) -> bool:
    is_view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    return (
        pa.types.is_string(t) or pa.types.is_large_string(t) or (is_view is not None and is_view(t))
    )


def _canonical(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _canonical(t.value_type)
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_integer(t):
        return INT
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return FLOAT
    if _is_string(t):
        return STR
    if pa.types.is_null(t):
        return NULL
    return t


def _kind(t: pa.DataType) -> str:
    if t == NULL:
        return "null"
    if t == BOOL:
        return "bool"
    if t == INT:
        return "int"
    if t == FLOAT:
        return "float"
    if t == STR:
        return "string"
    if pa.types.is_temporal(t):
        return "temporal"
    return "other"


def type_name(t: pa.DataType) -> str:
    return {FLOAT: "float64", BOOL: "bool"}.get(t, str(t))


def _temporal_compatible(a: pa.DataType, b: pa.DataType) -> bool:
    if a == b:
        return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    for family in (pa.types.is_date, pa.types.is_time, pa.types.is_duration):
        if family(a) and family(b):
            return True
    return False


def _numeric_result(*types: pa.DataType) -> pa.DataType:
    """int64 or float64 for numeric/bool/null operands."""
    return FLOAT if any(t == FLOAT for t in types) else INT


def _fmt_list(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    if len(names) > _MAX_LISTED:
        shown += f", … ({len(names) - _MAX_LISTED} more)"
    return shown


class Checker:
    """Infers the type of every node; `types` maps id(node) to its type."""

    def __init__(self, schema: pa.Schema, err: ErrorFactory):
        self.schema = schema
        self.err = err
        self.types: dict[int, pa.DataType] = {}
        self.sources: dict[str, pa.DataType] = {}

    def check(self, node: Node) -> pa.DataType:
        t = self._check(node)
        self.types[id(node)] = t
        return t

    def type_of(self, node: Node) -> pa.DataType:
        return self.types[id(node)]

    def _check(self, node: Node) -> pa.DataType:
        if isinstance(node, Lit):
            v = node.value
            if v is None:
                return NULL
            return {bool: BOOL, int: INT, float: FLOAT, str: STR}[type(v)]
        if isinstance(node, Column):
            return self.column(node)
        if isinstance(node, Neg):
            t = self.check(node.operand)
            if _kind(t) not in (*_NUMERIC, "null"):
                raise self.err(f"cannot apply unary '-' to {type_name(t)}", node.pos)
            return FLOAT if t == FLOAT else INT
        if isinstance(node, Not):
            t = self.check(node.operand)
            if t not in (BOOL, NULL):
                raise self.err(f"'not' needs a boolean operand, got {type_name(t)}", node.pos)
            return BOOL
        if isinstance(node, BoolOp):
            for operand in node.operands:
                t = self.check(operand)
                if t not in (BOOL, NULL):
                    raise self.err(
                        f"'{node.op}' needs boolean operands, got {type_name(t)}", operand.pos
                    )
            return BOOL
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, InList):
            return self.in_list(node)
        if isinstance(node, Call):
            return self.call(node)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def column(self, node: Column) -> pa.DataType:
        name = node.name
        indices = self.schema.get_all_field_indices(name)
        if len(indices) > 1:
            raise self.err(f"column '{name}' appears more than once in the table", node.pos)
        if not indices:
            raise self.err(self.unknown_column_message(name), node.pos)
        source = self.schema.field(indices[0]).type
        self.sources[name] = source
        return _canonical(source)

    def unknown_column_message(self, name: str) -> str:
        names = sorted(self.schema.names)
        if not names:
            return f"unknown column '{name}'; the table has no columns"
        message = f"unknown column '{name}'; available columns: {_fmt_list(names)}"
        same_case = [c for c in names if c.lower() == name.lower()]
        close = same_case or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        if close:
            message += f"; did you mean {' or '.join(repr(c) for c in close)}?"
        parts = name.split(".")
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in names:
                message += (
                    f" ('{name}' is one column name: dots never access attributes "
                    f"or fields of '{prefix}')"
                )
                break
        if name.lower() in ("and", "or", "not", "in", "true", "false", "null", "none"):
            message += " (keywords are lower-case)"
        return message

    def binary(self, node: Binary) -> pa.DataType:
        lt, rt = self.check(node.left), self.check(node.right)
        lk, rk = _kind(lt), _kind(rt)
        if node.op == "+" and "string" in (lk, rk):
            if lk in ("string", "null") and rk in ("string", "null"):
                return STR
            raise self.err(
                f"cannot apply '+' to {type_name(lt)} and {type_name(rt)} "
                "(a string can only be added to a string)",
                node.pos,
            )
        numeric = (*_NUMERIC, "null")
        if lk in numeric and rk in numeric:
            return FLOAT if node.op == "/" else _numeric_result(lt, rt)
        raise self.err(f"cannot apply '{node.op}' to {type_name(lt)} and {type_name(rt)}", node.pos)

    def compare(self, node: Compare) -> pa.DataType:
        lt, rt = self.check(node.left), self.check(node.right)
        lk, rk = _kind(lt), _kind(rt)
        if "null" in (lk, rk):
            hint = "not is_null(x)" if node.op == "!=" else "is_null(x)"
            raise self.err(
                f"comparing with null using '{node.op}' is always null; use {hint}", node.pos
            )
        if (
            (lk in _NUMERIC and rk in _NUMERIC)
            or lk == rk == "string"
            or (lk == rk == "temporal" and _temporal_compatible(lt, rt))
        ):
            return BOOL
        raise self.err(
            f"cannot compare {type_name(lt)} with {type_name(rt)} using '{node.op}'", node.pos
        )

    def in_list(self, node: InList) -> pa.DataType:
        t = self.check(node.operand)
        k = _kind(t)
        op = "not in" if node.negate else "in"
        if k in ("temporal", "other"):
            raise self.err(f"'{op}' does not support {type_name(t)}", node.pos)
        for item in node.items:
            ik = "string" if isinstance(item.value, str) else "number"
            if k == "null":
                continue
            if (k == "string") != (ik == "string"):
                raise self.err(
                    f"cannot compare {type_name(t)} with {type_name(self.check(item))} in '{op}' list",
                    item.pos,
                )
        return BOOL

    def unify(self, name: str, args: tuple[Node, ...], types: list[pa.DataType]) -> pa.DataType:
        known = [(a, t) for a, t in zip(args, types, strict=True) if t != NULL]
        if not known:
            return NULL
        kinds = {_kind(t) for _, t in known}
        if kinds <= _NUMERIC:
            if "float" in kinds:
                return FLOAT
            return BOOL if kinds == {"bool"} else INT
        first_arg, first = known[0]
        for arg, t in known[1:]:
            if t != first:
                raise self.err(
                    f"{name}() arguments must have compatible types, got {type_name(first)} "
                    f"and {type_name(t)}",
                    arg.pos,
                )
        return first

    def call(self, node: Call) -> pa.DataType:
        name, args = node.name, node.args
        types = [self.check(a) for a in args]

        def need(i: int, *kinds: str, what: str) -> None:
            if _kind(types[i]) not in (*kinds, "null"):
                raise self.err(f"{name}() expects {what}, got {type_name(types[i])}", args[i].pos)

        if name == "is_null":
            return BOOL
        if name == "coalesce":
            return self.unify(name, args, types)
        if name in ("lower", "upper", "contains", "startswith", "endswith", "len", "json_get"):
            need(0, "string", what="a string")
            return {"lower": STR, "upper": STR, "len": INT, "json_get": STR}.get(name, BOOL)
        if name in ("abs", "round"):
            need(0, *_NUMERIC, what="a number")
            return FLOAT if types[0] == FLOAT else INT
        if name in ("min", "max"):
            result = self.unify(name, args, types)
            if _kind(result) in ("other",):
                raise self.err(f"{name}() does not support {type_name(result)}", node.pos)
            return INT if result == BOOL else result
        raise AssertionError(name)  # pragma: no cover


# -------------------------------------------------------------------- compilation


class ArrayBackend:
    """Runs kernels on the columns of a RecordBatch or Table."""

    def __init__(self, data: pa.RecordBatch | pa.Table):
        self.data = data

    def column(self, name: str) -> Any:
        return self.data.column(name)

    def literal(self, value: Any, t: pa.DataType) -> Any:
        return pa.scalar(value, t)

    def call(self, function: str, args: list[Any], options: Any = None) -> Any:
        return pc.call_function(function, args, options)

    def cast(self, x: Any, t: pa.DataType) -> Any:
        # int -> float64 rounds like Python's float(int) instead of failing above 2**53
        return pc.cast(x, t, safe=t != FLOAT)


class ExpressionBackend:
    """Builds a `pyarrow.compute.Expression` instead of computing."""

    def column(self, name: str) -> Any:
        return pc.field(name)

    def literal(self, value: Any, t: pa.DataType) -> Any:
        return pc.scalar(pa.scalar(value, t))

    def call(self, function: str, args: list[Any], options: Any = None) -> Any:
        # `Expression._call` is what every generated pyarrow.compute wrapper uses to
        # build expressions; calling it directly also reaches the registered UDF.
        return pc.Expression._call(function, list(args), options)

    def cast(self, x: Any, t: pa.DataType) -> Any:
        return x.cast(t, safe=t != FLOAT)


_ARITH = {"+": "add", "-": "subtract", "*": "multiply"}
_CMP = {
    "==": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


class Emitter:
    """Turns a type-checked tree into kernel calls on a backend."""

    def __init__(self, backend: Any, checker: Checker, err: ErrorFactory):
        self.b = backend
        self.checker = checker
        self.err = err

    def emit(self, node: Node) -> Any:
        try:
            return self._emit(node)
        except ExpressionError:
            raise
        except pa.ArrowException as exc:
            what = _describe(node)
            detail = str(exc).split("\n")[0]
            if "overflow" in detail.lower():
                raise self.err(f"integer overflow in {what}", node.pos) from exc
            raise self.err(f"cannot evaluate {what}: {detail}", node.pos) from exc

    def to(self, x: Any, have: pa.DataType, want: pa.DataType) -> Any:
        return x if have == want else self.b.cast(x, want)

    def typed(self, node: Node, want: pa.DataType) -> Any:
        """`node` as a value of type `want` (literals are converted here, not cast)."""
        have = self.checker.type_of(node)
        if isinstance(node, Lit) and have != want:
            if node.value is None:
                return self.b.literal(None, want)
            if want == FLOAT:
                return self.b.literal(float(node.value), FLOAT)
            if want == INT:
                return self.b.literal(int(node.value), INT)
        return self.to(self.emit(node), have, want)

    def nonzero(self, x: Any, t: pa.DataType, node: Node) -> Any:
        """x with zeros replaced by null (so that x / 0 and x % 0 are null)."""
        if isinstance(node, Lit) and node.value not in (0, None):
            return x
        b = self.b
        is_zero = b.call("equal", [x, b.literal(0, t)])
        return b.call("if_else", [is_zero, b.literal(None, t), x])

    def _emit(self, node: Node) -> Any:
        b, type_of = self.b, self.checker.type_of
        result = type_of(node)
        if isinstance(node, Lit):
            return b.literal(node.value, result)
        if isinstance(node, Column):
            source = self.checker.sources[node.name]
            return self.to(b.column(node.name), source, result)
        if isinstance(node, Neg):
            x = self.typed(node.operand, result)
            return b.call("negate_checked" if result == INT else "negate", [x])
        if isinstance(node, Not):
            return b.call("invert", [self.typed(node.operand, BOOL)])
        if isinstance(node, BoolOp):
            function = "and_kleene" if node.op == "and" else "or_kleene"
            acc = self.typed(node.operands[0], BOOL)
            for operand in node.operands[1:]:
                acc = b.call(function, [acc, self.typed(operand, BOOL)])
            return acc
        if isinstance(node, Binary):
            return self.binary(node, result)
        if isinstance(node, Compare):
            # Numbers of different types meet at int64 / float64; strings, booleans
            # and temporal values are compared as they are.
            lt, rt = type_of(node.left), type_of(node.right)
            if lt != rt and _kind(lt) in _NUMERIC and _kind(rt) in _NUMERIC:
                lt = rt = _numeric_result(lt, rt)
            left, right = self.typed(node.left, lt), self.typed(node.right, rt)
            return b.call(_CMP[node.op], [left, right])
        if isinstance(node, InList):
            return self.in_list(node)
        if isinstance(node, Call):
            return self.call(node, result)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def binary(self, node: Binary, result: pa.DataType) -> Any:
        b = self.b
        if result == STR:
            left, right = self.typed(node.left, STR), self.typed(node.right, STR)
            return b.call("binary_join_element_wise", [left, right, b.literal("", STR)])
        operand_type = FLOAT if node.op == "/" else result
        left = self.typed(node.left, operand_type)
        right = self.typed(node.right, operand_type)
        if node.op == "/":
            return b.call("divide", [left, self.nonzero(right, FLOAT, node.right)])
        if node.op == "%":
            return b.call("modulo", [left, self.nonzero(right, result, node.right)])
        function = _ARITH[node.op] + ("_checked" if result == INT else "")
        return b.call(function, [left, right])

    def in_list(self, node: InList) -> Any:
        b = self.b
        t = self.checker.type_of(node.operand)
        if t == NULL:
            return b.literal(None, BOOL)
        values = [item.value for item in node.items]
        if t == STR:
            vt = STR
        elif t == FLOAT or any(type(v) is float for v in values):
            vt = FLOAT
        elif t == BOOL and all(type(v) is bool for v in values):
            vt = BOOL
        else:
            vt = INT
        convert: Callable[[Any], Any] = {STR: str, FLOAT: float, BOOL: bool, INT: int}[vt]
        value_set = pa.array([convert(v) for v in values], vt)
        x = self.typed(node.operand, vt)
        found = b.call("is_in", [x], pc.SetLookupOptions(value_set, skip_nulls=True))
        found = b.call("if_else", [b.call("is_valid", [x]), found, b.literal(None, BOOL)])
        return b.call("invert", [found]) if node.negate else found

    def call(self, node: Call, result: pa.DataType) -> Any:
        b, name, args = self.b, node.name, node.args
        if name == "is_null":
            return b.call("is_null", [self.emit(args[0])])
        if name in ("coalesce", "min", "max"):
            if result == NULL:
                return b.literal(None, NULL)
            values = [self.typed(a, result) for a in args]
            if name == "coalesce":
                return b.call("coalesce", values)
            if _kind(result) == "temporal":
                # no element-wise min/max kernel for every temporal type: pairwise
                # if_else, which is null as soon as a comparison is
                keep_first = "less_equal" if name == "min" else "greater_equal"
                acc = values[0]
                for value in values[1:]:
                    acc = b.call("if_else", [b.call(keep_first, [acc, value]), acc, value])
                return acc
            options = pc.ElementWiseAggregateOptions(skip_nulls=False)
            return b.call(f"{name}_element_wise", values, options)
        if name in ("lower", "upper"):
            return b.call(f"utf8_{name}", [self.typed(args[0], STR)])
        if name in ("contains", "startswith", "endswith"):
            function = {
                "contains": "match_substring",
                "startswith": "starts_with",
                "endswith": "ends_with",
            }[name]
            pattern = args[1].value  # type: ignore[attr-defined]
            options = pc.MatchSubstringOptions(pattern)
            return b.call(function, [self.typed(args[0], STR)], options)
        if name == "len":
            return self.to(b.call("utf8_length", [self.typed(args[0], STR)]), pa.int32(), INT)
        if name == "abs":
            return b.call("abs_checked" if result == INT else "abs", [self.typed(args[0], result)])
        if name == "round":
            x = self.typed(args[0], result)
            digits = args[1].value if len(args) > 1 else 0  # type: ignore[attr-defined]
            if result == INT and digits >= 0:
                return x
            return b.call("round", [x], pc.RoundOptions(digits, "half_to_even"))
        if name == "json_get":
            function = _expr_json.ensure_registered()
            keys = [a.value for a in args[1:]]  # type: ignore[attr-defined]
            path = b.literal(json.dumps(keys), STR)
            return b.call(function, [self.typed(args[0], STR), path])
        raise AssertionError(name)  # pragma: no cover


def _describe(node: Node) -> str:
    if isinstance(node, Binary | Compare):
        return f"'{node.op}'"
    if isinstance(node, Neg):
        return "unary '-'"
    if isinstance(node, Call):
        return f"{node.name}()"
    if isinstance(node, Column):
        return f"column '{node.name}'"
    if isinstance(node, InList):
        return "'not in'" if node.negate else "'in'"
    return type(node).__name__.lower()
