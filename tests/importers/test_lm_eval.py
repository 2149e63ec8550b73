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
    # An empty name would become the column "score." / "meta.": exit 2 ("not a standard column") before.
    ('{"doc_id": 0, "metrics": ["acc", ""], "acc": 1, "": 1}', 'name is empty'),
    ('{"doc_id": 0, "metrics": ["acc"], "acc": 1, "": "x"}', 'name is empty'),
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


# -- layouts and shapes of other lm-eval versions (EleutherAI/lm-evaluation-harness tags v0.4.0 .. HEAD 4e7e0d47f) --

def _sample(doc_id, acc, **kw):
    return json.dumps({"doc_id": doc_id, "doc": {"q": doc_id}, "target": "1", "resps": [[["-0.5", "True"]]],
                       "filtered_resps": [["-0.5", "True"]], "acc": acc, **kw})


def _results(tasks, **kw):
    return {"results": {t: {"alias": t, **m} for t, m in tasks.items()},
            "n-samples": {t: {"original": 10, "effective": 2} for t in tasks}, "model_name": "org/m", **kw}


def test_an_output_path_dir_holds_one_subdirectory_per_model(tmp_path):
    # >= 0.4.3 EvaluationTracker: <output_path>/<model_name_sanitized>/results_<date>.json + samples_*; the
    # output path itself (what a user points at) held only the subdirectory: "holds no lm-eval results"
    ts = "2024-08-21T03-40-10.802679"
    for model in ("org__a", "org__b"):
        sub = tmp_path / "out" / model
        sub.mkdir(parents=True)
        (sub / f"samples_arc_{ts}.jsonl").write_text(_sample(0, 1.0) + "\n" + _sample(1, 0.0) + "\n")
        (sub / f"results_{ts}.json").write_text(json.dumps(_results({"arc": {"acc,none": 0.5}},
                                                                    model_name=model.replace("__", "/"))))
    result, card = run_import("lm-eval", [tmp_path / "out"], tmp_path / "card")
    assert_valid(tmp_path / "card")
    assert sorted({e["agent"] for e in card.episodes().to_pylist()}) == ["org/a", "org/b"]
    assert result.episodes == 4 and len(result.rules) == 2


def test_an_output_path_ending_in_json_names_the_results_after_it(tmp_path):
    # EvaluationTracker.save_results_aggregated: --output_path run.json writes run_<date>.json, the samples
    # beside it (samples_<task>_<date>.jsonl); the results file was not recognised, so no rule was declared
    ts = "2025-06-30T19-37-57.457759"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / f"samples_arc_{ts}.jsonl").write_text(_sample(0, 1.0) + "\n" + _sample(1, 1.0) + "\n")
    (tmp_path / "run" / f"myrun_{ts}.json").write_text(json.dumps(_results({"arc": {"acc,none": 1.0}})))
    result, _ = run_import("lm-eval", [tmp_path / "run"], tmp_path / "card")
    assert_valid(tmp_path / "card")
    assert _reported(result) == {"lm_eval.arc.acc": 1.0}


def test_samples_written_as_json_lines_under_a_json_name_are_the_runs_samples(tmp_path):
    """lm-eval between 0.4.2 and 0.4.3 (loggers/evaluation_tracker.py @793469e, the git_hash of the
    committed lm_eval/tasks/bias_classification/results/ runs @39e13948) wrote each task's samples as
    JSON Lines named samples_<task>_<date>.json. The name matched the `x_<date>.json` results pattern,
    so the import read a samples file as a results document: "has data after the end of the JSON document"."""
    ts = "2024-06-17T12-20-26.826621"
    accs = [1.0, 0.0, 1.0]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / f"samples_bias_{ts}.json").write_text("".join(_sample(i, a) + "\n" for i, a in enumerate(accs)))
    results = _results({"bias": {"acc,none": sum(accs) / len(accs)}})
    results["n-samples"] = {"bias": {"original": 3, "effective": 3}}
    (tmp_path / "run" / f"results_{ts}.json").write_text(json.dumps(results))
    result, card = run_import("lm-eval", [tmp_path / "run"], tmp_path / "card")
    assert_valid(tmp_path / "card")
    assert result.episodes == len(accs)
    assert _reported(result) == {"lm_eval.bias.acc": pytest.approx(sum(accs) / len(accs))}


def test_repeated_runs_of_one_model_and_task_are_trials_with_a_rule_each(tmp_path):
    # a directory with several results_<date>.json of the same model and task (a run repeated): every
    # episode id occurred twice (exit 1)
    root = tmp_path / "run"
    root.mkdir()
    for ts, accs in (("2024-08-21T03-40-10.802679", (1.0, 0.0)), ("2024-08-21T03-41-15.831724", (1.0, 1.0))):
        (root / f"samples_arc_{ts}.jsonl").write_text("".join(_sample(i, a) + "\n" for i, a in enumerate(accs)))
        (root / f"results_{ts}.json").write_text(json.dumps(_results({"arc": {"acc,none": sum(accs) / 2}})))
    result, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")  # each rule replays its own run's number
    rows = card.episodes().to_pylist()
    assert sorted((r["task_id"], r["trial"]) for r in rows) == [("arc/0", 0), ("arc/0", 1), ("arc/1", 0), ("arc/1", 1)]
    assert sorted(_reported(result).values()) == [0.5, 1.0]


