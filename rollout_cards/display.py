"""How strings from a package are shown: in a terminal, a Markdown table, and a CI log.

A card's names, ids, paths and messages come from strangers. Shown as they are they could
drive the terminal (ESC sequences, bidi overrides), break a Markdown table out of its row
(a newline, a pipe, a backslash before a pipe), inject HTML into a job summary, or be read
by the GitHub Actions runner as a workflow command: it honours `::command::` at the start of
a line (after leading blanks) and the legacy `##[command]` anywhere in a line, on stdout and
stderr alike, whatever format the step meant to print.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Sequence

__all__ = ["csv_cell", "escape_controls", "inert_commands", "markdown_cell", "one_line", "text_table", "width"]

# C0/C1 controls, line and paragraph separators, every format character (Unicode category
# Cf: bidi overrides and isolates, zero-width spaces and joiners, the soft hyphen, tag
# characters — invisible, so "gpt-4o" and "gpt-4o\u200b" would look like one group) and lone
# surrogates (which stdout cannot encode); tab and newline are layout in a multi-line text,
# data in a one-line cell. Cf as of Unicode 15 (tests/test_display.py checks it against
# the running Python's unicodedata).
_INVISIBLE = (
    r"\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
    r"\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_CONTROLS = re.compile(rf"[\x00-\x08\x0b-\x1f{_INVISIBLE}]")
_CONTROLS_AND_BREAKS = re.compile(rf"[\x00-\x1f{_INVISIBLE}]")
# The runner trims leading white space before looking for "::"; "##[" it finds anywhere.
_COMMAND = re.compile(r"^([^\S\n]*):(?=:)|##\[", re.MULTILINE)
# What could end a table cell (a pipe; a backslash before one), open a code span, an HTML tag
# or entity, or make an inline link or image ("](" ): written as character references.
_MARKDOWN = {"&": "&amp;", "<": "&lt;", "|": "&#124;", "\\": "&#92;", "`": "&#96;", "](": "]&#40;"}
_MARKDOWN_RE = re.compile("|".join(re.escape(k) for k in _MARKDOWN))


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def escape_controls(text: str) -> str:
    """`text` with control and bidi characters written as escapes (\\x1b, \\u202e); tab and newline kept."""
    return _CONTROLS.sub(_escaped, text)


def one_line(text: object) -> str:
    """`text` as one line: every control character escaped, newline and tab included."""
    return _CONTROLS_AND_BREAKS.sub(_escaped, str(text))


def inert_commands(text: str) -> str:
    """`text` with nothing a CI runner reads as a command: a line's leading "::" becomes
    "\\x3a:" and every "##[" becomes "##\\x5b" (the escapes the rest of the output uses)."""
    return _COMMAND.sub(lambda m: "##\\x5b" if m.group() == "##[" else m.group(1) + "\\x3a", text)


def markdown_cell(text: object) -> str:
    """`text` as the content of one Markdown (GFM) table cell, shown literally: white space runs
    collapsed to one space (a newline would end the row), controls escaped, and the characters
    that end a cell, open a code span, a link or an HTML tag written as character references
    (a backslash escape would not do: GFM reads "\\\\|" as an escaped backslash, then a pipe)."""
    flat = " ".join(one_line(" ".join(str(text).split())).split())
    return inert_commands(_MARKDOWN_RE.sub(lambda m: _MARKDOWN[m.group()], flat))


# A spreadsheet (Excel, LibreOffice, Google Sheets) opening a CSV runs a cell that starts with
# one of these as a formula (OWASP "CSV injection"): "=HYPERLINK(...)", "@SUM(...)", "-2+3+cmd|...";
# tab and CR are read as blanks before one. Leading blanks are skipped before the test: a
# program may trim the cell before it parses it.
_FORMULA_START = re.compile(r"[=+\-@\t\r\n]")
# A cell that is exactly a number is read as that number, not as a formula: left as it is.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def csv_cell(value: object) -> object:
    """`value` as a CSV cell a spreadsheet shows as text: a text that a spreadsheet would run
    as a formula (it starts, after any blanks, with =, +, -, @, a tab or a line break) gets a
    leading apostrophe, OWASP's neutralisation; numbers (ints, floats, and texts that are
    exactly a decimal number such as "-0.5") and other values are returned unchanged."""
    if not isinstance(value, str):
        return value
    start = value.lstrip(" ")
    if start[:1] and _FORMULA_START.match(start) and not _NUMBER.fullmatch(start):
        return "'" + value
    return value


def width(text: str) -> int:
    """How many terminal columns `text` (one line, controls escaped) takes: combining marks take
    none, East Asian wide and full-width characters two (len() would shift every later column)."""
    if text.isascii():
        return len(text)
    from unicodedata import combining, east_asian_width

    return sum(0 if combining(c) else 2 if east_asian_width(c) in "WF" else 1 for c in text)


def text_table(header: Sequence[object], rows: Iterable[Sequence[object]], *, right: Container[int] = ()) -> list[str]:
    """The lines of an aligned text table: the header, a rule of dashes, one line per row. Every
    cell goes through `one_line` (a newline in a name would add a row, a tab or an escape shift
    the columns) and is padded by its display `width`; columns in `right` are right-aligned."""
    cells = [[one_line(c) for c in header], *([one_line(c) for c in row] for row in rows)]
    widths = [max(width(c) for c in column) for column in zip(*cells, strict=True)]

    def line(row: list[str]) -> str:
        pad = [" " * (w - width(c)) for c, w in zip(row, widths, strict=True)]
        return "  ".join(p + c if i in right else c + p for i, (c, p) in enumerate(zip(row, pad, strict=True))).rstrip()

    return [line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])]
