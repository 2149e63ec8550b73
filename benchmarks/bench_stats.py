"""`rcard power` and the rliable statistics against the plain rescore of the same rule.

    python benchmarks/bench_stats.py                      # the 100k-episode card
    python benchmarks/bench_stats.py --episodes 1000000   # the issue's 1M episodes / 20M steps

Same card and rule as bench_rescore.py (a step feature, a status policy, cluster_t over
500 tasks, four agents), except that timeouts count 0 instead of being excluded, so that
every (trial, task) cell of the rliable matrices is observed. Timed, each in a fresh interpreter, medians of --repeat runs:
- rescore: `rescore(card, rule)` (the rule's headlines, plus the rankings it now prints);
- power: `power_analysis(card, rule)` (every pair of agents, the variance split);
- rliable: `runs_tasks_view(card, rule, runs="trial")` — agents as methods, the card's
  `trial` as the run (500 passes over the 500 tasks), with `--resamples` stratified
  bootstrap resamples. Both reuse the rule's per-unit sums: the rule is applied once.
The issue asks for power and rliable under 2x the rescore.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import peak_rss_mb, row, run_child  # noqa: E402
from benchmarks.bench_rescore import RULE, card_path  # noqa: E402


def child(which: str, n: int, resamples: int) -> None:
    if which == "generate":
        from benchmarks.bench_rescore import generate

        generate(n)
        print(json.dumps({"generated": True}))
        return
    import rollout_cards as rc
    from rollout_cards.rules.loader import parse_rule
    from rollout_cards.rules.power import power_analysis
    from rollout_cards.rules.rescore import rescore
    from rollout_cards.rules.runs_tasks import runs_tasks_view

    # Timeouts count 0 here (bench_rescore excludes them): rliable needs every (run, task) cell.
    rule = parse_rule(RULE.replace("timeout: exclude", "timeout: 0"), file="bench.yaml")
    card = rc.open(card_path(n))
    t0 = time.perf_counter()
    if which == "rescore":
        report = rescore(card, [rule])
        out = {r.group["agent"]: r.value for r in report.results}
    elif which == "power":
        report = power_analysis(card, rule)
        out = {"pairs": len(report.results), "se": report.results[0].se}
    else:
        view = runs_tasks_view(card, rule, runs="trial", resamples=resamples)
        out = {g["group"]["agent"]: g["statistics"]["mean"]["value"] for g in view.groups}
    print(json.dumps({"seconds": time.perf_counter() - t0, "rss_mb": peak_rss_mb(), "result": out}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--child", nargs=3, metavar=("WHICH", "N", "RESAMPLES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    script = Path(__file__).resolve()
    n = args.episodes
    run_child(script, "generate", str(n), "0")
    times: dict[str, list[dict]] = {"rescore": [], "power": [], "rliable": []}
    for _ in range(args.repeat):
        for which in times:
            times[which].append(run_child(script, which, str(n), str(args.resamples)))
    rescore_means = times["rescore"][-1]["result"]
    rliable_means = times["rliable"][-1]["result"]
    for agent, v in rescore_means.items():
        if not np.isclose(v, rliable_means[agent], rtol=1e-9):
            raise SystemExit(f"rliable mean {rliable_means[agent]} != headline {v} for {agent}")
    med = {k: float(np.median([o["seconds"] for o in v])) for k, v in times.items()}
    print(f"{n:,} episodes, {args.repeat} runs each (medians), rliable with {args.resamples} resamples; "
          "the machine is shared (loaded): compare ratios")
    print(row("command", "seconds", "x rescore", "peak MB", widths=(12, 10, 10, 10)))
    for k in times:
        rss = max(o["rss_mb"] for o in times[k])
        print(row(k, f"{med[k]:.2f}", f"{med[k] / med['rescore']:.2f}x", f"{rss:.0f}", widths=(12, 10, 10, 10)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
