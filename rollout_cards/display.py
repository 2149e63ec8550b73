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

__all__ = ["escape_controls", "inert_commands", "markdown_cell", "one_line"]

# C0/C1 controls, line and paragraph separators, bidi overrides and isolates; tab and
# newline are layout in a multi-line text, data in a one-line cell.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROLS_AND_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
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
