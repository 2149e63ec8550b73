"""What checking digests on read costs a rescore (issue 9 item 4: at most 10% slower).

    python benchmarks/bench_digest.py                 # 25k episodes x 20 steps, ~250 B of text per step
    python benchmarks/bench_digest.py --repeat 7 --episodes 50000
    python benchmarks/bench_digest.py --episodes 5000 --words 400  # ~2.5 KB of text per step

A text-heavy card is the worst case: the rescore's rule (bench_rescore's `count`) reads a
few small columns (kind, name, score.ok, status), while the reader hashes every byte of
every table part it touches, content included (whole-file sha256 is what the inventory
records). Each run is a fresh interpreter timing `rc.open` + `apply_rule`, verified
(`verify=True`, the default) and unverified (`verify=False`) in rotation, so a load spike
on a shared machine hits both; medians of `--repeat` runs and their ratio are printed,
with the bytes hashed and the sha256 rate measured in the same run.

Both wall-clock and CPU time (all threads of the child) are printed: on a shared machine
the wall clock mostly measures the other processes (a sha256 measured at 68 MB/s of wall
clock under load 11 ran at 1.0–1.4 GB/s of CPU time: SHA-NI), while the CPU-time ratio
says what the digests cost the rescore's own work.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORK  # noqa: E402

CHILD = """
import sys, time
import rollout_cards as rc
from rollout_cards.rules.engine import apply_rule
from rollout_cards.rules.loader import parse_rule
sys.path.insert(0, {bench!r})
from bench_rescore import RULES
rule = parse_rule(RULES["count"])
t, c = time.perf_counter(), time.process_time()
apply_rule(rc.open(sys.argv[1], verify=sys.argv[2] == "1"), rule)
print(time.perf_counter() - t, time.process_time() - c)
"""


def _card(n: int, n_words: int = 40) -> Path:
    import numpy as np
    import pyarrow as pa

    import rollout_cards as rc

    path = WORK / (f"digest-text-{n}" if n_words == 40 else f"digest-text-{n}-{n_words}w")
    if (path / "card.json").exists():
        return path
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "flight", "booking", "refund", "user", "agent", "tool"])
    steps_per = 20
    with rc.CardWriter(path, id="digest", title="text-heavy card", timestamps=False, overwrite=True) as w:
        i = np.arange(n)
        w.write_episodes(pa.table({
            "episode_id": np.char.add("ep-", i.astype(str)), "task_id": np.char.add("t", (i % 500).astype(str)),
            "status": np.array(["completed"] * n), "agent": np.array(["a", "b"])[i % 2],
            "n_steps": np.full(n, steps_per), "score.ok": pa.array(rng.random(n) < 0.5)}))
        for start in range(0, n, 5000):
            m = min(5000, n - start)
            seq = np.tile(np.arange(steps_per), m)
            kinds = np.where(seq % 2 == 1, "tool_call", "message")
            names = np.where(kinds == "tool_call", np.array(["lookup", "search"])[rng.integers(0, 2, m * steps_per)],
                             None)
            content = [" ".join(rng.choice(words, n_words)) + str(rng.integers(1e9)) for _ in range(m * steps_per)]
            w.write_steps(pa.table({"episode_id": np.repeat(np.char.add("ep-", np.arange(start, start + m).astype(str)),
                                                            steps_per),
                                    "seq": seq, "kind": kinds, "name": names, "content": content}))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=25_000)
    parser.add_argument("--repeat", type=int, default=5, help="runs per setting (median)")
    parser.add_argument("--words", type=int, default=40, help="words of text per step (40: ~250 B)")
    args = parser.parse_args()
    card = _card(args.episodes, args.words)
    tables = sum(p.stat().st_size for p in card.rglob("*.parquet"))
    data = b"".join(p.read_bytes() for p in card.rglob("*.parquet"))
    t0, c0 = time.perf_counter(), time.process_time()
    hashlib.sha256(data).hexdigest()
    wall_rate = len(data) / (time.perf_counter() - t0) / 1e6
    cpu_rate = len(data) / max(time.process_time() - c0, 1e-9) / 1e6
    child = CHILD.format(bench=str(Path(__file__).resolve().parent))
    times: dict[str, list[tuple[float, float]]] = {"1": [], "0": []}
    for _ in range(args.repeat):
        for verify in times:
            out = subprocess.run([sys.executable, "-c", child, str(card), verify], capture_output=True, text=True,
                                 check=True)
            wall, cpu = out.stdout.strip().splitlines()[-1].split()
            times[verify].append((float(wall), float(cpu)))
    print(f"text-heavy card: {args.episodes:,} episodes, {args.episodes * 20:,} steps of {args.words} words, tables {tables / 1e6:.1f} MB "
          f"(all hashed when verified); sha256 here: {cpu_rate:.0f} MB/s of CPU time, {wall_rate:.0f} MB/s of "
          f"wall clock; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"rescore (count rule), median of {args.repeat} runs each, in rotation (wall s, CPU s of all threads):")
    medians = {}
    for verify, label in (("1", "verified  "), ("0", "unverified")):
        runs = times[verify]
        medians[verify] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        print(f"  {label} wall {medians[verify][0]:.2f} s, CPU {medians[verify][1]:.2f} s  "
              f"{[(round(w, 2), round(c, 2)) for w, c in runs]}")
    (won, con), (woff, coff) = medians["1"], medians["0"]
    print(f"  ratio verified / unverified: wall {won / woff:.2f}x, CPU {con / coff:.2f}x (budget 1.10x)")


if __name__ == "__main__":
    main()
