"""Logs written by inspect-ai's own eval() (tests/importers/inspect_runs.py), imported and
compared number by number with what `inspect_ai.log.read_eval_log` says Inspect computed."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("inspect_ai", reason="the Inspect comparison tests need the `inspect` extra (inspect-ai)")

from inspect_ai.log import read_eval_log  # noqa: E402

import rollout_cards as rc  # noqa: E402
from tests.importers.conftest import assert_valid, run_import  # noqa: E402
from tests.importers.inspect_runs import rescore, run  # noqa: E402


@pytest.fixture(scope="module", params=["eval", "json"])
def logs(request, tmp_path_factory):
    labels = None if request.param == "eval" else ["reducers"]  # the .json recorder: one run is enough
    return request.param, run(tmp_path_factory.mktemp(f"inspect-{request.param}"), request.param, labels)


def _replayed(card) -> dict[str, float]:
    report = rc.rescore(card)
    out = {}
    for run_ in report.runs:
        for result in run_.results:
            if result.stratum is None:
                out[run_.rule] = result.value
    return out


def _inspect_metrics(path) -> list[tuple[str, str | None, str, float, int]]:
    """(score name, reducer, metric, value, scored samples) of every metric Inspect reports that a
    rule replays: accuracy and mean, and std, var and stderr over at least 2 scored samples."""
    log = read_eval_log(str(path))
    return [(s.name, s.reducer, key, m.value, s.scored_samples) for s in log.results.scores
            for key, m in s.metrics.items()
            if m.name in ("accuracy", "mean") or (m.name in ("std", "var", "stderr") and s.scored_samples >= 2)]


def test_every_inspect_metric_is_a_rule_that_replays_it(logs, tmp_path):
    fmt, paths = logs
    for label, path in paths.items():
        result, card = run_import("inspect", [path], tmp_path / f"{fmt}-{label}")
        assert_valid(result.path)  # reported values and n replay
        replayed = _replayed(card)
        declared = {r["rule"]: r["reported"][0] for r in result.rules}
        expected = _inspect_metrics(path)
        assert expected and len(declared) == len(expected), (label, sorted(declared))
        assert {m[2] for m in expected} >= {"accuracy", "mean", "std", "var", "stderr"}
        # what no rule replays is said, per scorer x reducer, never silently left out
        unreplayed = [n for n in result.notes if "bootstrap_stderr" in n and "is not replayed" in n]
        assert len(unreplayed) == sum(1 for s in read_eval_log(str(path)).results.scores
                                      if "bootstrap_stderr" in s.metrics), result.notes
        task = read_eval_log(str(path), header_only=True).eval.task
        several = {n for n, *_ in expected if len({m[1] for m in expected if m[0] == n}) > 1}  # reducers
        for name, reducer, metric, value, scored in expected:
            rule = f"inspect.{task}.{name}.{metric}" + (f".{reducer}" if name in several and reducer else "")
            rule = rule.replace("-", "_") if rule not in declared else rule
            assert rule in declared, (rule, sorted(declared))
            assert declared[rule]["value"] == value and declared[rule]["n"] == scored
            assert math.isclose(replayed[rule], value, rel_tol=1e-12, abs_tol=1e-12), (rule, replayed[rule], value)


def test_scores_per_sample_match_inspects_samples(logs, tmp_path):
    """Each episode's score columns are value_to_float of the sample's Score, NaN as null."""
    from inspect_ai.scorer import value_to_float

    to_float = value_to_float()
    fmt, paths = logs
    path = paths["reducers"]
    _, card = run_import("inspect", [path], tmp_path / "card")
    rows = {(r["task_id"].split("/")[-1], r["trial"] + 1): r for r in card.episodes().to_pylist()}
    log = read_eval_log(str(path))
    seen_nan = seen_error = 0
    for sample in log.samples:
        row = rows[(str(sample.id), sample.epoch)]
        seen_error += row["status"] == "error"
        for name, score in (sample.scores or {}).items():
            values = score.value.items() if isinstance(score.value, dict) else [(None, score.value)]
            for key, value in values:
                column = f"score.{name}" if key is None else f"score.{name}.{key}"
                got = to_float(value)
                if math.isnan(got):
                    seen_nan += 1
                    assert row[column] is None
                else:
                    assert row[column] == got
    assert seen_nan and seen_error  # the run has both an unscored and an errored sample-epoch


def test_errors_limits_and_score_on_error_are_counted_as_inspect_counts(logs, tmp_path):
    fmt, paths = logs
    if fmt != "eval":
        pytest.skip("the .eval runs cover these")
    statuses = {}
    for label in ("score_on_error", "limits"):
        result, _ = run_import("inspect", [paths[label]], tmp_path / label)
        statuses[label] = result.statuses
    log = read_eval_log(str(paths["limits"]))
    assert statuses["limits"].get("limit") == sum(1 for s in log.samples if s.limit is not None and not s.error)
    assert statuses["score_on_error"].get("error") == 1


def test_a_log_and_its_rescore_in_one_card_keep_distinct_stable_ids(logs, tmp_path):
    """`inspect score` keeps the eval's task_id: imported together, the original keeps the ids it has
    alone, the re-score gets its own, and each log's rules replay that log's numbers."""
    fmt, paths = logs
    if fmt != "eval":
        pytest.skip("the .eval runs cover this")
    original = paths["limits"]
    rescored = rescore(original, tmp_path / "rescored.eval")
    assert read_eval_log(str(rescored), header_only=True).eval.task_id == read_eval_log(str(original)).eval.task_id
    _, alone = run_import("inspect", [original], tmp_path / "alone")
    result, card = run_import("inspect", [original, rescored], tmp_path / "both")
    assert_valid(result.path)
    ids = [r["episode_id"] for r in card.episodes().to_pylist()]
    alone_ids = [r["episode_id"] for r in alone.episodes().to_pylist()]
    assert len(set(ids)) == len(ids) == 2 * len(alone_ids)
    assert set(alone_ids) < set(ids)  # the original's ids do not change when its re-score joins it
    _, again = run_import("inspect", [original, rescored], tmp_path / "again")
    assert sorted(r["episode_id"] for r in again.episodes().to_pylist()) == sorted(ids)
    replayed = _replayed(card)
    match_rules = [r for r in replayed if ".match." in r]
    want = {m[2]: m[3] for m in _inspect_metrics(rescored) if m[0] == "match"}
    assert match_rules and all(math.isclose(replayed[r], want[r.split(".")[3]], abs_tol=1e-12) for r in match_rules)
    for name, _reducer, metric, value, _n in _inspect_metrics(original):
        same = [r for r in replayed if r.split(".")[2:4] == [name, metric]]
        assert len(same) == 2 and all(math.isclose(replayed[r], value, abs_tol=1e-12) for r in same), same
