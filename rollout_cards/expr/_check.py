"""Type checking of rule expressions: `Checker` infers an Arrow type for every node of a
parsed tree (private to `rollout_cards.expr`; see its docstring for the language)."""

from __future__ import annotations

import difflib

import pyarrow as pa

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
)
from rollout_cards.expr._parser import Literal as Lit

__all__ = ["BOOL", "FLOAT", "INT", "NULL", "NUMERIC", "STR", "Checker", "kind_of", "numeric_result", "type_name"]

#: How many column names an "unknown column" error lists before abbreviating.
_MAX_LISTED = 30

NULL, BOOL, INT, FLOAT, STR = pa.null(), pa.bool_(), pa.int64(), pa.float64(), pa.string()
NUMERIC = frozenset({"int", "float", "bool"})


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


def kind_of(t: pa.DataType) -> str:
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
    k = kind_of(t.value_type)
    return "number" if k in NUMERIC else k


def _temporal_compatible(a: pa.DataType, b: pa.DataType) -> bool:
    if a == b:
        return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    for family in (pa.types.is_date, pa.types.is_time, pa.types.is_duration):
        if family(a) and family(b):
            return True
    return False


def numeric_result(*types: pa.DataType) -> pa.DataType:
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
            if kind_of(t) not in (*NUMERIC, "null"):
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
        lk, rk = kind_of(lt), kind_of(rt)
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
        numeric = (*NUMERIC, "null")
        if lk in numeric and rk in numeric:
            return FLOAT if node.op == "/" else numeric_result(lt, rt)
        raise self.err(f"cannot apply '{node.op}' to {type_name(lt)} and {type_name(rt)}", node.pos)

    def compare(self, node: Compare) -> pa.DataType:
        lt, rt = self.check(node.left), self.check(node.right)
        lk, rk = kind_of(lt), kind_of(rt)
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
            (lk in NUMERIC and rk in NUMERIC)
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
        k = kind_of(t)
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
        if kind_of(ct) != "list":
            raise self.err(
                f"the right side of '{op}' must be a list (a list literal, a list feature, "
                f"json_list(...) or a comprehension), got {type_name(ct)}",
                node.container.pos,
            )
        k = kind_of(t)
        ik = _item_kind(ct)
        if k != "null" and ik != "null" and ("number" if k in NUMERIC else k) != ik:
            raise self.err(
                f"cannot look for {type_name(t)} in {type_name(ct)} with '{op}'", node.pos
            )
        return BOOL

    def comprehension(self, node: Comprehension) -> pa.DataType:
        it = self.check(node.iterable)
        if kind_of(it) != "list":
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
        if kind_of(body) in ("list", "null", "other"):
            raise self.err(
                f"the items of a comprehension must be scalars, got {type_name(body)}",
                node.body.pos,
            )
        return pa.list_(body)

    def unify(self, name: str, args: tuple[Node, ...], types: list[pa.DataType]) -> pa.DataType:
        known = [(a, t) for a, t in zip(args, types, strict=True) if t != NULL]
        if not known:
            return NULL
        kinds = {kind_of(t) for _, t in known}
        if kinds <= NUMERIC:
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
            if kind_of(types[i]) not in (*kinds, "null"):
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
            if NULL not in (a, b) and a != b and not {kind_of(a), kind_of(b)} <= NUMERIC:
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
            if kind_of(types[0]) == "list" and kind_of(types[0].value_type) == "other":
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
            need(0, "string", *NUMERIC, what="a string or a number")
            return FLOAT
        if name == "json_list":
            need(0, "string", what="JSON text (a string)")
            return pa.list_(STR)
        if name in ("lower", "upper", "json_get", "canonical"):
            what = "JSON text (a string)" if name in ("json_get", "canonical") else "a string"
            need(0, "string", what=what)
            return STR
        if name in ("abs", "round"):
            need(0, *NUMERIC, what="a number")
            return FLOAT if types[0] == FLOAT else INT
        if name in ("min", "max"):
            result = self.unify(name, args, types)
            if kind_of(result) in ("other", "list"):
                raise self.err(f"{name}() does not support {type_name(result)}", node.pos)
            return INT if result == BOOL else result
        raise AssertionError(name)  # pragma: no cover
