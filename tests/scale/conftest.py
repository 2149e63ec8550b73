"""Shared by the scale tests: one Ray session per module (Ray starts slowly), and cards whose
steps are cut into small row groups so that episodes span blocks."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import rollout_cards as rc
from rollout_cards.io import finalize, writer

#: The rules the identity tests run: every feature agg, episode columns in a feature, a float
#: sum (its order of addition shows), reduce, strata, compare — the engine's whole surface.
FEATURE_RULES = {
    "feat_count": """\
rule: feat.count
score: "n_search"
features:
  n_search: {from: steps, where: "kind == 'tool_call' and name == 'search_flights'", agg: count}
aggregate: {group_by: [agent], unit: task_id, interval: {method: cluster_t}}
compare: {baseline: {agent: alpha}}
""",
    "feat_float": """\
rule: feat.float
score: "cost + 0.1 * coalesce(mean_out, 0)"
features:
  cost: {from: steps, value: "coalesce(cost_usd, 0.0) * 1.0000001 + 1e-9 * seq", agg: sum}
  mean_out: {from: steps, where: "not is_null(output_tokens)", value: output_tokens, agg: mean}
aggregate: {group_by: [agent], strata: [task.category], interval: {method: bootstrap, seed: 7, resamples: 200}}
""",
    "feat_minmax": """\
rule: feat.minmax
score: "coalesce(max_seq, 0) - coalesce(min_seq, 0) + if(any_err, 1, 0) + if(all_ok, 1, 0)"
features:
  min_seq: {from: steps, where: "kind == 'tool_call'", value: seq, agg: min}
  max_seq: {from: steps, where: "kind == 'tool_call'", value: seq, agg: max}
  any_err: {from: steps, where: "kind == 'tool_result'", value: is_error, agg: any}
  all_ok: {from: steps, where: "kind == 'tool_result'", value: "not is_error", agg: all}
aggregate: {group_by: [agent]}
""",
    "feat_ordered": """\
rule: feat.ordered
score: "if(first_tool == 'search_flights', 1, 0) + if(last_kind == 'message', 1, 0) + len(calls) + len(tools)"
features:
  first_tool: {from: steps, where: "kind == 'tool_call'", value: name, agg: first}
  last_kind: {from: steps, value: kind, agg: last}
  calls: {from: steps, where: "kind == 'tool_call'", value: name, agg: list}
  tools: {from: steps, where: "kind == 'tool_call'", value: name, agg: set}
aggregate: {group_by: [agent], unit: task_id}
""",
    "feat_episode_column": """\
rule: feat.episode_column
score: "n_own"
features:
  n_own: {from: steps, where: "kind == 'message' and contains(content, task_id)", agg: count}
reduce: {by: [task_id, agent], with: max}
aggregate: {group_by: [agent]}
""",
}


#: Rules whose per-partition pieces differ: strata, on_status exclude, on_missing exclude,
#: reduce with short keys left out, compare on the unit.
EDGE_RULES = {
    "strata_exclude": """\
rule: edge.strata_exclude
score: "if(score.success, 1, 0) + 0.1 * n"
features:
  n: {from: steps, where: "kind == 'tool_call'", agg: count}
on_status: {error: exclude, timeout: 0.5}
aggregate: {group_by: [agent], strata: [task.category], unit: task_id, weights: by_count}
compare: {baseline: {agent: alpha}}
""",
    "missing_excluded": """\
rule: edge.missing_excluded
score: "cost"
features:
  cost: {from: steps, where: "not is_null(cost_usd)", value: cost_usd, agg: sum}
on_missing: exclude
aggregate: {group_by: [agent], interval: {method: bootstrap, seed: 3, resamples: 100}}
compare: {baseline: {agent: alpha}}
""",
    "short_pass": """\
