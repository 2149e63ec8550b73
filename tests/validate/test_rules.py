"""Rule files: size, encoding, safe YAML without duplicate keys, ids; messages never quote the file."""

from __future__ import annotations

import bad_cards
import pytest
import yaml

from rollout_cards.validate import validate
from rollout_cards.validate.rules import load_rule_yaml

RULE = bad_cards.RULE


@pytest.mark.parametrize("text", ["a: 1\na: 2\n", "a:\n  b: 1\n  b: 1\n", "!!python/object/apply:os.system ['x']\n",
                                  "a: !!python/name:os.system\n", "[1, 2\n", "? [1]\n: 2\n"])
def test_unsafe_or_ambiguous_yaml_is_refused(text):
    with pytest.raises(yaml.YAMLError):
        load_rule_yaml(text)


def test_plain_yaml_loads_as_with_the_safe_loader():
    text = "rule: x.y\nversion: 1\nbase: {a: 1}\nlist: [1, 2]\n"
    assert load_rule_yaml(text) == yaml.safe_load(text)


def test_alias_bomb_is_refused_before_expansion():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("bcdefgh", "cdefghi", strict=True)
    )
    with pytest.raises(yaml.YAMLError, match="anchors"):
        load_rule_yaml(bomb)


def test_yaml_errors_name_the_line_without_quoting_the_text(synthetic_copy):
    secret = "patient Jane Doe, born 1970-01-01, diagnosis"
    (synthetic_copy / RULE).write_text(f"rule: synthetic.success_rate\ndescription: {secret}: [\n")
    bad_cards.rehash(synthetic_copy)
    report = validate(synthetic_copy)
    (finding,) = [f for f in report.findings if f.code == "rule-yaml-invalid"]
    assert "line 2" in finding.message and "Jane" not in finding.message


def test_a_rule_stored_under_another_name(synthetic_copy):
    (synthetic_copy / RULE).rename(synthetic_copy / "rules" / "other.yaml")

    def change(doc):
        doc["rules"][0]["path"] = "rules/other.yaml"
        for entry in doc["inventory"]["files"]:
            if entry["path"] == RULE:
                entry["path"] = "rules/other.yaml"
        doc["inventory"]["files"].sort(key=lambda e: e["path"])
        bad_cards.set_root(doc)
    bad_cards.edit_manifest(synthetic_copy, change)
    report = validate(synthetic_copy)
    assert report.codes() == {"rule-id-mismatch"}
    assert report.findings[0].location.pointer == "/rules/0/path"


def test_replay_can_be_turned_off(synthetic_copy):
    report = validate(synthetic_copy, replay=False)
    assert report.valid
    assert {c.name: (c.status, c.note) for c in report.checks}["rules.replay"] == (
        "skipped", "replay was turned off (--no-replay)")
