"""Rescoring throughput and memory: the rule engine against the same query written by hand.

    python benchmarks/bench_rescore.py                   # 25k and 100k episodes (20 steps each)
    python benchmarks/bench_rescore.py --episodes 1000000   # the issue's size: 250k and 1M episodes

The rule has a step feature (count of `lookup` tool calls), a status policy (errors
count 0, timeouts are excluded), one headline per agent and a cluster-robust interval
over tasks. The baseline computes the same numbers with pyarrow and numpy by hand
(projected, filtered scan of the steps, group-by count, join by episode id, the status
policy, per-task sums and the CR1 standard error). It is the fairer baseline here: the
engine is built on the same Parquet reader and kernels, so the ratio is the engine's
own overhead, and no dependency (DuckDB) is added to the project for a benchmark.
Each measurement runs in a fresh interpreter (peak RSS via getrusage); the card is
generated in a child as well, because Linux carries a parent's peak RSS into its
children's ru_maxrss. Times are medians of `--repeat` runs. Generated cards are cached
under benchmarks/_work/.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import WORK, peak_rss_mb, row, run_child  # noqa: E402

STEPS_PER_EPISODE = 20
N_TASKS = 500
AGENTS = np.array(["alpha", "beta", "gamma", "delta"])
TOOLS = np.array(["lookup", "search", "book", "cancel"])

RULE = """\
rule: bench.lookup_success
score: "score.ok and n_lookups <= 2"
features:
  n_lookups:
    from: steps
    where: "kind == 'tool_call' and name == 'lookup'"
    agg: count
on_status: {error: 0, timeout: exclude, limit: 0}
aggregate:
  group_by: [agent]
  unit: task_id
  interval: {method: cluster_t}
"""


def card_path(n: int) -> Path:
    return WORK / f"rescore-{n}"


def generate(n: int) -> Path:
    """A card of n episodes and 20n steps, written with the bulk path (cached)."""
    from rollout_cards.io.writer import CardWriter

    path = card_path(n)
    if (path / "card.json").is_file():
        return path
    rng = np.random.default_rng(n)
    chunk = 50_000
    with CardWriter(path, id=f"bench-{n}", title="rescore benchmark", timestamps=False, overwrite=True) as w:

        def step_batches():
            for start in range(0, n, chunk):
                m = min(chunk, n - start)
                ids = np.repeat(np.char.add("ep-", np.arange(start, start + m).astype(str)), STEPS_PER_EPISODE)
                seq = np.tile(np.arange(STEPS_PER_EPISODE), m)
                kinds = np.where(seq % 2 == 1, "tool_call", "message")
                names = np.where(kinds == "tool_call", TOOLS[rng.integers(0, len(TOOLS), m * STEPS_PER_EPISODE)], None)
                yield pa.table({"episode_id": ids, "seq": seq, "kind": kinds, "name": names})

        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            i = np.arange(start, start + m)
            status = rng.choice(["completed", "error", "timeout"], size=m, p=[0.85, 0.1, 0.05])
            ok = rng.random(m) < 0.6
            w.write_episodes(
                pa.table(
                    {
                        "episode_id": np.char.add("ep-", i.astype(str)),
                        "task_id": np.char.add("task-", (i % N_TASKS).astype(str)),
                        "status": status,
                        "agent": AGENTS[i % len(AGENTS)],
                        "trial": i // (N_TASKS * len(AGENTS)),
                        "score.ok": pa.array(np.where(status == "completed", ok, None), pa.bool_()),
                    }
                )
            )
        w.write_steps(step_batches())
    return path


def run_engine(path: Path) -> dict[str, list[float]]:
    import rollout_cards as rc
    from rollout_cards.rules.engine import apply_rule
    from rollout_cards.rules.loader import parse_rule

    run = apply_rule(rc.open(path), parse_rule(RULE, file="bench.yaml"))
    return {r.group["agent"]: [r.value, r.ci_low, r.ci_high, r.n] for r in run.results}


def run_baseline(path: Path) -> dict[str, list[float]]:
    """The same numbers by hand: pyarrow scan and group-bys, numpy only over per-task sums."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    from scipy import stats

    steps = ds.dataset(str(path / "steps.parquet"))
    flt = (pc.field("kind").cast(pa.string()) == "tool_call") & (pc.field("name") == "lookup")
    calls = steps.to_table(columns=["episode_id"], filter=flt).group_by("episode_id").aggregate([([], "count_all")])
    ep = ds.dataset(str(path / "episodes.parquet")).to_table(
        columns=["episode_id", "task_id", "status", "agent", "score.ok"]
    )
    pos = pc.index_in(ep.column("episode_id"), value_set=calls.column("episode_id"))
    n_lookups = pc.coalesce(calls.column("count_all").take(pos), 0)
    score = pc.and_(pc.fill_null(ep.column("score.ok"), False), pc.less_equal(n_lookups, 2))
    status = ep.column("status").cast(pa.string())
    value = pc.if_else(pc.equal(status, "completed"), score.cast(pa.float64()), 0.0)
    kept = pa.table({"agent": ep.column("agent"), "task": ep.column("task_id"), "y": value}).filter(
        pc.not_equal(status, "timeout")
    )
    per_task = kept.group_by(["agent", "task"]).aggregate([("y", "sum"), ([], "count_all")])
    out = {}
    agents = per_task.column("agent").to_numpy(zero_copy_only=False)
    sums_all = per_task.column("y_sum").to_numpy()
    counts_all = per_task.column("count_all").to_numpy()
    for agent in sorted(set(agents.tolist())):
        mask = agents == agent
        sums, counts = sums_all[mask], counts_all[mask]
        n, c = int(counts.sum()), int(mask.sum())
        mean = float(sums.sum()) / n
        scores = sums - counts * mean
        se = math.sqrt(c / (c - 1) * float(scores @ scores)) / n
        half = stats.t.ppf(0.975, c - 1) * se
        out[str(agent)] = [mean, mean - half, mean + half, n]
    return out


