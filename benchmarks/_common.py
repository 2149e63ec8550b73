"""Shared helpers of the benchmark scripts: child-process runs with peak RSS, medians, printing."""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORK = Path(__file__).resolve().parent / "_work"


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB: Linux's VmHWM, the high-water mark of this
    program's memory (ru_maxrss also counts the parent's RSS that a child had before its exec, so a
    child of a large benchmark process would report the parent's size)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_child(script: Path, *args: str) -> dict[str, Any]:
    """Run `script --child ARGS` in a fresh interpreter; it prints one JSON line of results."""
    out = subprocess.run([sys.executable, str(script), "--child", *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Median wall time of `repeat` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def row(*cells: Any, widths: tuple[int, ...] = (34, 14, 14, 14)) -> str:
    """One aligned line of a figures table."""
    return "".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False)))
