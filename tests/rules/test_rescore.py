"""Rescoring the synthetic card with the fixture alternatives: each effect, with its numbers pinned.

Numbers are recomputed here from the episodes (plain Python) wherever the definition
is simple; the intervals come from the stats functions the engine is built on.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest

from rollout_cards.errors import RuleError
from rollout_cards.rules import render, rescore
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


# --- issue 13.4 and issue 11.3: what a reviewer asks of a rescore -------------------

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import rollout_cards as rc  # noqa: E402
from rollout_cards.io.writer import CardWriter  # noqa: E402
from rollout_cards.model.rule import Rule  # noqa: E402

ORIGINAL = """\
rule: t.original
kind: original
score: "score.ok"
aggregate: {group_by: [agent]}
"""
COST = """\
rule: t.cost
kind: diagnostic
score: "score.cost"
aggregate: {group_by: [agent], unit: task_id}
"""


def _runs_card(tmp_path, rows, rules=(ORIGINAL,)):
    path = tmp_path / "card"
    with CardWriter(path, id="t-card", title="rescore test", timestamps=False) as w:
        w.write_episodes(pa.Table.from_pylist(rows))
        for i, text in enumerate(rules):
            w.add_rule(f"r{i}.yaml", text=text)
    return rc.open(path)


def _run_rows():
    # 8 runs x 50 tasks; success depends strongly on the run, so runs are the unit.
    rng = np.random.default_rng(5)
    rows, i = [], 0
    for agent, base in (("a", 0.55), ("b", 0.6)):
        for run in range(8):
            p_run = min(0.95, max(0.05, base + rng.normal(0, 0.2)))
            for task in range(25):
                ok = bool(rng.random() < p_run)
                alt = ok and bool(rng.random() < 0.6)
                rows.append({"episode_id": f"e{i}", "task_id": f"t{task}", "run_id": f"{agent}-r{run}", "status": "completed",
                             "agent": agent, "score.ok": ok, "score.strict": alt, "score.cost": float(rng.gamma(2, 1 + (agent == "b")))})
                i += 1
    return rows


def test_rule_differences_pair_on_the_coarser_unit_and_say_so(tmp_path):
    # Issue 13.4: an alternative over runs was differenced over episodes (5x too narrow).
    rows = _run_rows()
    card = _runs_card(tmp_path, rows)
    alt = Rule.model_validate({"rule": "t.strict", "score": "score.strict", "aggregate": {"group_by": ["agent"], "unit": "run_id"}})
    d = next(d for d in rc.rescore(card, [alt]).differences if d.group == {"agent": "a"})
    assert d.unit == "run_id" and d.n_units == 8 and "coarser" in d.pairing
    assert any("paired on run_id, the coarser" in w for w in d.warnings)
    # Reference: the per-run difference of rates, clustered by run (plain numpy).
    runs = sorted({r["run_id"] for r in rows if r["agent"] == "a"})
    per_run = [[r for r in rows if r["run_id"] == run] for run in runs]
    n = sum(len(p) for p in per_run)
    diff = sum(r["score.strict"] - r["score.ok"] for p in per_run for r in p) / n
    z = np.array([sum(r["score.strict"] - r["score.ok"] for r in p) / n - len(p) / n * diff for p in per_run])
    se = np.sqrt(8 / 7 * z @ z)
    assert d.interval.se == pytest.approx(se) and d.difference == pytest.approx(diff)
    naive = rc.rescore(card, [alt], pair_on=["episode_id"]).differences[0]
    assert naive.unit == "episode_id" and naive.pairing == "named by pair_on"
    assert naive.interval.width < d.interval.width  # runs vary: the episode pairing is too narrow


def test_against_compares_only_with_the_named_declared_rules(tmp_path):
    card = _runs_card(tmp_path, _run_rows(), rules=(ORIGINAL, COST))
    alt = Rule.model_validate({"rule": "t.strict", "kind": "regrade", "score": "score.strict", "aggregate": {"group_by": ["agent"]}})
    everything = rc.rescore(card, [alt])
    assert {d.against for d in everything.differences} == {"t.original"}  # the original only, by default
    named = rc.rescore(card, [alt], against=["t.cost"])
    assert {d.against for d in named.differences} == {"t.cost"}
    with pytest.raises(RuleError, match="'t.nope' is not a rule the card declares"):
        rc.rescore(card, [alt], against=["t.nope"])


def test_lower_is_better_ranks_the_cheapest_first(tmp_path):
    card = _runs_card(tmp_path, _run_rows(), rules=(ORIGINAL,))
    cost = dict(Rule.model_validate({"rule": "t.cost", "score": "score.cost", "aggregate": {"group_by": ["agent"], "unit": "task_id"}}).model_dump(by_alias=True))
    up = Rule.model_validate(cost)
    cost["aggregate"] = {**cost["aggregate"], "higher_is_better": False}
    cost["rule"] = "t.cost_low"
    down = Rule.model_validate(cost)
    report = rc.rescore(card, [up, down])
    ranking = {r.rule: r for r in report.rankings}
    means = {a: statistics.fmean(r["score.cost"] for r in _run_rows() if r["agent"] == a) for a in "ab"}
    assert means["a"] < means["b"]
    assert [e["group"]["agent"] for e in ranking["t.cost_low"].entries] == ["a", "b"]
    assert [e["group"]["agent"] for e in ranking["t.cost"].entries] == ["b", "a"]
    assert ranking["t.cost_low"].higher_is_better is False


def test_rank_flips_say_whether_they_are_inside_the_noise():
    report = rescore(CARD, [RULES / "best_of_3.yaml"])
    alpha = next(c for c in report.rank_changes if c.group == {"agent": "alpha"})
    (swap,) = alpha.swapped_with
    # Under best-of-3 alpha beats beta clearly; under the original they are within noise.
    assert swap["excludes_zero"] and not swap["against_excludes_zero"]
    assert alpha.noise == "inside the noise"
    assert swap["against_interval"][0] < 0 < swap["against_interval"][1]
    table = render(report, "table")
    assert "inside the noise" in table


def test_p_values_are_adjusted_over_the_named_family():
    holm = rescore(CARD, [RULES / "best_of_3.yaml", RULES / "pass_at_2.yaml"])
    family = [c for c in holm.comparisons if c.p_value is not None]
    assert holm.adjust["method"] == "holm" and holm.adjust["m"] == len(family) >= 3
    p = sorted(c.p_value for c in family)
    smallest = min(family, key=lambda c: c.p_value)
    assert smallest.p_adjusted == pytest.approx(min(1.0, len(p) * p[0]))
    none = rescore(CARD, [RULES / "best_of_3.yaml", RULES / "pass_at_2.yaml"], adjust="none")
    assert all(c.p_adjusted == c.p_value for c in none.comparisons)
    assert "Holm adjustment over the" in render(holm, "table")
    # The compare of best_of_3 pairs one 0/1 value per task: exact McNemar.
    group = next(c for c in holm.comparisons if getattr(c, "baseline", None))
    assert group.interval.details["p_method"] == "exact McNemar"


def test_rankings_have_bootstrap_rank_intervals_and_tied_sets():
    report = rescore(CARD, [RULES / "best_of_3.yaml"])
    ranking = {r.rule: r for r in report.rankings}
    orig = ranking["synthetic.success_rate"]
    assert [e["group"]["agent"] for e in orig.entries] == ["beta", "alpha"]
    assert all(e["rank_low"] == 1 and e["rank_high"] == 2 for e in orig.entries)
    assert len(orig.tied_sets) == 1  # 0.439 vs 0.393: not separated
    best = ranking["synthetic.best_of_3"]
    assert [len(t) for t in best.tied_sets] == [1, 1]
    assert report.to_dict()["rankings"][0]["details"]["resampled"] == "shared units, jointly"
