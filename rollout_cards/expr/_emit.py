"""Compilation of type-checked rule expressions to Arrow kernels.

Private to `rollout_cards.expr` (see its docstring for the language). `Emitter` turns the
tree `Checker` typed into `pyarrow.compute` calls on a backend: `ArrayBackend` computes
over a RecordBatch / Table, `ExpressionBackend` builds a `pyarrow.compute.Expression`.
Both go through the same code, so `evaluate` and `to_arrow` cannot disagree.
"""

from __future__ import annotations

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
from rollout_cards.expr._check import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    NUMERIC,
    STR,
    Checker,
    kind_of,
    numeric_result,
)
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
from rollout_cards.expr._regex import named_groups

__all__ = ["ArrayBackend", "Emitter", "ExpressionBackend", "NotPushable"]


class NotPushable(Exception):
    """A construct that has no `pyarrow.compute.Expression` form (list operations)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


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
            if kind_of(lt) == "list":
                return self.list_compare(node, lt, rt)
            if lt != rt and kind_of(lt) in NUMERIC and kind_of(rt) in NUMERIC:
                lt = rt = numeric_result(lt, rt)
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
            if kind_of(result) == "temporal":
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
            if kind_of(t) == "list":
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
        named = named_groups(pattern)
        if named is not None:
            # One pass: the group of the leftmost match (as re.search), null without one.
            # The whole match is group g0 around the pattern (its flags stay inside it).
            renamed, _ = named
            groups = b.call("extract_regex", [text], pc.ExtractRegexOptions(f"(?P<g0>{renamed})"))
            return b.call("struct_field", [groups], pc.StructFieldOptions([group]))
        # The whole text replaced by the group of the leftmost match; texts without a match
        # give null. The match is group 1 of the wrapping pattern, the pattern's group g is
        # g + 1; only the wrapper's dots cross newlines.
        whole = pc.ReplaceSubstringOptions(f"^(?s:.*?)({pattern})(?s:.*)$", f"\\{group + 1}")
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
