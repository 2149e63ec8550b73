"""NeMo Agent Toolkit `nat eval` output (workflow_output_atif.json + <evaluator>_output.json)."""

from __future__ import annotations

import json

from tests.importers.conftest import assert_valid, run_import
from tests.importers.nemo_eval_runs import write_run

ITEMS = [(1, "2*3?", "6", "6"), (2, "4*5?", "20", "21"), (3, "7*8?", "56", "56"), ("q-4", "1+1?", "2", "2")]
SCORES = {"accuracy": {1: 1.0, 2: 0.0, 3: 1.0, "q-4": 0.75}, "trajectory": {1: 0.8, 2: ("error", "timeout"),
                                                                              3: 0.9, "q-4": 0.7}}


def test_samples_are_episodes_and_the_evaluators_average_replays(tmp_path):
    path = write_run(tmp_path / "run", ITEMS, SCORES)
    result, card = run_import("atif", [path], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert set(eps) == {"1", "2", "3", "q-4"}
    for item_id, _q, expected, answer in ITEMS:
        ep = eps[str(item_id)]
        assert ep["score.accuracy"] == SCORES["accuracy"][item_id]
        assert ep["meta.expected_output"] == expected and ep["meta.output"] == answer
        assert ep["run_id"] == "run" and ep["input_tokens"] == 260
    assert eps["2"]["score.trajectory"] == 0.0 and "Evaluator error" in eps["2"]["meta.trajectory_eval"]
    outputs = {n: json.loads((tmp_path / "run" / f"{n}_output.json").read_text()) for n in SCORES}
    rules = {r["rule"]: r for r in result.rules}
    for name, out in outputs.items():
        (reported,) = rules[f"nemo_eval.{name}.average_score"]["reported"]
        assert reported["value"] == out["average_score"] and reported["group"] == {"run_id": "run"}
    assert_valid(tmp_path / "c")


def test_a_non_number_score_is_kept_and_an_average_that_does_not_replay_is_not_reported(tmp_path):
    scores = {"accuracy": {1: float("nan"), 2: 0.0, 3: 1.0, "q-4": 1.0}}
    path = write_run(tmp_path / "run", ITEMS, scores)  # json.dumps writes NaN; the average is NaN too
    result, card = run_import("atif", [path], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert eps["1"]["score.accuracy"] is None and json.loads(eps["1"]["meta.accuracy_eval"])["score"] == "NaN"
    (rule,) = result.rules
    assert rule["reported"] == []
    assert any("average_score" in w and "not reported" in w for w in result.warnings)
    assert_valid(tmp_path / "c")


def test_an_evaluator_scoring_items_not_in_the_samples_is_declared(tmp_path):
    scores = {"accuracy": {1: 1.0, 2: 0.0, 3: 1.0, "q-4": 1.0, 99: 1.0}}
    path = write_run(tmp_path / "run", ITEMS, scores)
    result, card = run_import("atif", [path], tmp_path / "c")
    (drop,) = [d for d in card.manifest.drops if d.loss_class == "missing_episode"]
    assert drop.count == 1 and "accuracy_output.json" in drop.reason
    (rule,) = result.rules
    assert rule["reported"] == []
    assert_valid(tmp_path / "c")
