"""Benchmark: `validate()` against `sha256sum` of the same files plus one pyarrow scan of the
columns the validator checks, at two card sizes (to show peak RSS stays flat).

    python benchmarks/bench_validate.py                       # 12.5k and 50k episodes (20 steps each)
    python benchmarks/bench_validate.py --episodes 1000000    # the issue's size: 250k and 1M episodes, 20M steps
    python benchmarks/bench_validate.py --scale 20            # the same: 20 x the default size

Cards are generated with the bulk writer (seeded; short texts drawn from a pool).
Every measurement (and the generation) runs in a fresh child process; the figures
are medians of `--repeats`, MB/s is over the card's bytes, peak RSS is the child's
high-water mark (VmHWM). The baseline runs in the same invocation on the same (cached) files:
`sha256sum` over every file, then a child that reads the checked columns of both
tables with pyarrow; `ratio*` uses Python's hashlib (OpenSSL, often faster than
coreutils) instead of `sha256sum`, a stricter comparison. Targets (issue 3): validation within 2x of the baseline, peak
RSS under 1 GB and flat as the card grows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import row, run_child  # noqa: E402

DEFAULT_EPISODES = 50_000
STEPS_PER_EPISODE = 20
CHUNK_EPISODES = 25_000
EPISODE_COLUMNS = ["episode_id", "task_id", "status", "agent", "trial", "started_at", "ended_at", "n_steps",
                   "cost_usd", "score.reward"]
STEP_COLUMNS = ["episode_id", "seq", "kind", "t", "call_id", "cost_usd"]


def generate(out: Path, episodes: int, seed: int = 7) -> None:
    """A valid card of `episodes` episodes and 20 steps each, written through the bulk path."""
    import numpy as np
    import pyarrow as pa

    from rollout_cards.io.writer import CardWriter

    rng = np.random.default_rng(seed)
    # Texts of 20-200 random letters: Parquet compresses them about as much as real transcripts.
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz      "))
    pool = pa.array(["".join(rng.choice(letters, rng.integers(20, 200))) for _ in range(32768)])
    kinds = ["message", "message"] + ["tool_call", "tool_result"] * 8 + ["message", "message"]
    calls = [None, None] + [f"c{j}" for j in range(8) for _ in (0, 1)] + [None, None]
    agents = np.array(["alpha", "beta", "gamma", "delta"])
    t0 = 1_767_225_600_000_000  # 2026-01-01 in microseconds
    plan = {"expected_episodes": episodes}
    with CardWriter(out, id="bench-validate", title="Validation benchmark", plan=plan, timestamps=False,
                    scope={"license": "CC0-1.0"}) as card:
        for first in range(0, episodes, CHUNK_EPISODES):
            n = min(CHUNK_EPISODES, episodes - first)
            idx = np.arange(first, first + n)
            ids = pa.array([f"ep-{i:08d}" for i in idx])
            started = t0 + idx * 1_000_000
            card.write_episodes(pa.table({
                "episode_id": ids,
                "task_id": pa.array([f"task-{i % 500:03d}" for i in idx]),
                "status": pa.array(np.where(rng.random(n) < 0.9, "completed", "error")),
                "agent": pa.array(agents[idx % 4]),
                "trial": pa.array((idx // 2000) % 5),
                "started_at": pa.array(started, pa.timestamp("us", tz="UTC")),
                "ended_at": pa.array(started + STEPS_PER_EPISODE * 2_000_000, pa.timestamp("us", tz="UTC")),
                "n_steps": pa.array(np.full(n, STEPS_PER_EPISODE)),
                "cost_usd": pa.array(rng.random(n)),
                "score.reward": pa.array(rng.random(n)),
            }))
            rows = n * STEPS_PER_EPISODE
            of = np.repeat(np.arange(n), STEPS_PER_EPISODE)
            seq = np.tile(np.arange(STEPS_PER_EPISODE), n)
            card.write_steps(pa.table({
                "episode_id": ids.take(pa.array(of)),
                "seq": pa.array(seq),
                "kind": pa.array(np.tile(np.array(kinds), n)),
                "t": pa.array(started[of] + seq * 2_000_000, pa.timestamp("us", tz="UTC")),
                "call_id": pa.array(calls * n, pa.string()),
                "content": pool.take(pa.array(rng.integers(0, len(pool), rows))),
                "cost_usd": pa.array(rng.random(rows) / 100),
            }))


def card_files(card: Path) -> list[Path]:
    manifest = json.loads((card / "card.json").read_text())
    return [card / "card.json"] + [card / f["path"] for f in manifest["inventory"]["files"]]


def peak_rss_mb() -> float:
    """Peak RSS of this process image (VmHWM). Unlike ru_maxrss, it does not include the
    parent's memory that a fork-then-exec child inherits in Linux's accounting."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args: list[str]) -> None:
    """`--child validate|scan|hash CARD` (one measurement, printed as JSON) or `--child generate CARD N`."""
    mode, card = args[0], Path(args[1])
    if mode == "generate":
        generate(card, int(args[2]))
        print(json.dumps({"rss_mb": peak_rss_mb()}))
        return
    import pyarrow.parquet as pq

    if mode == "validate":
        from rollout_cards.validate import validate
    elif mode == "hash":
        from rollout_cards.io.hashing import sha256_file
    t = time.perf_counter()  # after the imports: they are not part of either measurement
    if mode == "validate":
        report = validate(card)
        if not report.valid:
            raise SystemExit(f"the benchmark card is invalid: {report.findings[:3]}")
    elif mode == "hash":
        for path in card_files(card):
            sha256_file(path)
    else:
        manifest = json.loads((card / "card.json").read_text())
        for table, columns in (("episodes", EPISODE_COLUMNS), ("steps", STEP_COLUMNS)):
            for rel in manifest["tables"][table]["paths"]:
                pf = pq.ParquetFile(card / rel)
                for group in range(pf.metadata.num_row_groups):  # per row group: flat memory
                    for _ in pf.iter_batches(batch_size=1 << 18, columns=columns, row_groups=[group]):
                        pass
    print(json.dumps({"seconds": time.perf_counter() - t, "rss_mb": peak_rss_mb()}))


