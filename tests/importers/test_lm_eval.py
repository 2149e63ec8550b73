from __future__ import annotations

import json
import math
import time

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.lm_eval import metric_value
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

RUN = "lm-eval/negotiationtom_Qwen3-8B"


def _reported(result):
    return {r["rule"]: r["reported"][0]["value"] for r in result.rules}


def test_real_run_imports_every_sample_and_replays_the_mean_metrics(tmp_path):
    root = external(RUN)
    results = json.loads(next(root.glob("results_*.json")).read_text())
    result, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    samples = {p.name.split("_", 1)[1].rsplit("_", 1)[0]: [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
               for p in root.glob("samples_*.jsonl")}
    assert result.episodes == sum(len(v) for v in samples.values()) == 60
    rows = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    for task, lines in samples.items():
        for s in lines:
            row = rows[f"Qwen/Qwen3-8B/{task}/{s['doc_id']}"]
            for metric in s["metrics"]:
                try:
                    expected = float(s[metric])  # stored as a string: read as its number
                except (TypeError, ValueError):
                    expected = None  # a (gold, prediction) pair of a corpus-level metric
                assert row.get(f"score.{metric}") == expected  # an all-null column is not stored
    reported = _reported(result)
    for task in ("negotiationtom_belief", "negotiationtom_desire"):
        assert reported[f"lm_eval.{task}.acc"] == results["results"][task]["acc,none"]
    assert reported["lm_eval.negotiationtom.acc"] == results["groups"]["negotiationtom"]["acc,none"]
    # corpus F1 is not a mean of per-sample values: noted, not declared
    assert not any("micro_f1" in r for r in reported)
    assert any("micro_f1" in n for n in result.notes)


def _write_run(root, samples, results_extra=None, constants=True):
    root.mkdir()
    ts = "2025-06-30T19-40-09.461247"
    lines = "\n".join(samples) + "\n"
    (root / f"samples_polymer_{ts}.jsonl").write_text(lines)
    results = {"results": {"polymer": {"alias": "polymer", "mae,none": "MAE", "acc,none": "ACC",
                                       "acc_stderr,none": "NaN"}},
               "n-samples": {"polymer": {"original": 100, "effective": 3}}, "model_name": "gpt-x",
               "lm_eval_version": "0.4.8", **(results_extra or {})}
    text = json.dumps(results).replace('"MAE"', "Infinity").replace('"ACC"', "0.6666666666666666").replace('"NaN"', "NaN")
    (root / f"results_{ts}.json").write_text(text)
    return root


def test_nan_and_infinity_import_as_counted_nulls_not_failures(tmp_path):
    samples = ['{"doc_id": 0, "doc": {"x": NaN}, "target": "1", "filter": "none", "metrics": ["mae", "acc"], "mae": Infinity, "acc": 1}',
               '{"doc_id": 1, "doc": {}, "target": "2", "filter": "none", "metrics": ["mae", "acc"], "mae": 0.5, "acc": "1.0"}',
               '{"doc_id": 2, "doc": {}, "target": "3", "filter": "none", "metrics": ["mae", "acc"], "mae": NaN, "acc": false}']
    root = _write_run(tmp_path / "run", samples)
    result, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    rows = sorted(card.episodes().to_pylist(), key=lambda r: r["task_id"])
    assert [r["score.mae"] for r in rows] == [None, 0.5, None]
    assert [r["score.acc"] for r in rows] == [1.0, 1.0, 0.0]
    assert json.loads(rows[0]["task.doc"]) == {"x": None}
    drop = next(d for d in card.manifest.drops if d.loss_class == "non_finite_value")
    assert drop.count == 2
    reported = _reported(result)
    assert reported["lm_eval.polymer.acc"] == pytest.approx(2 / 3)
    assert "lm_eval.polymer.mae" not in reported  # Infinity is not a number a rule can replay
    assert any("mae,none" in n and "not a finite number" in n for n in result.notes)


def test_filters_are_separate_episodes_and_rules(tmp_path):
    samples = ['{"doc_id": 0, "filter": "strict", "metrics": ["exact_match"], "exact_match": 1.0}',
               '{"doc_id": 0, "filter": "flexible", "metrics": ["exact_match"], "exact_match": 0.0}']
    root = _write_run(tmp_path / "run", samples, {"results": {"polymer": {"exact_match,strict": 1.0,
                                                                          "exact_match,flexible": 0.0}},
                                                  "n-samples": {"polymer": {"effective": 1}}})
    result, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    assert result.episodes == 2
    assert _reported(result) == {"lm_eval.polymer.exact_match.strict": 1.0, "lm_eval.polymer.exact_match.flexible": 0.0}


def test_a_task_without_its_samples_file_is_a_declared_drop(tmp_path):
    root = _write_run(tmp_path / "run", ['{"doc_id": 0, "metrics": ["acc"], "acc": 1}'],
                      {"n-samples": {"polymer": {"effective": 1}, "other": {"effective": 4}}})
    _, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    drop = next(d for d in card.manifest.drops if d.loss_class == "missing_samples_file")
    assert drop.count == 4 and "other" in drop.reason


@pytest.mark.parametrize(("line", "needle"), [
    ('{"doc_id": 0, "metrics": ["acc"]', "line 1"),
    ('{"doc_id": 0, "metrics": ["acc"], "acc": 1e999}', "line 1"),
    ('{"doc_id": 0, "metrics": ["acc"], "acc": 99999999999999999999999}', "line 1"),
    ('{"doc_id": 0, "metrics": ["acc"], "acc": "\\ud800"}', "surrogate"),
    ('{"doc_id": [1], "metrics": ["acc"], "acc": 1}', "doc_id"),
])
def test_bad_sample_lines_name_file_line_and_field(tmp_path, line, needle):
    root = _write_run(tmp_path / "run", [line, '{"doc_id": 1, "metrics": ["acc"], "acc": 1}'])
    with pytest.raises(SourceFormatError) as err:
        run_import("lm-eval", [root], tmp_path / "card")
    assert needle in str(err.value) and "samples_polymer" in str(err.value)
    result, _ = run_import("lm-eval", [root], tmp_path / "kept", keep_going=True)
    assert result.episodes == 1 and len(result.malformed) == 1


def test_a_group_name_too_long_for_a_rule_file_is_a_source_error_named_quickly(tmp_path):
    # A results file's group name goes into the rule the importer declares (description,
    # select); over the YAML scalar limit the writer's strict reading refused the rule
    # (WriterError, exit 2) after PyYAML spent minutes rendering and scanning it.
    name = "g" * 70_000
    root = _write_run(tmp_path / "run", ['{"doc_id": 0, "metrics": ["acc"], "acc": 1}'],
                      {"results": {name: {"acc,none": 1.0}}, "group_subtasks": {name: ["polymer"]}})
    started = time.perf_counter()
    with pytest.raises(SourceFormatError) as err:
        run_import("lm-eval", [root], tmp_path / "card")
    assert time.perf_counter() - started < 10
    message = str(err.value)
    assert "results_2025" in message and "characters at description" in message and "65,536" in message
    assert not (tmp_path / "card").exists()


def test_a_model_name_too_long_to_select_is_refused_at_its_record(tmp_path):
    # The fuzzer's 3 MiB string in results' model_name became every episode's agent and id.
    root = _write_run(tmp_path / "run", ['{"doc_id": 0, "metrics": ["acc"], "acc": 1}'], {"model_name": "m" * 5000})
    with pytest.raises(SourceFormatError) as err:
        run_import("lm-eval", [root], tmp_path / "card")
    assert "samples_polymer" in str(err.value) and "line 1" in str(err.value) and "agent is 5,000" in str(err.value)


def test_metric_values_read_numbers_from_strings_and_flag_non_finite():
    assert metric_value("-10.125") == (-10.125, False)
    assert metric_value(True) == (1.0, False)
    assert metric_value(math.inf) == (None, True)
    assert metric_value("N/A") == (None, False)
    assert metric_value([["a"], ["b"]]) == (None, False)
