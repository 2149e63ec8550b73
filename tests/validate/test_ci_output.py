"""CI output of rcard validate: GitHub annotations, Markdown summary, several cards, --ignore."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rollout_cards.cli import main
from tests.conftest import FIXTURE_CARDS, REPO

BAD = REPO / "fixtures" / "bad"


def _out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_github_annotations_name_the_file_under_the_card_and_the_yaml_line(capsys) -> None:
    code, out = _out(capsys, ["validate", str(BAD / "rule-invalid"), str(FIXTURE_CARDS / "synthetic"), "--format", "github"])
    assert code == 1
    lines = out.splitlines()
    rule = [line for line in lines if "rule-invalid::" in line]
    assert len(rule) == 1
    # The workflow command syntax: ::error file=...,line=N,title=...::message
    m = re.fullmatch(r"::error file=([^,]+),line=(\d+),title=rcard rule-invalid::(.+)", rule[0])
    assert m, rule[0]
    assert m.group(1) == f"{BAD / 'rule-invalid'}/rules/synthetic.success_rate.yaml"
    text = (BAD / "rule-invalid" / "rules" / "synthetic.success_rate.yaml").read_text().splitlines()
    assert text[int(m.group(2)) - 1].lstrip().startswith("agregate")  # the line really holds the bad key
    assert any(line.startswith("::notice title=rcard validate::") and "synthetic: VALID" in line for line in lines)


def test_github_escapes_newlines_and_percent(tmp_path: Path) -> None:
    from rollout_cards.validate.ci_output import _escape_data, _escape_property

    assert _escape_data("a%b\nc\rd") == "a%25b%0Ac%0Dd"
    assert _escape_property("x:y,z") == "x%3Ay%2Cz"


def test_markdown_summary_table(capsys) -> None:
    code, out = _out(capsys, ["validate", str(BAD / "file-unlisted"), str(FIXTURE_CARDS / "minimal"), "--format", "markdown"])
    assert code == 1
    assert out.startswith("## rcard validate\n")
    rows = [line for line in out.splitlines() if "invalid |" in line or "valid |" in line]
    assert len(rows) == 2 and "❌ invalid" in rows[0] and "✅ valid" in rows[1]
    assert "### " + str(BAD / "file-unlisted") in out


def test_several_cards_json_and_exit_codes(capsys) -> None:
    code, out = _out(capsys, ["validate", str(FIXTURE_CARDS / "minimal"), str(FIXTURE_CARDS / "synthetic"), "--format", "json"])
    assert code == 0
    data = json.loads(out)
    assert [r["valid"] for r in data["reports"]] == [True, True]
    code, out = _out(capsys, ["validate", str(FIXTURE_CARDS / "minimal"), "--format", "json"])
    assert json.loads(out)["valid"] is True  # one card: the report itself, as before


def test_ignore_is_listed_and_changes_the_verdict(capsys) -> None:
    code, out = _out(capsys, ["validate", str(BAD / "file-unlisted"), "--ignore", "file-unlisted", "--format", "json"])
    assert code == 0
    report = json.loads(out)
    assert report["valid"] and report["ignored"] == {"file-unlisted": 1}
    assert all(f["code"] != "file-unlisted" for f in report["findings"])
    assert main(["validate", str(FIXTURE_CARDS / "minimal"), "--ignore", "no-such-code"]) == 2
    assert main(["validate", str(FIXTURE_CARDS / "minimal"), "--ignore", "internal-error"]) == 2