rule: edge.short_pass
score: "score.success"
reduce: {by: [task_id], with: pass_at_k, k: 3, short: exclude}
aggregate: {group_by: [agent]}
compare: {baseline: {agent: alpha}}
""",
}


KINDS = ["message", "tool_call", "tool_result"]
NAMES = ["search_flights", "book", "cancel", None]


def random_rows(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Episodes and steps of a random card: up to 40 episodes over 7 tasks, some without
    steps, mixed statuses, null and float values spanning 16 orders of magnitude."""
    episodes, steps = [], []
    for i in range(rng.randint(1, 40)):
        eid = f"ep-{i:03d}"
        episodes.append({"episode_id": eid, "task_id": f"t{rng.randint(0, 6)}", "agent": rng.choice(["alpha", "beta"]),
                         "status": rng.choice(["completed"] * 4 + ["error", "timeout"]),
                         "task.category": rng.choice(["a", "b"]), "score.success": rng.random() < 0.5})
        for s in range(rng.randint(0, 30)):
            kind = rng.choice(KINDS)
            steps.append({"episode_id": eid, "seq": s, "kind": kind,
                          "name": rng.choice(NAMES) if kind != "message" else None,
                          "content": f"about t{rng.randint(0, 6)}" if kind == "message" else None,
                          "is_error": rng.random() < 0.3 if kind == "tool_result" else None,
                          "output_tokens": rng.choice([None, rng.randint(0, 10**6)]),
                          "cost_usd": rng.choice([None, rng.random() * 10 ** rng.randint(-8, 8)])})
    return episodes, steps


def write_rules(directory: Path, texts: dict[str, str] = FEATURE_RULES) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in texts.items():
        path = directory / f"{name}.yaml"
        path.write_text(text)
        paths.append(path)
    return paths


def reblocked(source: rc.Card, path: Path, row_group_rows: int, monkeypatch: pytest.MonkeyPatch) -> rc.Card:
    """`source` rewritten with steps row groups of `row_group_rows` rows (episodes then span blocks)."""
    with monkeypatch.context() as m:
        m.setattr(writer, "ROW_GROUP_ROWS", row_group_rows)
        m.setattr(finalize, "ROW_GROUP_ROWS", row_group_rows)
        with writer.CardWriter(path, id=source.id, title="reblocked", timestamps=False) as w:
            w.write_episodes(source.episodes())
            w.write_steps(source.steps())
    return rc.open(path)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[object]:
    """A local Ray with 2 worker CPUs for the whole module, shut down after it."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    from rollout_cards.scale.ray_engine import quiet_data_context

    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    quiet_data_context(ray)
    yield ray
    ray.shutdown()


def row_groups(card: rc.Card) -> int:
    fs, base = card.source.filesystem()
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(fs.open_input_file(f"{base}/{rel}")).num_row_groups
               for rel in card.manifest.tables.steps.paths)


def ray_task_workers(task: str) -> list[int]:
    """Ray worker processes of this test's session that are running `task` (not idle)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ray::") and "IDLE" not in cmdline and task in cmdline:
            out.append(int(pid))
    return out


def run_killing(task: str, job: Callable[[], Any]) -> Any:
    """`job()` while the first Ray worker seen running `task` is killed (SIGKILL, by its pid): its
    result, or None when it failed with the one EngineError that says no result was computed."""
    from rollout_cards.errors import EngineError

    killed: list[int] = []
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set() and not killed:
            for pid in ray_task_workers(task):
                os.kill(pid, signal.SIGKILL)  # a worker process this session started, by its id
                killed.append(pid)
                break
            time.sleep(0.005)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        try:
            result = job()
        except EngineError as exc:  # retries exhausted: one clear error, no result
            assert "no result was computed" in str(exc)
            result = None
    finally:
        stop.set()
        thread.join()
    assert killed, f"no Ray worker was seen running {task}"
    print(f"killed worker {killed[0]}; the job {'finished' if result is not None else 'failed with one EngineError'}")
    return result


__all__ = ["EDGE_RULES", "FEATURE_RULES", "NAMES", "random_rows", "ray_task_workers", "reblocked", "run_killing", "row_groups",
           "write_rules"]
