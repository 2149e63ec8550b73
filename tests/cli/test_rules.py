"""`rcard rules` lists the rule library; `--rule lib:ID` uses one anywhere a rule file is accepted."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.rules.library import library_rules
from tests.conftest import FIXTURE_CARDS


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_rules_lists_every_library_rule_with_kind_and_definition():
    out = invoke("rules")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    for entry in library_rules():
        (line,) = [x for x in lines if x.startswith(entry.id + " ")]
        assert entry.rule.kind.value in line and entry.definition in line
    listed = json.loads(invoke("rules", "--format", "json").output)["rules"]
    assert [r["id"] for r in listed] == [e.id for e in library_rules()]
    assert all(r["use"] == f"--rule lib:{r['id']}" and r["source"] and r["test"] for r in listed)


def test_show_prints_the_rule_file_and_unknown_ids_exit_2():
    out = invoke("rules", "--show", "lib:mle_bench.any_medal")
    assert out.exit_code == 0
    assert yaml.safe_load(out.output)["rule"] == "mle_bench.any_medal"
    bad = invoke("rules", "--show", "mle_bench.any_medals")
    assert bad.exit_code == 2 and "did you mean 'mle_bench.any_medal'" in bad.output


def test_rescore_takes_a_library_rule(tmp_path):
    # the MLE-bench rule on a card without its columns: a located error, exit 2
    card = FIXTURE_CARDS / "synthetic"
    out = invoke("rescore", str(card), "--rule", "lib:mle_bench.valid_submission")
    assert out.exit_code == 2
    assert out.output.startswith("rcard: lib:mle_bench.valid_submission: score: unknown column 'score.valid_submission'")
