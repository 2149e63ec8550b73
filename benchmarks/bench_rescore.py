"""Rescoring throughput and memory: the rule engine against the same query written in
DuckDB and in polars (the baselines a user would pick instead).

    pip install -e '.[bench]'
    python benchmarks/bench_rescore.py                      # 25k and 100k episodes (20 steps each)
    python benchmarks/bench_rescore.py --episodes 1000000   # the issue's size: 250k and 1M episodes
    python benchmarks/bench_rescore.py --only count --sizes 1000000

Three rules, each over the same card (`--only` picks some):

- count: a step feature (count of `lookup` tool calls), a status policy (errors count
  0, timeouts are excluded), one headline per agent, a cluster-robust interval over
  tasks;
- list: a list feature (the agent's `book` / `cancel` calls in order) compared as a
  multiset with a gold list read out of a JSON episode column (`task.gold`);
- regex: the answer letter extracted with a regular expression from the last message
  and compared with `task.target`.

Every baseline computes the same numbers (value, interval bounds and n per agent; the
interval from per-task sums with the same CR1 formula) and they are checked equal to the
engine's before any time counts. Each measurement runs in a fresh interpreter (peak RSS
via getrusage); the card is generated in a child as well, because Linux carries a
parent's peak RSS into its children's ru_maxrss. Times are medians of `--repeat` runs,
in rotation, so a load spike on a shared machine hits every contestant. Generated cards
are cached under benchmarks/_work/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
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
LETTERS = np.array(["A", "B", "C", "D"])
#: Gold lists of write calls, one per task (task i gets GOLD[i % len(GOLD)]).
GOLD = ["[]", '["book"]', '["cancel"]', '["book","cancel"]', '["cancel","book"]']

RULES = {
    "count": """\
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
""",
    "list": """\
rule: bench.write_set
score: "sort(writes) == sort(json_list(task.gold))"
features:
  writes:
    where: "kind == 'tool_call' and name in ['book', 'cancel']"
    value: "name"
    agg: list
on_status: {error: 0, timeout: exclude, limit: 0}
aggregate:
  group_by: [agent]
  unit: task_id
  interval: {method: cluster_t}
""",
    "regex": """\
rule: bench.answer_letter
score: "regex_extract(final, r'ANSWER: ([A-D])', 1) == task.target"
features:
  final:
    where: "kind == 'message'"
    value: "content"
    agg: last
on_status: {error: 0, timeout: exclude, limit: 0}
aggregate:
  group_by: [agent]
  unit: task_id
  interval: {method: cluster_t}
