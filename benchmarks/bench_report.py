"""HTML report build time, size and memory on the rescore benchmark card.

    python benchmarks/bench_report.py                      # 100k episodes / 2M steps
    python benchmarks/bench_report.py --episodes 1000000   # the issue's size: 1M / 20M steps

Builds `rcard report` (the benchmark rule as an alternative, validation on) and, as the
baseline a user runs anyway, `rcard rescore` of the same rule rendered as text, each in a
fresh interpreter (peak RSS via getrusage); medians of `--repeat` runs. Targets: under 30 s
and under 20 MB on the 1M-episode card (aggregates exact, the browser samples episodes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import WORK, peak_rss_mb, row, run_child  # noqa: E402
from benchmarks.bench_rescore import RULES, generate  # noqa: E402

RULE = RULES["count"]


def child(which: str, n: int) -> None:
    path = generate(n)
    rule = WORK / "bench-report-rule.yaml"
    rule.write_text(RULE, encoding="utf-8")
    t0 = time.perf_counter()
    if which == "report":
        from rollout_cards.report import build_report

        text = build_report(path, [rule])
        size = len(text.encode("utf-8"))
    else:
        from rollout_cards.rules.render import render
        from rollout_cards.rules.rescore import rescore

        size = len(render(rescore(path, [rule]), "table").encode("utf-8"))
    print(json.dumps({"seconds": time.perf_counter() - t0, "bytes": size, "rss_mb": peak_rss_mb()}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("WHICH", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    n = args.episodes
    run_child(Path(__file__), "rescore", str(n))  # generates (and caches) the card in a child
    runs = {w: [run_child(Path(__file__), w, str(n)) for _ in range(args.repeat)] for w in ("report", "rescore")}
    med = {w: statistics.median(r["seconds"] for r in rs) for w, rs in runs.items()}
    print(f"card: {n:,} episodes, {20 * n:,} steps; medians of {args.repeat} fresh-process runs (machine shared)")
    print(row("", "seconds", "peak RSS MB", "output bytes"))
    for w, rs in runs.items():
        print(row(f"rcard {w}", f"{med[w]:.2f}", f"{max(r['rss_mb'] for r in rs):.0f}", f"{rs[-1]['bytes']:,}"))
    print(f"report / rescore time: {med['report'] / med['rescore']:.2f}x; report size "
          f"{runs['report'][-1]['bytes'] / 1e6:.2f} MB (target < 20 MB, < 30 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
