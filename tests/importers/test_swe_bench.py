from __future__ import annotations

import json

import pytest

from rollout_cards.errors import ImporterError, SourceFormatError
from tests.importers.conftest import SOURCES, assert_valid, run_import

REPORT = SOURCES / "swe-bench" / "demo-model.demo-run.json"
PREDICTIONS = SOURCES / "swe-bench" / "predictions.jsonl"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    return run_import("swe-bench", [REPORT], tmp_path_factory.mktemp("swe") / "card",
                      options={"predictions": str(PREDICTIONS)})


def _rows(card):
    return {e["task_id"]: e for e in card.episodes().to_pylist()}


def test_one_episode_per_instance_with_status_and_scores(imported):
    _, card = imported
    rows = _rows(card)
    report = json.loads(REPORT.read_text())
    assert sorted(rows) == sorted(set(report["submitted_ids"]) | set(report["incomplete_ids"]))
    got = {iid: (r["status"], r["score.resolved"], r["score.empty_patch"]) for iid, r in rows.items()}
    assert got == {
        "demo__repo-1": ("completed", True, False),
        "demo__repo-2": ("completed", True, False),
        "demo__repo-3": ("completed", False, False),
        "demo__repo-4": ("completed", False, True),
        "demo__repo-5": ("error", False, False),
        "demo__repo-6": ("skipped", None, None),
    }
    assert rows["demo__repo-4"]["meta.report_lists"] == "submitted,unresolved,empty_patch"
    assert {r["agent"] for r in rows.values()} == {"demo-model"}  # from the predictions' model_name_or_path


def test_the_overlapping_id_is_imported_as_said_and_flagged(imported):
    _, card = imported
    (drop,) = [d for d in card.manifest.drops if d.declaration == "source_malformed"]
    assert drop.count == 1 and drop.loss_class == "conflicting_source_labels"
    assert "demo__repo-4" in drop.reason and "unresolved_ids and empty_patch_ids" in drop.reason
    assert drop.selector == "agent == 'demo-model' and task_id in ['demo__repo-4']"
    assert set(drop.affects) == {"swe_bench.resolved_rate", "swe_bench.resolved_rate_nonempty"}


def test_patches_are_artifacts(imported):
    _, card = imported
    rows = _rows(card)
    predictions = {p["instance_id"]: p for p in map(json.loads, PREDICTIONS.read_text().splitlines())}
    for iid in ("demo__repo-1", "demo__repo-5"):
        assert card.read_artifact(rows[iid]["meta.patch_artifact"]).decode() == predictions[iid]["model_patch"]
    assert rows["demo__repo-4"]["meta.patch_artifact"] is None  # the empty patch stores nothing


def test_rules_carry_the_report_rates(imported):
    result, card = imported
    report = json.loads(REPORT.read_text())
    reported = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
    submitted, resolved, empty = len(report["submitted_ids"]), len(report["resolved_ids"]), len(report["empty_patch_ids"])
    assert reported["swe_bench.resolved_rate"] == pytest.approx(resolved / submitted)
    assert reported["swe_bench.resolved_rate_nonempty"] == pytest.approx(resolved / (submitted - empty))
    assert {r["kind"] for r in result.rules} == {"original", "diagnostic"}
    assert_valid(result.path)


def test_plan_and_declared_gaps(imported):
    _, card = imported
    assert card.manifest.plan.tasks == [f"demo__repo-{i}" for i in range(1, 7)] and card.manifest.plan.trials == 1
    targets = {d.target for d in card.manifest.drops}
    assert {"steps", "episodes.started_at", "episodes.input_tokens"} <= targets


@pytest.mark.parametrize("layout", ["list", "object"])
def test_predictions_as_json_list_or_object(tmp_path, layout):
    preds = [json.loads(line) for line in PREDICTIONS.read_text().splitlines()]
    data = preds if layout == "list" else {p["instance_id"]: {k: v for k, v in p.items() if k != "instance_id"} for p in preds}
    path = tmp_path / "preds.json"
    path.write_text(json.dumps(data, indent=1))
    _, card = run_import("swe-bench", [REPORT], tmp_path / "card", options={"predictions": str(path)})
    assert sum(1 for e in card.episodes().to_pylist() if e["meta.patch_artifact"]) == 4