""",
}

IMPLEMENTATIONS = ("engine", "duckdb", "polars")


def card_path(n: int) -> Path:
    return WORK / f"rescore-v2-{n}"


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
                size = m * STEPS_PER_EPISODE
                # few write calls per episode, so that the gold lists are sometimes met
                tools = TOOLS[rng.choice(4, size=size, p=[0.45, 0.45, 0.05, 0.05])]
                names = np.where(kinds == "tool_call", tools, None)
                letters = LETTERS[rng.integers(0, 4, size)]
                content = np.where(kinds == "message", np.char.add("thinking... ANSWER: ", letters), None)
                yield pa.table({"episode_id": ids, "seq": seq, "kind": kinds, "name": names, "content": content})

        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            i = np.arange(start, start + m)
            status = rng.choice(["completed", "error", "timeout"], size=m, p=[0.85, 0.1, 0.05])
            ok = rng.random(m) < 0.6
            task = i % N_TASKS
            w.write_episodes(
                pa.table(
                    {
                        "episode_id": np.char.add("ep-", i.astype(str)),
                        "task_id": np.char.add("task-", task.astype(str)),
                        "status": status,
                        "agent": AGENTS[i % len(AGENTS)],
                        "trial": i // (N_TASKS * len(AGENTS)),
                        "score.ok": pa.array(np.where(status == "completed", ok, None), pa.bool_()),
                        "task.gold": np.array(GOLD)[task % len(GOLD)],
                        "task.target": LETTERS[task % 4],
                    }
                )
            )
        w.write_steps(step_batches())
    return path


# ------------------------------------------------------------------------- contestants


def run_engine(path: Path, rule: str) -> dict[str, list[float]]:
    import rollout_cards as rc
    from rollout_cards.rules.engine import apply_rule
    from rollout_cards.rules.loader import parse_rule

    run = apply_rule(rc.open(path), parse_rule(RULES[rule], file="bench.yaml"))
    return {r.group["agent"]: [r.value, r.ci_low, r.ci_high, r.n] for r in run.results}


def cluster_t(agents: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> dict[str, list[float]]:
    """Mean, CR1 cluster-t 95% interval and n per agent from per-(agent, task) sums."""
    from scipy import stats

    out = {}
    for agent in sorted(set(agents.tolist())):
        mask = agents == agent
        s, c = sums[mask].astype(np.float64), counts[mask].astype(np.float64)
        n, units = int(c.sum()), int(mask.sum())
        mean = float(s.sum()) / n
        scores = s - c * mean
        se = math.sqrt(units / (units - 1) * float(scores @ scores)) / n
        half = stats.t.ppf(0.975, units - 1) * se
        out[str(agent)] = [mean, mean - half, mean + half, n]
    return out


# The per-episode value y of each rule: status policy (completed -> the score, error -> 0,
# timeout -> excluded), then per-(agent, task) sums.
_DUCKDB_FEATURE = {
    "count": (
        "select episode_id, count(*) as v from read_parquet('{steps}') "
        "where kind = 'tool_call' and name = 'lookup' group by episode_id",
        "coalesce(f.v, 0) <= 2 and coalesce(e.\"score.ok\", false)",
    ),
    "list": (
        "select episode_id, list(name order by seq) as v from read_parquet('{steps}') "
        "where kind = 'tool_call' and name in ('book', 'cancel') group by episode_id",
        "coalesce(list_sort(f.v), []::varchar[]) = list_sort(from_json(e.\"task.gold\", '[\"VARCHAR\"]'))",
    ),
    "regex": (
        "select episode_id, arg_max(content, seq) as v from read_parquet('{steps}') "
        "where kind = 'message' group by episode_id",
        "coalesce(regexp_extract(f.v, 'ANSWER: ([A-D])', 1) = e.\"task.target\", false)",
    ),
}


def run_duckdb(path: Path, rule: str) -> dict[str, list[float]]:
    import duckdb

    feature, score = _DUCKDB_FEATURE[rule]
    query = f"""
        with f as ({feature.format(steps=path / 'steps.parquet')}),
        y as (
            select e.agent, e.task_id,
                   case when e.status = 'completed' then ({score})::int else 0 end as y
            from read_parquet('{path / 'episodes.parquet'}') e left join f using (episode_id)
            where e.status <> 'timeout'
        )
        select agent, task_id, sum(y) as s, count(*) as c from y group by agent, task_id
    """
    table = duckdb.sql(query).arrow()
    if isinstance(table, pa.RecordBatchReader):  # duckdb >= 1.4 returns a reader
        table = table.read_all()
    return cluster_t(
        table.column("agent").to_numpy(zero_copy_only=False),
        table.column("s").to_numpy(zero_copy_only=False),
        table.column("c").to_numpy(zero_copy_only=False),
    )


def run_polars(path: Path, rule: str) -> dict[str, list[float]]:
    import polars as pl

    steps = pl.scan_parquet(path / "steps.parquet")
    episodes = pl.scan_parquet(path / "episodes.parquet")
    kind = pl.col("kind").cast(pl.Utf8)
    if rule == "count":
        feature = steps.filter((kind == "tool_call") & (pl.col("name") == "lookup")).group_by("episode_id").agg(pl.len().alias("v"))
        score = (pl.col("v").fill_null(0) <= 2) & pl.col("score.ok").fill_null(False)
    elif rule == "list":
        feature = (
            steps.filter((kind == "tool_call") & pl.col("name").is_in(["book", "cancel"]))
            .group_by("episode_id")
            .agg(pl.col("name").sort_by("seq").alias("v"))
        )
        gold = pl.col("task.gold").str.json_decode(pl.List(pl.Utf8)).list.sort()
        score = (pl.col("v").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))).list.sort() == gold).fill_null(False)
    else:
        feature = steps.filter(kind == "message").group_by("episode_id").agg(pl.col("content").sort_by("seq").last().alias("v"))
        score = (pl.col("v").str.extract(r"ANSWER: ([A-D])", 1) == pl.col("task.target")).fill_null(False)
    status = pl.col("status").cast(pl.Utf8)
    per_task = (
        episodes.join(feature, on="episode_id", how="left")
        .filter(status != "timeout")
        .with_columns(pl.when(status == "completed").then(score.cast(pl.Int64)).otherwise(0).alias("y"))
        .group_by(["agent", "task_id"])
        .agg(pl.col("y").sum().alias("s"), pl.len().alias("c"))
        .collect()
    )
    return cluster_t(per_task["agent"].to_numpy(), per_task["s"].to_numpy(), per_task["c"].to_numpy())


RUNNERS = {"engine": run_engine, "duckdb": run_duckdb, "polars": run_polars}


def child(which: str, n: int, rule: str) -> None:
    if which == "generate":
        generate(n)
        print(json.dumps({"generated": str(card_path(n))}))
        return
    # Import everything a contestant uses before the clock starts: only the query is timed.
    import scipy.stats  # noqa: F401

    if which == "engine":
        import pyarrow.dataset  # noqa: F401

        # (rc.open and parse_rule import these lazily: ~70 ms of imports, PyYAML among them,
        # were timed as the query, where duckdb and polars are imported before the clock)
        import rollout_cards.io.reader  # noqa: F401
        import rollout_cards.rules.engine  # noqa: F401
        import rollout_cards.rules.loader  # noqa: F401
    else:
        __import__(which)
    path = card_path(n)
    t0 = time.perf_counter()
    result = RUNNERS[which](path, rule)
    elapsed = time.perf_counter() - t0
    print(json.dumps({"seconds": elapsed, "rss_mb": peak_rss_mb(), "result": result}))


def _agree(a: dict, b: dict) -> bool:
    if sorted(a) != sorted(b):
        return False
    return all(a[k][3] == b[k][3] and np.allclose(a[k][:3], b[k][:3], rtol=1e-9, atol=1e-12) for k in a)


def _load() -> str:
    """The 1/5/15-minute load averages (what else ran while the times were taken)."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000, help="largest card (the smaller is a quarter)")
    parser.add_argument("--sizes", type=int, nargs="+", help="card sizes in episodes (instead of --episodes)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--only", nargs="+", choices=sorted(RULES), default=list(RULES), help="rules to run")
    parser.add_argument("--child", nargs=3, metavar=("WHICH", "N", "RULE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    script = Path(__file__).resolve()
    sizes = args.sizes or [max(1000, args.episodes // 4), args.episodes]
    widths = (44, 10, 10, 10, 9, 9, 11, 11, 11)
    print(f"{STEPS_PER_EPISODE} steps per episode, {N_TASKS} tasks, 4 agents; cluster_t over tasks; "
          f"medians of {args.repeat} fresh-process runs; times in s, peak RSS in MiB; "
          f"load {_load()} on {os.cpu_count()} CPUs")
    print(row("rule / size", "engine", "duckdb", "polars", "/duckdb", "/polars", "engine MB", "duckdb MB", "polars MB", widths=widths))
    for n in sizes:
        t0 = time.perf_counter()
        # In a child too: Linux keeps a parent's peak RSS in its children's ru_maxrss across exec,
        # so the parent must stay small for the children's figures to be their own.
        run_child(script, "generate", str(n), "count")
        made = time.perf_counter() - t0
        for rule in args.only:
            timings: dict[str, list[dict]] = {k: [] for k in IMPLEMENTATIONS}
            for _ in range(args.repeat):
                for which in IMPLEMENTATIONS:
                    timings[which].append(run_child(script, which, str(n), rule))
            engine = timings["engine"][-1]["result"]
            for which in ("duckdb", "polars"):
                other = timings[which][-1]["result"]
                if not _agree(engine, other):
                    raise SystemExit(f"{rule}: engine and {which} disagree: {engine} vs {other}")
            med = {k: float(np.median([o["seconds"] for o in v])) for k, v in timings.items()}
            rss = {k: max(o["rss_mb"] for o in v) for k, v in timings.items()}
            label = f"{rule}: {n:,} ep / {n * STEPS_PER_EPISODE:,} steps"
            print(row(label, f"{med['engine']:.2f}", f"{med['duckdb']:.2f}", f"{med['polars']:.2f}",
                      f"{med['engine'] / med['duckdb']:.2f}x", f"{med['engine'] / med['polars']:.2f}x",
                      f"{rss['engine']:.0f}", f"{rss['duckdb']:.0f}", f"{rss['polars']:.0f}", widths=widths))
        print(f"  (card generated or reused in {made:.1f} s; results agree for every rule: "
              f"{', '.join(sorted(engine))}; load now {_load()}: a shared machine's load moves the "
              "ratios, as the contestants use different numbers of threads)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
