"""Harbor job / trial directories as Harbor writes them (tests/importers/harbor_jobs.py)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import yaml

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.atif import trial_status
from tests.importers.conftest import assert_valid, run_import
from tests.importers.harbor_jobs import Trial, write_job

JOB = "6b9d2fcb-d400-41b0-8239-3ea25239cab9"
OTHER = "403f2c25-18e3-4a69-a830-d4985eb06850"


def _rules(result):
    return {r["rule"]: r for r in result.rules}


def _trials(n, dataset="terminal-bench", **kw):
    return [Trial(f"task-{i}", f"{dataset[:2]}{i:05d}", reward=float(i % 3 == 0) if i % 4 else None,
                  exception=None if i % 4 else "AgentTimeoutError", dataset=dataset, **kw) for i in range(n)]


def test_reported_mean_is_the_jobs_own_number(tmp_path):
    job = write_job(tmp_path / "job", _trials(7) + _trials(3, dataset="other"))
    stats = json.loads((job / "result.json").read_text())["stats"]["evals"]
    result, card = run_import("atif", [job], tmp_path / "c")
    (rule,) = result.rules
    doc = yaml.safe_load((tmp_path / "c" / "rules" / "harbor.mean_reward.yaml").read_text())
    assert doc["aggregate"]["group_by"] == ["agent", "task.dataset", "run_id"]
    got = {r["group"]["task.dataset"]: r["value"] for r in rule["reported"]}
    assert got == {"terminal-bench": stats["terminus-2__gpt-4o__terminal-bench"]["metrics"][0]["mean"],
                   "other": stats["terminus-2__gpt-4o__other"]["metrics"][0]["mean"]}
    assert {r["group"]["run_id"] for r in rule["reported"]} == {JOB}
    assert set(card.episodes(columns=["run_id"]).column("run_id").to_pylist()) == {JOB}
    assert_valid(tmp_path / "c")


def test_trials_of_another_job_are_imported_but_not_reported_as_this_jobs(tmp_path):
    # a job directory holding trials that name another job (as a real job directory did: two runs moved together)
    mine, theirs = _trials(4), _trials(3, dataset="simple", job_id=OTHER)
    job = write_job(tmp_path / "job", mine + theirs)
    result, card = run_import("atif", [job], tmp_path / "c")
    (rule,) = result.rules
    assert [(r["group"]["task.dataset"], r["group"]["run_id"]) for r in rule["reported"]] == [("terminal-bench", JOB)]
    runs = card.episodes(columns=["task.dataset", "run_id"]).to_pylist()
    assert {(r["task.dataset"], r["run_id"]) for r in runs} == {("terminal-bench", JOB), ("simple", OTHER)}
    assert any(OTHER in w and "3 trial directories" in w for w in result.warnings)
    assert_valid(tmp_path / "c")


def test_a_mean_over_other_trials_than_imported_is_not_reported(tmp_path):
    trials = _trials(5)
    job = write_job(tmp_path / "job", trials)
    for name in (trials[1].name, trials[2].name):  # the job counted them; their directories are gone
        for f in sorted((job / name).rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
        (job / name).rmdir()
    result, _card = run_import("atif", [job], tmp_path / "c")
    (rule,) = result.rules
    assert rule["reported"] == []
    assert any("is not the mean over the 3 trials imported" in w for w in result.warnings)
    missing = [d for d in _card.manifest.drops if d.loss_class == "interrupted_run"]
    assert missing and missing[0].count == 2
    assert_valid(tmp_path / "c")


def test_a_lone_trial_reports_no_number(tmp_path):
    job = write_job(tmp_path / "job", _trials(2))
    result, _card = run_import("atif", [job / _trials(2)[1].name], tmp_path / "c")
    (rule,) = result.rules
    assert rule["reported"] == []  # Harbor writes no aggregate for one trial
    assert_valid(tmp_path / "c")


def test_zoned_trial_times_are_the_episode_times(tmp_path):
    trials = _trials(2)
    trials[1].started_at, trials[1].finished_at = "2025-11-01T10:00:00.000000", "2025-11-01T10:02:00.000000"
    job = write_job(tmp_path / "job", trials)
    result, card = run_import("atif", [job], tmp_path / "c")
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    zoned = eps[trials[0].name]
    assert zoned["started_at"] == datetime.fromisoformat(trials[0].started_at)
    assert zoned["ended_at"] == datetime.fromisoformat(trials[0].finished_at)
    naive = eps[trials[1].name]
    assert naive["started_at"] is None and naive["meta.started_at"] == "2025-11-01T10:00:00.000000"
    drops = {d.target: d.count for d in card.manifest.drops if d.action == "unobserved"}
    assert drops["episodes.started_at"] == 1 and drops["episodes.ended_at"] == 1
    assert_valid(tmp_path / "c")


def test_reversed_trial_times_are_refused(tmp_path):
    trials = _trials(1)
    trials[0].finished_at = "2026-02-09T20:00:00Z"
    job = write_job(tmp_path / "job", trials)
    with pytest.raises(SourceFormatError, match="finished_at .* is before started_at") as info:
        run_import("atif", [job], tmp_path / "c")
    assert "result.json" in str(info.value)


@pytest.mark.parametrize(("kind", "status"), [
    ("ContextLengthExceededError", "limit"), ("OutputLengthExceededError", "limit"),
    ("AgentTimeoutError", "timeout"), ("VerifierTimeoutError", "timeout"),
    ("EnvironmentStartTimeoutError", "error"), ("AgentSetupTimeoutError", "error"), ("DaytonaError", "error")])
def test_harbor_exceptions(kind, status):
    assert trial_status({"exception_type": kind}) == (status, kind)


def test_every_trial_field_is_kept(tmp_path):
    trials = _trials(1)
    trials[0].extra = {"rollout_summary": {"n": 3}}  # a field of a newer TrialResult
    job = write_job(tmp_path / "job", trials)
    result, card = run_import("atif", [job], tmp_path / "c")
    (ep,) = card.episodes().to_pylist()
    assert json.loads(ep["meta.record"]) == {"rollout_summary": {"n": 3}}
    assert json.loads(ep["meta.agent_info"]) == {"version": "2.0.0", "model_info": {"provider": "openai"}}
    assert ep["meta.trial_uri"] == f"file:///jobs/x/{trials[0].name}"
    assert json.loads(ep["meta.exception_info"]) == {"occurred_at": "2026-02-09T12:36:16.569481"}
    assert card.manifest.provenance.agents[0].version == "2.0.0"
    assert_valid(tmp_path / "c")


def test_two_jobs_keep_both_job_records_and_a_job_twice_is_refused(tmp_path):
    a = write_job(tmp_path / "a", _trials(2))
    b = write_job(tmp_path / "b", _trials(3, dataset="bench-b"), job_id=OTHER)
    result, card = run_import("atif", [a, b], tmp_path / "c")
    assert set(card.manifest.meta["harbor_jobs"]) == {JOB, OTHER}
    (rule,) = result.rules
    assert {r["group"]["run_id"] for r in rule["reported"]} == {JOB, OTHER}
    assert_valid(tmp_path / "c")
    with pytest.raises(SourceFormatError, match="a job is imported once"):
        run_import("atif", [a, a], tmp_path / "d")


def test_a_linked_trajectory_is_refused_not_taken_for_none(tmp_path):
    trials = _trials(1)
    job = write_job(tmp_path / "job", trials)
    (tmp_path / "elsewhere.json").write_text("{}")
    (job / trials[0].name / "agent" / "trajectory.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SourceFormatError, match="link") as err:
        run_import("atif", [job], tmp_path / "c")
    assert "trajectory.json" in str(err.value)


def test_the_trial_files_not_read_are_noted(tmp_path):
    trials = _trials(2)
    job = write_job(tmp_path / "job", trials)
    for t in trials:
        (job / t.name / "trial.log").write_text("log")
        (job / t.name / "verifier").mkdir()
        (job / t.name / "verifier" / "test-stdout.txt").write_text("1 passed")
    result, _card = run_import("atif", [job], tmp_path / "c")
    (note,) = [n for n in result.notes if "not read" in n]
    assert "4 other files" in note and "trial.log (2)" in note and "verifier/test-stdout.txt (2)" in note


def test_a_jobs_directory_imports_every_job(tmp_path):
    write_job(tmp_path / "jobs" / "2026-02-09__12-22-47", _trials(2))
    write_job(tmp_path / "jobs" / "2026-02-09__13-00-00", _trials(3, dataset="bench-b"), job_id=OTHER)
    result, card = run_import("atif", [tmp_path / "jobs"], tmp_path / "c")
    assert card.episodes().num_rows == 5 and set(card.manifest.meta["harbor_jobs"]) == {JOB, OTHER}
    assert_valid(tmp_path / "c")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceFormatError, match="nor a jobs directory"):
        run_import("atif", [tmp_path / "empty"], tmp_path / "d")
