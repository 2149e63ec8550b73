"""Rescoring the synthetic card with the fixture alternatives: each effect, with its numbers pinned.

Numbers are recomputed here from the episodes (plain Python) wherever the definition
is simple; the intervals come from the stats functions the engine is built on.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest

from rollout_cards.errors import RuleError
from rollout_cards.rules import rescore
from tests.conftest import FIXTURE_CARDS, REPO

RULES = REPO / "fixtures" / "rules"
CARD = FIXTURE_CARDS / "synthetic"


def heads(report, rule_id, stratum=None):
    return {
        r.group["agent"]: r
        for r in report.results
        if r.rule == rule_id and (r.stratum == stratum if stratum else r.stratum is None)
    }


def success(x) -> float:
    return 1.0 if x["status"] == "completed" and x["score.success"] else 0.0


def test_without_rules_the_card_replays_its_own(synthetic):
    report = rescore(CARD)
    assert [run.rule for run in report.runs] == ["synthetic.success_rate"]
    assert report.differences == () and report.rank_changes == ()
    assert {a: round(r.value, 4) for a, r in heads(report, "synthetic.success_rate").items()} == {"alpha": 0.3925, "beta": 0.4393}


def test_a_status_rule_moves_the_headline(synthetic_rows):
    report = rescore(CARD, [RULES / "errors_excluded.yaml"])
    alt = heads(report, "synthetic.errors_excluded")
    for agent in ("alpha", "beta"):
        completed = [success(x) for x in synthetic_rows if x["agent"] == agent and x["status"] == "completed"]
        assert alt[agent].value == pytest.approx(statistics.fmean(completed))
    assert alt["alpha"].value == pytest.approx(42 / 96) and alt["beta"].value == pytest.approx(47 / 85)
    assert alt["beta"].excluded_by_status == {"error": 16, "limit": 3, "skipped": 1, "timeout": 3}
    diffs = {d.group["agent"]: d for d in report.differences}
    assert diffs["beta"].difference == pytest.approx(47 / 85 - 47 / 107)  # +11.4 points
    assert diffs["beta"].difference > 0.11 and diffs["beta"].interval.low > 0  # the move is not noise
    assert diffs["beta"].unit == "task_id" and diffs["beta"].n_units == 36
    assert report.rank_changes == ()


def test_mean_and_median_rank_the_agents_differently_on_hard_tasks(synthetic_rows):
    report = rescore(CARD, [RULES / "profit_mean.yaml", RULES / "profit_median.yaml"])
    hard = {"cond.difficulty": "hard"}
    mean, median = heads(report, "synthetic.profit_mean", hard), heads(report, "synthetic.profit_median", hard)
    for agent in ("alpha", "beta"):
        profits = [x["score.profit"] for x in synthetic_rows if x["agent"] == agent and x["status"] == "completed" and x["cond.difficulty"] == "hard"]
        assert mean[agent].value == pytest.approx(statistics.fmean(profits))
        assert median[agent].value == pytest.approx(statistics.median(profits))
    assert mean["alpha"].value > mean["beta"].value  # 24.62 > 4.35: alpha's rare windfalls
    assert median["alpha"].value < median["beta"].value  # 0.00 < 4.05: the typical hard task
    assert round(mean["alpha"].value, 2) == 24.62 and median["alpha"].value == 0.0
    assert round(median["beta"].value, 3) == 4.048


def test_the_run_as_unit_widens_the_interval_several_times():
    report = rescore(CARD, [RULES / "success_by_episode.yaml", RULES / "success_by_run.yaml"])
    by_episode, by_run = heads(report, "synthetic.success_by_episode"), heads(report, "synthetic.success_by_run")
    alpha_e, alpha_r = by_episode["alpha"], by_run["alpha"]
    assert alpha_e.value == alpha_r.value == pytest.approx(42 / 107)
    assert alpha_e.interval.method == "wilson" and alpha_e.interval.n_units == 107
    assert alpha_r.interval.method == "cluster_t" and alpha_r.interval.n_units == 3 and alpha_r.interval.df == 2
    ratio = alpha_r.interval.width / alpha_e.interval.width
    assert ratio > 5  # 6.7x: alpha's success depends on the run
    assert any("3 units of run_id is 3.0x wider" in w for w in alpha_r.warnings)


def test_best_of_3_and_pass_at_2_flip_the_ranking(synthetic_rows):
    report = rescore(CARD, [RULES / "best_of_3.yaml", RULES / "pass_at_2.yaml"])
    original = heads(report, "synthetic.success_rate")
    assert original["beta"].value > original["alpha"].value
    best = heads(report, "synthetic.best_of_3")
    tasks: dict[tuple[str, str], list[float]] = defaultdict(list)
    for x in synthetic_rows:
        if x["status"] not in ("cancelled", "skipped"):
            tasks[(x["agent"], x["task_id"])].append(success(x))
    for agent in ("alpha", "beta"):
        assert best[agent].value == pytest.approx(statistics.fmean(max(v) for (a, _), v in tasks.items() if a == agent))
    assert round(best["alpha"].value, 4) == 0.8611 and round(best["beta"].value, 4) == 0.5556
    changes = {(c.rule, c.group["agent"]): (c.rank, c.against_rank) for c in report.rank_changes}
    assert changes == {
        ("synthetic.best_of_3", "alpha"): (1, 2),
        ("synthetic.best_of_3", "beta"): (2, 1),
        ("synthetic.pass_at_2", "alpha"): (1, 2),
        ("synthetic.pass_at_2", "beta"): (2, 1),
    }


def test_an_identical_alternative_differs_by_exactly_zero():
    report = rescore(CARD, [RULES / "success_by_episode.yaml"])
    for d in report.differences:
        assert d.difference == 0.0 and not d.interval.defined


def test_alternative_ids_must_not_clash_with_the_card():
    with pytest.raises(RuleError, match="used twice"):
        rescore(CARD, [CARD / "rules" / "synthetic.success_rate.yaml"])


def test_seed_makes_bootstraps_reproducible():
    a = rescore(CARD, [RULES / "profit_median.yaml"], seed=3).to_dict()
    b = rescore(CARD, [RULES / "profit_median.yaml"], seed=3).to_dict()
    assert a == b and a["seed"] == 3


def test_cluster_t_beyond_the_unit_interval_is_flagged_not_clipped():
    import rollout_cards as rc

    report = rc.rescore(FIXTURE_CARDS / "synthetic", REPO / "fixtures" / "rules" / "success_by_run.yaml")
    alpha = [r for r in report.results if r.rule == "synthetic.success_by_run" and r.group == {"agent": "alpha"}][0]
    assert alpha.ci_low < 0 < 1 < alpha.ci_high  # the method's bounds are reported as they are
    assert any("reaches outside [0, 1]" in w for w in alpha.warnings)
