"""tau-bench results (`EnvRunResult` JSON arrays) to a rollout card.

Each array element `{task_id, trial, reward, info, traj}` is one episode
`<agent>/<task_id>/<trial>`; the agent is `--agent` or the file name stem. The
array is streamed element by element, so a 400 MB file never sits in memory.

Terminal state (tau-bench's `Env.step` sets `info.reward_info` only when the
episode is done, i.e. the user sent ###STOP### or a terminating tool ran):

| source record                                         | status    |
|-------------------------------------------------------|-----------|
| `info.error` (+ `info.traceback`), no `info.source`   | error, with message, traceback and type |
| `info.source == "transfer_to_human_agents"`           | completed (hand-off) |
| `info.source == "user"` and `info.reward_info` set    | completed (the user ended the conversation) |
| `info.source == "user"` and `info.reward_info` null   | limit (turns ran out mid-conversation) |
| `info.source` = a tool name, `info.reward_info` null  | limit (turns ran out in the middle of a tool call) |

The declared rules reproduce tau-bench's own numbers: `tau_bench.original` (mean
reward, unit task: its pass^1) and `tau_bench.pass_hat_<k>` for k = 2 … trials
(pass^k = mean over tasks of C(c, k) / C(n, k), c = trials with reward 1 ± 1e-6).
The source has no timestamps, tokens or agent cost; those columns stay null and
are declared in the drops manifest.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from ..model.card import Software
from ..numbers import parse_decimal
from .base import ImportRequest
from .json_stream import JsonStream
from .openai_chat import ChatMapping, add_chat_messages
from .rule_files import rule_document
from .session import ImportSession
from .steps import StepBuffer, json_text

__all__ = ["TauBenchImporter", "pass_hat_k", "terminal_state"]

_TRANSFER = "transfer_to_human_agents"
_SUCCESS_EPS = 1e-6  # tau-bench's is_successful: 1 - 1e-6 <= reward <= 1 + 1e-6
_RECORD_KEYS = frozenset(("task_id", "trial", "reward", "info", "traj"))
_INFO_KEYS = frozenset(("task", "source", "user_cost", "reward_info", "error", "traceback"))
_TASK_KEYS = {"instruction": "task.instruction", "user_id": "task.user_id", "actions": "task.actions", "outputs": "task.outputs"}
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def pass_hat_k(successes: list[int], trials: list[int], k: int) -> float:
    """tau-bench's pass^k: the mean over tasks of C(c, k) / C(n, k)."""
    return sum(math.comb(c, k) / math.comb(n, k) for c, n in zip(successes, trials, strict=True)) / len(trials)


def terminal_state(info: dict[str, Any]) -> tuple[str, str | None]:
    """(status, message) of a tau-bench `info` (see the module table)."""
    source = info.get("source")
    if "reward_info" in info:
        done = info["reward_info"] is not None
    else:  # older results without reward_info: only these two sources end an episode
        done = source in ("user", _TRANSFER)
    if done:
        return "completed", None
    if source == "user":
        return "limit", "ran out of turns before the simulated user ended the conversation"
    return "limit", f"ran out of turns in the middle of a tool call ({source})"