def child(which: str, n: int) -> None:
    if which == "generate":
        generate(n)
        print(json.dumps({"generated": str(card_path(n))}))
        return
    # Import everything either side uses before the clock starts: only the query is timed.
    import pyarrow.dataset  # noqa: F401
    import scipy.stats  # noqa: F401

    import rollout_cards.rules.engine  # noqa: F401

    path = card_path(n)
    t0 = time.perf_counter()
    result = (run_engine if which == "engine" else run_baseline)(path)
    elapsed = time.perf_counter() - t0
    print(json.dumps({"seconds": elapsed, "rss_mb": peak_rss_mb(), "result": result}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000, help="largest card (the smaller is a quarter)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--child", nargs=2, metavar=("WHICH", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    script = Path(__file__).resolve()
    sizes = [max(1000, args.episodes // 4), args.episodes]
    print(f"rule: feature count(lookup calls), status policy, group_by agent, cluster_t over {N_TASKS} tasks")
    print(row("size", "engine s", "by hand s", "ratio", "engine MB", "by hand MB", widths=(30, 11, 11, 8, 11, 11)))
    for n in sizes:
        t0 = time.perf_counter()
        # In a child too: Linux keeps a parent's peak RSS in its children's ru_maxrss across exec,
        # so the parent must stay small for the children's figures to be their own.
        run_child(script, "generate", str(n))
        made = time.perf_counter() - t0
        timings = {"engine": [], "baseline": []}
        last: dict[str, dict] = {}
        for _ in range(args.repeat):
            for which in timings:
                out = run_child(script, which, str(n))
                timings[which].append(out)
                last[which] = out["result"]
        for agent, (v, lo, hi, count) in last["engine"].items():
            b = last["baseline"][agent]
            if count != b[3] or not np.allclose([v, lo, hi], b[:3], rtol=1e-9, atol=1e-12):
                raise SystemExit(f"engine and baseline disagree for {agent}: {last['engine'][agent]} vs {b}")
        med = {k: float(np.median([o["seconds"] for o in v])) for k, v in timings.items()}
        rss = {k: max(o["rss_mb"] for o in v) for k, v in timings.items()}
        label = f"{n:,} episodes / {n * STEPS_PER_EPISODE:,} steps"
        print(row(label, f"{med['engine']:.2f}", f"{med['baseline']:.2f}", f"{med['engine'] / med['baseline']:.2f}x",
                  f"{rss['engine']:.0f}", f"{rss['baseline']:.0f}", widths=(30, 11, 11, 8, 11, 11)))
        print(f"  (card generated or reused in {made:.1f} s; results agree: {sorted(last['engine'])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
