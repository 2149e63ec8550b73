"""Plan coverage by drops, and drops checked against the data."""

from __future__ import annotations

import hashlib

import bad_cards
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import rollout_cards as rc
from rollout_cards.model.card import Drop
from rollout_cards.validate import validate
from rollout_cards.validate.coverage import drop_column


def _remove(card, *episode_ids):
    keep = lambda t: t.filter(pc.invert(pc.is_in(t.column("episode_id"), pa.array(episode_ids))))  # noqa: E731
    for name in ("episodes", "steps"):
        table = keep(pq.read_table(card / f"{name}.parquet"))
        pq.write_table(table, card / f"{name}.parquet")
        bad_cards.edit_manifest(card, lambda d, n=name, t=table: d["tables"][n].update(rows=t.num_rows))
    bad_cards.rehash(card)


def _drop(**fields):
    return {"target": "episodes", "action": "omitted", "declaration": "author_declared",
            "loss_class": "interrupted_run", "reason": "the sandbox crashed", **fields}


def _with_drops(card, *drops):
    bad_cards.edit_manifest(card, lambda d: d["drops"].extend(drops))


@pytest.mark.parametrize(("drops", "codes"), [
    ([], {"plan-episode-missing"}),
    ([_drop(selector="task_id == 'task-00' and agent == 'alpha'")], {"plan-episode-missing"}),
    ([_drop(selector="agent == 'alpha' and task_id in ['task-00', 'task-01']")], set()),
    ([_drop(selector="trial == 0 and task_id in ['task-00', 'task-01']", action="unobserved")], set()),
    ([_drop(count=2)], set()),
    ([_drop(count=1)], {"plan-episode-missing"}),
    ([_drop()], {"plan-episode-missing"}),
    ([_drop(selector="error_type == 'X'")], {"plan-episode-missing"}),
    ([_drop(selector="task_id == 'task-00'"), _drop(count=1)], set()),
    ([_drop(selector="task_id == 'task-00'", action="redacted")], {"plan-episode-missing"}),
])
def test_missing_planned_episodes_are_covered_by_selectors_or_counts(synthetic_copy, drops, codes):
    _remove(synthetic_copy, "alpha-task-00-0", "alpha-task-01-0")
    _with_drops(synthetic_copy, *drops)
    report = validate(synthetic_copy, replay=False)  # the published numbers changed with the episodes
    assert report.codes() == codes
    missing = [f for f in report.findings if f.code == "plan-episode-missing"]
    assert all(f.location.pointer == "/plan" for f in missing)
    if drops and drops[0].get("count") == 1:
        assert len(missing) == 2 and "account for 1 of 2" in missing[0].message


@pytest.mark.parametrize(("expected", "drops", "codes"), [
    (216, [], set()),
    (220, [], {"plan-episode-missing"}),
    (220, [_drop(count=4, selector="task_id == 'gone'")], set()),
    (210, [], {"episode-unplanned"}),
])
def test_expected_episodes_only_checks_the_count(synthetic_copy, expected, drops, codes):
    bad_cards.edit_manifest(synthetic_copy, lambda d: d.update(plan={"expected_episodes": expected}))
    _with_drops(synthetic_copy, *drops)
    assert validate(synthetic_copy).codes() == codes


def test_episodes_outside_the_grid_are_warnings_with_rows(synthetic_copy):
    bad_cards.edit_manifest(synthetic_copy, lambda d: d["plan"].update(agents=["alpha"]))
    report = validate(synthetic_copy)
    unplanned = [f for f in report.findings if f.code == "episode-unplanned"]
    assert len(unplanned) == 108 and report.valid and not validate(synthetic_copy, strict=True).valid
    assert all(f.location.file == "episodes.parquet" and f.location.row is not None for f in unplanned)


@pytest.mark.parametrize(("target", "expected"), [
    ("episodes", ("episodes", None)), ("steps", ("steps", None)), ("steps.content", ("steps", "content")),
    ("episodes.score.reward", ("episodes", "score.reward")), ("artifacts", (None, None)),
    ("stream:screen", (None, None)), ("stream:", None), ("steps.", None), ("bogus", None), ("episodes2.x", None),
])
def test_drop_targets(target, expected):
    drop = Drop(target=target, action="omitted", declaration="author_declared", loss_class="x", reason="r")
    assert drop_column(drop) == expected


def _redact(card, values, digests, **drop):
    table = pq.read_table(card / "steps.parquet")
    i = table.schema.get_field_index("content")
    table = table.set_column(i, table.schema.field(i), pa.array(values, pa.string()))
    if digests is not None:
        table = table.append_column("meta.digest.content", pa.array(digests, pa.string()))
    pq.write_table(table, card / "steps.parquet")
    bad_cards.rehash(card)
    bad_cards.add_drop(card, target="steps.content", action=drop.pop("action", "redacted"),
                       reason="personal data", **drop)


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_markers_and_keyed_digests_with_sha256_digests_are_a_valid_redaction(minimal_copy):
    originals = ["What is 1 + 1?", "2", "What is 2 + 2?"]
    _redact(minimal_copy, ["[redacted]", "hmac-sha256:" + "ab" * 32, None], [_sha(originals[0]), _sha("2"), None],
            action="hashed", digest_column="steps.meta.digest.content")
    assert validate(minimal_copy).valid


def test_a_selector_limits_the_redaction_to_its_rows(minimal_copy):
    _redact(minimal_copy, ["[redacted]", "2", "[redacted]"], [_sha("a"), None, _sha("b")], selector="role == 'user'")
    assert validate(minimal_copy).codes() == set()


def test_a_redacted_value_without_its_digest(minimal_copy):
    _redact(minimal_copy, ["[redacted]", "[redacted]", "[redacted]"], [_sha("a"), None, "ZZ"])
    report = validate(minimal_copy)
    assert [(f.code, f.location.row) for f in report.findings] == [("drop-digest-missing", 1),
                                                                   ("drop-digest-invalid", 2)]


def test_redact_card_output_validates(synthetic_copy, tmp_path):
    spec = {"redact": [{"target": "steps.content", "where": "role == 'user'", "action": "replace",
                        "reason": "user messages may hold personal data"}]}
    rc.redact_card(synthetic_copy, spec, tmp_path / "redacted")
    report = validate(tmp_path / "redacted")
    assert report.valid, [f for f in report.findings if f.severity != "info"]


def test_selectors_are_type_checked_against_the_target_table(synthetic_copy):
    _with_drops(synthetic_copy, _drop(target="steps", selector="seq + 'x' == 1"),
                _drop(target="steps.t", action="unobserved", selector="kind == 'tool_call'"))
    report = validate(synthetic_copy)
    assert [(f.code, f.location.pointer) for f in report.findings if f.severity == "error"] == [
        ("drop-selector-invalid", "/drops/1/selector")]


def test_affects_must_name_rules_of_the_card(synthetic_copy):
    _with_drops(synthetic_copy, _drop(count=0, affects=["synthetic.success_rate", "other.rule"]))
    report = validate(synthetic_copy)
    assert [(f.code, f.location.pointer) for f in report.findings if f.severity == "error"] == [
        ("drop-rule-unknown", "/drops/1/affects/1")]