def test_a_sample_line_without_filter_takes_the_tasks_filters_in_order(tmp_path):
    # lm-eval 0.4.0-0.4.6 (evaluator.py: `for filter_key in ...filtered_resps.keys(): for doc_id, doc in ...`)
    # writes one unnamed line per filter, filter by filter: the second filter's lines were "occurs twice"
    ts = "2024-06-03T02-45-05.614529"
    root = tmp_path / "run"
    root.mkdir()
    lines = [_sample(0, 1.0), _sample(1, 1.0), _sample(0, 0.0), _sample(1, 1.0)]  # strict x2, then flexible x2
    (root / f"samples_gsm_{ts}.jsonl").write_text("\n".join(json.dumps({**json.loads(x), "exact_match": json.loads(x)["acc"]})
                                                            for x in lines) + "\n")
    (root / f"results_{ts}.json").write_text(json.dumps(_results(
        {"gsm": {"exact_match,strict-match": 1.0, "exact_match_stderr,strict-match": 0.0,
                 "exact_match,flexible-extract": 0.5, "exact_match_stderr,flexible-extract": 0.5}})))
    result, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    flt = {(r["task_id"], r["meta.filter"]): r["score.exact_match"] for r in card.episodes().to_pylist()}
    assert flt == {("gsm/0", "strict-match"): 1.0, ("gsm/1", "strict-match"): 1.0,
                   ("gsm/0", "flexible-extract"): 0.0, ("gsm/1", "flexible-extract"): 1.0}
    assert _reported(result) == {"lm_eval.gsm.exact_match.strict-match": 1.0,
                                 "lm_eval.gsm.exact_match.flexible-extract": 0.5}
    assert any("do not name their filter" in n for n in result.notes)
    (root / f"samples_gsm_{ts}.jsonl").write_text("\n".join(lines + [_sample(0, 1.0)]) + "\n")
    with pytest.raises(SourceFormatError, match="occurs 3 times.*2 filter"):
        run_import("lm-eval", [root], tmp_path / "card2")


def test_the_0_4_0_layout_results_json_and_json_array_samples_with_list_arguments(tmp_path):
    # lm-eval 0.4.0-0.4.2 __main__.py: results.json and `<re.sub("/|=", "__", model_args)>_<task>.jsonl`
    # holding json.dumps(samples, indent=2) (one array), each sample's arguments the raw request args
    root = tmp_path / "run"
    root.mkdir()
    samples = [{"doc_id": i, "doc": {"q": i}, "target": 1, "arguments": [["ctx", " yes"], ["ctx", " no"]],
                "resps": [[[-0.5, True]], [[-2.0, False]]], "filtered_resps": [[-0.5, True], [-2.0, False]],
                "acc": a} for i, a in enumerate((1.0, 0.0, 1.0))]
    (root / "pretrained__org__m,dtype__float16_arc.jsonl").write_text(json.dumps(samples, indent=2))
    (root / "results.json").write_text(json.dumps({
        "results": {"arc": {"acc,none": 2 / 3, "acc_stderr,none": 0.3}}, "configs": {"arc": {"task": "arc"}},
        "versions": {"arc": 1.0}, "config": {"model": "hf", "model_args": "pretrained=org/m,dtype=float16"}}))
    result, card = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    assert result.episodes == 3 and {e["agent"] for e in card.episodes().to_pylist()} == {"org/m"}
    assert _reported(result) == {"lm_eval.arc.acc": pytest.approx(2 / 3)}
    steps = [s for s in card.steps().to_pylist() if s["episode_id"].endswith("/arc/0")]
    assert [(s["kind"], s["name"], s["content"]) for s in steps] == [
        ("message", "gen_args_0", "ctx"), ("observation", "gen_args_0", None),
        ("message", "gen_args_1", "ctx"), ("observation", "gen_args_1", None)]
    assert json.loads(steps[0]["payload"]) == {"arg_1": " yes"}


