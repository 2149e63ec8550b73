"""The safe expression language of reporting rules (design brief, section 4).

Expressions appear in rule files (`select`, `score`, feature `where` / `value`) and are
evaluated over Arrow record batches of the `episodes` or `steps` table. They are
tokenized and parsed by our own code (`_lexer`, `_parser`) into an immutable
tree, type-checked against an Arrow schema and compiled to vectorized
`pyarrow.compute` calls (`_check` types the tree, `_emit` compiles it; `json_get` in `_json`). Nothing is ever
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
quotes with the escapes \\\\ \\' \\" \\n \\t \\r \\0 \\uXXXX, raw strings `r'...'` that keep
every backslash (for regular expressions: `r'ANSWER:\\s*([A-D])'`), `true`/`True`,
`false`/`False`, `null`/`None`. List literals hold literals only (`kind in ['tool_call',
'action']`, `trial in [-1, 2]`); null is not allowed in them.

Lists: a list value is a list column or feature (`agg: list` / `set`), a list literal
(`['A', 'B', 'C']`, literals of one kind), `json_list(...)`,
`sort` / `distinct` of a list, or a comprehension
`[body for x in list if cond]` (the `if` part is optional; `x` names the item inside
body and cond, and other names are the row's columns). `x in list` / `x not in list`
test membership in a list value; `a == b` / `a != b` compare two lists as sequences
(same length, equal items in order) and `sort(a) == sort(b)` as multisets. List
operations are vectorized over the flattened items and have no
`pyarrow.compute.Expression` form (`to_arrow` refuses them; `prefilter` pushes the
other conjuncts of a filter).

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
are decoded), bool -> bool, lists -> list<normalized item type>. Timestamps, dates,
times and durations keep their types and support `is_null`, `coalesce`, `min`, `max`
and comparisons with each other; other types (structs, binary) only `is_null` and
`coalesce`. A list where a scalar is needed (or the reverse) is a type error.

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
    contains(s, p)           string, string -> bool; p may be any string expression
    startswith(s, p)         string, string -> bool   (`endswith(answer, 'ANSWER: ' +
    endswith(s, p)           string, string -> bool    task.target)`); a literal p runs
                             Arrow's kernel, a column-valued p the UDF
                             `rollout_cards.str_match` (see `_text`)
    len(x)                   string -> int64 (characters); list -> int64 (items)
    if(c, a, b)              bool, T, T -> T: a where c is true, b where false, null
                             where c is null; a and b must have the same type
                             (numbers promote)
    number(s)                string -> float64: decimal text ('12', ' -1.5e3 ') read
                             as a number, null when it is not one (no inf, nan, hex);
                             numbers pass through as float64
    regex_match(s, 'p')      string -> bool: RE2 pattern p matches somewhere in s
    regex_extract(s, 'p'[, g])  string -> string: group g (0-8, default 0 = the whole
                             match) of the leftmost match, null without a match ('' for
                             a group that did not take part)
    regex_replace(s, 'p', 'r')  string -> string: every match replaced by r (\\1 … \\9
                             insert groups)
                             Patterns are string literals compiled by RE2 when the
                             expression is parsed (linear time, no backreferences or
                             lookaround); a pattern RE2 rejects is an ExpressionError
    canonical(text)          string -> string: the JSON text with object keys sorted, no
                             whitespace and integral numbers as integers (1.0 -> 1), so
                             that equal JSON values give equal strings; null when text
                             is not JSON (NaN and Infinity are not JSON). UDF
                             `rollout_cards.canonical`.
    json_list(text, k, ...)  string -> list<string>: the JSON array at the key path
                             (no keys: the text itself), each item rendered as json_get
                             renders values; null when absent or not an array
    at(list, i)              list, int -> item: the item at index i (negative from the
                             end), null when out of range
    index_of(list, x)        list, item -> int64: position of the first item equal to x,
                             null when absent
    sort(list)               list -> list: items in ascending order, nulls last
    distinct(list)           list -> list: sorted, each value once, nulls dropped
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
                             of a batch once (see `_json`).

Limits: at most MAX_LENGTH (10,000) characters and MAX_DEPTH (64) levels of nesting.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from rollout_cards.errors import ExpressionError
from rollout_cards.expr._check import BOOL, FLOAT, INT, NULL, Checker, type_name
from rollout_cards.expr._emit import ArrayBackend, Emitter, ExpressionBackend, NotPushable
from rollout_cards.expr._lexer import ErrorFactory, tokenize
from rollout_cards.expr._parser import (
    FUNCTIONS,
    MAX_DEPTH,
    BoolOp,
    Column,
    Comprehension,
    Node,
    Parser,
)

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
        set_(self, "_names", frozenset(_free_names(root)))

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

        Every scalar construct maps to Arrow kernels (json_get, canonical and the
        column-valued substring tests to registered UDFs). List operations (comprehensions,
        json_list, sort, distinct, list equality, `in` over a list value) have no
        expression form: they raise ExpressionError here (see `pushable`); type errors
        raise exactly as `typecheck` does.
        """
        checker = Checker(schema, self._err)
        checker.check(self._root)
        try:
            return Emitter(ExpressionBackend(), checker, self._err).emit(self._root)
        except NotPushable as exc:
            raise self._err(
                f"{exc.what} cannot be part of a scan filter (list operations are evaluated "
                "on record batches); filter the rows after reading",
                0,
            ) from None

    def pushable(self, schema: pa.Schema) -> bool:
        """Whether `to_arrow(schema)` succeeds: every name is a column of `schema` and no
        list operation is used."""
        try:
            self.to_arrow(schema)
        except ExpressionError:
            return False
        return True

    def prefilter(self, schema: pa.Schema) -> pc.Expression | None:
        """A filter over the columns of `schema` that every row where this (boolean)
        expression is true passes: the whole expression when it is pushable, else the
        pushable operands of a top-level `and`; None when nothing can be pushed."""
        if self.pushable(schema):
            return self.to_arrow(schema)
        if not (isinstance(self._root, BoolOp) and self._root.op == "and"):
            return None
        parts = []
        for operand in self._root.operands:
            checker = Checker(schema, self._err)
            try:
                if checker.check(operand) != BOOL:
                    continue
                parts.append(Emitter(ExpressionBackend(), checker, self._err).emit(operand))
            except (ExpressionError, NotPushable):
                continue
        if not parts:
            return None
        out = parts[0]
        for part in parts[1:]:
            out = out & part
        return out


def _free_names(root: Node) -> set[str]:
    """Column names the tree reads (names bound by a comprehension are not columns)."""
    out: set[str] = set()
    stack: list[tuple[Node, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, bound = stack.pop()
        if isinstance(node, Column):
            if node.name not in bound:
                out.add(node.name)
        elif isinstance(node, Comprehension):
            stack.append((node.iterable, bound))
            inner = bound | {node.var}
            stack.append((node.body, inner))
            if node.cond is not None:
                stack.append((node.cond, inner))
        else:
            stack.extend((child, bound) for child in node.children())
    return out
