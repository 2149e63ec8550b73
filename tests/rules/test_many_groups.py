"""A rule grouping by thousands of values (a hostile or careless card: one group per episode's
agent) must finish or refuse clearly: rescore's pairwise work (rank intervals, tied sets,
the swaps behind rank changes), power's all-pairs comparison and rliable's per-pair
bootstraps are bounded. Found by the trust pass: 10,000 agents made rescore and rliable run
past 5 minutes and power reach 3.9 GB before it was killed."""

from __future__ import annotations

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import RuleError
from rollout_cards.rules import rescore
from rollout_cards.rules.power import MAX_POWER_PAIRS, power_analysis
from rollout_cards.rules.rescore import MAX_RANKED_GROUPS
from rollout_cards.rules.runs_tasks import MAX_RLIABLE_GROUPS, runs_tasks_view

GROUPS = MAX_RANKED_GROUPS + 50  # past every bound: ranking (100), power's pairs (10,000 = 141 groups), rliable (50)
RULE = """rule: many.success
version: 1
kind: regrade
score: "score.success"
on_missing: 0
aggregate:
  statistic: mean
  group_by: [agent]
  unit: task_id
  interval: {{method: {method}, level: 0.95}}
"""


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    n = GROUPS * 4
    writer = rc.CardWriter(root / "card", id="many", title="many groups", timestamps=False)
    ids = [f"e{i}" for i in range(n)]
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": [f"t{i % 4}" for i in range(n)], "agent": [f"a{i // 4:03d}" for i in range(n)],
        "run_id": ["r0"] * n, "status": ["completed"] * n,
        # two values per agent, so values tie and rank, and the alternative rule reorders them
        "score.success": [float((i // 4) % 3 == 0 or i % 4 == 0) for i in range(n)],
        "score.other": [float((i // 4) % 5 == 0) for i in range(n)]}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    rule = root / "r.yaml"
    rule.write_text(RULE.format(method="cluster_t"))
    writer.add_rule(rule)  # the card's own rule: the alternative is compared with it
    writer.close()
    other = root / "o.yaml"
    other.write_text(RULE.format(method="cluster_t").replace("many.success", "many.other")
                     .replace('"score.success"', '"score.other"'))
    return root / "card", rule, other


def test_rescore_of_many_groups_gives_point_ranks_and_says_why(many):
    card, rule, other = many
    report = rescore(card, [other])
    ranking = next(r for r in report.rankings if r.rule == "many.success")
    assert len(ranking.entries) == GROUPS and ranking.tied_sets == ()
    assert all(e["rank_low"] is None for e in ranking.entries)
    assert ranking.details["rank_interval"] == (f"not computed: {GROUPS:,} groups, more than the "
                                                f"{MAX_RANKED_GROUPS} ranked with intervals")
    # the rank changes are listed, their noise not assessed (that is pairwise too)
    assert report.rank_changes and all(c.noise.startswith("not assessed") and not c.swapped_with
                                       for c in report.rank_changes)
    # the headlines are unchanged by the bound: each group's mean, as plain Python gives it
    run = next(r for r in report.runs if r.rule == "many.success")
    for g in run.results[:5]:
        i = int(g.group["agent"][1:])
        expected = sum(float(i % 3 == 0 or j == 0) for j in range(4)) / 4
        assert g.value == pytest.approx(expected)
    result = CliRunner().invoke(app, ["rescore", str(card)])
    assert result.exit_code == 0, result.output
    assert f"many.success: rank intervals not computed: {GROUPS:,} groups" in result.output


def test_power_of_all_pairs_of_many_groups_is_refused_naming_the_fix(many):
    card, rule, _ = many
    assert GROUPS * (GROUPS - 1) // 2 > MAX_POWER_PAIRS
    with pytest.raises(RuleError, match=r"every pair of the 150 groups \(11,175 pairs\), more than the 10,000.*"
                                         r"compare\.baseline"):
        power_analysis(card, rule)
    baseline = rule.parent / "b.yaml"
    baseline.write_text(rule.read_text() + "compare:\n  baseline: {agent: a000}\n")
    report = power_analysis(card, baseline)  # one baseline: GROUPS - 1 pairs
    assert len(report.results) == GROUPS - 1


def test_rliable_of_many_groups_is_refused(many):
    card, rule, _ = many
    with pytest.raises(RuleError, match=f"compare {GROUPS} groups, more than the {MAX_RLIABLE_GROUPS}"):
        runs_tasks_view(card, rule)
    result = CliRunner().invoke(app, ["rliable", str(card), "--rule", str(rule)])
    assert result.exit_code == 2 and "more than the 50" in result.output, result.output  # a --rule file: usage
