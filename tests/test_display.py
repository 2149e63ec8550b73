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
