"""Importer figures (issue: importers): tau-bench import throughput and peak RSS.

    python benchmarks/bench_import.py                    # 2,000 episodes (~40 MB), quick
    python benchmarks/bench_import.py --episodes 20000   # the issue's size (~400 MB)
    python benchmarks/bench_import.py --scale 10         # the same: 10 x the default

Writes a synthetic tau-bench-shaped results file (the real file's shape: an ~8 KB
system policy, ~26 chat messages with ~6 tool calls and JSON tool results, ~20 KB
per episode; deterministic), then, each in a fresh child process so peak RSS is
its own, and each the median of `--repeats` runs:

1. baseline: `json.load` of the whole file (what an importer that does not stream pays);
2. `rcard import tau-bench` of the same file (streamed, bulk-written card).

Prints episodes/s and peak RSS of both and their ratios. Targets: >= 2,000
episodes/s and peak RSS under 1 GB at 20,000 episodes (~400 MB).

    nice -n 10 python benchmarks/bench_import.py --replicas  # tau2-bench + mini-swe-agent at 5k/10k/20k

With `--replicas` (needs ../shared) the real tau2-bench and mini-swe-agent files are replicated
with new ids (`benchmarks/_replicas.py`) to 5,000, 10,000 and 20,000 episodes; each size of each
format is imported and read by the baseline a user would pick (`json.load` of every JSON file,
`yaml.safe_load` of the exit statuses), interleaved round by round (`--repeats`, default 3),
each in a fresh process; it prints wall and CPU seconds, episodes per second of each, peak RSS,
the import/baseline ratios, the flatness from 5k to 20k and the issue's targets (>= 2,000
episodes/s, peak RSS < 500 MB). The machine's load average is printed with them. `--baseline DIR`
also imports with the `rollout_cards` of DIR in the same rounds (before/now CPU and RSS).

    python benchmarks/bench_import.py --inspect          # 3,000-sample Inspect logs (.eval and .json)
    python benchmarks/bench_import.py --real             # every importer on its real files (small: start-up counts)
    python benchmarks/bench_import.py --inspect-gb 1     # a 1 GB .eval: rcard import's peak RSS

With `--inspect` (needs the `inspect` extra and ../shared) the logs replicate a real log
Inspect 0.3.285 wrote, in Inspect's own layout (`benchmarks/_inspect_eval.py`: zstd members
written as Inspect writes them; results recomputed as Inspect computes them; the .json
form written by Inspect's own recorder). Measured against what an Inspect user runs:
`inspect_ai.log.read_eval_log` of the same file (target: rcard import >= 3x faster), and
read_eval_log + accuracy of the first scorer against `rcard rescore` of the imported card
(target: >= 20x faster). The four are run interleaved, round by round, and each ratio is the
median of the rounds' ratios, so a shared machine's load falls on both sides alike; module
loading is untimed on both sides. `--keep` keeps (and reuses) the generated logs. `--baseline DIR`
also runs, in the same rounds, `rcard import` with the `rollout_cards` of DIR (e.g. `git archive main |
tar -x -C DIR`): before/now ratios of the import measured under the same load. `--inspect-gb N` writes a .eval of N GB (samples padded with
~200 KB of tool output each) and measures one `rcard import` of it (target: peak RSS
under 1 GB); read_eval_log of it is not run (it holds every sample in memory).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORK, peak_rss_mb, row, run_child  # noqa: E402
from _real import real_bench, real_child  # noqa: E402
from _replicas import REPLICAS, SIZES, replica_bench, replica_load  # noqa: E402

DEFAULT_EPISODES = 2000
TOOLS = ("get_user_details", "get_reservation_details", "search_direct_flight", "book_reservation",
         "cancel_reservation", "update_reservation_flights", "think")
POLICY = "# Airline Agent Policy\n\n" + "".join(
    f"- Rule {i}: before any action that updates the booking database, list the details and obtain "
    f"explicit confirmation; never give information not provided by the user or the tools ({i}).\n"
    for i in range(45)
)


def _record(rng: random.Random, task: int, trial: int) -> dict:
    traj = [{"role": "system", "content": POLICY},
            {"role": "user", "content": f"Hi, I need help with reservation {task:05d}. " * 3}]
    n_calls = rng.randint(4, 8)
    for c in range(n_calls):
        traj.append({"content": "Let me check that for you. " * rng.randint(2, 8), "role": "assistant"})
        traj.append({"role": "user", "content": "Yes, please go ahead with that. " * rng.randint(1, 4)})
        call_id = f"call_{task}_{trial}_{c}_{rng.getrandbits(40):x}"
        name = rng.choice(TOOLS)
        args = {"user_id": f"user_{task}", "reservation_id": f"R{rng.getrandbits(24):06X}", "cabin": "economy"}
        traj.append({"content": None, "role": "assistant", "tool_calls": [
            {"function": {"arguments": json.dumps(args), "name": name}, "id": call_id, "type": "function"}]})
        flights = [{"flight_number": f"HAT{rng.randint(1, 300):03d}", "origin": "JFK", "destination": "SEA",
                    "status": "available", "prices": {"economy": rng.randint(80, 400), "business": rng.randint(400, 2000)}}
                   for _ in range(rng.randint(3, 9))]
        traj.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": json.dumps(flights)})
    traj.append({"content": "Your request is complete. " * 4, "role": "assistant"})
    traj.append({"role": "user", "content": "Thank you! ###STOP###"})
    reward = float(rng.random() < 0.4)
    return {"task_id": task, "trial": trial, "reward": reward, "traj": traj,
            "info": {"task": {"user_id": f"user_{task}", "instruction": f"You are user_{task}. " * 20,
                              "actions": [{"name": "book_reservation", "kwargs": {"user_id": f"user_{task}"}}],
                              "outputs": []},
                     "source": rng.choice(["user", "user", "user", "transfer_to_human_agents"]),
                     "user_cost": rng.random() / 100,
                     "reward_info": {"reward": reward, "info": {"r_actions": reward == 1.0}, "actions": []}}}


def make_source(path: Path, episodes: int, trials: int = 4) -> int:
    """Write a tau-bench-shaped JSON array of `episodes` records, streamed; returns its size."""
    rng = random.Random(20250101)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        for i in range(episodes):
            fh.write(("," if i else "") + json.dumps(_record(rng, i // trials, i % trials)))
        fh.write("]")
    return path.stat().st_size


def _child(mode: str, source: Path, out: Path) -> dict:
    from rollout_cards.importers import import_source  # module loading is not the import's cost

    if mode.startswith("inspect"):
        return _inspect_child(mode, source, out)
    from rollout_cards.cli import without_pandas

    # As `rcard import` of a built-in format does (cli/importers.py): pyarrow's first conversion
    # would import pandas (~0.6 CPU s, counted as the import's before), which no built-in importer uses.
    without_pandas.block()
    shutil.rmtree(out, ignore_errors=True)
    t0, c0 = time.perf_counter(), time.process_time()
    if mode.startswith("real"):  # every real source of one format: json.load of its files, or the import
        n, steps = real_child(mode, source, out)
    elif mode == "load":
        with open(source, encoding="utf-8") as fh:
            n = len(json.load(fh))
        steps = None
    elif mode == "load-replica":  # tau2-bench / mini-swe-agent replicas: json.load of every JSON file
        n, steps = replica_load(source), None
    else:
        result = import_source(mode.removeprefix("import:") if mode.startswith("import:") else "tau-bench", [source], out)
        n, steps = result.episodes, result.steps
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"episodes": n, "steps": steps, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": peak_rss_mb()}


def _inspect_child(mode: str, source: Path, out: Path) -> dict:
    import rollout_cards as rc
    from rollout_cards.importers import import_source

    if mode in ("inspect-read", "inspect-accuracy"):
        from inspect_ai.log import read_eval_log
        from inspect_ai.scorer import value_to_float
    else:  # module loading is not timed on either side (inspect_ai loads its modules at import):
        import msgspec  # noqa: F401 - loaded lazily by the first fast decode (jsondoc._load)
        import pyarrow as pa
        import scipy.special  # noqa: F401 - loaded lazily by the t intervals

        pa.array([0])  # pyarrow loads its pandas shim (pandas, when installed) at its first array from a list
        from rollout_cards.importers import inspect_ai, inspect_replay  # noqa: F401
        from rollout_cards.io import finalize, reader  # noqa: F401
        from rollout_cards.rules import engine, rescore  # noqa: F401 - the import replays its rules too

    if mode == "inspect-import":
        shutil.rmtree(out, ignore_errors=True)
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "inspect-read":
        n = len(read_eval_log(str(source)).samples or [])
    elif mode == "inspect-accuracy":
        to_float = value_to_float()
        samples = read_eval_log(str(source)).samples or []
        values = [to_float(s.scores["match"].value) for s in samples if s.scores and "match" in s.scores]
        n, _accuracy = len(samples), sum(values) / len(values)
    elif mode == "inspect-import":
        n = import_source("inspect", [source], out).episodes
    else:
        n = len(rc.rescore(rc.open(out)).runs)  # the number of rules replayed
    return {"episodes": n, "steps": None, "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "peak_rss_mb": peak_rss_mb()}


def _baseline_child(code: Path, *args: str) -> dict:
    """`run_child` with the `rollout_cards` of `code` first on the path (the editable install comes after)."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    out = subprocess.run([sys.executable, str(Path(__file__)), "--child", *args], capture_output=True, text=True,
                         check=False, env=env)
    if out.returncode != 0:
        raise SystemExit(f"baseline child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load() -> str:
    """The 1, 5 and 15 minute load averages, to print beside a figure (n/a where there are none)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _inspect(samples: int, repeats: int, keep: bool = False, baseline: Path | None = None) -> int:
    """Both formats; the four measurements interleaved round by round (read, import, read +
    accuracy, rescore), so the load of a shared machine falls on both sides alike; each ratio
    is the median of the rounds' ratios."""
    from _inspect_eval import make_eval, make_json

    work = WORK / "import-inspect"
    sources = {"eval": work / f"log-{samples}.eval", "json": work / f"log-{samples}.json"}
    if not keep or not all(p.exists() for p in sources.values()):
        shutil.rmtree(work, ignore_errors=True)
        t0 = time.perf_counter()
        make_eval(sources["eval"], samples)
        made = time.perf_counter() - t0
        make_json(sources["eval"], sources["json"])
        print(f"wrote {samples} samples: {sources['eval'].name} {sources['eval'].stat().st_size / 1e6:.1f} MB in "
              f"{made:.1f} s, {sources['json'].name} {sources['json'].stat().st_size / 1e6:.1f} MB (Inspect's "
              f"recorder), {time.perf_counter() - t0:.0f} s in all")
    modes = ("inspect-read", "inspect-import", "inspect-accuracy", "inspect-rescore")
    for fmt, source in sources.items():
        out = work / f"card-{fmt}"
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        before: list[dict] = []
        for _ in range(repeats):
            for mode in modes:
                runs[mode].append(run_child(Path(__file__), mode, str(source), str(out)))
            if baseline is not None:
                before.append(_baseline_child(baseline, "inspect-import", str(source), str(work / f"card-{fmt}-before")))
        seconds = {m: [r["seconds"] for r in runs[m]] for m in modes}
        print(f"\n{fmt} ({source.stat().st_size / 1e6:.1f} MB): {repeats} rounds, each measurement in a fresh "
              "process; median seconds (min-max), peak RSS = max over rounds")
        print(row("", "median s", "min-max s", "samples/s", "peak RSS MB", widths=(30, 10, 16, 11, 12)))
        for label, mode in (("inspect_ai read_eval_log", "inspect-read"), ("rcard import inspect", "inspect-import"),
                            ("read_eval_log + accuracy", "inspect-accuracy"), ("rcard rescore (all rules)", "inspect-rescore")):
            t = statistics.median(seconds[mode])
            print(row(label, f"{t:.2f}", f"{min(seconds[mode]):.1f}-{max(seconds[mode]):.1f}", f"{samples / t:.0f}",
                      f"{max(r['peak_rss_mb'] for r in runs[mode]):.0f}", widths=(30, 10, 16, 11, 12)))
        cpu = {m: [r["cpu_seconds"] for r in runs[m]] for m in modes}
        print(f"CPU s (process time, median of {repeats}): " + ", ".join(
            f"{m.removeprefix('inspect-')} {statistics.median(cpu[m]):.2f}" for m in modes))
        cpu_speed = [a / b for a, b in zip(cpu["inspect-read"], cpu["inspect-import"], strict=True)]
        print(f"{fmt}: in CPU s rcard import is {statistics.median(cpu_speed):.2f}x as fast as read_eval_log "
              f"(rounds {', '.join(f'{x:.2f}' for x in cpu_speed)})")
        # rescore's read-ahead threads wait for a core on a loaded machine, the lone read_eval_log
        # does not: its wall ratio falls with the load (14.8-25.0x in one run at load 6), the CPU one
        # (every thread's time counted) much less
        cpu_fast = [a / b for a, b in zip(cpu["inspect-accuracy"], cpu["inspect-rescore"], strict=True)]
        print(f"{fmt}: in CPU s rcard rescore is {statistics.median(cpu_fast):.1f}x as fast as read_eval_log + "
              f"accuracy (rounds {', '.join(f'{x:.1f}' for x in cpu_fast)}); load {_load()}")
        if before:
            then = [r["cpu_seconds"] for r in before]
            gain = [a / b for a, b in zip(then, cpu["inspect-import"], strict=True)]
            was = [a / b for a, b in zip(cpu["inspect-read"], then, strict=True)]
            print(f"{fmt}: baseline ({baseline}) rcard import CPU s {statistics.median(then):.2f} (rounds "
                  f"{', '.join(f'{x:.2f}' for x in then)}); before/now {statistics.median(gain):.2f}x (rounds "
                  f"{', '.join(f'{x:.2f}' for x in gain)}); read / baseline import {statistics.median(was):.2f}x")
        speed = [a / b for a, b in zip(seconds["inspect-read"], seconds["inspect-import"], strict=True)]
        fast = [a / b for a, b in zip(seconds["inspect-accuracy"], seconds["inspect-rescore"], strict=True)]
        s1, s2 = statistics.median(speed), statistics.median(fast)
        print(f"{fmt}: rcard import is {s1:.2f}x as fast as read_eval_log (median of the rounds' ratios "
              f"{', '.join(f'{x:.2f}' for x in speed)}; target 3x: {'met' if s1 >= 3 else 'NOT met'}); rescore "
              f"({runs['inspect-rescore'][0]['episodes']} rules) {s2:.1f}x as fast as read_eval_log + accuracy "
              f"({', '.join(f'{x:.1f}' for x in fast)}; target 20x: {'met' if s2 >= 20 else 'NOT met'})")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _inspect_large(gb: float) -> int:
    from _inspect_eval import make_eval

    work = WORK / "import-inspect-large"
    shutil.rmtree(work, ignore_errors=True)
    pad_kb = 200  # KB of tool output added to each sample; the bytes per sample are measured on a probe log
    probe = make_eval(work / "probe.eval", 60, pad_kb=pad_kb)
    per_sample = probe.stat().st_size / 60
    samples = int(gb * 1e9 / per_sample) + 1
    t0 = time.perf_counter()
    source = make_eval(work / "large.eval", samples, pad_kb=pad_kb)
    print(f"wrote large.eval: {source.stat().st_size / 1e9:.2f} GB, {samples} samples "
          f"({time.perf_counter() - t0:.0f} s); one rcard import in a fresh process")
    r = run_child(Path(__file__), "inspect-import", str(source), str(work / "card"))
    print(row("", "seconds", "samples/s", "peak RSS MB"))
    print(row("rcard import inspect", f"{r['seconds']:.1f}", f"{samples / r['seconds']:.0f}", f"{r['peak_rss_mb']:.0f}"))
    print(f"target: peak RSS < 1024 MB on a {source.stat().st_size / 1e9:.2f} GB .eval: "
          f"{'met' if r['peak_rss_mb'] < 1024 else 'NOT met'} ({r['peak_rss_mb']:.0f} MB)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _median_runs(mode: str, source: Path, out: Path, repeats: int) -> dict:
    runs = [run_child(Path(__file__), mode, str(source), str(out)) for _ in range(repeats)]
    return {"episodes": runs[0]["episodes"], "steps": runs[0]["steps"],
            "seconds": statistics.median(r["seconds"] for r in runs),
            "cpu_seconds": statistics.median(r.get("cpu_seconds", r["seconds"]) for r in runs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=None, help=f"episodes in the synthetic file (default {DEFAULT_EPISODES})")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the default size (10 = the issue's 20,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median time, max RSS)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic file and card under benchmarks/_work")
    parser.add_argument("--format", choices=("tau-bench", *REPLICAS), default="tau-bench",
                        help="tau-bench: synthetic file; tau2-bench / mini-swe-agent: the real files of "
                        "../shared/data/external replicated with new ids, at 5,000, 10,000 and 20,000 episodes")
    parser.add_argument("--replicas", action="store_true", help="tau2-bench and mini-swe-agent replicas at 5,000, "
                        "10,000 and 20,000 episodes, against json.load + yaml of every file (the issue's figures)")
    parser.add_argument("--real", action="store_true", help="every importer on its real files of "
                        "../shared/data/external, against json.load of the same files")
    parser.add_argument("--inspect", action="store_true", help="benchmark Inspect logs instead (inspect extra)")
    parser.add_argument("--samples", type=int, default=3000, help="samples of the Inspect logs (default 3000)")
    parser.add_argument("--inspect-gb", type=float, default=None, help="peak RSS of importing a .eval this many GB")
    parser.add_argument("--baseline", type=Path, default=None, help="with --inspect or --replicas: also import with "
                        "the rollout_cards of this directory in the same rounds (before/now)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "SOURCE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, source, out = args.child
        print(json.dumps(_child(mode, Path(source), Path(out))))
        return 0
    if args.inspect_gb:
        return _inspect_large(args.inspect_gb)
    if args.inspect:
        return _inspect(args.samples, args.repeats, keep=args.keep, baseline=args.baseline)
    if args.real:
        return real_bench(lambda mode, src, out: _median_runs(mode, src, out, args.repeats), args.repeats)

    if args.replicas or args.format in REPLICAS:
        return replica_bench(list(REPLICAS) if args.replicas else [args.format],
                             [args.episodes] if args.episodes else list(SIZES), args.repeats,
                             lambda mode, src, out: run_child(Path(__file__), mode, str(src), str(out)), keep=args.keep,
                             before=None if args.baseline is None else
                             lambda mode, src, out: _baseline_child(args.baseline, mode, str(src), str(out)))
    episodes = args.episodes or int(DEFAULT_EPISODES * args.scale)
    work = WORK / "import"
    work.mkdir(parents=True, exist_ok=True)
    source, out = work / f"tau-{episodes}.json", work / "card"
    if not source.exists():
        t0 = time.perf_counter()
        size = make_source(source, episodes)
        print(f"wrote {source.name}: {size / 1e6:.0f} MB, {episodes} episodes ({time.perf_counter() - t0:.1f} s)")
    size = source.stat().st_size
    base = _median_runs("load", source, out, args.repeats)
    ours = _median_runs("import", source, out, args.repeats)

    print(f"\ntau-bench import of {episodes} episodes, {size / 1e6:.0f} MB ({ours['steps']} steps); "
          f"median of {args.repeats}, peak RSS = max over runs")
    print(row("", "seconds", "episodes/s", "peak RSS MB"))
    for label, r in (("baseline: json.load of the file", base), ("rcard import tau-bench", ours)):
        print(row(label, f"{r['seconds']:.2f}", f"{r['episodes'] / r['seconds']:.0f}", f"{r['peak_rss_mb']:.0f}"))
    print(f"import time / json.load time: {ours['seconds'] / base['seconds']:.2f}x; "
          f"import RSS / json.load RSS: {ours['peak_rss_mb'] / base['peak_rss_mb']:.2f}x")
    rate, rss = episodes / ours["seconds"], ours["peak_rss_mb"]
    print(f"targets: >= 2000 episodes/s: {'met' if rate >= 2000 else 'NOT met'} ({rate:.0f}); "
          f"peak RSS < 1024 MB: {'met' if rss < 1024 else 'NOT met'} ({rss:.0f} MB)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