def measure(card: Path, repeats: int) -> dict[str, float]:
    files = [str(p) for p in card_files(card)]
    subprocess.run(["sha256sum", *files], check=True, capture_output=True)  # warm the page cache
    sha, pysha, scan, val, scan_rss, val_rss = [], [], [], [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(["sha256sum", *files], check=True, capture_output=True)
        sha.append(time.perf_counter() - t)
        pysha.append(run_child(Path(__file__), "hash", str(card))["seconds"])
        s = run_child(Path(__file__), "scan", str(card))
        scan.append(s["seconds"])
        scan_rss.append(s["rss_mb"])
        v = run_child(Path(__file__), "validate", str(card))
        val.append(v["seconds"])
        val_rss.append(v["rss_mb"])
    size = sum(Path(f).stat().st_size for f in files)
    out = {
        "mb": size / 1e6,
        "sha256sum": statistics.median(sha),
        "hashlib": statistics.median(pysha),
        "scan": statistics.median(scan),
        "validate": statistics.median(val),
        "scan_rss": max(scan_rss),
        "validate_rss": max(val_rss),
    }
    out["baseline"] = out["sha256sum"] + out["scan"]
    out["strict_baseline"] = out["hashlib"] + out["scan"]
    return out


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=None, help="episodes of the larger card")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the default size (20 = 1M episodes)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="generate the cards here and keep them")
    args = parser.parse_args()
    largest = args.episodes or int(DEFAULT_EPISODES * args.scale)
    sizes = [largest // 4, largest]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-validate-"))
    widths = (24, 9, 12, 10, 8, 11, 11, 7, 8, 7, 8, 12)
    print(row("episodes / steps", "card MB", "sha256sum s", "hashlib s", "scan s", "baseline s", "validate s",
              "ratio", "ratio*", "MB/s", "RSS MB", "scan RSS MB", widths=widths))
    try:
        for n in sizes:
            card = work / f"card-{n}"
            if not (card / "card.json").exists():
                t = time.perf_counter()
                run_child(Path(__file__), "generate", str(card), str(n))  # keeps this process small
                print(f"  (generated {n:,} episodes in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
            m = measure(card, args.repeats)
            print(row(f"{n:,} / {n * STEPS_PER_EPISODE:,}", f"{m['mb']:.0f}", f"{m['sha256sum']:.2f}",
                      f"{m['hashlib']:.2f}", f"{m['scan']:.2f}", f"{m['baseline']:.2f}", f"{m['validate']:.2f}",
                      f"{m['validate'] / m['baseline']:.2f}x", f"{m['validate'] / m['strict_baseline']:.2f}x",
                      f"{m['mb'] / m['validate']:.0f}", f"{m['validate_rss']:.0f}", f"{m['scan_rss']:.0f}",
                      widths=widths), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print("baseline = sha256sum + one scan of the checked columns; ratio* = against hashlib's sha256 "
          "(OpenSSL, the hasher the validator uses) + the scan")
    print("targets: validate within 2x of the baseline; peak RSS < 1 GB and flat as the card grows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
