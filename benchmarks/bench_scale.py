"""The Ray engine against the local engine on the rescore benchmark card (bench_rescore.py's
generator: n episodes, 20n steps, 64k-step row groups), with 1 and 2 Ray worker CPUs.

    pip install -e '.[ray]'
    python benchmarks/bench_scale.py                           # 250k and 1M episodes (5M / 20M steps)
    python benchmarks/bench_scale.py --sizes 100000 --repeat 3 # a quicker run
    python benchmarks/bench_scale.py --driver-path             # also Ray with scoring on the driver
    python benchmarks/bench_scale.py --validate                # rcard validate: local vs Ray

For each size and rule (`count`: a count feature; `regex`: a `last` feature over message text)
it prints the median time of the rule (digests checked, as `rcard rescore` does) per engine,
the Ray engine's ratio to the local one, the one-off Ray start-up, peak RSS of the driver and
of the busiest Ray worker, and what travelled to the driver (per-unit sums; with
--driver-path also the path that scores on the driver: partial rows) — then the per-worker
throughput the projection in docs/scale.md starts from. Driver RSS at two sizes shows
whether the driver's memory depends on the number of steps and episodes. Every run's results
(value, interval, n per agent) are checked equal to the local engine's before any time counts.
Each engine runs in a fresh interpreter (peak RSS via getrusage; workers via /proc VmHWM).

With --validate it times `validate(card)` instead (every check: digests, tables, coverage),
locally and with `engine="ray"`, checks the two reports are equal, and prints what the table
scans sent to the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import peak_rss_mb, row, run_child  # noqa: E402
from benchmarks.bench_rescore import RULES, STEPS_PER_EPISODE, generate  # noqa: E402

SCRIPT = Path(__file__).resolve()
RULE_NAMES = ("count", "regex")
#: The count rule without its step feature: what the driver does per episode on either engine
#: (read the episodes, score, reduce, interval) — the driver-side term of the projection.
DRIVER_ONLY = """\
rule: bench.episodes_only
score: "score.ok"
on_status: {error: 0, timeout: exclude, limit: 0}
aggregate:
  group_by: [agent]
  unit: task_id
  interval: {method: cluster_t}
