"""A rule the card declares that cannot be read or applied to the card's own data is invalid
input (exit 1, naming the card and the rule file); the same failure of a rule given with
--rule stays a usage error (exit 2)."""

from __future__ import annotations

import pickle
import shutil
import sys

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.errors import RuleError
from tests.conftest import FIXTURE_CARDS, REPO

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402

RULE = bad_cards.RULE


def _with_score(tmp_path, array: pa.Array):
    """The synthetic card with score.success replaced by `array` (one value per episode)."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    table = bad_cards.read_table(card, "episodes.parquet")
    i = table.schema.get_field_index("score.success")
    table = table.set_column(i, pa.field("score.success", array.type), array)
    bad_cards.write_table(card, "episodes.parquet", table)
    bad_cards.rehash(card)
    return card, table.num_rows


def _commands(card, out):
    return [
        ["rescore", str(card)],
        ["report", str(card), "-o", str(out / "r.html")],
        ["export", "eee", str(card), "-o", str(out / "eee")],
        ["export", "inspect-scores", str(card), "--rule", "synthetic.success_rate", "-o", str(out / "s.jsonl")],
        ["power", str(card), "--rule", "synthetic.success_rate", "--delta", "0.1"],
        ["rliable", str(card), "--rule", "synthetic.success_rate", "--runs", "trial", "--tasks", "task_id"],
    ]


@pytest.mark.parametrize("kind", ["string", "uint64-beyond-int64"])
def test_the_cards_own_rule_failing_on_its_data_is_invalid_input(tmp_path, kind):
    n = bad_cards.read_table(FIXTURE_CARDS / "synthetic", "episodes.parquet").num_rows
    array = pa.array(["1"] * n) if kind == "string" else pa.array([2**64 - 1] * n, pa.uint64())
    card, _ = _with_score(tmp_path, array)
    out = tmp_path / "out"
    out.mkdir()
    # the line of `score:` in the rule file, as an editor shows it (not the loader's map)
    line = 1 + [t.split(":")[0] for t in (card / RULE).read_text().splitlines()].index("score")
    for args in _commands(card, out):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert f"{card}: {RULE}:{line}: score:" in result.output, (args, result.output)
        assert f"`rcard validate {card}`" in result.output
        assert "internal error" not in result.output and "Traceback" not in result.output
    assert not [p for p in out.rglob("*") if p.is_file()]  # nothing written


def test_a_malformed_rule_file_of_the_card_is_invalid_input(tmp_path):
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    (card / RULE).write_text("rule: synthetic.success_rate\nscore: [\n")
    bad_cards.rehash(card)
    result = CliRunner().invoke(app, ["rescore", str(card)])
    assert result.exit_code == 1, result.output
    assert f"{card}: {RULE}:3" in result.output and "not valid YAML" in result.output


def test_an_alternative_rule_that_does_not_fit_stays_a_usage_error(tmp_path):
    rule = tmp_path / "alt.yaml"
    rule.write_text("rule: alt\nscore: task_id\naggregate:\n  group_by: [agent]\n")
    result = CliRunner().invoke(app, ["rescore", str(FIXTURE_CARDS / "synthetic"), "--rule", str(rule)])
    assert result.exit_code == 2, result.output
    assert f"{rule}:2: score: expected a number" in result.output and "the card declares" not in result.output


def test_the_card_rule_file_name_keeps_its_card_through_pickling():
    """Ray's workers get the plan (with its file) pickled; their errors must still name the card."""
    from rollout_cards.io.reader import open_card
    from rollout_cards.rules.loader import CardRuleFile, declared_rules

    card = open_card(FIXTURE_CARDS / "synthetic")
    [(_, file)] = declared_rules(card)
    assert isinstance(file, CardRuleFile) and file == RULE
    back = pickle.loads(pickle.dumps(file))
    assert back == RULE and back.card == card.path
    assert RuleError("x", file=back).card == card.path
    assert RuleError("x", file=RULE).card is None


@pytest.mark.parametrize("literal", ["7" * 5000, "7" * 40, "1e999999"])
def test_a_huge_number_in_the_cards_rule_is_a_located_error(tmp_path, literal):
    """int() of more than 4,300 digits raised ValueError: an internal error (exit 2) before."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    text = (card / RULE).read_text()
    line = text.splitlines().index('score: "score.success"') + 1
    (card / RULE).write_text(text.replace('score: "score.success"', f'score: "score.success * {literal}"'))
    bad_cards.rehash(card)
    result = CliRunner().invoke(app, ["rescore", str(card)])
    assert result.exit_code == 1, result.output
    assert f"{card}: {RULE}:{line}: score: " in result.output, result.output
    assert "(column 17)" in result.output and ("does not fit in 64 bits" in result.output
                                               or "too large for a 64-bit float" in result.output)
    assert max(map(len, result.output.splitlines())) < 400  # the literal is shortened