class TauBenchImporter:
    """tau-bench `EnvRunResult` JSON arrays (e.g. historical_trajectories/*.json)."""

    name = "tau-bench"
    summary = "tau-bench results: JSON arrays of {task_id, trial, reward, info, traj}"
    options: dict[str, str] = {}

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every source file; each file is one agent unless --agent names it."""
        request.check_options(self.name, self.options)
        session.set_software("harness", Software(name="tau-bench", url="https://github.com/sierra-research/tau-bench"))
        # (agent, task_id) -> [trials, successes]; trials per task give the plan and pass^k
        tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        rewards: dict[str, list[float]] = defaultdict(list)
        seen_trials: dict[str, set[tuple[str, int]]] = defaultdict(set)
        counts = ChatMapping()
        for index, path in enumerate(request.sources):
            agent = request.agent or path.stem
            session.add_source(path, self.name, request.url(index))
            session.add_agent({"name": agent})
            with open(path, "rb") as fh:
                stream = JsonStream(fh, str(path))
                for i, record in session.guard(stream.document_items()):
                    with session.record():
                        row, steps = _episode(record, i, agent, str(path), counts)
                        session.add_episode(row, steps)
                        key = (agent, row["task_id"])
                        tally[key][0] += 1
                        tally[key][1] += _successful(row["score.reward"])
                        rewards[agent].append(row["score.reward"])
                        seen_trials[agent].add((row["task_id"], row["trial"]))
        for note in counts.notes():
            session.note(note)
        if not rewards:
            return
        _declare_rules(session, tally, rewards)
        _declare_plan(session, seen_trials)
        _declare_missing(session)


def _successful(reward: float) -> int:
    return int(1 - _SUCCESS_EPS <= reward <= 1 + _SUCCESS_EPS)


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool)) or value is None else type(value).__name__
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text):,} characters)"


def _label(index: int, record: dict[str, Any]) -> str:
    if "task_id" in record and "trial" in record:
        # Shortened: the label is in every message of the record, and either field may be anything.
        return f"{index} (task_id {_short(record['task_id'])}, trial {_short(record['trial'])})"
    return str(index)


def _episode(
    record: Any, index: int, agent: str, file: str, counts: ChatMapping
) -> tuple[dict[str, Any], StepBuffer]:
    if not isinstance(record, dict):
        raise StepBuffer("", file=file, record=str(index)).error("is not a JSON object")
    label = _label(index, record)
    probe = StepBuffer("", file=file, record=label)
    missing = sorted(_RECORD_KEYS - record.keys())
    if missing:
        raise probe.error(f"is missing required field(s) {', '.join(missing)}")
    task_id, trial, reward, info = record["task_id"], record["trial"], record["reward"], record["info"]
    if isinstance(task_id, bool) or not isinstance(task_id, (int, str)) or task_id == "":
        raise probe.error(f"task_id {task_id!r} is not an integer or string")
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
        raise probe.error(f"trial {trial!r} is not a non-negative integer")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise probe.error(f"reward {reward!r} is not a finite number")
    if not isinstance(info, dict):
        raise probe.error("info is not an object")
    episode_id = f"{agent}/{task_id}/{trial}"
    steps = StepBuffer(episode_id, file=file, record=label)
    add_chat_messages(steps, record["traj"], counts, field="traj")

    row: dict[str, Any] = {
        "episode_id": episode_id,
        "task_id": str(task_id),
        "agent": agent,
        "trial": trial,
        "score.reward": float(reward),
    }
    if "error" in info and "source" not in info:
        traceback = info.get("traceback")
        last = traceback.strip().splitlines()[-1] if isinstance(traceback, str) and traceback.strip() else ""
        match = _ERROR_TYPE.match(last)
        row.update(
            status="error",
            error_message=str(info["error"]),
            error_traceback=traceback if isinstance(traceback, str) else None,
            error_type=match.group(1) if match else None,
        )
    else:
        if not isinstance(info.get("source"), str):
            raise steps.error("info.source is missing; it says how the episode ended")
        status, message = terminal_state(info)
        row.update(status=status, error_message=message)
        row["meta.source"] = info["source"]
    task = info.get("task")
    if task is not None:
        if not isinstance(task, dict):
            raise steps.error("info.task is not an object")
        for key, value in task.items():
            # Gold actions and outputs are structured: JSON text; any other non-text value too.
            structured = key in ("actions", "outputs") or not isinstance(value, str)
            row[_TASK_KEYS.get(key, f"task.{key}")] = json_text(value) if structured and value is not None else value
    user_cost = info.get("user_cost")
    if user_cost is not None:
        if isinstance(user_cost, bool) or not isinstance(user_cost, (int, float)):
            raise steps.error(f"info.user_cost {user_cost!r} is not a number")
        row["meta.user_cost"] = float(user_cost)
    if info.get("reward_info") is not None:
        row["meta.reward_info"] = json_text(info["reward_info"])
    for key, value in info.items():
        if key not in _INFO_KEYS and value is not None:
            row[f"meta.info.{key}"] = json_text(value)
    for key, value in record.items():
        if key not in _RECORD_KEYS and value is not None:
            row[f"meta.{key}"] = json_text(value)
    return row, steps


def _declare_rules(
    session: ImportSession, tally: dict[tuple[str, str], list[int]], rewards: dict[str, list[float]]
) -> None:
    agents = sorted(rewards)
    on_status = {"completed": "score", "limit": "score", "error": 0, "timeout": 0, "cancelled": "exclude", "skipped": "exclude"}
    aggregate = {"statistic": "mean", "group_by": ["agent"], "unit": "task_id", "interval": {"method": "auto", "level": 0.95}}
    session.add_rule(
        rule_document(
            rule="tau_bench.original",
            kind="original",
            description=(
                "tau-bench's own number: the mean of the original reward over every episode "
                "(its pass^1). Episodes that ran out of turns keep the reward tau-bench gave them "
                "(0); exception records count as 0."
            ),
            score="score.reward",
            on_status=on_status,
            on_missing=0,
            aggregate=aggregate,
            reported=[{"group": {"agent": a}, "value": sum(rewards[a]) / len(rewards[a])} for a in agents],
        )
    )
    per_agent: dict[str, tuple[list[int], list[int]]] = {a: ([], []) for a in agents}
    for (agent, _task), (n, c) in sorted(tally.items()):
        per_agent[agent][0].append(c)
        per_agent[agent][1].append(n)
    max_k = min(min(n) for _c, n in per_agent.values())
    for k in range(2, max_k + 1):
        session.add_rule(
            rule_document(
                rule=f"tau_bench.pass_hat_{k}",
                kind="original",
                description=(
                    f"tau-bench's pass^{k}: for each task, the chance that {k} trials drawn without "
                    f"replacement all succeed, C(c,{k})/C(n,{k}), averaged over tasks; a trial succeeds "
                    "when its reward is 1 (within 1e-6)."
                ),
                score="score.reward >= 0.999999 and score.reward <= 1.000001",
                on_status=on_status,
                on_missing=0,
                reduce={"by": ["task_id"], "with": "pass_hat_k", "k": k},
                aggregate=aggregate,
                reported=[{"group": {"agent": a}, "value": pass_hat_k(*per_agent[a], k)} for a in agents],
            )
        )


def _declare_plan(session: ImportSession, seen: dict[str, set[tuple[str, int]]]) -> None:
    tasks = sorted({t for pairs in seen.values() for t, _ in pairs}, key=_task_order)
    trials = 1 + max(trial for pairs in seen.values() for _, trial in pairs)
    complete = all(len(pairs) == len(tasks) * trials for pairs in seen.values())
    if complete and not session.malformed:
        session.set_plan({"tasks": tasks, "agents": sorted(seen), "trials": trials,
                          "description": "every task x trial of each results file (the grid observed in the source)"})
    else:
        session.set_plan({
            "expected_episodes": session.episodes_written + len(session.malformed),
            "description": "the records of the results files, including those that could not be mapped",
        })


def _task_order(task_id: str) -> tuple[int, int | str]:
    # parse_decimal, not isdigit(): '²'.isdigit() is true and int('²') raises (an internal error).
    number = parse_decimal(task_id)
    return (1, task_id) if number is None else (0, number)


def _declare_missing(session: ImportSession) -> None:
    n_ep, n_steps = session.episodes_written, session.steps_written
    why = "tau-bench results record no timestamps"
    session.declare_missing("steps.t", why, count=n_steps)
    session.declare_missing("episodes.started_at", why, count=n_ep)
    session.declare_missing("episodes.ended_at", why, count=n_ep)
    for column in ("input_tokens", "output_tokens", "cost_usd"):
        session.declare_missing(f"steps.{column}", f"tau-bench results record no per-step {column}", count=n_steps)
    for column in ("input_tokens", "output_tokens", "total_tokens", "cost_usd"):
        session.declare_missing(
            f"episodes.{column}",
            f"tau-bench results record no agent {column} (info.user_cost, the simulated user's cost, "
            "is kept as meta.user_cost)",
            count=n_ep,
        )
