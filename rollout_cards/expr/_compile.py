"""Type checking and compilation of rule expressions to Arrow kernels.

Private to `rollout_cards.expr` (see its docstring for the language).
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rollout_cards.errors import ExpressionError
from rollout_cards.expr import _json as _expr_json
from rollout_cards.expr import _text as _expr_text
from rollout_cards.expr import segments as seg
from rollout_cards.expr._lexer import ErrorFactory
from rollout_cards.expr._parser import (
    Binary,
    BoolOp,
    Call,
    Column,
    Compare,
    Comprehension,
    InList,
    ListLiteral,
    Member,
    Neg,
    Node,
    Not,
    walk,
)
from rollout_cards.expr._parser import Literal as Lit

__all__ = [
    "ArrayBackend",
    "Checker",
    "Emitter",
    "ExpressionBackend",
    "NotPushable",
    "type_name",
]


class NotPushable(Exception):
    """A construct that has no `pyarrow.compute.Expression` form (list operations)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what

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
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(_canonical(t.value_type))
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
    if pa.types.is_list(t):
        return "list"
    return "other"


def type_name(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"list<{type_name(t.value_type)}>"
    return {FLOAT: "float64", BOOL: "bool"}.get(t, str(t))


def _item_kind(t: pa.DataType) -> str:
    """The kind of a list's items, numbers and booleans together."""
    k = _kind(t.value_type)
    return "number" if k in _NUMERIC else k


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
        self.sources: dict[int, pa.DataType] = {}
        self.scope: dict[str, pa.DataType] = {}

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
        if isinstance(node, Member):
            return self.member(node)
        if isinstance(node, Comprehension):
            return self.comprehension(node)
        if isinstance(node, ListLiteral):
            kinds = {"string" if isinstance(i.value, str) else "number" for i in node.items}
            if len(kinds) > 1:
                raise self.err("a list literal cannot mix strings and numbers", node.pos)
            return pa.list_(self.unify("list", node.items, [self.check(i) for i in node.items]))
        if isinstance(node, Call):
            return self.call(node)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def column(self, node: Column) -> pa.DataType:
        name = node.name
        if name in self.scope:
            self.sources[id(node)] = self.scope[name]
            return self.scope[name]
        indices = self.schema.get_all_field_indices(name)
        if len(indices) > 1:
            raise self.err(f"column '{name}' appears more than once in the table", node.pos)
        if not indices:
            raise self.err(self.unknown_column_message(name), node.pos)
        source = self.schema.field(indices[0]).type
        self.sources[id(node)] = source
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
        if "list" in (lk, rk):
            raise self.err(
                f"cannot apply '{node.op}' to {type_name(lt)} and {type_name(rt)} "
                "(lists support ==, !=, in, len, sort and distinct)",
                node.pos,
            )
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
        if lk == rk == "list" and node.op in ("==", "!="):
            ik, jk = _item_kind(lt), _item_kind(rt)
            if ik == jk or "null" in (ik, jk):
                return BOOL
        if (
            (lk in _NUMERIC and rk in _NUMERIC)
            or lk == rk == "string"
            or (lk == rk == "temporal" and _temporal_compatible(lt, rt))
        ):
            return BOOL
        hint = ""
        if "list" in (lk, rk):
            hint = (
                " (a list compares with a list: == and != as sequences, sort(a) == sort(b) "
                "as multisets; use 'x in list' for membership)"
            )
        raise self.err(
            f"cannot compare {type_name(lt)} with {type_name(rt)} using '{node.op}'{hint}",
            node.pos,
        )

    def in_list(self, node: InList) -> pa.DataType:
        t = self.check(node.operand)
        k = _kind(t)
        op = "not in" if node.negate else "in"
        if k in ("temporal", "other", "list"):
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

    def member(self, node: Member) -> pa.DataType:
        t = self.check(node.operand)
        ct = self.check(node.container)
        op = "not in" if node.negate else "in"
        if _kind(ct) != "list":
            raise self.err(
                f"the right side of '{op}' must be a list (a list literal, a list feature, "
                f"json_list(...) or a comprehension), got {type_name(ct)}",
                node.container.pos,
            )
        k = _kind(t)
        ik = _item_kind(ct)
        if k != "null" and ik != "null" and ("number" if k in _NUMERIC else k) != ik:
            raise self.err(
                f"cannot look for {type_name(t)} in {type_name(ct)} with '{op}'", node.pos
            )
        return BOOL

    def comprehension(self, node: Comprehension) -> pa.DataType:
        it = self.check(node.iterable)
        if _kind(it) != "list":
            raise self.err(
                f"a comprehension iterates over a list, got {type_name(it)}", node.iterable.pos
            )
        saved = self.scope.get(node.var)
        self.scope[node.var] = it.value_type
        try:
            body = self.check(node.body)
            if node.cond is not None:
                ct = self.check(node.cond)
                if ct not in (BOOL, NULL):
                    raise self.err(
                        f"the 'if' of a comprehension needs a boolean, got {type_name(ct)}",
                        node.cond.pos,
                    )
        finally:
            if saved is None:
                del self.scope[node.var]
            else:
                self.scope[node.var] = saved
        if _kind(body) in ("list", "null", "other"):
            raise self.err(
                f"the items of a comprehension must be scalars, got {type_name(body)}",
                node.body.pos,
            )
        return pa.list_(body)

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
        if name == "if":
            if types[0] not in (BOOL, NULL):
                raise self.err(
                    f"the condition of if() must be a boolean, got {type_name(types[0])}",
                    args[0].pos,
                )
            a, b = types[1], types[2]
            if NULL not in (a, b) and a != b and not {_kind(a), _kind(b)} <= _NUMERIC:
                raise self.err(
                    f"the branches of if() must have the same type, got {type_name(a)} "
                    f"and {type_name(b)}",
                    args[2].pos,
                )
            return self.unify(name, args[1:], types[1:])
        if name == "len":
            need(0, "string", "list", what="a string or a list")
            return INT
        if name == "at":
            need(0, "list", what="a list")
            need(1, "int", "bool", what="an integer index as its second argument")
            return types[0].value_type if types[0] != NULL else NULL
        if name == "index_of":
            need(0, "list", what="a list")
            return INT
        if name in ("sort", "distinct"):
            need(0, "list", what="a list")
            if _kind(types[0]) == "list" and _kind(types[0].value_type) == "other":
                raise self.err(f"{name}() cannot order {type_name(types[0])}", args[0].pos)
            return types[0] if types[0] != NULL else pa.list_(NULL)
        if name in ("contains", "startswith", "endswith"):
            need(0, "string", what="a string")
            need(1, "string", what="a string as its second argument")
            return BOOL
        if name in ("regex_match", "regex_extract", "regex_replace"):
            need(0, "string", what="a string")
            return BOOL if name == "regex_match" else STR
        if name == "number":
            need(0, "string", *_NUMERIC, what="a string or a number")
            return FLOAT
        if name == "json_list":
            need(0, "string", what="JSON text (a string)")
            return pa.list_(STR)
        if name in ("lower", "upper", "json_get", "canonical"):
            what = "JSON text (a string)" if name in ("json_get", "canonical") else "a string"
            need(0, "string", what=what)
            return STR
        if name in ("abs", "round"):
            need(0, *_NUMERIC, what="a number")
            return FLOAT if types[0] == FLOAT else INT
        if name in ("min", "max"):
            result = self.unify(name, args, types)
            if _kind(result) in ("other", "list"):
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

    def array(self, x: Any) -> pa.Array:
        """x as one Array of the data's length (scalars repeated, chunks combined)."""
        if isinstance(x, pa.Scalar):
            return pa.repeat(x, self.data.num_rows) if x.type != NULL else pa.nulls(
                self.data.num_rows
            )
        if isinstance(x, pa.ChunkedArray):
            return x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
        return x

    def list_op(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*(self.array(a) for a in args))

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

    def list_op(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotPushable(what)


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
            source = self.checker.sources[id(node)]
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
            if _kind(lt) == "list":
                return self.list_compare(node, lt, rt)
            if lt != rt and _kind(lt) in _NUMERIC and _kind(rt) in _NUMERIC:
                lt = rt = _numeric_result(lt, rt)
            left, right = self.typed(node.left, lt), self.typed(node.right, rt)
            return b.call(_CMP[node.op], [left, right])
        if isinstance(node, InList):
            return self.in_list(node)
        if isinstance(node, Member):
            return self.member(node)
        if isinstance(node, Comprehension):
            return self.comprehension(node, result)
        if isinstance(node, ListLiteral):
            convert = float if result.value_type == FLOAT else (lambda v: v)
            return b.literal([convert(i.value) for i in node.items], result)
        if isinstance(node, Call):
            return self.call(node, result)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    # ---- lists (vectorized over the flattened items; no Arrow expression form)
    def _common_lists(self, a: Node, b: Node) -> tuple[pa.DataType, pa.DataType]:
        at, bt = self.checker.type_of(a), self.checker.type_of(b)
        if at.value_type != bt.value_type and FLOAT in (at.value_type, bt.value_type):
            return pa.list_(FLOAT), pa.list_(FLOAT)
        return at, bt

    def list_compare(self, node: Compare, lt: pa.DataType, rt: pa.DataType) -> Any:
        want_l, want_r = self._common_lists(node.left, node.right)
        left, right = self.typed(node.left, want_l), self.typed(node.right, want_r)
        equal = self.b.list_op("list equality", seg.lists_equal, left, right)
        return self.b.call("invert", [equal]) if node.op == "!=" else equal

    def member(self, node: Member) -> Any:
        ct = self.checker.type_of(node.container)
        t = self.checker.type_of(node.operand)
        item = ct.value_type
        if item == NULL or t == NULL:
            return self.b.literal(None, BOOL)
        if FLOAT in (t, item) and t != item:
            item = FLOAT
        x = self.typed(node.operand, item)
        lists = self.typed(node.container, pa.list_(item))
        found = self.b.list_op("'in' over a list value", seg.list_contains, lists, x)
        return self.b.call("invert", [found]) if node.negate else found

    def comprehension(self, node: Comprehension, result: pa.DataType) -> Any:
        b = self.b
        if not isinstance(b, ArrayBackend):
            raise NotPushable("a list comprehension")
        lists = b.array(self.typed(node.iterable, self.checker.type_of(node.iterable)))
        items, parents = seg.flatten(lists)
        inner_nodes = [node.body, *(() if node.cond is None else (node.cond,))]
        names = {n.name for root in inner_nodes for n in walk(root) if isinstance(n, Column)}
        available = set(b.data.schema.names)
        take = pa.array(parents, pa.int64())
        columns = {
            name: b.array(b.column(name)).take(take)
            for name in sorted(names - {node.var})
            if name in available
        }
        columns[node.var] = items
        inner = ArrayBackend(pa.RecordBatch.from_pydict(columns))
        emitter = Emitter(inner, self.checker, self.err)
        values = inner.array(emitter.typed(node.body, result.value_type))
        if node.cond is not None:
            keep = pc.fill_null(inner.array(emitter.typed(node.cond, BOOL)), False)
            values = values.filter(keep)
            parents = parents[np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)]
        return seg.rebuild(values, parents, len(lists), pc.is_valid(lists))

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
        if vt == FLOAT:
            # is_in hashes bits: -0.0 would not find 0.0. Adding +0.0 maps -0.0 to 0.0 (IEEE 754).
            value_set = pa.array([convert(v) + 0.0 for v in values], vt)
            x = b.call("add", [x, b.literal(0.0, FLOAT)])
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
        if name == "if":
            if result == NULL:
                return b.literal(None, NULL)
            cond = self.typed(args[0], BOOL)
            return b.call("if_else", [cond, self.typed(args[1], result), self.typed(args[2], result)])
        if name in ("lower", "upper"):
            return b.call(f"utf8_{name}", [self.typed(args[0], STR)])
        if name in ("contains", "startswith", "endswith"):
            text = self.typed(args[0], STR)
            if isinstance(args[1], Lit) and isinstance(args[1].value, str):
                function = {
                    "contains": "match_substring",
                    "startswith": "starts_with",
                    "endswith": "ends_with",
                }[name]
                return b.call(function, [text], pc.MatchSubstringOptions(args[1].value))
            udf = _expr_text.ensure_registered()
            return b.call(udf, [text, self.typed(args[1], STR), b.literal(name, STR)])
        if name in ("regex_match", "regex_extract", "regex_replace"):
            return self.regex(node, b)
        if name == "number":
            return self.number(args[0])
        if name == "canonical":
            udf = _expr_json.ensure_canonical_registered()
            return b.call(udf, [self.typed(args[0], STR)])
        if name == "json_list":
            keys = [a.value for a in args[1:]]  # type: ignore[attr-defined]
            text = self.typed(args[0], STR)
            return b.list_op(
                "json_list()", lambda t: _expr_json.json_list_array(t, keys), text
            )
        if name == "at":
            lists = self.emit(args[0])
            return b.list_op("at()", seg.item_at, lists, self.typed(args[1], INT))
        if name == "index_of":
            lt = self.checker.type_of(args[0])
            item = lt.value_type
            xt = self.checker.type_of(args[1])
            if FLOAT in (item, xt) and item != xt:
                item = FLOAT
            lists = self.typed(args[0], pa.list_(item))
            return b.list_op("index_of()", seg.index_of, lists, self.typed(args[1], item))
        if name in ("sort", "distinct"):
            lists = self.typed(args[0], result)
            return b.list_op(
                f"{name}()", lambda x: seg.sort_lists(x, distinct=name == "distinct"), lists
            )
        if name == "len":
            t = self.checker.type_of(args[0])
            if _kind(t) == "list":
                return self.to(b.call("list_value_length", [self.emit(args[0])]), pa.int32(), INT)
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

    def regex(self, node: Call, b: Any) -> Any:
        text = self.typed(node.args[0], STR)
        pattern = node.args[1].value  # type: ignore[attr-defined]
        if node.name == "regex_match":
            return b.call("match_substring_regex", [text], pc.MatchSubstringOptions(pattern))
        if node.name == "regex_replace":
            repl = node.args[2].value  # type: ignore[attr-defined]
            return b.call(
                "replace_substring_regex", [text], pc.ReplaceSubstringOptions(pattern, repl)
            )
        group = node.args[2].value if len(node.args) > 2 else 0  # type: ignore[attr-defined]
        # The whole text replaced by the group of the leftmost match (as re.search);
        # texts without a match give null.
        # The match is group 1 of the wrapping pattern, the pattern's group g is g + 1.
        whole = pc.ReplaceSubstringOptions(f"(?s)^.*?({pattern}).*$", f"\\{group + 1}")
        found = b.call("match_substring_regex", [text], pc.MatchSubstringOptions(pattern))
        extracted = b.call("replace_substring_regex", [text], whole)
        return b.call("if_else", [found, extracted, b.literal(None, STR)])

    def number(self, arg: Node) -> Any:
        b = self.b
        t = self.checker.type_of(arg)
        if t != STR:
            return self.typed(arg, FLOAT)
        text = b.call("utf8_trim_whitespace", [self.typed(arg, STR)])
        valid = b.call("match_substring_regex", [text], pc.MatchSubstringOptions(_NUMBER_RE))
        safe = b.call("if_else", [valid, text, b.literal("0", STR)])
        value = b.call("cast", [safe], pc.CastOptions.safe(FLOAT))
        return b.call("if_else", [valid, value, b.literal(None, FLOAT)])


#: Decimal numbers as number() reads them (no inf/nan, no hex, no thousands separators).
_NUMBER_RE = r"^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$"


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
