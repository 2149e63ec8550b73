"""The rules each importer declares replay, with the rule engine, to the numbers the source published."""

from __future__ import annotations

import pytest

from rollout_cards.rules import replay_card, rescore
from tests.conftest import external
from tests.importers.conftest import SOURCES, run_import


def _replayed(card) -> dict[tuple[str, str], tuple[float, float]]:
    checks = replay_card(card)
    assert checks and all(c.ok for c in checks), [c.message for c in checks if not c.ok]
    return {(c.rule, c.field): (c.reported, c.computed) for c in checks}


def _result(card, rule: str) -> dict:
    return next(r for r in rescore(card).to_dict()["results"] if r["rule"] == rule)


def test_tau_bench_rules_replay(tmp_path):
    _, card = run_import("tau-bench", [SOURCES / "tau-bench" / "synthetic-agent.json"], tmp_path / "c")
    checks = _replayed(card)
    assert checks[("tau_bench.original", "value")][1] == pytest.approx(0.5)
    assert checks[("tau_bench.pass_hat_2", "value")][1] == pytest.approx(0.25)
    # limit and error episodes stay in the denominator, as tau-bench counts them
    assert _result(card, "tau_bench.original")["n"] == 8


def test_inspect_rule_replays_with_errors_left_out(tmp_path):
    _, card = run_import("inspect", [SOURCES / "inspect" / "synthetic.json"], tmp_path / "c")
    assert _replayed(card)[("inspect.arith.match.accuracy", "value")][1] == pytest.approx(0.375)
    result = _result(card, "inspect.arith.match.accuracy")
    # the errored sample-epoch carries no score: left out as Inspect leaves it out, and counted
    assert result["excluded_by_status"] == {} and result["n_missing_excluded"] == 1 and result["n_episodes"] == 3


def test_swe_bench_rules_replay(tmp_path):
    _, card = run_import("swe-bench", [SOURCES / "swe-bench" / "demo-model.demo-run.json"], tmp_path / "c")
    checks = _replayed(card)
    assert checks[("swe_bench.resolved_rate", "value")][1] == pytest.approx(0.4)
    assert checks[("swe_bench.resolved_rate_nonempty", "value")][1] == pytest.approx(0.5)
    nonempty = _result(card, "swe_bench.resolved_rate_nonempty")
    assert nonempty["n"] == 4 and nonempty["n_selected_out"] == 1  # the empty patch
    assert nonempty["excluded_by_status"] == {"skipped": 1}  # the instance without a prediction


def test_the_published_tau_bench_number_replays(tmp_path):
    _, card = run_import("tau-bench", [external("tau-bench/gpt-4o-airline.json")], tmp_path / "c")
    checks = _replayed(card)
    assert checks[("tau_bench.original", "value")][1] == pytest.approx(0.42)
    result = _result(card, "tau_bench.original")
    assert result["n"] == 200 and result["interval"]["unit"] == "task_id" and result["interval"]["n_units"] == 50
    assert {rule for rule, _ in checks} == {"tau_bench.original", "tau_bench.pass_hat_2", "tau_bench.pass_hat_3",
                                            "tau_bench.pass_hat_4"}


def test_the_scored_inspect_log_replays_accuracy(tmp_path):
    path = external("inspect/2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval")
    _, card = run_import("inspect", [path], tmp_path / "c")
    assert _replayed(card)[("inspect.popularity.match.accuracy", "value")] == (0.8, pytest.approx(0.8))
    assert _result(card, "inspect.popularity.match.accuracy")["n"] == 10
