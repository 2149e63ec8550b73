"""Benchmark sources made by replicating the real files of ../shared/data/external with new ids.

`tau2_source(path, n)` writes one tau2-bench Results JSON holding `n` simulations: the
simulations of the real results files, cycled, each copy with a new simulation id and
its task renamed `<task>~<copy>` (the task definitions are replicated the same way, so
the plan stays a tasks x trials grid). `mini_swe_agent_source(dir, n)` writes a
mini-swe-agent output directory with `n` instances: the real run directory's
instances, cycled, each copy renamed `<instance>~<copy>` in `preds.json`, the exit
statuses and its `<id>/<id>.traj.json` (`with_every_trajectory` gives every listed
instance a trajectory, cycling the real ones; the real run lacks 12 of its 15).
Deterministic: the same n gives byte-identical files.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from _common import WORK, row

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "external"
TAU2_FILES = ("tau2-bench/qwen2.5-7b_airline_default_gpt-4.1-2025-04-14_1trials.json",
              "tau2-bench/gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json")
MINI_DIR = "mini-swe-agent/deepseek_reasoner_dev"


def _need(rel: str) -> Path:
    path = EXTERNAL / rel
    if not path.exists():
        raise SystemExit(f"{path} is absent: this benchmark replicates the real files of ../shared/data/external")
    return path


def tau2_source(path: Path, n: int) -> int:
    """Write a tau2 Results file of `n` simulations replicated from the real ones; returns its size."""
    runs = [json.loads(_need(rel).read_text(encoding="utf-8")) for rel in TAU2_FILES]
    head = runs[0]
    # Every simulation becomes trial 0 of its own replicated task, so the plan is tasks x 1 trial.
    sims = [(r, s) for r, run in enumerate(runs) for s in run["simulations"]]
    tasks = {(r, t["id"]): t for r, run in enumerate(runs) for t in run["tasks"]}
    info = dict(head["info"], num_trials=1)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f'{{"timestamp": {json.dumps(head["timestamp"])}, "info": {json.dumps(info)}, "tasks": [')
        for i in range(n):
            r, sim = sims[i % len(sims)]
            fh.write(("," if i else "") + json.dumps(dict(tasks[(r, sim["task_id"])], id=f"{sim['task_id']}~{i}")))
        fh.write('], "simulations": [')
        for i in range(n):
            r, sim = sims[i % len(sims)]
            copy = dict(sim, id=str(uuid.UUID(int=i + 1)), task_id=f"{sim['task_id']}~{i}", trial=0)
            fh.write(("," if i else "") + json.dumps(copy))
        fh.write("]}")
    return path.stat().st_size


def mini_swe_agent_source(directory: Path, n: int, *, with_every_trajectory: bool = False) -> int:
    """Write a mini-swe-agent output directory of `n` instances; returns its total size."""
    import yaml

    src = _need(MINI_DIR)
    preds = json.loads((src / "preds.json").read_text(encoding="utf-8"))
    status_file = next(src.glob("exit_statuses_*.yaml"))
    statuses = yaml.safe_load(status_file.read_text(encoding="utf-8"))["instances_by_exit_status"]
    status_of = {iid: s for s, ids in statuses.items() for iid in ids}
    trajs = {p.name.removesuffix(".traj.json"): p.read_text(encoding="utf-8") for p in sorted(src.glob("*.traj.json"))}
    listed = sorted(status_of)
    real = sorted(trajs)
    directory.mkdir(parents=True, exist_ok=True)
    out_preds: dict[str, dict] = {}
    out_status: dict[str, list[str]] = {}
    total = 0
    for i in range(n):
        iid = listed[i % len(listed)]
        new = f"{iid}~{i}"
        source_traj = trajs.get(iid) or (trajs[real[i % len(real)]] if with_every_trajectory else None)
        status = status_of[iid] if iid in trajs or not with_every_trajectory else None
        if source_traj is not None:
            doc = json.loads(source_traj)
            old = doc.get("instance_id")
            doc["instance_id"] = new
            status = status or doc["info"]["exit_status"]
            text = json.dumps(doc, indent=2).replace(f'"{old}"', f'"{new}"') if old else json.dumps(doc, indent=2)
            (directory / new).mkdir(exist_ok=True)
            (directory / new / f"{new}.traj.json").write_text(text, encoding="utf-8")
            total += len(text)
        out_status.setdefault(status, []).append(new)
        base = preds.get(iid) or next(iter(preds.values()))
        out_preds[new] = dict(base, instance_id=new)
    text = json.dumps(out_preds, indent=2)
    (directory / "preds.json").write_text(text, encoding="utf-8")
    status_text = yaml.safe_dump({"instances_by_exit_status": out_status}, sort_keys=False)
    (directory / status_file.name).write_text(status_text, encoding="utf-8")
    return total + len(text) + len(status_text)


REPLICAS = ("tau2-bench", "mini-swe-agent")
SIZES = (5000, 10000, 20000)


def replica_load(source: Path) -> int:
    """Baseline: what a user reading the files themselves pays — `json.load` of every JSON file of
    the source and `yaml.safe_load` of its YAML files (mini-swe-agent's exit statuses)."""
    import yaml

    if source.is_file():
        files = [source]
    else:
        files = sorted(source.rglob("*.json"))
        for path in sorted(source.glob("*.yaml")):
            with open(path, encoding="utf-8") as fh:
                yaml.safe_load(fh)
    n = 0
    for path in files:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        n += len(doc["simulations"]) if isinstance(doc, dict) and "simulations" in doc else 1
    return n


def _source(work: Path, fmt: str, n: int) -> Path:
    source = work / (f"tau2-{n}.json" if fmt == "tau2-bench" else f"mini-{n}")
    if not source.exists():
        t0 = time.perf_counter()
        size = tau2_source(source, n) if fmt == "tau2-bench" else mini_swe_agent_source(source, n)
        print(f"wrote {source.name}: {size / 1e6:.0f} MB, {n:,} episodes ({time.perf_counter() - t0:.1f} s)")
    return source


def replica_bench(formats: list[str], sizes: list[int], repeats: int, run: Callable[[str, Path, Path], dict],
                  *, keep: bool = False, before: Callable[[str, Path, Path], dict] | None = None) -> int:
    """Import replicas of each format at each size, each run in a fresh process, the baseline and
    the import interleaved round by round (so the shared machine's load falls on both alike);
    print medians of the rounds, CPU seconds, peak RSS, ratios and the issue's targets. `before`:
    also the import by other code (`--baseline DIR`), in the same rounds: before/now ratios."""
    work = WORK / "import-replicas"
    work.mkdir(parents=True, exist_ok=True)
    out = work / "card"
    sources = {(fmt, n): _source(work, fmt, n) for fmt in formats for n in sizes}
    load0 = os.getloadavg()
    runs: dict[tuple[str, int, str], list[dict]] = {}
    for _ in range(repeats):
        for (fmt, n), source in sources.items():
            for mode in ("load-replica", f"import:{fmt}", *((f"before:{fmt}",) if before else ())):
                r = before(f"import:{fmt}", source, out) if mode.startswith("before:") else run(mode, source, out)
                runs.setdefault((fmt, n, mode), []).append(r)
                print(f"  {fmt} {n:,} {mode}: {r['seconds']:.1f} s, {r['cpu_seconds']:.2f} CPU s, "
                      f"{r['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    print(f"\n{repeats} rounds, each measurement a fresh process; figures are medians over the rounds, peak RSS the "
          f"maximum. Load average (1/5/15 min) {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} at the start, "
          f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} at the end, on {os.cpu_count()} cores: wall seconds "
          "stretch with the load; CPU s (the child's process time) and the ratios much less.")
    widths = (42, 9, 11, 8, 11, 9)
    for fmt in formats:
        print(f"\n{fmt}: the real files of ../shared/data/external replicated with new ids")
        print(row("", "wall s", "episodes/s", "CPU s", "eps/CPU-s", "RSS MB", widths=widths))
        medians = {}
        for n in sizes:
            labelled = [("json.load + yaml of every file", "load-replica"), ("rcard import", f"import:{fmt}")]
            if before:
                labelled.append(("rcard import, baseline code", f"before:{fmt}"))
            for label, mode in labelled:
                rs = runs[(fmt, n, mode)]
                m = {"seconds": statistics.median(r["seconds"] for r in rs),
                     "cpu": statistics.median(r["cpu_seconds"] for r in rs),
                     "rss": max(r["peak_rss_mb"] for r in rs), "steps": rs[0]["steps"]}
                medians[(n, mode)] = m
                print(row(f"{n:,}: {label}", f"{m['seconds']:.2f}", f"{n / m['seconds']:,.0f}", f"{m['cpu']:.2f}",
                          f"{n / m['cpu']:,.0f}", f"{m['rss']:.0f}", widths=widths))
            base, ours = medians[(n, "load-replica")], medians[(n, f"import:{fmt}")]
            cpu_ratio = statistics.median(b["cpu_seconds"] / a["cpu_seconds"] for a, b in
                                          zip(runs[(fmt, n, "load-replica")], runs[(fmt, n, f"import:{fmt}")], strict=True))
            print(f"  {n:,}: import / baseline {ours['seconds'] / base['seconds']:.2f}x wall, {cpu_ratio:.2f}x CPU "
                  f"(median of the rounds' ratios), {ours['rss'] / base['rss']:.2f}x RSS; {ours['steps']:,} steps")
            if before:
                then = runs[(fmt, n, f"before:{fmt}")]
                gain = [b["cpu_seconds"] / a["cpu_seconds"] for a, b in zip(runs[(fmt, n, f"import:{fmt}")], then,
                                                                           strict=True)]
                print(f"  {n:,}: baseline code / now: CPU {statistics.median(gain):.2f}x (rounds "
                      f"{', '.join(f'{x:.2f}' for x in gain)}), peak RSS {medians[(n, f'before:{fmt}')]['rss']:.0f} "
                      f"-> {ours['rss']:.0f} MB")
        (n0, n1), key = (sizes[0], sizes[-1]), f"import:{fmt}"
        a, b = medians[(n0, key)], medians[(n1, key)]
        if n1 > n0:
            print(f"  flatness {n0:,} -> {n1:,} ({n1 / n0:.0f}x the episodes): episodes per CPU-second "
                  f"x{(n1 / b['cpu']) / (n0 / a['cpu']):.2f}, wall episodes/s "
                  f"x{(n1 / b['seconds']) / (n0 / a['seconds']):.2f}, peak RSS x{b['rss'] / a['rss']:.2f} "
                  f"({a['rss']:.0f} -> {b['rss']:.0f} MB)")
        for n in sizes:
            m = medians[(n, key)]
            print(f"  target at {n:,}: >= 2,000 episodes/s: wall {n / m['seconds']:,.0f} "
                  f"({'met' if n / m['seconds'] >= 2000 else 'NOT met'}), per CPU-second {n / m['cpu']:,.0f} "
                  f"({'met' if n / m['cpu'] >= 2000 else 'NOT met'}); peak RSS < 500 MB: "
                  f"{'met' if m['rss'] < 500 else 'NOT met'} ({m['rss']:.0f} MB)")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0
