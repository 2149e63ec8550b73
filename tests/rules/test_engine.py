"""The engine on the synthetic fixture and on small generated cards: counts, statistics, errors."""

from __future__ import annotations

import importlib.util
import math
import statistics
from collections import defaultdict

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import ExpressionError, RuleError
from rollout_cards.model.rule import Rule
from rollout_cards.rules.engine import apply_rule
from rollout_cards.rules.loader import load_rule
from rollout_cards.stats import UnitStats, cluster_t_interval, wilson_interval
from tests.conftest import FIXTURE_CARDS, REPO
from tests.rules.conftest import build_card, episode

BAD = REPO / "fixtures" / "rules" / "bad"


def rule(**doc) -> Rule:
    return Rule.model_validate({"rule": "t.rule", **doc})


def by_group(run):
    return {tuple(r.group.values()): r for r in run.results if r.stratum is None}


def _make_py():
    spec = importlib.util.spec_from_file_location("fixture_make", REPO / "fixtures" / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_declared_rule_replays_the_numbers_make_py_computed_independently(synthetic):
    expected = _make_py().success_rates(FIXTURE_CARDS / "synthetic")
    run = apply_rule(synthetic, load_rule(FIXTURE_CARDS / "synthetic" / "rules" / "synthetic.success_rate.yaml"))
    heads = by_group(run)
    assert heads[("alpha",)].value == pytest.approx(expected["alpha"], abs=1e-12)
    assert heads[("beta",)].value == pytest.approx(expected["beta"], abs=1e-12)


def test_counts_add_up_and_the_interval_is_cluster_t_over_tasks(synthetic, synthetic_rows):
    run = apply_rule(synthetic, load_rule(FIXTURE_CARDS / "synthetic" / "rules" / "synthetic.success_rate.yaml"))
    for agent, r in by_group(run).items():
        rows = [x for x in synthetic_rows if x["agent"] == agent[0]]
        kept = [x for x in rows if x["status"] not in ("cancelled", "skipped")]
        assert r.n + r.n_excluded + r.n_selected_out == len(rows)
        assert r.n == len(kept) and r.interval.n_units == len({x["task_id"] for x in kept})
        units = UnitStats.from_values(
            [1.0 if x["status"] == "completed" and x["score.success"] else 0.0 for x in kept],
            [x["task_id"] for x in kept],
        )
        ref = cluster_t_interval(units)
        assert (r.ci_low, r.ci_high) == pytest.approx((ref.low, ref.high))
        assert r.interval.method == "cluster_t" and r.unit == "task_id"


def test_defaults_only_rule_and_score(synthetic, synthetic_rows):
    run = apply_rule(synthetic, rule(score="score.success"))
    (r,) = run.results
    scored = [x for x in synthetic_rows if x["status"] not in ("cancelled", "skipped")]
    successes = sum(1 for x in scored if x["status"] == "completed" and x["score.success"])
    assert r.group == {} and r.n == len(scored) and r.successes == successes
    assert r.excluded_by_status == {"cancelled": 1, "skipped": 1}
    w = wilson_interval(successes, len(scored))
    assert r.interval.method == "wilson" and (r.ci_low, r.ci_high) == pytest.approx((w.low, w.high))
    assert r.unit == "episode_id" and r.interval.n_units == len(scored)


def test_select_removes_and_counts(synthetic, synthetic_rows):
    run = apply_rule(synthetic, rule(score="score.success", select="cond.difficulty == 'hard'", aggregate={"group_by": ["agent"]}))
    for agent, r in by_group(run).items():
        rows = [x for x in synthetic_rows if x["agent"] == agent[0]]
        assert r.n_selected_out == sum(1 for x in rows if x["cond.difficulty"] != "hard")
    assert run.n_selected_out == sum(1 for x in synthetic_rows if x["cond.difficulty"] != "hard")


def test_an_empty_selection_gives_n_zero_and_an_undefined_value(synthetic):
    run = apply_rule(synthetic, rule(score="score.success", select="agent == 'nobody'", aggregate={"group_by": ["agent"]}))
    for r in run.results:
        assert r.n == 0 and r.value is None and not r.interval.defined
        assert r.display == "undefined (n = 0)" and r.n_selected_out == 108


def test_status_policy_numbers_and_missing_scores(tmp_path):
    card = build_card(
        tmp_path / "c",
        [
            episode(0, **{"score.x": 1.0}),
            episode(1, **{"score.x": None}),
            episode(2, status="error"),
            episode(3, status="timeout"),
            episode(4, status="limit"),
        ],
    )
    r = apply_rule(card, rule(score="score.x", on_status={"error": 0.5, "timeout": "exclude"})).results[0]
    # limit -> default 0, error -> 0.5, missing score -> on_missing default 0
    assert r.n == 4 and r.value == pytest.approx((1.0 + 0.0 + 0.5 + 0.0) / 4)
    assert r.excluded_by_status == {"timeout": 1} and r.n_missing == 1 and r.n_missing_excluded == 0
    assert any("null or NaN score, counted as 0" in w for w in r.warnings)
    r = apply_rule(card, rule(score="score.x", on_missing="exclude", on_status={"error": "score"})).results[0]
    # error scored with its null score -> missing too
    assert r.n_missing == 2 and r.n_missing_excluded == 2 and r.n == 3 and r.value == pytest.approx(1 / 3)
    with pytest.raises(RuleError) as info:
        apply_rule(card, rule(score="score.x", on_missing="error"), file="r.yaml")
    assert info.value.key == "on_missing" and "'ep-00001'" in str(info.value)


@settings(max_examples=25, deadline=None)
@given(
    statuses=st.lists(st.sampled_from(["completed", "error", "timeout", "limit", "cancelled", "skipped"]), min_size=1, max_size=30),
    policy=st.fixed_dictionaries({s: st.sampled_from(["score", "exclude", 0, 1]) for s in ["error", "timeout", "cancelled"]}),
)
def test_every_episode_is_counted_exactly_once(tmp_path_factory, statuses, policy):
    path = tmp_path_factory.mktemp("card") / "c"
    rows = [episode(i, status=s, agent="ab"[i % 2], **{"score.ok": i % 3 == 0}) for i, s in enumerate(statuses)]
    card = build_card(path, rows)
    run = apply_rule(card, rule(score="score.ok", on_status=policy, select="task_id != 'task-9'", aggregate={"group_by": ["agent"]}))
    for r in run.results:
        total = sum(1 for x in rows if x["agent"] == r.group["agent"])
        assert r.n + r.n_excluded + r.n_selected_out == total


def test_the_bad_input_corpus_fails_with_file_key_and_fix(synthetic):
    cases = {
        "missing_column.yaml": (ExpressionError, "score", "did you mean 'score.success'"),
        "divide_by_string.yaml": (ExpressionError, "score", "cannot apply '/' to float64 and string"),
        "k_too_large.yaml": (RuleError, "reduce.k", "fewer than k=3"),
        "bootstrap_zero_events.yaml": (RuleError, "aggregate.interval.method", "wilson"),
        "score_is_text.yaml": (ExpressionError, "score", "expected a number"),
    }
    for name, (kind, key, fragment) in cases.items():
        with pytest.raises(kind) as info:
            apply_rule(synthetic, load_rule(BAD / name), file=str(BAD / name))
        assert info.value.key == key, name
        assert str(BAD / name) in str(info.value) and fragment in str(info.value), str(info.value)


def test_unknown_grouping_columns_are_named(synthetic):
    with pytest.raises(RuleError) as info:
        apply_rule(synthetic, rule(score="score.success", aggregate={"group_by": ["agnt"]}), file="r.yaml")
    assert info.value.key == "aggregate.group_by" and "did you mean 'agent'" in str(info.value)


def test_reduce_max_is_a_best_of_k_and_says_so(synthetic, synthetic_rows):
    run = apply_rule(synthetic, load_rule(REPO / "fixtures" / "rules" / "best_of_3.yaml"))
    tasks: dict[tuple[str, str], list[float]] = defaultdict(list)
    for x in synthetic_rows:
        if x["status"] in ("cancelled", "skipped"):
            continue
        tasks[(x["agent"], x["task_id"])].append(1.0 if x["status"] == "completed" and x["score.success"] else 0.0)
    for agent, r in by_group(run).items():
        maxima = [max(v) for (a, _), v in tasks.items() if a == agent[0]]
        assert r.value == pytest.approx(statistics.fmean(maxima))
        assert r.n == 36 and r.reduce["with"] == "max" and r.reduce["k"] == 3
        assert any("best of k=2..3 attempts per task_id" in w for w in r.warnings)


def test_pass_at_2_matches_the_estimator_per_task(synthetic, synthetic_rows):
    run = apply_rule(synthetic, load_rule(REPO / "fixtures" / "rules" / "pass_at_2.yaml"))
    tasks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for x in synthetic_rows:
        if x["status"] not in ("cancelled", "skipped"):
            tasks[(x["agent"], x["task_id"])].append(int(x["status"] == "completed" and bool(x["score.success"])))
    for agent, r in by_group(run).items():
        per_task = [1 - math.comb(len(v) - sum(v), 2) / math.comb(len(v), 2) for (a, _), v in tasks.items() if a == agent[0]]
        assert r.value == pytest.approx(statistics.fmean(per_task))


def test_a_unit_that_varies_within_a_reduce_key_is_refused(synthetic):
    with pytest.raises(RuleError, match="constant per reduce key"):
        apply_rule(synthetic, rule(score="score.success", reduce={"by": ["task_id"], "with": "mean"}, aggregate={"unit": "run_id"}))


def test_kidney_stones_strata_flag_the_ranking_flip(tmp_path):
    counts = {("A", "small"): (81, 87), ("A", "large"): (192, 263), ("B", "small"): (234, 270), ("B", "large"): (55, 80)}
    rows, i = [], 0
    for (agent, size), (k, n) in counts.items():
        for j in range(n):
            rows.append(episode(i, agent=agent, **{"cond.size": size, "score.ok": j < k}))
            i += 1
    card = build_card(tmp_path / "k", rows)
    runs = {
        w: apply_rule(card, rule(score="score.ok", aggregate={"group_by": ["agent"], "strata": ["cond.size"], "weights": w}))
        for w in ("equal", "by_count")
    }
    pooled = {w: {r.group["agent"]: r for r in run.results if r.pooled} for w, run in runs.items()}
    assert pooled["by_count"]["A"].value == pytest.approx(273 / 350) and pooled["by_count"]["B"].value == pytest.approx(289 / 350)
    assert pooled["equal"]["A"].value == pytest.approx((81 / 87 + 192 / 263) / 2)
    assert pooled["equal"]["B"].value == pytest.approx((234 / 270 + 55 / 80) / 2)
    note = [w for w in pooled["equal"]["A"].warnings if "rank the groups differently" in w]
    assert note and "equal: agent=A > agent=B" in note[0] and "by_count: agent=B > agent=A" in note[0]
    # Per-stratum results are Wilson intervals over the stratum's episodes.
    small_a = next(r for r in runs["equal"].results if r.stratum == {"cond.size": "small"} and r.group == {"agent": "A"})
    w = wilson_interval(81, 87)
    assert small_a.n == 87 and (small_a.ci_low, small_a.ci_high) == pytest.approx((w.low, w.high))
    # The pooled interval linearizes Σ w_s·mean_s over units (episodes here, nested in the
    # strata): design-based variance Σ_s n_s/(n_s−1) Σ z², t on C − S degrees of freedom.
    var, units = 0.0, 0
    for size, w in (("small", 87 / 350), ("large", 263 / 350)):
        k, n = counts[("A", size)]
        z = np.asarray([w * (y - k / n) / n for y in [1.0] * k + [0.0] * (n - k)])
        var += n / (n - 1) * float(z @ z)
        units += n
    half = scipy.stats.t.ppf(0.975, units - 2) * math.sqrt(var)
    by_count_a = pooled["by_count"]["A"]
    assert by_count_a.interval.method == "stratified_design_t" and by_count_a.interval.df == 348
    assert (by_count_a.ci_low, by_count_a.ci_high) == pytest.approx((273 / 350 - half, 273 / 350 + half))


def test_zero_events_are_printed_with_an_upper_bound_and_one_unit_is_undefined(tmp_path):
    card = build_card(tmp_path / "z", [episode(i, run_id="r0", **{"score.ok": False}) for i in range(32)])
    r = apply_rule(card, rule(score="score.ok")).results[0]
    assert r.display == "0/32 (95% upper bound 0.0894)"
    assert r.ci_low == 0.0 and r.ci_high == pytest.approx(0.1071791983)
    r = apply_rule(card, rule(score="score.ok", aggregate={"unit": "run_id"})).results[0]
    assert not r.interval.defined and r.interval.n_units == 1
    assert any("only 1 unit (run_id)" in w for w in r.warnings)
    with pytest.raises(RuleError, match="refusing to bootstrap"):
        apply_rule(card, rule(score="score.ok", aggregate={"interval": {"method": "bootstrap"}}))


def test_interval_methods_that_cannot_apply(synthetic):
    with pytest.raises(RuleError, match="wilson needs 0/1 scores"):
        apply_rule(synthetic, rule(score="score.profit", aggregate={"interval": {"method": "wilson"}}))
    with pytest.raises(RuleError, match="cluster_t is an interval for the mean"):
        apply_rule(synthetic, rule(score="score.profit", aggregate={"statistic": "median", "interval": {"method": "cluster_t"}}))
    # Beyond the exact enumeration's 12 units, the seeded bootstrap is used and named.
    r = apply_rule(synthetic, rule(score="score.profit", aggregate={"interval": {"method": "exact_bootstrap"}})).results[0]
    assert r.interval.method == "bootstrap" and any("enumerates at most 12 units" in w for w in r.warnings)


def test_bootstrap_is_seeded_and_reports_its_resamples(synthetic):
    spec = {"statistic": "median", "group_by": ["agent"], "interval": {"method": "bootstrap", "resamples": 500}}
    a = apply_rule(synthetic, rule(score="score.profit", aggregate=spec), seed=7).results
    b = apply_rule(synthetic, rule(score="score.profit", aggregate=spec), seed=7).results
    c = apply_rule(synthetic, rule(score="score.profit", aggregate=spec), seed=8).results
    assert [(r.ci_low, r.ci_high) for r in a] == [(r.ci_low, r.ci_high) for r in b]
    assert [(r.ci_low, r.ci_high) for r in a] != [(r.ci_low, r.ci_high) for r in c]
    details = a[0].interval.details
    assert details["resamples"] == 500 and details["seed"] == 7 and details["quantile_method"] == "linear"


def test_reading_a_column_the_drops_manifest_marks_unobserved_warns(synthetic):
    run = apply_rule(
        synthetic,
        rule(score="cost > 0", features={"cost": {"value": "coalesce(cost_usd, 0.0)", "agg": "sum"}}),
    )
    assert any("steps.cost_usd, which the drops manifest marks unobserved" in w for w in run.results[0].warnings)


def test_features_reach_score_and_select(synthetic, synthetic_rows):
    run = apply_rule(
        synthetic,
        rule(
            score="searched",
            select="n_calls >= 2",
            features={
                "searched": {"where": "kind == 'tool_call' and name == 'search_flights'", "agg": "any"},
                "n_calls": {"where": "kind == 'tool_call'", "agg": "count"},
            },
            on_status={"error": "score", "timeout": "score", "limit": "score", "cancelled": "score", "skipped": "score"},
        ),
    )
    steps = synthetic.steps(columns=["episode_id", "kind", "name"]).to_pylist()
    calls: dict[str, list[str]] = defaultdict(list)
    for s in steps:
        if s["kind"] == "tool_call":
            calls[s["episode_id"]].append(s["name"])
    kept = [x["episode_id"] for x in synthetic_rows if len(calls[x["episode_id"]]) >= 2]
    r = run.results[0]
    assert r.n == len(kept) and r.n_selected_out == len(synthetic_rows) - len(kept)
    assert r.successes == sum("search_flights" in calls[e] for e in kept)


def test_compare_pairs_groups_on_shared_units(synthetic):
    run = apply_rule(synthetic, load_rule(REPO / "fixtures" / "rules" / "best_of_3.yaml"))
    (c,) = run.comparisons
    heads = by_group(run)
    assert c.group == {"agent": "alpha"} and c.baseline == {"agent": "beta"}
    assert c.difference == pytest.approx(heads[("alpha",)].value - heads[("beta",)].value)
    assert c.n_units == 36 and c.interval.method == "paired_t" and c.interval.low > 0
    with pytest.raises(RuleError, match="no group matches the baseline"):
        apply_rule(synthetic, rule(score="score.success", aggregate={"group_by": ["agent"]}, compare={"baseline": {"agent": "gamma"}}))
