"""Headline and pooled intervals on small cards: the issue-13 fixes, each against a
textbook formula computed here in plain Python."""

from __future__ import annotations

import math
import statistics

import pytest
import scipy.stats

from rollout_cards.model.rule import Rule
from rollout_cards.rules import apply_rule
from tests.rules.conftest import build_card, episode


def rule(**doc) -> Rule:
    return Rule.model_validate({"rule": "t.rule", **doc})


def pooled(run, group=None):
    return next(r for r in run.results if r.pooled and (group is None or r.group == group))


SCORES = {  # stratum -> per-task scores (one episode per task: the task is the unit)
    "easy": [0.9, 0.7, 0.8, 1.0],
    "mid": [0.4, 0.6, 0.3],
    "hard": [0.1],  # a lonely unit
}


def _card(tmp_path, scores):
    rows, i = [], 0
    for stratum, values in scores.items():
        for v in values:
            rows.append(episode(i, task_id=f"t{i}", **{"cond.level": stratum, "score.x": v}))
            i += 1
    return build_card(tmp_path / "c", rows)


def test_units_nested_in_strata_use_the_design_based_variance(tmp_path):
    scores = {k: v for k, v in SCORES.items() if k != "hard"}
    run = apply_rule(_card(tmp_path, scores), rule(score="score.x", aggregate={"unit": "task_id", "strata": ["cond.level"]}))
    r = pooled(run)
    # Textbook stratified sampling: Var = Σ w_h² s_h² / n_h, df = n − H.
    var = sum(0.25 * statistics.variance(v) / len(v) for v in scores.values())
    half = scipy.stats.t.ppf(0.975, 7 - 2) * math.sqrt(var)
    est = statistics.fmean(statistics.fmean(v) for v in scores.values())
    assert r.interval.method == "stratified_design_t" and r.interval.df == 5
    assert (r.ci_low, r.ci_high) == pytest.approx((est - half, est + half))
    assert r.interval.details["design"] == "units nested in strata"


def test_a_lonely_unit_in_a_stratum_widens_the_interval_and_says_so(tmp_path):
    # Issue 13.3: the lone "hard" task used to add exactly zero variance, silently.
    run = apply_rule(_card(tmp_path, SCORES), rule(score="score.x", aggregate={"unit": "task_id", "strata": ["cond.level"]}))
    r = pooled(run)
    w = 1 / 3
    est = statistics.fmean(statistics.fmean(v) for v in SCORES.values())
    var = sum(w * w * statistics.variance(v) / len(v) for k, v in SCORES.items() if k != "hard")
    var_adjust = var + (w * (SCORES["hard"][0] - est)) ** 2  # survey's lonely.psu = "adjust"
    assert r.interval.se == pytest.approx(math.sqrt(var_adjust))
    assert r.interval.se > math.sqrt(var)  # wider than the silent zero
    assert r.interval.details["lonely_strata"] == ["cond.level=hard"]
    assert any("single unit of task_id (cond.level=hard)" in w for w in r.warnings)


def test_units_crossing_strata_keep_the_cluster_variance(tmp_path):
    rows = [episode(i, run_id=f"r{i % 3}", **{"cond.level": "a" if i % 2 else "b", "score.x": float((i * i) % 7)}) for i in range(30)]
    run = apply_rule(build_card(tmp_path / "x", rows), rule(score="score.x", aggregate={"unit": "run_id", "strata": ["cond.level"]}))
    r = pooled(run)
    assert r.interval.method == "stratified_cluster_t" and r.interval.df == 2
    assert "lonely_strata" not in r.interval.details


def test_auto_median_with_an_all_zero_group_keeps_the_other_groups(tmp_path):
    # Issue 13.5: auto picked the bootstrap, which refused the all-zero group, and the
    # whole report failed.
    rows = [episode(i, agent="zero", **{"score.x": 0.0}) for i in range(20)]
    rows += [episode(20 + i, agent="some", **{"score.x": float(i % 4)}) for i in range(20)]
    run = apply_rule(build_card(tmp_path / "z", rows), rule(score="score.x", aggregate={"statistic": "median", "group_by": ["agent"]}))
    heads = {r.group["agent"]: r for r in run.results}
    assert heads["some"].interval.defined and heads["some"].interval.method == "bootstrap"
    assert not heads["zero"].interval.defined and heads["zero"].value == 0.0
    assert "zero events" in heads["zero"].interval.reason
    assert any("use wilson or clopper_pearson" in w for w in heads["zero"].warnings)


