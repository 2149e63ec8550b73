"""Strings from a package shown in Markdown tables and CI logs (rollout_cards.display).

Markdown is checked by rendering it with markdown-it-py (GFM tables; installed with typer's
rich), an independent parser: each row keeps its cells and a hostile value renders as its
literal text — no link, image, code span or HTML from the value."""

from __future__ import annotations

import re

import pytest

from rollout_cards.display import inert_commands, markdown_cell, one_line

HOSTILE = ["a\\|b", "x | y", "`code`", "<script>alert(1)</script>", "[t](javascript:alert(1))",
           "![i](https://e.example/p.png)", "&lt;", "line\nbreak\r\n::error::x", "\u2028sep", "\x1b[2J", "end\\"]


def _cells(md: str) -> list[list[str]]:
    mdit = pytest.importorskip("markdown_it", reason="markdown-it-py renders the tables (installed with typer)")
    html = mdit.MarkdownIt("commonmark").enable("table").render(md)
    assert "<a " not in html and "<img" not in html and "<code>" not in html and "<script" not in html, html
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)
    return [re.findall(r"<t[dh]>(.*?)</t[dh]>", r, re.S) for r in rows]


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_cell_keeps_the_row_and_shows_the_value_literally(value: str) -> None:
    import html

    cells = _cells(f"| a | b |\n|---|---|\n| {markdown_cell(value)} | z |\n")
    assert len(cells) == 2 and len(cells[1]) == 2 and cells[1][1] == "z"
    assert html.unescape(cells[1][0]) == " ".join(one_line(" ".join(value.split())).split())


def test_inert_commands() -> None:
    text = "ok\n  ::error::x\n::\nabc::d ##[set-output name=a;]b"
    out = inert_commands(text)
    assert not re.search(r"(?m)^\s*::", out) and "##[" not in out
    assert out == "ok\n  \\x3a:error::x\n\\x3a:\nabc::d ##\\x5bset-output name=a;]b"


def test_every_format_character_and_lone_surrogate_is_escaped() -> None:
    """Unicode category Cf (zero-width spaces and joiners, bidi controls, the soft hyphen, tag
    characters) is invisible: 'gpt-4o' and 'gpt-4o\\u200b' would show as one group. Checked
    against the running Python's unicodedata, not the module's own list."""
    import sys
    import unicodedata

    from rollout_cards.display import escape_controls

    cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in ("Cf", "Cc", "Cs", "Zl", "Zp")]
    text = "".join(cf)
    assert one_line(text).isascii() and one_line(text).isprintable()
    kept = escape_controls(text)
    assert set(kept) - set("\\xu0123456789abcdefrU") == {"\t", "\n"}
    one_line(text).encode("utf-8")  # a lone surrogate would not encode


def test_text_table_keeps_one_line_per_row_and_aligns_by_terminal_width() -> None:
    from rollout_cards.display import text_table, width

    assert width("漢字") == 4 and width("e\u0301") == 1 and width("ab") == 2
    lines = text_table(["name", "n"], [["a\nb", 1], ["漢字", 22], ["e\u0301\u0301", 3]], right={1})
    assert lines == ["name   n", "----  --", "a\\nb   1", "漢字  22", "e\u0301\u0301      3"]


def test_csv_cell_neutralises_formulas_and_keeps_numbers() -> None:
    from rollout_cards.display import csv_cell

    # OWASP's CSV-injection triggers, with blanks before them.
    for text in ["=1+1", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "  =1", "-", "+", "=", "\n=1"]:
        assert csv_cell(text) == "'" + text, text
    # Numbers (of any type, or texts that are exactly a decimal number) and plain text unchanged.
    for value in [-0.5, 3, None, True, "-0.5", "+2", "-1e-3", ".5", "gpt-4o", "a=b", "", "'quoted"]:
        assert csv_cell(value) == value, value