def test_nested_groups_and_groups_only_in_the_groups_key(tmp_path):
    # HEAD (api/group.py, evaluator_utils.py): results holds tasks only, groups their own key, group_subtasks
    # the direct children (a group of groups), the value aggregated over the leaf tasks weighted by size;
    # 0.4.x lists plain tasks as {task: []}: such tasks got no rule at all
    ts = "2026-01-16T15-23-47.285735"
    root = tmp_path / "run"
    root.mkdir()
    accs = {"t1": (1.0, 1.0), "t2": (0.0, 1.0), "t3": (0.0, 0.0)}
    for task, vals in accs.items():
        (root / f"samples_{task}_{ts}.jsonl").write_text("".join(_sample(i, a) + "\n" for i, a in enumerate(vals)))
    results = _results({t: {"acc,none": sum(v) / 2} for t, v in accs.items()})
    results["groups"] = {"top": {"alias": "top", "acc,none": 0.5}, "mid": {"alias": "mid", "acc,none": 0.75}}
    results["group_subtasks"] = {"top": ["mid", "t3"], "mid": ["t1", "t2"], "t1": [], "t2": [], "t3": []}
    (root / f"results_{ts}.json").write_text(json.dumps(results))
    result, _ = run_import("lm-eval", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    assert _reported(result) == {"lm_eval.t1.acc": 1.0, "lm_eval.t2.acc": 0.5, "lm_eval.t3.acc": 0.0,
                                 "lm_eval.mid.acc": 0.75, "lm_eval.top.acc": 0.5}


def test_a_results_file_without_samples_says_log_samples(tmp_path):
    # most published lm-eval outputs are results only (run without --log_samples): the error said
    # "no episodes could be imported"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results_2025-03-11T18-58-19.682249.json").write_text(json.dumps(_results({"arc": {}})))
    with pytest.raises(SourceFormatError, match="--log_samples") as err:
        run_import("lm-eval", [tmp_path / "run"], tmp_path / "card")
    assert "results_2025-03-11T18-58-19.682249.json" in str(err.value)


@pytest.mark.parametrize("plan", ["n-samples", "none"])
def test_keep_going_plans_the_samples_the_results_report_not_one_more_per_bad_line(tmp_path, plan):
    """n-samples.effective already counts a sample whose line is malformed; the plan added every
    malformed record on top (61 planned, 59 imported + 1 dropped: plan-episode-missing)."""
    import shutil

    root = tmp_path / "run"
    shutil.copytree(external(RUN), root)
    results_file = next(root.glob("results_*.json"))
    results = json.loads(results_file.read_text())
    if plan == "none":
        del results["n-samples"]
        results_file.write_text(json.dumps(results))
    files = sorted(root.glob("samples_*.jsonl"))
    lines = [x for p in files for x in p.read_text().splitlines() if x.strip()]
    text = files[0].read_text().splitlines(keepends=True)
    text[12] = text[12].replace('"doc_id"', '"bad": "\\ud800", "doc_id"', 1)
    files[0].write_text("".join(text))
    result, card = run_import("lm-eval", [root], tmp_path / "card", keep_going=True)
    planned = sum(c["effective"] for c in results["n-samples"].values()) if plan == "n-samples" else len(lines)
    assert card.manifest.plan.expected_episodes == planned == 60
    assert result.episodes == 59 and len(result.malformed) == 1
    assert_valid(tmp_path / "card")


def _real_run(tmp_path):
    import shutil

    root = tmp_path / "run"
    shutil.copytree(external(RUN), root)
    return root, sorted(root.glob("samples_*.jsonl"))


def _edit_line(path, i, edit):
    lines = path.read_text().splitlines(keepends=True)
    doc = json.loads(lines[i])
    edit(doc)
    lines[i] = json.dumps(doc) + "\n"
    path.write_text("".join(lines))


def test_a_record_left_out_adds_no_value_to_the_reported_mean_it_is_checked_against(tmp_path):
    """The sample's metric values were counted before its arguments failed to map: the rule was
    declared with the reported mean of 20 values over a card holding 19 (reported-mismatch)."""
    root, files = _real_run(tmp_path)
    _edit_line(files[0], 7, lambda d: d["arguments"].__setitem__("gen_args_0", ""))
    result, card = run_import("lm-eval", [root], tmp_path / "card", keep_going=True)
    assert result.episodes == 59 and len(result.malformed) == 1
    assert_valid(tmp_path / "card")


def test_a_sample_naming_a_filter_the_results_do_not_report_is_not_one_more_planned_run(tmp_path):
    """The plan multiplied a task's n-samples.effective by the filters seen in its samples: one
    line with filter "" planned 20 more samples of the task (80 planned, 60 present)."""
    root, files = _real_run(tmp_path)
    _edit_line(files[0], 5, lambda d: d.__setitem__("filter", ""))
    results = json.loads(next(root.glob("results_*.json")).read_text())
    _, card = run_import("lm-eval", [root], tmp_path / "card")
    assert card.manifest.plan.expected_episodes == sum(c["effective"] for c in results["n-samples"].values()) == 60
    assert_valid(tmp_path / "card")


def test_planned_samples_a_cut_file_lacks_are_declared_missing(tmp_path):
    """A samples file cut in its middle: its last, partial line is one malformed record, and the
    planned samples after it were in no drop (plan-episode-missing)."""
    root, files = _real_run(tmp_path)
    data = files[0].read_bytes()
    files[0].write_bytes(data[: len(data) // 3])
    result, card = run_import("lm-eval", [root], tmp_path / "card", keep_going=True)
    assert_valid(tmp_path / "card")
    [drop] = [d for d in card.manifest.drops if d.loss_class == "missing_records"]
    assert drop.count == 60 - result.episodes - len(result.malformed) > 0
    assert "fewer lines than the results report" in drop.reason  # a JSONL file cut at a line: no break to see