def test_iqm_over_runs_is_labelled_iqm_of_run_means(tmp_path):
    # Issue 13.6: with unit run_id the IQM is over 4 run means, not rliable's IQM.
    rows = [episode(i, run_id=f"r{i % 4}", **{"score.x": float(i % 7)}) for i in range(40)]
    run = apply_rule(build_card(tmp_path / "i", rows), rule(score="score.x", aggregate={"statistic": "iqm", "unit": "run_id"}))
    r = run.results[0]
    means = [statistics.fmean(float(i % 7) for i in range(40) if i % 4 == k) for k in range(4)]
    assert r.value == pytest.approx(scipy.stats.trim_mean(means, 0.25))
    assert r.interval.details["statistic_over"] == "iqm of the 4 run_id means"
    assert any("not rliable's iqm" in w for w in r.warnings)
    by_episode = apply_rule(build_card(tmp_path / "j", rows), rule(score="score.x", aggregate={"statistic": "iqm"})).results[0]
    assert "statistic_over" not in by_episode.interval.details


def test_one_episode_group_has_no_wilson_interval(tmp_path):
    rows = [episode(0, agent="solo", **{"score.ok": True})] + [episode(i, agent="many", **{"score.ok": i % 2 == 0}) for i in range(1, 11)]
    run = apply_rule(build_card(tmp_path / "w", rows), rule(score="score.ok", aggregate={"group_by": ["agent"]}))
    solo = next(r for r in run.results if r.group == {"agent": "solo"})
    assert not solo.interval.defined and solo.ci_low is None and solo.ci_high is None
    assert solo.to_dict()["interval"]["defined"] is False


def test_a_paired_median_of_two_constant_groups_is_undefined_not_fatal(tmp_path):
    rows = [episode(i, agent="a", **{"score.x": 0.0}) for i in range(10)]
    rows += [episode(10 + i, agent="b", **{"score.x": 0.0}) for i in range(10)]
    rows += [episode(20 + i, agent="c", **{"score.x": float(i % 3)}) for i in range(10)]
    doc = {"statistic": "median", "group_by": ["agent"], "unit": "task_id"}
    run = apply_rule(build_card(tmp_path / "p", rows), rule(score="score.x", aggregate=doc, compare={"baseline": {"agent": "a"}}))
    by = {c.group["agent"]: c for c in run.comparisons}
    assert not by["b"].interval.defined and "every resample gives the same difference" in by["b"].interval.reason
    assert by["c"].interval.method == "paired_bootstrap"


@pytest.mark.parametrize("statistic", ["std", "var", "stderr"])
def test_spread_headlines_are_over_the_unit_values(tmp_path, statistic):
    # Two episodes per task: the spread is of the 5 task means (n − 1), as Inspect's metrics
    # are of its reduced samples; with one unit it is undefined (Inspect would print 0).
    rows = [episode(i, task_id=f"t{i % 5}", agent="a", **{"score.x": float((i * 7) % 4)}) for i in range(10)]
    rows.append(episode(10, task_id="t9", agent="solo", **{"score.x": 1.0}))
    run = apply_rule(build_card(tmp_path / "s", rows),
                     rule(score="score.x", aggregate={"statistic": statistic, "unit": "task_id", "group_by": ["agent"]}))
    heads = {r.group["agent"]: r for r in run.results}
    means = [statistics.fmean(float((i * 7) % 4) for i in range(10) if i % 5 == k) for k in range(5)]
    want = {"std": statistics.stdev(means), "var": statistics.variance(means),
            "stderr": statistics.stdev(means) / math.sqrt(5)}[statistic]
    assert heads["a"].value == pytest.approx(want, rel=1e-12)
    assert heads["a"].interval.method == "bootstrap" and heads["a"].interval.defined
    assert heads["solo"].value is None and not heads["solo"].interval.defined
    assert any("undefined" in w for w in heads["solo"].warnings)


def test_a_spread_of_all_correct_scores_is_zero_not_a_count_of_successes(tmp_path):
    # Inspect's stderr of all-correct samples is 0.0: the headline is that number, not "n/n" with a
    # zero-event bound (which describes a mean of 0/1 scores; `rcard export eee` reads `successes`).
    rows = [episode(i, task_id=f"t{i}", **{"score.ok": 1.0}) for i in range(8)]
    run = apply_rule(build_card(tmp_path / "c", rows), rule(score="score.ok", aggregate={"statistic": "stderr"}))
    head = run.results[0]
    assert head.value == 0.0 and head.successes is None and not head.zero_events
