from __future__ import annotations

import pytest

import rollout_cards as rc
from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.rule_files import rule_document
from rollout_cards.importers.session import ImportSession
from rollout_cards.importers.steps import StepBuffer
from rollout_cards.rules.loader import parse_rule
from tests.importers.conftest import assert_valid

#: A source's records: (task, agent, score); the record of t3 cannot be mapped.
RECORDS = [("t0", "a", 1.0), ("t1", "a", 0.0), ("t2", "a", 1.0), ("t3", "a", 0.0), ("t4", "a", 1.0),
           ("t0", "b", 1.0), ("t1", "b", 0.0)]
BAD = ("t3", "a")


def _rule(rule_id: str, reported: list[dict]) -> dict:
    return rule_document(rule=rule_id, kind="original", description="The mean score.", score="score.x",
                         on_status={"completed": "score"}, on_missing=0,
                         aggregate={"statistic": "mean", "group_by": ["agent"], "unit": "task_id"},
                         reported=reported)


def _import(out, keep_going: bool):
    session = ImportSession(out, format="test", card_id="c", title="T", keep_going=keep_going)
    for task, agent, score in RECORDS:
        with session.record():
            if (task, agent) == BAD:
                raise SourceFormatError("is not a record", file="src.jsonl", record=f"{agent}/{task}")
            session.add_episode({"episode_id": f"{agent}/{task}", "task_id": task, "agent": agent, "trial": 0,
                                 "status": "completed", "score.x": score}, StepBuffer(f"{agent}/{task}", file="src.jsonl",
                                                                                  record=task))
    # the source's own summary, over every record it holds (the one left out included)
    means = {a: sum(s for _, b, s in RECORDS if b == a) / sum(1 for _, b, _ in RECORDS if b == a) for a in "ab"}
    session.add_rule(_rule("src.mean", [{"group": {"agent": a}, "value": v} for a, v in means.items()]))
    # a number over the records the card keeps (what most importers compute)
    kept = [s for t, b, s in RECORDS if b == "a" and (t, b) != BAD]
    session.add_rule(_rule("src.kept_mean", [{"group": {"agent": "a"}, "value": sum(kept) / len(kept)}]))
    return session.finish(), means, sum(kept) / len(kept)


def test_keep_going_takes_out_only_the_reported_numbers_the_card_cannot_give_back(tmp_path):
    # scripts/import_sweep.py 3 1 case 28 (swe-bench) and last session's lm-eval case 865: --keep-going left out
    # a record the source's number counts, the number was still declared reported, and the fresh card failed
    # rcard validate (reported-mismatch). Now, for every importer: agent a's 3/5 is taken out (the card holds
    # 3 of 4), agent b's 1/2 and the mean over the kept records stay, and the drop names the rule.
    result, means, kept = _import(tmp_path / "card", keep_going=True)
    assert means["a"] == pytest.approx(0.6) and kept == pytest.approx(0.75)
    assert_valid(tmp_path / "card")
    card = rc.open(tmp_path / "card")
    rules = {r.id: parse_rule(card.read_text(r.path)) for r in card.manifest.rules}
    assert [(dict(r.group), r.value) for r in rules["src.mean"].reported] == [({"agent": "b"}, 0.5)]
    assert [r.value for r in rules["src.kept_mean"].reported] == [pytest.approx(0.75)]
    assert "Not declared as reported: reported value 0.6 for agent=a" in rules["src.mean"].description
    assert "0.75" in rules["src.mean"].description and "left out 1 record(s) of src.jsonl" in rules["src.mean"].description
    (drop,) = [d for d in card.manifest.drops if d.loss_class == "malformed_record"]
    assert drop.affects == ["src.mean"] and drop.count == 1
    assert [r["reported"] for r in result.rules if r["rule"] == "src.mean"] == [[{"group": {"agent": "b"},
                                                                                "value": 0.5, "tolerance": 1e-6}]]
    assert any(w.startswith("src.mean: not declared as reported") for w in result.warnings)


def test_without_keep_going_nothing_is_replayed_at_import(tmp_path):
    with pytest.raises(SourceFormatError, match="is not a record"):
        _import(tmp_path / "card", keep_going=False)
    assert not (tmp_path / "card").exists()
