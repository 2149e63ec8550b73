"""Harbor job and trial directories, written deterministically in the shape Harbor writes them.

The shape is Harbor's as read at refreshdotdev/harbor-trajectories @22dafa68 (vendor/harbor, a copy of
Harbor of February 2026; laude-institute/harbor itself has no snapshot here): `Job.run` writes
`<job>/config.json` and `<job>/result.json` (JobResult without trial_results: id, started_at,
finished_at, n_total_trials, stats = JobStats.from_trial_results + one Mean per evals key), and each
trial `<job>/<task>__<7 chars>/result.json` (TrialResult, times in UTC with a "Z") with
`agent/trajectory.json` when the agent wrote ATIF. The statistics are computed here in plain Python,
as harbor/models/job/result.py and harbor/metrics/mean.py do, so they are the harness's numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Trial:
    task: str
    suffix: str
    reward: float | None
    exception: str | None = None
    dataset: str = "terminal-bench"
    agent: str = "terminus-2"
    model: str | None = "openai/gpt-4o"
    job_id: str | None = None  # None: the job's own id
    started_at: str = "2026-02-09T20:25:33.142185Z"
    finished_at: str = "2026-02-09T20:36:21.878564Z"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.task[:32]}__{self.suffix}"


def evals_key(trial: Trial) -> str:
    model = trial.model.split("/", 1)[-1] if trial.model else None
    key = f"{trial.agent}__{model}__{trial.dataset}" if model else f"{trial.agent}__{trial.dataset}"
    return key.replace("/", "-")


def trial_result(trial: Trial, job_id: str) -> dict[str, Any]:
    provider, _, model = (trial.model or "").partition("/")
    exc = None
    if trial.exception:
        exc = {"exception_type": trial.exception, "exception_message": f"{trial.exception} raised",
               "exception_traceback": f"Traceback (most recent call last):\n{trial.exception}",
               "occurred_at": "2026-02-09T12:36:16.569481"}  # datetime.now(): local, no zone
    result = {
        "id": f"00000000-0000-0000-0000-{sum(map(ord, trial.name)):012d}",
        "task_name": trial.task,
        "trial_name": trial.name,
        "trial_uri": f"file:///jobs/x/{trial.name}",
        "task_id": {"path": f"{trial.dataset}/{trial.task}"},
        "source": trial.dataset,
        "task_checksum": "5bd8c07e",
        "config": {"task": {"path": f"{trial.dataset}/{trial.task}", "source": trial.dataset},
                   "trial_name": trial.name, "trials_dir": "jobs/x",
                   "agent": {"name": trial.agent, "model_name": trial.model, "kwargs": {}},
                   "job_id": trial.job_id or job_id},
        "agent_info": {"name": trial.agent, "version": "2.0.0",
                       "model_info": {"name": model, "provider": provider} if trial.model else None},
        "agent_result": {"n_input_tokens": 1000, "n_cache_tokens": 0, "n_output_tokens": 100, "cost_usd": 0.01,
                         "rollout_details": None, "metadata": None},
        "verifier_result": None if trial.reward is None else {"rewards": {"reward": trial.reward}},
        "exception_info": exc,
        "started_at": trial.started_at,
        "finished_at": trial.finished_at,
        "environment_setup": {"started_at": trial.started_at, "finished_at": trial.started_at},
        "agent_setup": None, "agent_execution": None, "verifier": None,
    }
    result.update(trial.extra)
    return result


def job_stats(results: list[dict[str, Any]]) -> dict[str, Any]:
    """JobStats.from_trial_results, then Mean over each evals key (None rewards count 0)."""
    stats: dict[str, Any] = {"n_trials": 0, "n_errors": 0, "evals": {}}
    rewards: dict[str, list[Any]] = {}
    for r in results:
        stats["n_trials"] += 1
        info = r["agent_info"]
        model = info["model_info"]["name"] if info["model_info"] else None
        key = (f"{info['name']}__{model}__{r['source'] or 'adhoc'}" if model
               else f"{info['name']}__{r['source'] or 'adhoc'}").replace("/", "-")
        ev = stats["evals"].setdefault(key, {"n_trials": 0, "n_errors": 0, "metrics": [], "reward_stats": {},
                                             "exception_stats": {}})
        verifier = r["verifier_result"]
        rewards.setdefault(key, []).append(verifier["rewards"] if verifier else None)
        if verifier and verifier["rewards"] is not None:
            ev["n_trials"] += 1
            for k, v in verifier["rewards"].items():
                ev["reward_stats"].setdefault(k, {}).setdefault(str(v), []).append(r["trial_name"])
        if r["exception_info"]:
            ev["exception_stats"].setdefault(r["exception_info"]["exception_type"], []).append(r["trial_name"])
            ev["n_errors"] += 1
            stats["n_errors"] += 1
    for key, values in rewards.items():
        flat = [0 if v is None else next(iter(v.values())) for v in values]
        stats["evals"][key]["metrics"].append({"mean": sum(flat) / len(flat)})
    return stats


def write_job(root: Path, trials: list[Trial], *, job_id: str = "6b9d2fcb-d400-41b0-8239-3ea25239cab9",
              n_total: int | None = None, trajectory: Path | None = None,
              counted: list[Trial] | None = None) -> Path:
    """A job directory; `counted` (default: the trials of this job) are the trials its result.json counts."""
    root.mkdir(parents=True, exist_ok=True)
    results = {t.name: trial_result(t, job_id) for t in trials}
    for t in trials:
        d = root / t.name
        (d / "agent").mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(results[t.name], indent=4))
        (d / "config.json").write_text(json.dumps(results[t.name]["config"], indent=4))
        if trajectory is not None:
            (d / "agent" / "trajectory.json").write_bytes(trajectory.read_bytes())
    own = counted if counted is not None else [t for t in trials if t.job_id in (None, job_id)]
    stats = job_stats([trial_result(t, job_id) for t in own])
    (root / "config.json").write_text(json.dumps({"job_name": root.name, "n_attempts": 1}, indent=4))
    (root / "result.json").write_text(json.dumps({
        "id": job_id, "started_at": "2026-02-09T12:22:47.473434", "finished_at": "2026-02-09T13:02:07.060869",
        "n_total_trials": len(own) if n_total is None else n_total, "stats": stats}, indent=4))
    return root
