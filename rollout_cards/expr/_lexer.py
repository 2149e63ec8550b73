"""Tokenizer of the rule expression language (see `rollout_cards.expr`).

Hand-written, character by character; it never calls Python's own tokenizer, `ast`,
`eval` or `compile`. Positions are 0-based offsets into the expression text; errors
report them 1-based as the `column` of `ExpressionError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout_cards.errors import ExpressionError

__all__ = ["KEYWORDS", "ErrorFactory", "Token", "tokenize"]

#: Words with a meaning in the grammar. `is`, `lambda`, `if`, `else`, `for` and
#: `import` are reserved so that Python habits get a clear error instead of a
#: confusing one; a column with one of these names is written in backquotes.
KEYWORDS = frozenset(
    {
        "and", "or", "not", "in",
        "true", "false", "True", "False", "null", "None",
        "is", "lambda", "if", "else", "for", "import",
    }
)  # fmt: skip

# "=" is a token only so that the parser can say "keyword arguments are not supported"
# or "use '=='"; it is never accepted.
_OPERATORS = (
    "==",
    "!=",
    "<=",
    ">=",
    "<",
    ">",
    "=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "(",
    ")",
    "[",
    "]",
    ",",
)

# Character sequences that are not part of the language but that people write by
# habit: each gets a message saying what to write instead.
_MISTAKES = {
    "**": "'**' (power) is not supported",
    "//": "'//' (floor division) is not supported; '/' is true division",
    "&&": "'&&' is not an operator; use 'and'",
    "||": "'||' is not an operator; use 'or'",
    "<>": "'<>' is not an operator; use '!='",
    "!": "'!' is not an operator; use 'not' (or '!=' to compare)",
    "&": "'&' is not an operator; use 'and'",
    "|": "'|' is not an operator; use 'or'",
    "~": "'~' is not an operator; use 'not'",
    ".": "attribute access is not supported ('.' is only allowed inside a column name)",
    ":": "unexpected ':' (slices, lambdas and dict literals are not supported)",
    "{": "unexpected '{' (dict and set literals are not supported)",
    "}": "unexpected '}'",
    ";": "unexpected ';' (an expression is a single expression)",
    "#": "unexpected '#' (comments are not supported)",
}

_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}

_ALLOWED_ESCAPES = r"allowed escapes: \\ \' \" \n \t \r \0 \uXXXX"

_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Token:
    """One token: `kind` is "int", "float", "str", "name", "kw", "op" or "end"."""

    kind: str
    value: object
    pos: int
    end: int

    def describe(self) -> str:
        if self.kind == "end":
            return "end of expression"
        if self.kind == "str":
            return "string literal"
        if self.kind in ("int", "float"):
            return f"number {self.value!r}"
        if self.kind == "name":
            return f"name '{self.value}'"
        return f"'{self.value}'"


class ErrorFactory:
    """Builds `ExpressionError`s that carry the expression text, file and key."""

    __slots__ = ("display", "file", "key", "text")

    def __init__(self, text: str, file: str | None, key: str | None):
        self.text = text
        # Line breaks and tabs are shown as spaces so that the caret under the
        # expression points at the right character (offsets are unchanged).
        self.display = text.replace("\r", " ").replace("\n", " ").replace("\t", " ")
        self.file = file
        self.key = key

    def __call__(self, message: str, pos: int | None = None) -> ExpressionError:
        column = None if pos is None else min(pos, len(self.text)) + 1
        return ExpressionError(
            message, expression=self.display, column=column, file=self.file, key=self.key
        )


def _is_ident_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_ident_char(c: str) -> bool:
    return _is_ident_start(c) or ("0" <= c <= "9")


def _is_digit(c: str) -> bool:
    return "0" <= c <= "9"


def tokenize(text: str, err: ErrorFactory) -> list[Token]:
    """Split `text` into tokens; the last token has kind "end"."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c == "r" and i + 1 < n and text[i + 1] in "'\"":
            i = _raw_string(text, i, tokens, err)
        elif _is_ident_start(c):
            i = _name(text, i, tokens, err)
        elif _is_digit(c) or (c == "." and i + 1 < n and _is_digit(text[i + 1])):
            i = _number(text, i, tokens, err)
        elif c in "'\"":
            i = _string(text, i, tokens, err)
        elif c == "`":
            end = text.find("`", i + 1)
            nl = text.find("\n", i + 1)
            if end < 0 or (0 <= nl < end):
                raise err("unterminated backquoted column name", i)
            if end == i + 1:
                raise err("empty backquoted column name", i)
            tokens.append(Token("name", text[i + 1 : end], i, end + 1))
            i = end + 1
        else:
            for op in _OPERATORS:
                if text.startswith(op, i):
                    for bad, message in _MISTAKES.items():
                        if len(bad) > len(op) and text.startswith(bad, i):
                            raise err(message, i)
                    tokens.append(Token("op", op, i, i + len(op)))
                    i += len(op)
                    break
            else:
                for bad, message in _MISTAKES.items():
                    if text.startswith(bad, i):
                        raise err(message, i)
                if c.isprintable() and not c.isspace():
                    raise err(f"unexpected character {c!r}", i)
                raise err(f"unexpected character {ascii(c)}", i)
    tokens.append(Token("end", None, n, n))
    return tokens