"""


def _results(run) -> dict[str, list[float]]:  # noqa: ANN001
    return {r.group["agent"]: [r.value, r.interval.low, r.interval.high, r.n] for r in run.results}


def _worker_peaks_mb() -> list[float]:
    """Peak RSS (VmHWM) of every live Ray worker process, in MiB."""
    peaks = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            if not cmd.startswith(b"ray::"):
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks.append(int(line.split()[1]) / 1024)
        except OSError:
            continue
    return peaks


def child(engine: str, n: int, rule_name: str, workers: int, repeat: int) -> None:
    """One engine in this process: `local`, `ray` (scored on the workers) or `ray-driver`
    (step features on the workers, scoring on the driver: the path of rules that need every
    observation)."""
    import rollout_cards as rc
    from rollout_cards.rules.engine import apply_rule
    from rollout_cards.rules.loader import parse_rule

    path = generate(n)
    if engine == "gen":
        print(json.dumps({"path": str(path)}))
        return
    if engine.startswith("validate"):
        validate_child(path, engine == "validate-ray", workers, repeat)
        return
    rule = parse_rule(RULES.get(rule_name, DRIVER_ONLY), file="bench.yaml")
    times, out, stats, startup = [], None, {}, 0.0
    if engine.startswith("ray"):
        import ray

        from rollout_cards.scale.ray_engine import RayEngine, quiet_data_context

        t0 = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        quiet_data_context(ray)
        startup = time.perf_counter() - t0
    for _ in range(repeat):
        card = rc.open(path)
        t0 = time.perf_counter()
        if engine.startswith("ray"):
            steps = RayEngine(card)
            run = steps.run_rule(rule, split=engine == "ray")
            steps.finish()
            stats = steps.stats
        else:
            run = apply_rule(card, rule)
        card.verify_all()
        times.append(time.perf_counter() - t0)
        out = _results(run)
    workers_mb = _worker_peaks_mb() if engine.startswith("ray") else []
    print(json.dumps({"times": times, "startup": startup, "rss": peak_rss_mb(), "results": out,
                      "worker_rss_max": max(workers_mb, default=0.0), "workers_seen": len(workers_mb),
                      "stats": stats}))


def validate_child(path: Path, on_ray: bool, workers: int, repeat: int) -> None:
    """`validate(card)` in this process, locally or with `engine="ray"` (a local Ray of `workers`
    CPUs started first): times, the report, peak RSS, and what the table scans sent the driver."""
    from rollout_cards.validate import ray_tables, validate

    startup, stats = 0.0, {}
    if on_ray:
        import ray

        from rollout_cards.scale.ray_engine import quiet_data_context

        t0 = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        quiet_data_context(ray)
        startup = time.perf_counter() - t0
        real = ray_tables._scan_tables

        def spy(ctx):  # noqa: ANN001, ANN202
            out = real(ctx)
            stats.update(ctx.facts["ray_tables_stats"])
            return out

        ray_tables._scan_tables = spy
    times, report = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        report = validate(path, engine="ray" if on_ray else "local")
        times.append(time.perf_counter() - t0)
    workers_mb = _worker_peaks_mb() if on_ray else []
    print(json.dumps({"times": times, "startup": startup, "rss": peak_rss_mb(),
                      "report": report.model_dump(mode="json"), "worker_rss_max": max(workers_mb, default=0.0),
                      "stats": stats}))


def validate_main(sizes: list[int], repeat: int) -> None:
    """`rcard validate` of the card, local against Ray with 1 and 2 worker CPUs."""
    widths = (30, 10, 10, 12, 12, 12)
    for n in sizes:
        run_child(SCRIPT, "gen", str(n), "count", "1", "1")
        steps = n * STEPS_PER_EPISODE
        print(f"\n{n:,} episodes, {steps:,} steps — validate (median of {repeat}; every check, digests included)")
        print(row("engine", "time s", "vs local", "first run s", "driver MiB", "worker MiB", widths=widths))
        local = run_child(SCRIPT, "validate-local", str(n), "count", "1", str(repeat))
        base = statistics.median(local["times"])
        print(row("local (1 process)", f"{base:.2f}", "1.00", f"{local['times'][0]:.2f}", f"{local['rss']:.0f}", "-",
                  widths=widths))
        for workers in (1, 2):
            got = run_child(SCRIPT, "validate-ray", str(n), "count", str(workers), str(repeat))
            if got["report"] != local["report"]:
                raise SystemExit(f"ray ({workers} workers): the report differs from the local one")
            t = statistics.median(got["times"])
            print(row(f"ray, {workers} CPU(s)", f"{t:.2f}", f"{t / base:.2f}", f"{got['times'][0]:.2f}",
                      f"{got['rss']:.0f}", f"{got['worker_rss_max']:.0f}", widths=widths))
            sent = got["stats"]
            print(f"    start-up {got['startup']:.1f} s (once per session); table scans: {sent['runs']} runs of "
                  f"blocks, {sent['partitions']} partitions, {sent['bytes_to_driver'] / 2**10:,.1f} KiB to the driver; "
                  f"report {'valid' if local['report']['valid'] else 'invalid'} and equal to the local one")
            print(json.dumps({"n": n, "mode": "validate", "workers": workers, "local_s": base, "ray_s": t,
                              "local_times": local["times"], "times": got["times"], "startup_s": got["startup"],
                              "driver_mib": got["rss"], "local_mib": local["rss"], "worker_mib": got["worker_rss_max"],
                              "load": os.getloadavg()[0], **sent}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250_000, 1_000_000])
    ap.add_argument("--only", nargs="+", choices=RULE_NAMES, default=list(RULE_NAMES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--driver-path", action="store_true",
                    help="Also time the Ray engine with scoring on the driver (2 worker CPUs).")
    ap.add_argument("--driver-only", action="store_true",
                    help="Time only the episodes-side work (the rule without its step feature), locally.")
    ap.add_argument("--validate", action="store_true",
                    help="Time `validate` (every check) instead of rescoring: local vs Ray with 1 and 2 worker CPUs.")
    ap.add_argument("--child", nargs=5, metavar=("ENGINE", "N", "RULE", "WORKERS", "REPEAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        engine, n, rule, workers, repeat = args.child
        child(engine, int(n), rule, int(workers), int(repeat))
        return
    print(f"bench_scale: {os.cpu_count()} cores; the machine is shared with other engineers' jobs "
          f"(load average {os.getloadavg()[0]:.1f}), so read ratios and medians, not absolute times.")
    if args.validate:
        validate_main(args.sizes, args.repeat)
        return
    if args.driver_only:
        for n in args.sizes:
            got = run_child(SCRIPT, "local", str(n), "episodes", "1", str(args.repeat))
            t = statistics.median(got["times"])
            print(f"{n:,} episodes, no step feature (driver-side work): {t:.2f} s median of {args.repeat} "
                  f"({n / t / 1e6:.2f} M episodes/s), peak RSS {got['rss']:.0f} MiB")
            print(json.dumps({"n": n, "driver_only_s": t, "rss": got["rss"]}))
        return
    for n in args.sizes:
        run_child(SCRIPT, "gen", str(n), "count", "1", "1")  # cached; in a child, so no RSS is inherited
        steps = n * STEPS_PER_EPISODE
        for rule in args.only:
            print(f"\n{n:,} episodes, {steps:,} steps — rule {rule} (median of {args.repeat}; digests checked)")
            print(row("engine", "time s", "vs local", "first run s", "driver MiB", "worker MiB",
                      widths=(30, 10, 10, 12, 12, 12)))
            local = run_child(SCRIPT, "local", str(n), rule, "1", str(args.repeat))
            base = statistics.median(local["times"])
            print(row("local (1 process)", f"{base:.2f}", "1.00", f"{local['times'][0]:.2f}", f"{local['rss']:.0f}",
                      "-", widths=(30, 10, 10, 12, 12, 12)))
            variants = [("ray", 1), ("ray", 2)] + ([("ray-driver", 2)] if args.driver_path else [])
            for engine, workers in variants:
                got = run_child(SCRIPT, engine, str(n), rule, str(workers), str(args.repeat))
                if got["results"] != local["results"]:
                    raise SystemExit(f"{engine} ({workers} workers) differs from local: {got['results']} vs {local['results']}")
                t = statistics.median(got["times"])
                where = "scored on workers" if engine == "ray" else "scored on driver"
                print(row(f"ray {where}, {workers} CPU(s)", f"{t:.2f}", f"{t / base:.2f}", f"{got['times'][0]:.2f}",
                          f"{got['rss']:.0f}", f"{got['worker_rss_max']:.0f}", widths=(30, 10, 10, 12, 12, 12)))
                per_run = dict(got["stats"])  # the last run's engine: figures of one run
                if engine == "ray":
                    sent = (f"to the driver per run: {per_run['bytes_to_driver'] / 2**10:,.0f} KiB of per-unit sums "
                            f"from {per_run.get('partitions', 0):.0f} partitions, no step partials")
                else:
                    sent = (f"to the driver per run: {per_run['partial_rows']:,.0f} partial rows, "
                            f"{per_run['bytes_to_driver'] / 2**20:.1f} MiB ({per_run['bytes_to_driver'] / steps:.2f} "
                            f"B/step); driver merge {per_run['merge_seconds']:.2f} s")
                print(f"    start-up {got['startup']:.1f} s (once per session); {per_run['blocks']:.0f} blocks; {sent}; "
                      f"throughput {steps / t / workers / 1e6:.2f} M steps/s per worker CPU")
                print(json.dumps({"n": n, "rule": rule, "engine": engine, "workers": workers, "local_s": base,
                                  "ray_s": t, "times": got["times"], "startup_s": got["startup"],
                                  "driver_mib": got["rss"], "local_mib": local["rss"],
                                  "worker_mib": got["worker_rss_max"], "load": os.getloadavg()[0], **per_run}))


if __name__ == "__main__":
    main()
