"""The rule model: defaults, cross-field checks, JSON Schema."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rollout_cards.model.rule import DEFAULT_ON_STATUS, Rule
from rollout_cards.model.schemas import document_schemas, schema_problems
from tests.conftest import REPO


def test_a_rule_with_only_rule_and_score_has_the_documented_defaults():
    rule = Rule.model_validate({"rule": "x.y", "score": "score.ok"})
    assert rule.on_status == DEFAULT_ON_STATUS
    assert [rule.on_status.policy(s) for s in ("completed", "error", "timeout", "limit", "cancelled", "skipped")] == [
        "score", 0.0, 0.0, 0.0, "exclude", "exclude"
    ]
    assert rule.on_missing == 0.0
    assert rule.aggregate.statistic.value == "mean"
    assert rule.aggregate.group_by == []
    assert rule.aggregate.unit_columns() is None
    assert rule.aggregate.interval.method.value == "auto"
    assert rule.aggregate.interval.level == 0.95


def test_a_partial_on_status_keeps_the_other_defaults():
    rule = Rule.model_validate({"rule": "x", "score": "1", "on_status": {"error": "exclude"}})
    assert rule.on_status.error == "exclude"
    assert rule.on_status.timeout == 0.0 and rule.on_status.cancelled == "exclude"


@pytest.mark.parametrize(
    "doc, fragment",
    [
        ({"reduce": {"by": ["task_id"], "with": "pass_at_k"}}, "needs k"),
        ({"reduce": {"by": ["task_id"], "with": "max", "k": 2}}, "k applies to pass_at_k"),
        ({"features": {"n": {"agg": "sum"}}}, "needs a `value`"),
        ({"features": {"n": {"agg": "count", "value": "1"}}}, "remove `value`"),
        ({"features": {"bad-name": {"agg": "count"}}}, "string_pattern_mismatch"),
        ({"compare": {"baseline": {"agent": "a"}}}, "compare.baseline must name group_by"),
        ({"aggregate": {"group_by": ["agent"]}, "reported": [{"value": 0.5}]}, "reported[0].group"),
        ({"aggregate": {"group_by": ["a"], "strata": ["a"]}}, "both a group_by and a strata"),
        ({"aggregate": {"interval": {"level": 1.5}}}, "less_than"),
        ({"on_missing": "skip"}, "on_missing"),
        ({"surprise": 1}, "extra_forbidden"),
    ],
)
def test_invalid_rules_are_refused(doc, fragment):
    with pytest.raises(ValidationError) as info:
        Rule.model_validate({"rule": "x", "score": "1", **doc})
    text = str(info.value) + json.dumps([e["type"] for e in info.value.errors()])
    assert fragment in text


def test_the_file_keys_from_and_with_round_trip():
    doc = {
        "rule": "x",
        "score": "n > 0",
        "features": {"n": {"from": "steps", "agg": "count", "where": "kind == 'tool_call'"}},
        "reduce": {"by": ["task_id"], "with": "max"},
    }
    rule = Rule.model_validate(doc)
    again = Rule.model_validate(rule.to_json_dict())
    assert again == rule
    assert rule.to_json_dict()["reduce"]["with"] == "max"
    assert rule.to_json_dict()["features"]["n"]["from"] == "steps"


def test_the_rule_schema_is_generated_and_committed():
    assert "rule-0.2.schema.json" in document_schemas()
    assert (REPO / "schemas" / "rule-0.2.schema.json").is_file()


def test_the_schema_accepts_the_fixture_rules_and_names_problems():
    import yaml

    for path in sorted((REPO / "fixtures" / "rules").glob("*.yaml")):
        assert schema_problems("rule", yaml.safe_load(path.read_text())) == [], path.name
    problems = schema_problems("rule", {"rule": "x", "score": "1", "aggregate": {"statistic": "avg"}})
    assert [p.location for p in problems] == ["/aggregate/statistic"]


def test_every_field_has_a_description_in_the_schema():
    schema = document_schemas()["rule-0.2.schema.json"]
    for name, definition in schema["$defs"].items():
        for field, spec in definition.get("properties", {}).items():
            assert spec.get("description"), f"{name}.{field} has no docstring"


@pytest.mark.parametrize("key", ["group_by", "strata"])
def test_a_group_key_names_each_column_once(key, tmp_path):
    """`group_by: [agent, agent]` made `rcard rescore` fail inside the engine (internal error,
    "('beta',) is not in list"); refused where the rule is read, naming the key."""
    with pytest.raises(ValidationError, match=f"{key} names a column more than once"):
        Rule.model_validate({"rule": "x", "score": "1", "aggregate": {key: ["agent", "agent"]}})
    from typer.testing import CliRunner

    from rollout_cards.cli import app

    rule = tmp_path / "r.yaml"
    rule.write_text(f"rule: x.y\nscore: score.success\naggregate:\n  {key}: [agent, agent]\n")
    result = CliRunner().invoke(app, ["rescore", str(REPO / "fixtures/cards/synthetic"), "--rule", str(rule)])
    assert result.exit_code == 2 and f"r.yaml:4: aggregate.{key}: {key} names a column more than once" in result.output, \
        result.output
