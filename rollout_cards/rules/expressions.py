"""The safe expression language of reporting rules (design brief, section 4).

Expressions appear in rule files (`select`, `score`, feature `where` / `value`) and are
evaluated over Arrow record batches of the `episodes` or `steps` table. They are
tokenized and parsed by our own code (`_expr_lexer`, `_expr_parser`) into an immutable
tree, type-checked against an Arrow schema and compiled to vectorized
`pyarrow.compute` calls. Nothing is ever passed to `eval`, `exec`, `compile` or `ast`.

API
---
    parse_expression(text, *, file=None, key=None) -> Expression     raises ExpressionError

    Expression.text / .file / .key
    Expression.names                                   frozenset[str] of column names used
    Expression.typecheck(schema, *, expect=None) -> pa.DataType
        expect="boolean" requires a bool result (select / where),
        expect="number" requires int64, float64 or bool (score).
    Expression.evaluate(data) -> pa.Array (for a RecordBatch) | pa.ChunkedArray (Table)
        always of length data.num_rows and of the type `typecheck` returns.
    Expression.to_arrow(schema) -> pyarrow.compute.Expression
        for `Table.filter`, `pyarrow.dataset` filters and projections; built from the
        same kernels as `evaluate`, so the results are identical.

Every `ExpressionError` carries the expression text, the 1-based `column` of the
offending character (offset in the whole text; line breaks are displayed as spaces)
and the `file` and `key` given to `parse_expression`.

Grammar
-------
Precedence, loosest first (all binary operators are left-associative):

    1  or                          n-ary, Kleene logic (or_kleene)
    2  and                         n-ary, Kleene logic (and_kleene)
    3  not x                       prefix, Kleene logic
    4  == != < <= > >=  in  not in comparisons; chained as in Python:
                                   `0 < x <= 1` means `0 < x and x <= 1`;
                                   `in` / `not in` cannot be chained
    5  + -                         `+` also concatenates two strings
    6  * / %                       `/` is true division, `%` is Python's (floored) modulo
    7  -x                          prefix
    8  literals, names, f(...), ( ... )

Literals: integers (64-bit), floats (`1.5`, `.5`, `1e3`), strings in single or double
quotes with the escapes \\\\ \\' \\" \\n \\t \\r \\0 \\uXXXX, `true`/`True`, `false`/`False`,
`null`/`None`. List literals exist only on the right of `in` / `not in` and hold
literals only (`kind in ['tool_call', 'action']`, `trial in [-1, 2]`); null is not
allowed in them.

Names are column names. A name may contain dots and always names ONE column:
`score.reward` is the column "score.reward"; `a.__class__` is the (probably missing)
column "a.__class__" — there is no attribute access, indexing, keyword argument,
lambda, import or call of anything but the functions below. Column names with other
characters are written in backquotes: `` `meta.my-col` ``. Keywords (`and or not in
true false null True False None is lambda if else for import`) are case-sensitive;
use backquotes for a column with such a name.

Types and semantics
-------------------
Column types are normalized: any integer -> int64, floating point or decimal ->
float64, string / large_string / dictionary-encoded strings -> string (dictionaries
are decoded), bool -> bool. Timestamps, dates, times and durations keep their types
and support `is_null`, `coalesce`, `min`, `max` and comparisons with each other; other
types (lists, structs, binary) only `is_null` and `coalesce`.

* Everything propagates null: `x + null`, `lower(null)`, `null < 1`… are null.
  `and` / `or` / `not` use Kleene logic (`false and null` is false, `true or null`
  is true). `is_null(x)` is never null.
* Arithmetic on int64 stays int64 (overflow is an error, never a wrap-around);
  int with float gives float64; `/` always gives float64. Division or modulo by zero
  gives null. Booleans count as 0 / 1 in arithmetic and when compared with numbers,
  as in Python.
* Comparisons need both sides numeric (int, float, bool), both strings (ordered by
  code point), both booleans, or compatible temporal types. Comparing a string with
  a number, or anything with `null`, is a type error (use `is_null(x)`).
* `x in [...]` is `is_in`; it is null when x is null. `x not in [...]` is
  `not (x in [...])`.
* `and`, `or`, `not` need booleans: `not 'x'` and `1 and x` are type errors.

Functions
---------
    is_null(x)               any        -> bool (never null; NaN is not null)
    coalesce(a, b, ...)      T, T, ...  -> T    first non-null (numbers promote)
    lower(s), upper(s)       string     -> string
    contains(s, 'lit')       string     -> bool  (second argument: string literal)
    startswith(s, 'lit')     string     -> bool
    endswith(s, 'lit')       string     -> bool
    len(s)                   string     -> int64 (characters)
    abs(x)                   number     -> int64 | float64
    min(a, b, ...)           numbers, strings or equal temporal types -> same;
    max(a, b, ...)           null if any argument is null
    round(x[, n])            number     -> int64 for an int x, float64 for a float x;
                             n is an integer literal (default 0, may be negative);
                             ties go to the even neighbour as in Python
    json_get(text, k, ...)   string     -> string: the value at the key path
                             (k: string literals for object keys, integer literals
                             for array indexes, e.g. json_get(args, 'user', 'id');
                             'a.b' is the single key "a.b"). Strings come back as
                             they are, numbers as their JSON text ('3', '2.5'),
                             booleans as 'true'/'false', objects and arrays as
                             compact JSON; a missing key, invalid JSON or a JSON
                             null give null. Implemented as the pyarrow scalar UDF
                             `rollout_cards.json_get` that parses each distinct text
                             of a batch once (see `_expr_json`).

Limits: at most MAX_LENGTH (10,000) characters and MAX_DEPTH (64) levels of nesting.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from rollout_cards.errors import ExpressionError
from rollout_cards.rules import _expr_json
from rollout_cards.rules._expr_lexer import ErrorFactory, tokenize
from rollout_cards.rules._expr_parser import (
    FUNCTIONS,
    MAX_DEPTH,
    Binary,
    BoolOp,
    Call,
    Column,
    Compare,
    InList,
    Neg,
    Node,
    Not,
    Parser,
    walk,
)
from rollout_cards.rules._expr_parser import Literal as Lit

__all__ = [
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Expression",
    "parse_expression",
]

#: Longest accepted expression, in characters.
MAX_LENGTH = 10_000

#: How many column names an "unknown column" error lists before abbreviating.
_MAX_LISTED = 30

NULL, BOOL, INT, FLOAT, STR = pa.null(), pa.bool_(), pa.int64(), pa.float64(), pa.string()
_NUMERIC = frozenset({"int", "float", "bool"})

Expect = Literal["boolean", "number"]


def parse_expression(text: str, *, file: str | None = None, key: str | None = None) -> Expression:
    """Parse `text`; `file` and `key` (e.g. "rules/alt.yaml", "score") go into errors."""
    if not isinstance(text, str):
        raise ExpressionError(
            f"an expression must be a string, not {type(text).__name__} "
            '(quote it in YAML, e.g. score: "1")',
            expression=repr(text),
            file=file,
            key=key,
        )
    err = ErrorFactory(text, file, key)
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            f"expression is too long ({len(text):,} characters; the limit is {MAX_LENGTH:,})",
            expression=text,
            file=file,
            key=key,
        )
    try:
        root = Parser(tokenize(text, err), err).parse()
    except RecursionError:  # pragma: no cover - the depth limits prevent this
        raise err(f"expression is nested too deeply (more than {MAX_DEPTH} levels)") from None
    return Expression(text, root, file, key)


class Expression:
    """A parsed expression (immutable). Create with `parse_expression`."""

    __slots__ = ("_err", "_file", "_key", "_names", "_root", "_text")

    def __init__(self, text: str, root: Node, file: str | None, key: str | None):
        set_ = object.__setattr__
        set_(self, "_text", text)
        set_(self, "_root", root)
        set_(self, "_file", file)
        set_(self, "_key", key)
        set_(self, "_err", ErrorFactory(text, file, key))
        set_(
            self,
            "_names",
            frozenset(n.name for n in walk(root) if isinstance(n, Column)),
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Expression is immutable")

    @property
    def text(self) -> str:
        return self._text

    @property
    def file(self) -> str | None:
        return self._file

    @property
    def key(self) -> str | None:
        return self._key

    @property
    def names(self) -> frozenset[str]:
        """The column names the expression reads."""
        return self._names

    def __repr__(self) -> str:
        return f"Expression({self._text!r})"

    def __str__(self) -> str:
        return self._text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other._text == self._text

    def __hash__(self) -> int:
        return hash(("Expression", self._text))

    # ------------------------------------------------------------------ typing
    def typecheck(self, schema: pa.Schema, *, expect: Expect | None = None) -> pa.DataType:
        """The result type over `schema`; raises ExpressionError on any type error.

        Result types are normalized (int64, float64, string, bool, null, or the
        temporal / other type of a column).
        """
        if expect not in (None, "boolean", "number"):
            raise ValueError(f"expect must be None, 'boolean' or 'number', not {expect!r}")
        checker = _Checker(schema, self._err)
        result = checker.check(self._root)
        if expect == "boolean" and result != BOOL:
            raise self._err(f"expected a boolean expression, got {_tname(result)}", 0)
        if expect == "number" and result not in (BOOL, INT, FLOAT):
            raise self._err(f"expected a number or a boolean expression, got {_tname(result)}", 0)
        return result

    # -------------------------------------------------------------- evaluation
    def evaluate(self, data: pa.RecordBatch | pa.Table) -> pa.Array | pa.ChunkedArray:
        """Evaluate over every row of `data` (an Array for a batch, a ChunkedArray for a table)."""
        if not isinstance(data, pa.RecordBatch | pa.Table):
            raise TypeError(
                f"evaluate() needs a pyarrow RecordBatch or Table, not {type(data).__name__}"
            )
        checker = _Checker(data.schema, self._err)
        result_type = checker.check(self._root)
        emitter = _Emitter(_ArrayBackend(data), checker, self._err)
        out = emitter.emit(self._root)
        n = data.num_rows
        if isinstance(out, pa.Scalar):
            out = pa.repeat(out, n) if out.type != NULL else pa.nulls(n)
        if out.type != result_type:
            out = pc.cast(out, result_type)
        if isinstance(data, pa.Table) and isinstance(out, pa.Array):
            out = pa.chunked_array([out], result_type)
        elif isinstance(data, pa.RecordBatch) and isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        return out

    def to_arrow(self, schema: pa.Schema) -> pc.Expression:
        """A `pyarrow.compute.Expression` computing the same values (e.g. as a scan filter).

        Every construct of the language maps to Arrow kernels (json_get to the
        registered UDF), so this never gives up; it raises ExpressionError on
        type errors exactly as `typecheck` does.
        """
        checker = _Checker(schema, self._err)
        checker.check(self._root)
        out = _Emitter(_ExpressionBackend(), checker, self._err).emit(self._root)
        return out


# ------------------------------------------------------------------------- types


def _canonical(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _canonical(t.value_type)
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_integer(t):
        return INT
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return FLOAT
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
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


def _tname(t: pa.DataType) -> str:
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


class _Checker:
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
                raise self.err(f"cannot apply unary '-' to {_tname(t)}", node.pos)
            return FLOAT if t == FLOAT else INT
        if isinstance(node, Not):
            t = self.check(node.operand)
            if t not in (BOOL, NULL):
                raise self.err(f"'not' needs a boolean operand, got {_tname(t)}", node.pos)
            return BOOL
        if isinstance(node, BoolOp):
            for operand in node.operands:
                t = self.check(operand)
                if t not in (BOOL, NULL):
                    raise self.err(
                        f"'{node.op}' needs boolean operands, got {_tname(t)}", operand.pos
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
                f"cannot apply '+' to {_tname(lt)} and {_tname(rt)} "
                "(a string can only be added to a string)",
                node.pos,
            )
        numeric = (*_NUMERIC, "null")
        if lk in numeric and rk in numeric:
            return FLOAT if node.op == "/" else _numeric_result(lt, rt)
        raise self.err(f"cannot apply '{node.op}' to {_tname(lt)} and {_tname(rt)}", node.pos)

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
        raise self.err(f"cannot compare {_tname(lt)} with {_tname(rt)} using '{node.op}'", node.pos)

    def in_list(self, node: InList) -> pa.DataType:
        t = self.check(node.operand)
        k = _kind(t)
        op = "not in" if node.negate else "in"
        if k in ("temporal", "other"):
            raise self.err(f"'{op}' does not support {_tname(t)}", node.pos)
        for item in node.items:
            ik = "string" if isinstance(item.value, str) else "number"
            if k == "null":
                continue
            if (k == "string") != (ik == "string"):
                raise self.err(
                    f"cannot compare {_tname(t)} with {_tname(self.check(item))} in '{op}' list",
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
                    f"{name}() arguments must have compatible types, got {_tname(first)} "
                    f"and {_tname(t)}",
                    arg.pos,
                )
        return first

    def call(self, node: Call) -> pa.DataType:
        name, args = node.name, node.args
        types = [self.check(a) for a in args]

        def need(i: int, *kinds: str, what: str) -> None:
            if _kind(types[i]) not in (*kinds, "null"):
                raise self.err(f"{name}() expects {what}, got {_tname(types[i])}", args[i].pos)

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
                raise self.err(f"{name}() does not support {_tname(result)}", node.pos)
            return INT if result == BOOL else result
        raise AssertionError(name)  # pragma: no cover


# -------------------------------------------------------------------- compilation


class _ArrayBackend:
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


class _ExpressionBackend:
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


class _Emitter:
    """Turns a type-checked tree into kernel calls on a backend."""

    def __init__(self, backend: Any, checker: _Checker, err: ErrorFactory):
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
        return self.to(self.emit(node), self.checker.type_of(node), want)

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
