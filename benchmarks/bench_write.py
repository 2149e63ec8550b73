"""Writer and reader figures (issue: format v0.1).

    python benchmarks/bench_write.py            # quick: 2k vs 10k episodes, 200k-episode open
    python benchmarks/bench_write.py --full     # the issue's sizes: 10k vs 50k episodes, 1M-episode open

Prints, each measured in a fresh child process so peak RSS is its own:
1. streaming writer: episodes x 100 steps (~200 bytes of content per step): steps/s, peak RSS,
   at two sizes to show memory stays flat as the run grows (target >= 100k steps/s, < 300 MB);
2. bulk write of the same data from Arrow tables vs a bare `pyarrow.parquet.write_table`
   of the same tables in the same child (target ratio <= 1.5);
3. `rc.open()` + reading the `status` column of a large card (target < 1 s).
Timings are medians of repeats; the machine is shared, so read ratios first.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORK, peak_rss_mb, row, run_child  # noqa: E402

CONTENT = "The agent considered the request and answered with a careful, polite reply. " * 3  # ~230 B


def _stream(n_episodes: int, out: Path) -> dict:
    import rollout_cards as rc

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    with rc.CardWriter(out, id="bench", title="bench") as card:
        for i in range(n_episodes):
            with card.episode(task_id=f"task-{i % 500}", agent=f"agent-{i % 4}", trial=i // 2000) as ep:
                for j in range(25):
                    ep.message("user", CONTENT[:200])
                    call = ep.tool_call("search", {"q": j}, call_id=f"c{j}")
                    ep.tool_result(call, CONTENT[:200])
                    ep.message("assistant", CONTENT[:200])
                ep.score("reward", float(i % 2))
    dt = time.perf_counter() - t0
    steps = n_episodes * 100
    return {"steps": steps, "seconds": dt, "steps_per_s": steps / dt, "peak_rss_mb": peak_rss_mb()}


def _tables(n_episodes: int, chunk: int = 1000):
    """The same data as Arrow tables, chunk episodes at a time."""
    import pyarrow as pa

    for start in range(0, n_episodes, chunk):
        ids = [f"ep-{i}" for i in range(start, min(n_episodes, start + chunk))]
        episodes = pa.table({
            "episode_id": ids,
            "task_id": [f"task-{i % 500}" for i in range(start, start + len(ids))],
            "status": pa.array(["completed"] * len(ids)).dictionary_encode(),
            "agent": [f"agent-{i % 4}" for i in range(start, start + len(ids))],
            "score.reward": [float(i % 2) for i in range(start, start + len(ids))],
        })
        n = len(ids) * 100
        kinds = ["message", "tool_call", "tool_result", "message"] * 25
        steps = pa.table({
            "episode_id": pa.array([e for e in ids for _ in range(100)]),
            "seq": pa.array(list(range(100)) * len(ids), pa.int64()),
            "kind": pa.array(kinds * len(ids)).dictionary_encode(),
            "content": pa.array([CONTENT[:200]] * n),
        })
        yield episodes, steps


def _bulk(n_episodes: int, out: Path) -> dict:
    import pyarrow.parquet as pq

    import rollout_cards as rc
    from rollout_cards.io.writer import PARQUET_OPTIONS
    from rollout_cards.tables import conform_table

    # Conform once up front so both sides write identical tables; the writer conforms again (its checks).
    data = [(conform_table(e, "episodes"), conform_table(s, "steps")) for e, s in _tables(n_episodes)]
    bare_times, ours_times = [], []
    for _ in range(3):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        t0 = time.perf_counter()
        with pq.ParquetWriter(out / "e.parquet", data[0][0].schema, **PARQUET_OPTIONS) as we, pq.ParquetWriter(
            out / "s.parquet", data[0][1].schema, **PARQUET_OPTIONS
        ) as ws:
            for e, s in data:
                we.write_table(e)
                ws.write_table(s, row_group_size=1 << 20)
        bare_times.append(time.perf_counter() - t0)
        shutil.rmtree(out)
        t0 = time.perf_counter()
        with rc.CardWriter(out, id="bulk", title="bulk") as card:
            for e, s in data:
                card.write_episodes(e)
                card.write_steps(s)
        ours_times.append(time.perf_counter() - t0)
    bare, ours = statistics.median(bare_times), statistics.median(ours_times)
    return {"bare_s": bare, "ours_s": ours, "ratio": ours / bare, "steps": n_episodes * 100, "peak_rss_mb": peak_rss_mb()}


def _open_status(n_episodes: int, out: Path) -> dict:
    import pyarrow as pa

    import rollout_cards as rc

    if not (out / "card.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        with rc.CardWriter(out, id="big", title="big") as card:
            for start in range(0, n_episodes, 200_000):
                n = min(200_000, n_episodes - start)
                card.write_episodes(pa.table({
                    "episode_id": [f"e{i}" for i in range(start, start + n)],
                    "task_id": [f"t{i % 1000}" for i in range(start, start + n)],
                    "status": pa.array(["completed", "error", "timeout", "completed"] * (n // 4) + ["completed"] * (n % 4)),
                    "agent": [f"a{i % 8}" for i in range(start, start + n)],
                }))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        card = rc.open(out)
        status = card.episodes(columns=["status"]).column(0)
        times.append(time.perf_counter() - t0)
    return {"episodes": len(status), "median_s": statistics.median(times), "peak_rss_mb": peak_rss_mb()}


CHILDREN = {"stream": _stream, "bulk": _bulk, "open": _open_status}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the issue's sizes (takes minutes)")
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, n = args.child
        print(json.dumps(CHILDREN[what](int(n), WORK / f"{what}-{n}")))
        return
    small, large, big = (10_000, 50_000, 1_000_000) if args.full else (2_000, 10_000, 200_000)
    WORK.mkdir(parents=True, exist_ok=True)
    me = Path(__file__)
    print("1. streaming writer (100 steps/episode, ~200 B content/step)")
    print(row("episodes", "steps/s", "peak RSS MB", "seconds"))
    for n in (small, large):
        r = run_child(me, "stream", str(n))
        print(row(n, f"{r['steps_per_s']:,.0f}", f"{r['peak_rss_mb']:.0f}", f"{r['seconds']:.1f}"))
    print("\n2. bulk write from Arrow tables vs bare pyarrow.parquet writes (median of 3)")
    r = run_child(me, "bulk", str(small))
    print(row("steps", "bare s", "ours s", "ratio"))
    print(row(r["steps"], f"{r['bare_s']:.2f}", f"{r['ours_s']:.2f}", f"{r['ratio']:.2f}x"))
    print("\n3. rc.open() + read the status column (median of 5)")
    r = run_child(me, "open", str(big))
    print(row("episodes", "seconds", "peak RSS MB"))
    print(row(r["episodes"], f"{r['median_s']:.3f}", f"{r['peak_rss_mb']:.0f}"))
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