def test_without_predictions_the_agent_is_the_file_stem(tmp_path):
    _, card = run_import("swe-bench", [REPORT], tmp_path / "card")
    assert {e["agent"] for e in card.episodes().to_pylist()} == {"demo-model.demo-run"}


def test_not_a_report(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": 1, "resolved": []}))
    with pytest.raises(SourceFormatError, match="schema_version 2"):
        run_import("swe-bench", [path], tmp_path / "card")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_unknown_option_is_refused(tmp_path):
    with pytest.raises(ImporterError, match="no option fields"):
        run_import("swe-bench", [REPORT], tmp_path / "card", options={"fields": {}})


def test_the_5x_failure_classification_and_a_2_0_report(tmp_path):
    # SWE-bench/SWE-bench swebench/harness/reporting.py @7a21e05: infra_failure_ids / ambiguous_failure_ids
    # (a subset of unresolved / error, why they failed) and failure_reasons were silently not in the card;
    # run_evaluation.py @v2.0.0 wrote no schema_version and no submitted/empty_patch/incomplete lists (exit 1)
    ids = ["a__a-1", "b__b-2", "c__c-3"]
    v5 = {"total_instances": 3, "submitted_instances": 3, "completed_instances": 2, "resolved_instances": 1,
          "unresolved_instances": 1, "empty_patch_instances": 0, "error_instances": 1,
          "infra_failure_instances": 1, "ambiguous_failure_instances": 0,
          "completed_ids": ids[:2], "incomplete_ids": [], "empty_patch_ids": [], "submitted_ids": ids,
          "resolved_ids": ids[:1], "unresolved_ids": ids[1:2], "infra_failure_ids": ids[2:],
          "ambiguous_failure_ids": [], "failure_reasons": {ids[2]: "docker: no space left on device"},
          "error_ids": ids[2:], "schema_version": 2}
    (tmp_path / "m.run.json").write_text(json.dumps(v5))
    _, card = run_import("swe-bench", [tmp_path / "m.run.json"], tmp_path / "c5")
    assert_valid(tmp_path / "c5")
    row = _rows(card)[ids[2]]
    assert row["status"] == "error" and row["meta.failure_reason"] == "docker: no space left on device"
    assert row["meta.report_lists"] == "submitted,error,infra_failure"
    v2 = {"total_instances": 3, "completed_instances": 2, "resolved_instances": 1, "unresolved_instances": 1,
          "error_instances": 1, "unstopped_instances": 0, "completed_ids": ids[:2], "resolved_ids": ids[:1],
          "unresolved_ids": ids[1:2], "error_ids": ids[2:], "unstopped_containers": [], "unremoved_images": ["img"]}
    (tmp_path / "m.old.json").write_text(json.dumps(v2))
    result, card = run_import("swe-bench", [tmp_path / "m.old.json"], tmp_path / "c2")
    assert_valid(tmp_path / "c2")
    assert {r["task_id"]: r["status"] for r in card.episodes().to_pylist()} == {
        ids[0]: "completed", ids[1]: "completed", ids[2]: "error"}
    reported = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
    assert reported["swe_bench.resolved_rate"] == pytest.approx(1 / 3)
    assert card.manifest.meta["swe_bench_report.m.old"]["unremoved_images"] == ["img"]
    assert any("2.0.x" in n for n in result.notes)


def test_other_json_beside_the_run_report_in_a_directory_is_noted_not_read(tmp_path):
    # A directory holding the run report and the predictions, plus JSON another tool left beside them (a
    # config.json): every top-level .json was taken as a run report, so with instance reports below it was
    # "per-instance report.json files were given with several run reports", without them "is not a SWE-bench
    # harness report". A file named as a source is still read as a report (test_not_a_report).
    run = tmp_path / "run"
    run.mkdir()
    (run / REPORT.name).write_bytes(REPORT.read_bytes())
    (run / "predictions.jsonl").write_bytes(PREDICTIONS.read_bytes())
    (run / "config.json").write_text(json.dumps({"model": "demo", "temperature": 0.0}))
    result, card = run_import("swe-bench", [run], tmp_path / "card")
    expected = json.loads(REPORT.read_text())
    assert sorted(_rows(card)) == sorted(set(expected["submitted_ids"]) | set(expected.get("incomplete_ids", [])))
    assert any("not read: " in n and "config.json" in n for n in result.notes)
    assert "config.json" not in {s.name for s in card.manifest.provenance.sources}
    (run / REPORT.name).unlink()
    with pytest.raises(SourceFormatError, match=r"holds predictions only .*config\.json: JSON that names no run "
                       r"report key"):
        run_import("swe-bench", [run], tmp_path / "card2")


def test_a_2_0_3_to_2_0_9_report_without_schema_version_is_read_as_schema_2(tmp_path):
    # SWE-bench run_evaluation.py @v2.0.3..@v2.0.9 make_run_report wrote the submitted / incomplete /
    # empty-patch lists but no schema_version (added at v2.0.10, the lists unchanged); it was exit 1 'is
    # not a SWE-bench harness report with schema_version 2'. Fields in v2.0.9's order.
    ids = ["a__a-1", "b__b-2", "c__c-3", "d__d-4"]
    report = {"total_instances": 5, "submitted_instances": 4, "completed_instances": 2, "resolved_instances": 1,
              "unresolved_instances": 1, "empty_patch_instances": 1, "error_instances": 1, "unstopped_instances": 0,
              "completed_ids": ids[:2], "incomplete_ids": ["e__e-5"], "empty_patch_ids": ids[2:3],
              "submitted_ids": ids, "resolved_ids": ids[:1], "unresolved_ids": ids[1:2], "error_ids": ids[3:],
              "unstopped_containers": [], "unremoved_images": []}
    path = tmp_path / "org__m.run-2.json"
    path.write_text(json.dumps(report, indent=4))
    result, card = run_import("swe-bench", [path], tmp_path / "c")
    assert_valid(tmp_path / "c")
    assert {k: (r["status"], r["score.resolved"]) for k, r in _rows(card).items()} == {
        "a__a-1": ("completed", True), "b__b-2": ("completed", False), "c__c-3": ("completed", False),
        "d__d-4": ("error", False), "e__e-5": ("skipped", None)}
    reported = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
    # the harness's own counts: resolved / submitted, and resolved / (submitted - empty patches)
    assert reported == {"swe_bench.resolved_rate": 1 / 4, "swe_bench.resolved_rate_nonempty": pytest.approx(1 / 3)}
    assert any("2.0.3-2.0.9" in n for n in result.notes)


def test_a_repeated_prediction_keeps_the_last_as_the_harness_does_and_says_so(tmp_path):
    # SWE-agent appends a line to all_preds.jsonl each time an instance is run again; the harness keys
    # predictions by instance_id (run_evaluation.py @7a21e05: {pred["instance_id"]: pred ...}), so the last
    # line is the one evaluated. The importer kept the last too, but silently.
    lines = PREDICTIONS.read_text().splitlines()
    first = json.loads(lines[0])
    again = {**first, "model_patch": "diff --git a/again b/again\n"}
    path = tmp_path / "all_preds.jsonl"
    path.write_text("\n".join([*lines, json.dumps(again)]) + "\n")
    result, card = run_import("swe-bench", [REPORT], tmp_path / "c", options={"predictions": str(path)})
    row = _rows(card)[first["instance_id"]]
    assert card.read_artifact(row["meta.patch_artifact"]).decode() == again["model_patch"]
    assert any(f"1 later prediction(s) of an instance already predicted (e.g. {first['instance_id']})" in n
               for n in result.notes)


@pytest.mark.parametrize("field, value", [
    ("empty_patch_instances", -1), ("resolved_instances", 2.0), ("submitted_instances", True),
    ("error_instances", "1"), ("completed_instances", None), ("total_instances", -6),
    ("infra_failure_instances", [1]), ("submitted_instances", 7), ("resolved_instances", 9),
])
def test_a_count_that_is_no_count_of_the_report_is_refused_naming_the_field(tmp_path, field, value):
    # scripts/import_sweep.py 60 2 case 540: empty_patch_instances = -1 imported (exit 0) with the rate
    # 2 / (5 - -1) declared as reported, which the card cannot replay (rcard validate: reported-mismatch).
    # The harness writes every count as the length of a list of the dataset's instances (make_run_report
    # @7a21e05): a count not a whole number >= 0, or above total_instances (6 here), is refused.
    report = json.loads(REPORT.read_text())
    report[field] = value
    path = tmp_path / "m.run.json"
    path.write_text(json.dumps(report))
    with pytest.raises(SourceFormatError, match=field) as caught:
        run_import("swe-bench", [path], tmp_path / "card")
    assert caught.value.record == field and caught.value.file == str(path)


def test_lists_naming_more_instances_than_the_total_are_refused(tmp_path):
    report = json.loads(REPORT.read_text())
    report["total_instances"] = 5  # the lists name 6: five submitted, one incomplete
    path = tmp_path / "m.run.json"
    path.write_text(json.dumps(report))
    with pytest.raises(SourceFormatError, match=r"lists name 6 instances, more than total_instances \(5\)"):
        run_import("swe-bench", [path], tmp_path / "card")


def _rates(report):
    """The rules' rates over a report's lists, in plain Python: errors score 0, instances in no
    outcome list (and incomplete ones) are left out."""
    outcome = set(report["resolved_ids"]) | set(report["unresolved_ids"]) | set(report["empty_patch_ids"])
    scored = (outcome | set(report["error_ids"])) & set(report["submitted_ids"])
    won = [i in report["resolved_ids"] and i not in report["error_ids"] for i in sorted(scored)]
    nonempty = [w for i, w in zip(sorted(scored), won, strict=True) if i not in report["empty_patch_ids"]]
    return sum(won) / len(won), sum(nonempty) / len(nonempty)


@pytest.mark.parametrize("change", ["count", "orphan"])
def test_a_rate_the_cards_instances_do_not_give_is_not_declared_reported(tmp_path, change):
    # A count that disagrees with its list (resolved_instances 3, two resolved_ids), or a submitted instance
    # in no outcome list (the rules leave it out; the harness's submitted count keeps it): the rate from the
    # report's counts was declared reported and the fresh card failed rcard validate (reported-mismatch).
    report = json.loads(REPORT.read_text())
    if change == "count":
        report["resolved_instances"] = 3
    else:
        report["unresolved_ids"].remove("demo__repo-3")
        report["completed_ids"].remove("demo__repo-3")
    path = tmp_path / "m.run.json"
    path.write_text(json.dumps(report))
    result, card = run_import("swe-bench", [path], tmp_path / "card")
    assert_valid(tmp_path / "card")
    counts = {"count": 3 / 5, "orphan": 2 / 5}[change]
    assert _rates(report)[0] != pytest.approx(counts)  # the two really differ
    declared = {r["rule"]: r["reported"] for r in result.rules}
    assert declared["swe_bench.resolved_rate"] == []
    why = "resolved_instances is 3 but resolved_ids lists 2 ids" if change == "count" else \
        "1 submitted instance(s) in no outcome list"
    assert any("swe_bench.resolved_rate is declared without the report's rate" in w and why in w
               for w in result.warnings)


def test_keep_going_leaving_an_instance_out_leaves_the_rate_undeclared(tmp_path):
    # scripts/import_sweep.py 3 1 case 28: an unresolved_ids entry no episode id can hold, under --keep-going:
    # the record was left out and the report's 8 / 23 was declared over a card of 22 scored instances
    # (recomputed 8 / 22: reported-mismatch). Now the rate is declared only where the card gives it back.
    report = json.loads(REPORT.read_text())
    report["unresolved_ids"][0] = "y" * 5000
    del report["total_instances"]
    path = tmp_path / "m.run.json"
    path.write_text(json.dumps(report))
    result, _ = run_import("swe-bench", [path], tmp_path / "card", keep_going=True)
    assert_valid(tmp_path / "card")
    assert len(result.malformed) == 1
    assert all(r["reported"] == [] for r in result.rules)
    assert any("1 record(s) left out by --keep-going" in w for w in result.warnings)
