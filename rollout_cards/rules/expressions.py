"""The safe expression language of reporting rules (design brief, section 4).

Expressions appear in rule files (`select`, `score`, feature `where` / `value`) and are
evaluated over Arrow record batches of the `episodes` or `steps` table. They are
tokenized and parsed by our own code (`_expr_lexer`, `_expr_parser`) into an immutable
tree, type-checked against an Arrow schema and compiled to vectorized
`pyarrow.compute` calls (`_expr_compile`; `json_get` in `_expr_json`). Nothing is ever
passed to `eval`, `exec`, `compile` or `ast`.

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
        same kernels as `evaluate`, so the results are identical. Every construct maps
        (json_get to a registered UDF), so it never returns None. A filter must be
        boolean: check with typecheck(schema, expect="boolean") first (the bare
        expression `null` has type null).
    Expression objects are immutable, hashable and compare equal by text.

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

from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from rollout_cards.errors import ExpressionError
from rollout_cards.rules._expr_compile import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    ArrayBackend,
    Checker,
    Emitter,
    ExpressionBackend,
    type_name,
)
from rollout_cards.rules._expr_lexer import ErrorFactory, tokenize
from rollout_cards.rules._expr_parser import FUNCTIONS, MAX_DEPTH, Column, Node, Parser, walk

__all__ = [
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Expression",
    "parse_expression",
]

#: Longest accepted expression, in characters.
MAX_LENGTH = 10_000

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
        checker = Checker(schema, self._err)
        result = checker.check(self._root)
        if expect == "boolean" and result != BOOL:
            raise self._err(f"expected a boolean expression, got {type_name(result)}", 0)
        if expect == "number" and result not in (BOOL, INT, FLOAT):
            raise self._err(
                f"expected a number or a boolean expression, got {type_name(result)}", 0
            )
        return result

    # -------------------------------------------------------------- evaluation
    def evaluate(self, data: pa.RecordBatch | pa.Table) -> pa.Array | pa.ChunkedArray:
        """Evaluate over every row of `data` (an Array for a batch, a ChunkedArray for a table)."""
        if not isinstance(data, pa.RecordBatch | pa.Table):
            raise TypeError(
                f"evaluate() needs a pyarrow RecordBatch or Table, not {type(data).__name__}"
            )
        checker = Checker(data.schema, self._err)
        result_type = checker.check(self._root)
        emitter = Emitter(ArrayBackend(data), checker, self._err)
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
        checker = Checker(schema, self._err)
        checker.check(self._root)
        out = Emitter(ExpressionBackend(), checker, self._err).emit(self._root)
        return out
