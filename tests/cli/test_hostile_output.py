"""A card's names must not drive the terminal: an agent named with an ANSI escape (ESC[2J clears
the screen) or a bidi override (U+202E shows the rest of the line reversed, so two groups can
look swapped) is printed escaped by info, rescore, power and rliable's text output — before,
only error messages were escaped and these printed the raw characters. JSON output keeps the
exact names (json escapes what JSON must)."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app

NAMES = ["\x1b[2Jclear", "\u202egpt-4o", "plain"]
RULE = """rule: h.success
version: 1
kind: regrade
score: "score.success"
on_missing: 0
aggregate:
  statistic: mean
  group_by: [agent]
  unit: task_id
  interval: {method: cluster_t, level: 0.95}
"""


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    n = 24  # every (agent, run, task) cell once: 3 x 2 x 4
    ids = [f"e{i}" for i in range(n)]
    writer = rc.CardWriter(root / "card", id="names", title="names", timestamps=False)
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": [f"t{i // 6}" for i in range(n)], "agent": [NAMES[i % 3] for i in range(n)],
        "run_id": [f"r{i // 3 % 2}" for i in range(n)], "status": ["completed"] * n,
        "score.success": [float(i % 5 == 0) for i in range(n)]}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    writer.close()
    (root / "r.yaml").write_text(RULE)
    return root / "card", root / "r.yaml"


@pytest.mark.parametrize("command", ["info", "rescore", "power", "rliable"])
def test_names_are_escaped_in_text_output(card, command):
    path, rule = card
    argv = [command, str(path)] + ([] if command == "info" else ["--rule", str(rule)])
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "\\x1b[2Jclear" in result.output and "\\u202egpt-4o" in result.output


def test_json_output_keeps_the_exact_names(card):
    path, rule = card
    result = CliRunner().invoke(app, ["rescore", str(path), "--rule", str(rule), "--format", "json"])
    assert result.exit_code == 0, result.output
    groups = {r["group"]["agent"] for r in json.loads(result.output)["results"]}
    assert groups == set(NAMES)


# The GitHub Actions runner reads "::command::" at the start of a line (after blanks) and the
# legacy "##[command]" anywhere in a line, in any step's stdout or stderr — so text output
# run in CI must carry neither from a card's names, whatever the format.
INJECT = "x\n::error::INJ1 ##[error]INJ2 <script>alert(1)</script> [l](javascript:x) `c` a\\|b"


def _no_command(text: str) -> None:
    assert not re.search(r"(?m)^\s*::", text) and "##[" not in text, text


@pytest.fixture(scope="module")
def hostile_card(tmp_path_factory):
    root = tmp_path_factory.mktemp("inject")
    n = 12
    ids = [f"e{i}" for i in range(n)]
    writer = rc.CardWriter(root / "card", id="inject", title="T" + INJECT, timestamps=False,
                           scope={"license": "CC0-1.0"})
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": [f"t{i // 2}" for i in range(n)],
        "agent": [("ok", "bad" + INJECT)[i % 2] for i in range(n)], "run_id": ["r0"] * n,
        "status": ["completed"] * n, "score.success": [float(i % 3 == 0) for i in range(n)]}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    writer.close()
    (root / "r.yaml").write_text(RULE)
    (root / "card" / "unlisted ##[error]INJ3").write_text("x")  # a finding quotes its name
    return root / "card", root / "r.yaml"


@pytest.mark.parametrize("argv", [
    ["info"], ["rescore", "--rule", "R"], ["rescore", "--rule", "R", "--format", "markdown"],
    ["rescore", "--rule", "R", "--format", "csv"], ["power", "--rule", "R"], ["rliable", "--rule", "R"],
    ["validate"], ["validate", "--format", "markdown"], ["validate", "--format", "github"], ["card"],
])
def test_no_workflow_command_from_a_card_in_ci_output(hostile_card, argv):
    path, rule = hostile_card
    argv = [argv[0], str(path)] + [str(rule) if a == "R" else a for a in argv[1:]]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code in (0, 1), result.output
    if "github" in argv:  # every line is one of ours, the data escaped
        assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in result.output.splitlines())
        assert "INJ3" in result.output
    else:
        _no_command(result.output)


def test_markdown_tables_keep_their_rows(hostile_card):
    mdit = pytest.importorskip("markdown_it", reason="markdown-it-py renders the tables (installed with typer)")
    path, rule = hostile_card
    for argv in (["rescore", str(path), "--rule", str(rule), "--format", "markdown"],
                 ["validate", str(path), "--format", "markdown"], ["card", str(path)]):
        result = CliRunner().invoke(app, argv)
        body = result.output.split("\n---\n", 1)[1] if argv[0] == "card" else result.output  # not the YAML front matter
        html = mdit.MarkdownIt("commonmark").enable("table").render(body)
        assert "<script" not in html and 'href="javascript' not in html, argv
        for table in re.findall(r"<table>(.*?)</table>", html, re.S):
            widths = {len(re.findall(r"<t[dh]>", row)) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)}
            assert len(widths) == 1, (argv, table)


# A spreadsheet opening a CSV runs a cell that starts with = + - @ (or a tab / CR before one)
# as a formula (OWASP "CSV injection"); a cell that is exactly a number is read as a number.
FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+1", "-2+3+cmd|' /C x'!A0",
            "\t=1+1", "\r=1+1", " =1"]
PROFIT_RULE = RULE.replace("h.success", "h.profit").replace('"score.success"', '"score.profit"')


def _runs_as_formula(cell: str) -> bool:
    try:
        float(cell)
        return False  # a number, shown as one
    except ValueError:
        return cell.lstrip(" ")[:1] in ("=", "+", "-", "@", "\t", "\r", "\n")


@pytest.fixture(scope="module")
def formula_card(tmp_path_factory):
    root = tmp_path_factory.mktemp("formulas")
    n = 4 * len(FORMULAS)
    ids = [f"e{i}" for i in range(n)]
    writer = rc.CardWriter(root / "card", id="formulas", title="formulas", timestamps=False)
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": [f"t{i // len(FORMULAS)}" for i in range(n)],
        "agent": [FORMULAS[i % len(FORMULAS)] for i in range(n)], "status": ["completed"] * n,
        "score.success": [float(i % 3 == 0) for i in range(n)],
        "score.profit": [-0.5 - (i % 4) for i in range(n)]}))  # negative headlines: "-2.0 [...]" displays
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    writer.close()
    (root / "r.yaml").write_text(RULE)
    (root / "p.yaml").write_text(PROFIT_RULE)
    return root


def test_csv_cells_do_not_run_as_spreadsheet_formulas(formula_card):
    import csv
    import io

    argv = ["rescore", str(formula_card / "card"), "--rule", str(formula_card / "r.yaml"),
            "--rule", str(formula_card / "p.yaml"), "--format", "csv"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    running = [(k, v) for r in rows for k, v in r.items() if _runs_as_formula(v)]
    assert not running, running
    # The names are all there, marked as text; the numbers stay numbers (negative ones too).
    groups = {r["group"] for r in rows if r["record"] == "result"}  # (a CR printed escaped, as \\r)
    assert {f"agent={name}" for name in FORMULAS if "\r" not in name} < groups and len(groups) == len(FORMULAS)
    profits = [float(r["value"]) for r in rows if r["record"] == "result" and r["rule"] == "h.profit"]
    assert profits and all(v < 0 for v in profits)
    assert any(r["display"].startswith("'-") for r in rows if r["rule"] == "h.profit" and r["record"] == "result")
