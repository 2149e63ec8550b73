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
import shutil
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


def replica_load(source: Path) -> int:
    """Baseline: `json.load` of every JSON file of the source (what a non-streaming reader pays)."""
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*.json"))
    n = 0
    for path in files:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        n += len(doc["simulations"]) if isinstance(doc, dict) and "simulations" in doc else 1
    return n


def replica_bench(fmt: str, sizes: list[int], repeats: int, measure: Callable[[str, Path, Path], dict],
                  *, keep: bool = False) -> int:
    """Import replicas of `fmt` at each size in fresh processes; print rate, RSS and the baseline ratio."""
    work = WORK / "import-replicas"
    work.mkdir(parents=True, exist_ok=True)
    out = work / "card"
    figures = []
    for n in sizes:
        source = work / (f"tau2-{n}.json" if fmt == "tau2-bench" else f"mini-{n}")
        if not source.exists():
            t0 = time.perf_counter()
            size = tau2_source(source, n) if fmt == "tau2-bench" else mini_swe_agent_source(
                source, n)
            print(f"wrote {source.name}: {size / 1e6:.0f} MB, {n} episodes ({time.perf_counter() - t0:.1f} s)")
        base = measure("load-replica", source, out)
        ours = measure(f"import:{fmt}", source, out)
        figures.append((n, base, ours))
    print(f"\n{fmt} import of real files replicated with new ids; median of {repeats} runs, peak RSS = max "
          "over runs; the machine is shared (loaded): read the ratios first; CPU s = the child's process time")
    widths = (40, 12, 12, 12, 12, 12)
    print(row("", "seconds", "episodes/s", "CPU s", "eps/CPU-s", "peak RSS MB", widths=widths))
    for n, base, ours in figures:
        for label, r in ((f"{n:,}: json.load of every file", base), (f"{n:,}: rcard import {fmt}", ours)):
            cpu = r.get("cpu_seconds", r["seconds"])
            print(row(label, f"{r['seconds']:.2f}", f"{n / r['seconds']:.0f}", f"{cpu:.2f}", f"{n / cpu:.0f}",
                      f"{r['peak_rss_mb']:.0f}", widths=widths))
        cpu_ratio = ours.get("cpu_seconds", ours["seconds"]) / base.get("cpu_seconds", base["seconds"])
        print(f"  import / json.load: {ours['seconds'] / base['seconds']:.2f}x time ({cpu_ratio:.2f}x CPU), "
              f"{ours['peak_rss_mb'] / base['peak_rss_mb']:.2f}x RSS; {ours['steps']:,} steps")
    if len(figures) > 1:
        (n0, _, a), (n1, _, b) = figures[0], figures[-1]
        print(f"flatness {n0:,} -> {n1:,}: episodes/s x{(n1 / b['seconds']) / (n0 / a['seconds']):.2f}, "
              f"peak RSS x{b['peak_rss_mb'] / a['peak_rss_mb']:.2f}")
    for n, _, ours in figures:
        rate, rss = n / ours["seconds"], ours["peak_rss_mb"]
        print(f"targets at {n:,}: >= 2000 episodes/s: {'met' if rate >= 2000 else 'NOT met'} ({rate:.0f}); "
              f"peak RSS < 500 MB: {'met' if rss < 500 else 'NOT met'} ({rss:.0f} MB)")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0
