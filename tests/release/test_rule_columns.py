"""Which columns a rule reads (for a redaction's `affects`)."""

from __future__ import annotations

from rollout_cards.release.rule_columns import ALL_COLUMNS, columns_read_by_rules
from rollout_cards.rules.loader import columns_read, parse_rule

RULE = """
rule: tau.transfer_is_failure
select: "agent == 'gpt-4o'"
features:
  transferred:
    from: steps
    where: "kind == 'tool_call' and name == 'transfer_to_human_agents'"
    agg: any
  writes:
    where: "kind == 'tool_call'"
    value: "name + ':' + args"
    agg: list
score: "score.reward == 1 and not transferred"
reduce: {by: [task_id], with: pass_hat_k, k: 2}
aggregate: {group_by: [agent], unit: task_id, strata: [cond.wind]}
compare: {baseline: {agent: gpt-4o}, pair_on: [task_id, trial]}
"""


def test_columns_of_the_brief_example() -> None:
    # Feature names (transferred, writes) are not columns; grouping keys are.
    assert columns_read(parse_rule(RULE)) == {
        "episodes.agent", "episodes.score.reward", "episodes.task_id", "episodes.cond.wind", "episodes.trial",
        "steps.kind", "steps.name", "steps.args",
    }


def test_unreadable_rules_read_everything() -> None:
    out = columns_read_by_rules({"a": "score: 'content =='", "b": ": : :", "c": "[1, 2]",
                                 "d": "rule: d\nscore: 'score.x'"})
    assert out["a"] == out["b"] == out["c"] == ALL_COLUMNS
    assert out["d"] == {"episodes.score.x"}
