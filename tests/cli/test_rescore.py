"""`rcard rescore`: every fixture card in every format; broken rules exit 2 with a located message."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import FIXTURE_CARDS, REPO

CARDS = sorted(p.name for p in FIXTURE_CARDS.iterdir())
RULES = REPO / "fixtures" / "rules"
BAD = sorted((RULES / "bad").glob("*.yaml"))


def invoke(*args: str):
    return CliRunner().invoke(app, ["rescore", *args])


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "csv"])
@pytest.mark.parametrize("name", CARDS)
def test_every_fixture_card_in_every_format(name, fmt):
    result = invoke(str(FIXTURE_CARDS / name), "--format", fmt)
    assert result.exit_code == 0, result.output
    if fmt == "json":
        assert json.loads(result.output)["card"]
    elif fmt == "csv":
        assert next(csv.reader(io.StringIO(result.output)))[0] == "record"


def test_alternative_rules_side_by_side_as_json():
    result = invoke(str(FIXTURE_CARDS / "synthetic"), "--rule", str(RULES / "errors_excluded.yaml"), "-r", str(RULES / "best_of_3.yaml"), "-f", "json", "--seed", "1")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [r["rule"] for r in doc["rules"]] == ["synthetic.success_rate", "synthetic.errors_excluded", "synthetic.best_of_3"]
    assert [r["source"] for r in doc["rules"]] == ["card", "alternative", "alternative"]
    assert {(c["rule"], c["group"]["agent"]) for c in doc["rank_changes"]} == {("synthetic.best_of_3", "alpha"), ("synthetic.best_of_3", "beta")}


def test_the_minimal_card_without_rules_says_so():
    result = invoke(str(FIXTURE_CARDS / "minimal"))
    assert result.exit_code == 0 and "the card declares none" in result.output
    result = invoke(str(FIXTURE_CARDS / "minimal"), "--rule", str(RULES.parent / "rules" / "success_by_episode.yaml"))
    assert result.exit_code == 2 and "unknown column 'score.success'" in result.output


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_a_broken_rule_file_exits_2_naming_the_file(path):
    result = invoke(str(FIXTURE_CARDS / "synthetic"), "--rule", str(path))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("rcard: ") and path.name in result.output
    assert "Traceback" not in result.output


def test_an_empty_selection_is_printed_as_undefined(tmp_path):
    rule = tmp_path / "empty.yaml"
    rule.write_text("rule: t.empty\nscore: score.success\nselect: \"agent == 'nobody'\"\naggregate: {group_by: [agent]}\n")
    result = invoke(str(FIXTURE_CARDS / "synthetic"), "--rule", str(rule))
    assert result.exit_code == 0
    rows = [line for line in result.output.splitlines() if "t.empty " in line and " mean " in line]
    assert len(rows) == 2 and all("undefined (n = 0)" in line for line in rows)


def test_the_console_script_runs_without_a_traceback():
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from rollout_cards.cli import main; sys.exit(main(sys.argv[1:]))", "rescore", str(FIXTURE_CARDS / "synthetic"), "--rule", str(RULES / "bad" / "k_too_large.yaml")],
        capture_output=True, text=True, cwd=REPO,
    )
    assert out.returncode == 2 and "reduce.k" in out.stderr and "Traceback" not in out.stderr


APPLY_ERRORS = {  # rule text, the key the error names, a text on the key's line, what it says
    "unknown_column": ("rule: t.unknown\n# a comment\n\nscore: \"score.nonexistent\"\naggregate: {group_by: [agent]}\n",
                       "score", 'score: "score.nonexistent"', "unknown column 'score.nonexistent'"),
    "type_error": ("rule: t.types\n\nfeatures:\n  n:\n    from: steps\n    where: \"kind + 1 == 2\"\n    agg: count\n"
                   "score: \"n\"\naggregate:\n  group_by: [agent]\n",
                   "features.n.where", 'where: "kind + 1 == 2"', "cannot apply '+' to string and int64"),
    "group_by": ("rule: t.group\nscore: \"1\"\naggregate:\n  interval: {method: wilson}\n  group_by:\n    - nosuch\n",
                 "aggregate.group_by", "group_by:", "unknown column 'nosuch'"),
}


@pytest.mark.parametrize("case", sorted(APPLY_ERRORS))
def test_an_error_applying_a_rule_names_the_rule_files_line(tmp_path, case):
    """Names are checked where the rule meets the card, after the rule file was read: the error
    knew its key only (`R.yaml: score: unknown column`), while `rcard validate` names the line."""
    text, key, on_line, says = APPLY_ERRORS[case]
    rule = tmp_path / "r.yaml"
    rule.write_text(text)
    line = 1 + [on_line in t for t in text.splitlines()].index(True)  # as an editor numbers it
    result = invoke(str(FIXTURE_CARDS / "synthetic"), "--rule", str(rule))
    assert result.exit_code == 2, result.output
    assert f"{rule}:{line}: {key}: " in result.output and says in result.output, result.output
    assert "Traceback" not in result.output
