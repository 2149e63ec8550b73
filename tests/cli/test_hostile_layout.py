"""A name from the card cannot add a line to a text table or shift its columns.

Every command's text output is compared with the same card's output under plain names of
the same length: same number of lines (a newline, \\r, U+2028 or NEL in a name printed a
spoofed row), and in every aligned table each row keeps its characters inside the columns
the dash rule under the header marks — measured in terminal columns (East Asian wide
characters take two, combining marks none; an escape such as \\u202e padded by len() before
being escaped shifted every later column). Before, `rcard info`, `rescore`, `power`,
`rliable` and `validate` printed a name's newline as a line break."""

from __future__ import annotations

import unicodedata

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from tests.cli.test_hostile_output import RULE

HOSTILE = ["nl\nagent=ok  h.success  mean  1.0000", "cr\rX", "ls\u2028Y", "ps\u2029P", "tab\tZ", "bidi\u202eW",
           "esc\x1b[2J", "nel\x85n", "vt\x0bv", "ff\x0cf", "fs\x1cs", "zw\u200bq", "wide漢字名", "e\u0301\u0301x",
           "bom\ufeffb", "tag\U000e0041t"]
PLAIN = [f"p{i:02d}" + "x" * (len(h) - 3) for i, h in enumerate(HOSTILE)]


def _card(root, names, title):
    k = len(names)
    n = k * 8  # every (agent, run, task) cell once: k x 2 x 4 (rliable needs the full grid)
    ids = [f"e{i}" for i in range(n)]
    writer = rc.CardWriter(root, id="layout", title=title, timestamps=False)
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": [f"t{i // k % 4}" for i in range(n)], "agent": [names[i % k] for i in range(n)],
        "run_id": [f"r{i // (4 * k)}" for i in range(n)], "status": ["completed"] * n,
        "score.success": [float((i * 7) % 5 < 2) for i in range(n)]}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    writer.close()
    return root


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout")
    (root / "r.yaml").write_text(RULE)
    hostile = _card(root / "hostile", HOSTILE, "title\nrcard: VALID")
    plain = _card(root / "plain", PLAIN, "title rcard: VALID")
    for card, name in ((hostile, "unlisted\n  error   fake-code  x: y \u202e"), (plain, "unlisted   fake-code  x: y  ")):
        (card / name).write_text("x")  # validate quotes the file's name in a finding
    return hostile, plain, root / "r.yaml"


def _columns(text: str) -> list[tuple[int, str]]:
    """(terminal column, character) of each character of a line; zero-width ones share a column."""
    out, col = [], 0
    for c in text:
        w = 0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        out.append((col - (w == 0), c))
        col += w
    return out


def _spans(rule: str) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, c in enumerate(rule + " "):
        if c == "-" and start is None:
            start = i
        elif c != "-" and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _assert_tables_aligned(output: str) -> int:
    lines = output.splitlines()
    tables = 0
    for i, line in enumerate(lines):
        if i == 0 or not line.strip() or set(line.strip()) - {"-", " "} or "--" not in line:
            continue
        tables += 1
        spans = _spans(line)
        inside = lambda col: any(a <= col < b for a, b in spans)  # noqa: E731
        for row in [lines[i - 1], *lines[i + 1:]]:
            if not row.strip():
                break
            bad = [(col, c) for col, c in _columns(row) if c != " " and not inside(col)]
            assert not bad, f"a character outside the columns {spans}: {bad[:3]} in {row!r}"
    return tables


@pytest.mark.parametrize("argv", [["info"], ["rescore", "--rule", "R"], ["power", "--rule", "R"],
                                  ["rliable", "--rule", "R", "--runs", "run_id", "--tasks", "task_id"], ["validate"]])
def test_a_name_cannot_add_a_row_or_shift_a_column(cards, argv):
    hostile, plain, rule = cards
    outputs = []
    for card in (hostile, plain):
        args = [argv[0], str(card)] + [str(rule) if a == "R" else a for a in argv[1:]]
        result = CliRunner().invoke(app, args)
        assert result.exit_code in (0, 1), result.output
        outputs.append(result.output)
    bad, good = outputs
    assert len(bad.splitlines()) == len(good.splitlines()), bad
    tables = _assert_tables_aligned(bad)
    assert tables == _assert_tables_aligned(good) and (tables > 0 or argv[0] in ("validate", "rliable")), bad
    for raw in ("\n", "\r", "\u2028", "\u2029", "\t", "\u202e", "\x1b", "\x85", "\x0b", "\x0c", "\x1c", "\u200b",
                "\ufeff", "\U000e0041"):
        assert raw not in bad.replace("\n", ""), repr(raw)
    assert "\\u202e" in bad or argv[0] == "validate"


def test_export_eee_left_out_lines_keep_one_line_each(tmp_path):
    """`left out:` quotes the rule's group label (the card's values), printed raw before:
    a newline made a line of its own and an ESC reached the terminal."""
    n = 8
    ids = [f"e{i}" for i in range(n)]
    writer = rc.CardWriter(tmp_path / "card", id="eee", title="eee", timestamps=False)
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": ["t\n  left out: spoof\x1b[2J", "t2"] * 4, "agent": ["a", "b"] * 4,
        "status": ["completed"] * n, "score.success": [float(i % 3 == 0) for i in range(n)]}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    writer.close()
    rule = tmp_path / "by_task.yaml"
    rule.write_text("rule: by.task\nscore: score.success\naggregate:\n  group_by: [task_id]\n")
    result = CliRunner().invoke(app, ["export", "eee", str(tmp_path / "card"), "--rule", str(rule),
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code in (0, 1), result.output
    left = [line for line in result.output.splitlines() if "left out" in line]
    assert len(left) == 2 and all(line.startswith("  left out: rule by.task group task_id=") for line in left), left
    assert "\x1b" not in result.output
