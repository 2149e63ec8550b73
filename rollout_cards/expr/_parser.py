"""Syntax tree and recursive-descent (precedence-climbing) parser of rule expressions.

See `rollout_cards.expr` for the language. This module only builds an
immutable tree; types and evaluation live in `expressions.py`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from rollout_cards.expr._lexer import ErrorFactory, Token

__all__ = [
    "FUNCTIONS",
    "MAX_DEPTH",
    "BoolOp",
    "Binary",
    "Call",
    "Column",
    "Compare",
    "Comprehension",
    "InList",
    "ListLiteral",
    "Literal",
    "Member",
    "Neg",
    "Node",
    "Not",
    "Parser",
    "walk",
]

#: Maximum nesting depth: of parentheses, calls and unary operators while parsing,
#: and of the syntax tree (a chain `a + b + c …` nests one level per operator;
#: `and`/`or` chains, chained comparisons and `in` lists do not).
MAX_DEPTH = 64

#: The callable functions: name -> (minimum, maximum or None) number of arguments.
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "abs": (1, 1),
    "at": (2, 2),
    "canonical": (1, 1),
    "coalesce": (2, None),
    "contains": (2, 2),
    "distinct": (1, 1),
    "endswith": (2, 2),
    "if": (3, 3),
    "index_of": (2, 2),
    "is_null": (1, 1),
    "json_get": (2, None),
    "json_list": (1, None),
    "len": (1, 1),
    "lower": (1, 1),
    "max": (2, None),
    "min": (2, None),
    "number": (1, 1),
    "regex_extract": (2, 3),
    "regex_match": (2, 2),
    "regex_replace": (3, 3),
    "round": (1, 2),
    "sort": (1, 1),
    "startswith": (2, 2),
    "upper": (1, 1),
}

#: Functions whose second argument is an RE2 regular expression (a string literal).
REGEX_FUNCTIONS = frozenset({"regex_match", "regex_extract", "regex_replace"})

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
_PREC_OR, _PREC_AND, _PREC_NOT, _PREC_CMP, _PREC_ADD, _PREC_MUL, _PREC_NEG = range(1, 8)

_UNSUPPORTED_WORDS = {
    "is": "'is' is not supported; use is_null(x) or not is_null(x)",
    "lambda": "'lambda' is not supported",
    "if": "conditional expressions are written if(condition, then, otherwise)",
    "else": "conditional expressions are written if(condition, then, otherwise)",
    "for": "'for' is only allowed in a list comprehension: [f(x) for x in list if cond]",
    "import": "'import' is not supported",
}


# --------------------------------------------------------------------------- nodes
# Every node has `pos` (0-based offset of its operator, name or first character)
# and `depth` (1 for a leaf). Nodes are immutable and may be shared (a chained
# comparison `a < b < c` shares `b`).


@dataclass(frozen=True, slots=True)
class Node:
    pos: int
    depth: int

    def children(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True, slots=True)
class Literal(Node):
    value: None | bool | int | float | str


@dataclass(frozen=True, slots=True)
class Column(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Neg(Node):
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True, slots=True)
class BoolOp(Node):
    op: str  # "and" | "or"
    operands: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.operands


@dataclass(frozen=True, slots=True)
class Binary(Node):
    op: str  # "+" | "-" | "*" | "/" | "%"
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, slots=True)
class Compare(Node):
    op: str  # "==" | "!=" | "<" | "<=" | ">" | ">="
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, slots=True)
class InList(Node):
    operand: Node
    items: tuple[Literal, ...]
    negate: bool

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True, slots=True)
class ListLiteral(Node):
    """A list of literals used as a value: `['A', 'B', 'C']`."""

    items: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class Member(Node):
    """`x in list` / `x not in list` where the list is a value (a column or function)."""

    operand: Node
    container: Node
    negate: bool

    def children(self) -> tuple[Node, ...]:
        return (self.operand, self.container)


@dataclass(frozen=True, slots=True)
class Comprehension(Node):
    """`[body for var in iterable if cond]`: body over the items of a list, filtered."""

    body: Node
    var: str
    iterable: Node
    cond: Node | None

    def children(self) -> tuple[Node, ...]:
        extra = () if self.cond is None else (self.cond,)
        return (self.iterable, self.body, *extra)


@dataclass(frozen=True, slots=True)
class Call(Node):
    name: str
    args: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.args


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree (iteratively, so that depth never matters)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children())


def _is_kw(tok: Token, word: str) -> bool:
    return tok.kind == "kw" and tok.value == word


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


# -------------------------------------------------------------------------- parser


class Parser:
    """Precedence climbing over the tokens of one expression.

    Precedence, loosest first: `or` < `and` < `not` < comparisons and `in` / `not in`
    < `+ -` < `* / %` < unary `-`.
    """

    def __init__(self, tokens: list[Token], err: ErrorFactory):
        self.tokens = tokens
        self.i = 0
        self.err = err
        self.nesting = 0

    # ---- helpers
    def peek(self, k: int = 0) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def at_op(self, *ops: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.value in ops

    def at_kw(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "kw" and tok.value in words

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise self.err(f"expression is nested too deeply (more than {MAX_DEPTH} levels)", pos)

    def leave(self) -> None:
        self.nesting -= 1

    def make(self, cls: type, pos: int, *fields: object, children: tuple[Node, ...]) -> Node:
        depth = 1 + max((c.depth for c in children), default=0)
        if depth > MAX_DEPTH:
            raise self.err(
                f"expression is nested too deeply (more than {MAX_DEPTH} levels); "
                "split long chains of operators",
                pos,
            )
        return cls(pos, depth, *fields)

    def unexpected(self, tok: Token, context: str = "") -> Exception:
        if tok.kind == "op" and tok.value == "=":
            return self.err("'=' is not an operator; use '==' to compare", tok.pos)
        if tok.kind == "kw" and tok.value in _UNSUPPORTED_WORDS:
            return self.err(_UNSUPPORTED_WORDS[tok.value], tok.pos)
        if tok.kind == "end":
            return self.err(f"unexpected end of expression{context}", tok.pos)
        if tok.kind == "op" and tok.value == ")":
            return self.err(f"unmatched ')'{context}", tok.pos)
        return self.err(f"unexpected {tok.describe()}{context}", tok.pos)

    # ---- grammar
    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise self.err("empty expression", 0)
        node = self.expr(_PREC_OR)
        tok = self.peek()
        if tok.kind != "end":
            hint = ""
            if tok.kind in ("name", "int", "float", "str") or (
                tok.kind == "kw" and tok.value in ("true", "false", "True", "False", "null", "None")
            ):
                hint = " (missing operator?)"
            elif tok.kind == "kw" and tok.value == "not":
                hint = " ('not' goes before its operand, or write 'not in')"
            raise self.unexpected(tok, hint)
        return node

    def binary_prec(self, tok: Token) -> int | None:
        if tok.kind == "kw":
            if tok.value == "or":
                return _PREC_OR
            if tok.value == "and":
                return _PREC_AND
            if tok.value == "in":
                return _PREC_CMP
            if tok.value == "not" and _is_kw(self.peek(1), "in"):
                return _PREC_CMP
            if tok.value == "is":
                raise self.err(_UNSUPPORTED_WORDS["is"], tok.pos)
            return None
        if tok.kind == "op":
            if tok.value in _COMPARISONS:
                return _PREC_CMP
            if tok.value in ("+", "-"):
                return _PREC_ADD
            if tok.value in ("*", "/", "%"):
                return _PREC_MUL
        return None

    def expr(self, min_prec: int) -> Node:
        left = self.prefix(min_prec)
        while True:
            tok = self.peek()
            prec = self.binary_prec(tok)
            if prec is None or prec < min_prec:
                return left
            if prec in (_PREC_OR, _PREC_AND):
                operands = [left]
                while self.at_kw(tok.value):
                    self.advance()
                    operands.append(self.expr(prec + 1))
                left = self.make(
                    BoolOp, tok.pos, tok.value, tuple(operands), children=tuple(operands)
                )
            elif prec == _PREC_CMP:
                left = self.comparison(left)
            else:
                self.advance()
                right = self.expr(prec + 1)
                left = self.make(Binary, tok.pos, tok.value, left, right, children=(left, right))

    def comparison(self, left: Node) -> Node:
        parts: list[tuple[str, int, Node | tuple[Literal, ...]]] = []
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.value in _COMPARISONS:
                self.advance()
                parts.append((tok.value, tok.pos, self.expr(_PREC_ADD)))
            elif tok.kind == "kw" and tok.value == "in":
                self.advance()
                parts.append(("in", tok.pos, self.in_list()))
            elif tok.kind == "kw" and tok.value == "not" and _is_kw(self.peek(1), "in"):
                self.advance()
                self.advance()
                parts.append(("not in", tok.pos, self.in_list()))
            elif tok.kind == "kw" and tok.value == "is":
                raise self.err(_UNSUPPORTED_WORDS["is"], tok.pos)
            else:
                break
        if len(parts) > 1:
            for op, pos, _ in parts:
                if op in ("in", "not in"):
                    raise self.err(
                        f"'{op}' cannot be chained with other comparisons; add parentheses", pos
                    )
        nodes: list[Node] = []
        for op, pos, right in parts:
            if isinstance(right, tuple):
                node = self.make(InList, pos, left, right, op == "not in", children=(left,))
            elif op in ("in", "not in"):
                node = self.make(
                    Member, pos, left, right, op == "not in", children=(left, right)
                )
            else:
                node = self.make(Compare, pos, op, left, right, children=(left, right))
                left = right
            nodes.append(node)
        if len(nodes) == 1:
            return nodes[0]
        return self.make(BoolOp, parts[0][1], "and", tuple(nodes), children=tuple(nodes))

    def in_list(self) -> tuple[Literal, ...] | Node:
        start = self.peek()
        if not self.at_op("[") or self.is_comprehension():
            # a list value: a column, a feature, a function or a comprehension
            return self.expr(_PREC_ADD)
        self.advance()
        items: list[Literal] = []
        while not self.at_op("]"):
            tok = self.advance()
            neg = None
            if tok.kind == "op" and tok.value == "-" and self.peek().kind in ("int", "float"):
                neg, tok = tok, self.advance()
            if tok.kind in ("int", "float"):
                value = -tok.value if neg else tok.value  # type: ignore[operator]
                items.append(self.literal(value, (neg or tok).pos))
            elif tok.kind == "str":
                items.append(self.literal(tok.value, tok.pos))  # type: ignore[arg-type]
            elif tok.kind == "kw" and tok.value in ("true", "True", "false", "False"):
                items.append(self.literal(tok.value in ("true", "True"), tok.pos))
            elif tok.kind == "kw" and tok.value in ("null", "None"):
                raise self.err(
                    "null cannot be an item of an 'in' list (x in [..] is null when x is null); "
                    "use is_null(x)",
                    tok.pos,
                )
            elif tok.kind == "end":
                raise self.err("unterminated list: missing ']'", start.pos)
            else:
                raise self.err(
                    "items of an 'in' list must be literals (numbers, strings, true, false), "
                    f"found {tok.describe()}",
                    tok.pos,
                )
            if self.at_op(","):
                self.advance()
            elif not self.at_op("]"):
                tok = self.peek()
                if tok.kind == "end":
                    raise self.err("unterminated list: missing ']'", start.pos)
                raise self.unexpected(tok, " in list (expected ',' or ']')")
        self.advance()
        return tuple(items)

    def literal(self, value: None | bool | int | float | str, pos: int) -> Literal:
        if type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
            raise self.err(f"integer {value} does not fit in 64 bits", pos)
        return Literal(pos, 1, value)

    def prefix(self, min_prec: int) -> Node:
        tok = self.peek()
        if tok.kind == "kw" and tok.value == "not":
            if _is_kw(self.peek(1), "in"):
                raise self.err("'not in' needs a left operand", tok.pos)
            if min_prec > _PREC_NOT:
                raise self.err("'not' cannot appear here; put it in parentheses: (not …)", tok.pos)
            self.advance()
            self.enter(tok.pos)
            operand = self.expr(_PREC_NOT)
            self.leave()
            return self.make(Not, tok.pos, operand, children=(operand,))
        if tok.kind == "op" and tok.value == "-":
            self.advance()
            nxt = self.peek()
            if nxt.kind in ("int", "float"):
                self.advance()
                return self.postfix(self.literal(-nxt.value, tok.pos))  # type: ignore[operator]
            self.enter(tok.pos)
            operand = self.expr(_PREC_NEG)
            self.leave()
            return self.make(Neg, tok.pos, operand, children=(operand,))
        if tok.kind == "op" and tok.value == "+":
            raise self.err("unary '+' is not supported", tok.pos)
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.value == "(":
            raise self.err("only the listed functions can be called", tok.pos)
        if tok.kind == "op" and tok.value == "[":
            raise self.err("indexing is not supported", tok.pos)
        return node

    def primary(self) -> Node:
        tok = self.advance()
        if tok.kind in ("int", "float", "str"):
            return self.literal(tok.value, tok.pos)  # type: ignore[arg-type]
        if tok.kind == "kw":
            if tok.value == "if" and self.at_op("("):
                return self.call(tok)
            if tok.value in ("true", "True"):
                return self.literal(True, tok.pos)
            if tok.value in ("false", "False"):
                return self.literal(False, tok.pos)
            if tok.value in ("null", "None"):
                return self.literal(None, tok.pos)
            if tok.value in _UNSUPPORTED_WORDS:
                raise self.err(_UNSUPPORTED_WORDS[tok.value], tok.pos)
            raise self.err(f"expected an operand, found '{tok.value}'", tok.pos)
        if tok.kind == "name":
            if self.at_op("("):
                return self.call(tok)
            return Column(tok.pos, 1, tok.value)  # type: ignore[arg-type]
        if tok.kind == "op" and tok.value == "(":
            self.enter(tok.pos)
            inner = self.expr(_PREC_OR)
            self.leave()
            if not self.at_op(")"):
                raise self.unexpected(
                    self.peek(), f" (expected ')' to close the '(' at column {tok.pos + 1})"
                )
            self.advance()
            return inner
        if tok.kind == "op" and tok.value == "[":
            self.i -= 1
            if self.is_comprehension():
                return self.comprehension()
            items = self.in_list()
            assert isinstance(items, tuple)
            return ListLiteral(tok.pos, 1, items)
        if tok.kind == "end":
            raise self.err("unexpected end of expression (an operand is missing)", tok.pos)
        raise self.unexpected(tok, " (expected an operand)")

    def is_comprehension(self) -> bool:
        """At '[': does a 'for' follow at bracket depth 1 (a comprehension, not a literal)?"""
        depth = 0
        for tok in self.tokens[self.i :]:
            if tok.kind == "op" and tok.value in ("[", "("):
                depth += 1
            elif tok.kind == "op" and tok.value in ("]", ")"):
                depth -= 1
                if depth == 0:
                    return False
            elif tok.kind == "kw" and tok.value == "for" and depth == 1:
                return True
            elif tok.kind == "end":
                return False
        return False

    def comprehension(self) -> Node:
        open_tok = self.advance()
        self.enter(open_tok.pos)
        body = self.expr(_PREC_OR)
        if not self.at_kw("for"):
            raise self.unexpected(self.peek(), " in the comprehension (expected 'for')")
        self.advance()
        var = self.advance()
        if var.kind != "name" or "." in str(var.value):
            raise self.err("expected a plain name after 'for', e.g. [f(x) for x in list]", var.pos)
        if not self.at_kw("in"):
            raise self.unexpected(self.peek(), " (expected 'in' after the name)")
        self.advance()
        iterable = self.expr(_PREC_ADD)
        cond = None
        if self.at_kw("if"):
            self.advance()
            cond = self.expr(_PREC_OR)
        if not self.at_op("]"):
            raise self.unexpected(
                self.peek(), f" (expected ']' to close the '[' at column {open_tok.pos + 1})"
            )
        self.advance()
        self.leave()
        children = (iterable, body) if cond is None else (iterable, body, cond)
        return self.make(
            Comprehension, open_tok.pos, body, str(var.value), iterable, cond, children=children
        )

    def call(self, name_tok: Token) -> Node:
        name = str(name_tok.value)
        pos = name_tok.pos
        if name not in FUNCTIONS:
            head, _, last = name.rpartition(".")
            if head and last in FUNCTIONS:
                raise self.err(
                    f"method calls are not supported; write {last}({head}) instead of {name}()", pos
                )
            if head:
                raise self.err(
                    f"'{name}' is a column name and cannot be called; "
                    f"functions: {', '.join(sorted(FUNCTIONS))}",
                    pos,
                )
            raise self.err(
                f"unknown function '{name}'; available functions: {', '.join(sorted(FUNCTIONS))}"
                + _suggest(name, list(FUNCTIONS)),
                pos,
            )
        open_tok = self.advance()
        self.enter(open_tok.pos)
        args: list[Node] = []
        while not self.at_op(")"):
            args.append(self.expr(_PREC_OR))
            if self.at_op("="):
                raise self.err("keyword arguments are not supported", self.peek().pos)
            if self.at_op(","):
                self.advance()
            elif not self.at_op(")"):
                raise self.unexpected(
                    self.peek(), f" in the call of {name}() (expected ',' or ')')"
                )
        self.advance()
        self.leave()
        lo, hi = FUNCTIONS[name]
        if len(args) < lo or (hi is not None and len(args) > hi):
            if hi is None:
                wanted = f"at least {lo} arguments"
            elif lo == hi:
                wanted = f"{lo} argument{'s' if lo > 1 else ''}"
            else:
                wanted = f"{lo} or {hi} arguments"
            raise self.err(f"{name}() takes {wanted} ({len(args)} given)", pos)
        self.check_literal_args(name, args)
        return self.make(Call, pos, name, tuple(args), children=tuple(args))

    def check_literal_args(self, name: str, args: list[Node]) -> None:
        def is_lit(node: Node, *types: type) -> bool:
            return isinstance(node, Literal) and type(node.value) in types

        if name in REGEX_FUNCTIONS:
            self.check_regex(name, args)
        if name == "round" and len(args) == 2 and not is_lit(args[1], int):
            raise self.err(
                "the second argument of round() (digits) must be an integer literal", args[1].pos
            )
        if name == "json_get":
            for arg in args[1:]:
                if not is_lit(arg, str, int):
                    raise self.err(
                        "json_get() keys must be string literals (object keys) "
                        "or integer literals (array indexes)",
                        arg.pos,
                    )
        if name == "json_list":
            for arg in args[1:]:
                if not is_lit(arg, str, int):
                    raise self.err(
                        "json_list() keys must be string literals (object keys) "
                        "or integer literals (array indexes)",
                        arg.pos,
                    )

    def check_regex(self, name: str, args: list[Node]) -> None:
        """Patterns are literals compiled by RE2 here, so a bad one fails with the rule."""
        pattern = args[1]
        if not (isinstance(pattern, Literal) and isinstance(pattern.value, str)):
            raise self.err(
                f"the pattern of {name}() must be a string literal (an RE2 regular expression)",
                pattern.pos,
            )
        sample = pa.array([""], pa.string())
        try:
            pc.match_substring_regex(sample, pattern=pattern.value)
        except pa.ArrowInvalid as exc:
            raise self.err(
                f"{name}(): RE2 rejects the pattern ({_re2_reason(exc)}); RE2 has no "
                "backreferences or lookaround (see https://github.com/google/re2/wiki/Syntax)",
                pattern.pos,
            ) from None
        if name == "regex_extract" and len(args) == 3:
            group = args[2]
            if not (isinstance(group, Literal) and type(group.value) is int):
                raise self.err("the group of regex_extract() must be an integer literal", group.pos)
            if not 0 <= group.value <= 8:
                raise self.err("the group of regex_extract() must be between 0 and 8", group.pos)
            # extraction wraps the pattern in one more group (see _emit.regex)
            self.check_rewrite(
                f"({pattern.value})", f"\\{group.value + 1}", "regex_extract()", group.pos, shift=1
            )
        if name == "regex_replace":
            repl = args[2]
            if not (isinstance(repl, Literal) and isinstance(repl.value, str)):
                raise self.err(
                    "the replacement of regex_replace() must be a string literal "
                    "(\\1 … \\9 insert groups)",
                    repl.pos,
                )
            self.check_rewrite(pattern.value, repl.value, "regex_replace()", repl.pos)

    def check_rewrite(
        self, pattern: str, replacement: str, what: str, pos: int, shift: int = 0
    ) -> None:
        sample = pa.array([""], pa.string())
        try:
            pc.replace_substring_regex(sample, pattern=f"(?:{pattern})|", replacement=replacement)
        except pa.ArrowInvalid as exc:
            if shift:
                raise self.err(
                    f"{what}: the pattern has no group {replacement[1:] and int(replacement[1:]) - shift}",
                    pos,
                ) from None
            raise self.err(f"{what}: {_re2_reason(exc)}", pos) from None


def _re2_reason(exc: Exception) -> str:
    text = str(exc).splitlines()[0]
    for prefix in ("Invalid regular expression: ", "Invalid replacement string: "):
        text = text.replace(prefix, "")
    return text.rstrip(".")
