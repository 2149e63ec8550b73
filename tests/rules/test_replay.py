"""Replay of `reported` numbers: the fixture matches, a tampered number is caught with both values."""

from __future__ import annotations

import pytest

import rollout_cards as rc
from rollout_cards.io.finalize import refresh_manifest
from rollout_cards.model.rule import Rule
from rollout_cards.rules.replay import replay_card, replay_rule


def test_the_fixture_reported_numbers_replay(synthetic):
    checks = replay_card(synthetic)
    assert [c.pointer for c in checks] == ["/reported/0/value", "/reported/1/value"]
    assert all(c.ok for c in checks)
    assert checks[0].file == "rules/synthetic.success_rate.yaml"


def test_a_tampered_value_is_reported_with_both_numbers(synthetic_copy):
    path = synthetic_copy / "rules" / "synthetic.success_rate.yaml"
    path.write_text(path.read_text().replace("value: 0.4393", "value: 0.4593"))
    refresh_manifest(synthetic_copy)
    bad = [c for c in replay_card(rc.open(synthetic_copy)) if not c.ok]
    assert len(bad) == 1 and bad[0].pointer == "/reported/1/value"
    assert "0.4593" in bad[0].message and "0.4392523364" in bad[0].message and "tolerance 5e-05" in bad[0].message


def test_interval_bounds_n_and_unknown_groups(synthetic):
    rule = Rule.model_validate(
        {
            "rule": "t.replay",
            "score": "score.success",
            "aggregate": {"group_by": ["agent"]},
            "reported": [
                {"group": {"agent": "alpha"}, "value": 0.3925, "tolerance": 0.0001, "n": 107, "ci_low": 0.3053, "ci_high": 0.4872},
                {"group": {"agent": "alpha"}, "value": 0.3925, "tolerance": 0.0001, "n": 108},
                {"group": {"agent": "gamma"}, "value": 0.5},
            ],
        }
    )
    checks = {(c.pointer): c for c in replay_rule(synthetic, rule)}
    assert all(checks[p].ok for p in ("/reported/0/value", "/reported/0/n", "/reported/0/ci_low", "/reported/0/ci_high"))
    assert not checks["/reported/1/n"].ok
    assert checks["/reported/2/value"].computed is None and "no such group" in checks["/reported/2/value"].message


@pytest.mark.parametrize("stratum, value", [({"cond.difficulty": "hard"}, 24.6186), (None, 14.7882)])
def test_strata_can_be_reported(synthetic, stratum, value):
    rule = Rule.model_validate(
        {
            "rule": "t.strata",
            "score": "score.profit",
            "on_status": {"error": "exclude", "timeout": "exclude", "limit": "exclude"},
            "aggregate": {"group_by": ["agent"], "strata": ["cond.difficulty"]},
            "reported": [{"group": {"agent": "alpha"}, "stratum": stratum, "value": value, "tolerance": 0.00005}],
        }
    )
    (check,) = replay_rule(synthetic, rule)
    assert check.ok, check.message