def _name(text: str, i: int, tokens: list[Token], err: ErrorFactory) -> int:
    start, n = i, len(text)
    while i < n and _is_ident_char(text[i]):
        i += 1
    # Dotted names are single column names: `score.reward`, `a.__class__`.
    while i + 1 < n and text[i] == "." and _is_ident_char(text[i + 1]):
        i += 1
        while i < n and _is_ident_char(text[i]):
            i += 1
    word = text[start:i]
    if i < n and text[i] == ".":
        raise err(
            f"'{word}.' is not a column name; attribute access is not supported "
            "(write names with odd characters in backquotes: `a.b-c`)",
            i,
        )
    kind = "kw" if word in KEYWORDS else "name"
    tokens.append(Token(kind, word, start, i))
    return i


def _number(text: str, i: int, tokens: list[Token], err: ErrorFactory) -> int:
    start, n = i, len(text)
    while i < n and _is_digit(text[i]):
        i += 1
    is_float = False
    if i < n and text[i] == "." and not (i + 1 < n and _is_ident_start(text[i + 1])):
        is_float = True
        i += 1
        while i < n and _is_digit(text[i]):
            i += 1
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        if j < n and _is_digit(text[j]):
            is_float = True
            i = j
            while i < n and _is_digit(text[i]):
                i += 1
    if i < n and (_is_ident_char(text[i]) or text[i] == "."):
        j = i
        while j < n and (_is_ident_char(text[j]) or text[j] == "."):
            j += 1
        raise err(f"invalid number {text[start:j]!r}", start)
    literal = text[start:i]
    shown = literal if len(literal) <= 40 else f"{literal[:20]}...{literal[-10:]} ({len(literal)} characters)"
    if is_float:
        value = float(literal)  # float() has no digit limit; too large a literal reads as inf
        if value in (float("inf"), float("-inf")):
            raise err(f"number {shown} is too large for a 64-bit float", start)
        tokens.append(Token("float", value, start, i))
    else:
        # Counted before int(): past 4,300 digits int() raises ValueError (Python's limit on
        # converting long strings), and int64 holds at most 19 significant digits.
        digits = literal.lstrip("0") or "0"
        if len(digits) > 19 or (value := int(digits)) > _INT64_MAX + 1:
            # One more than the maximum is allowed so that `-9223372036854775808`
            # (folded by the parser) can be written; the parser checks the range.
            raise err(f"integer {shown} does not fit in 64 bits", start)
        tokens.append(Token("int", value, start, i))
    return i


def _raw_string(text: str, i: int, tokens: list[Token], err: ErrorFactory) -> int:
    """r'...' / r"...": backslashes are kept as they are (for regular expressions)."""
    quote = text[i + 1]
    end = text.find(quote, i + 2)
    if end < 0:
        raise err("unterminated string literal", i)
    tokens.append(Token("str", text[i + 2 : end], i, end + 1))
    return end + 1


def _string(text: str, i: int, tokens: list[Token], err: ErrorFactory) -> int:
    quote, start, n = text[i], i, len(text)
    i += 1
    out: list[str] = []
    while True:
        if i >= n:
            raise err("unterminated string literal", start)
        c = text[i]
        if c == quote:
            tokens.append(Token("str", "".join(out), start, i + 1))
            return i + 1
        if c == "\\":
            if i + 1 >= n:
                raise err("unterminated string literal", start)
            e = text[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
            elif e == "u":
                digits = text[i + 2 : i + 6]
                if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise err("invalid escape: '\\u' needs four hex digits", i)
                code = int(digits, 16)
                if 0xD800 <= code <= 0xDFFF:
                    raise err("invalid escape: surrogate code point", i)
                out.append(chr(code))
                i += 6
            else:
                bad = "\\" + e
                raise err(f"invalid escape '{bad}' in string; {_ALLOWED_ESCAPES}", i)
        else:
            out.append(c)
            i += 1
