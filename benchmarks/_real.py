"""`bench_import.py --real`: every importer on the real files of ../shared/data/external.

The files are small (a few to a few thousand episodes), so these figures include each
import's fixed costs (opening the card, writing Parquet, the manifest); they say how the
importers compare with each other and with the baseline a user would pick for the same
files: `json.load` of each JSON file, `json.loads` of each JSON Lines line, `yaml.safe_load`
of each YAML file (module loading is outside the measured time in both).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

from _common import row
from _replicas import EXTERNAL

#: format -> its sources (each one `rcard import FORMAT SOURCE...`), paths relative to EXTERNAL.
SOURCES: dict[str, list[list[str]]] = {
    "tau2-bench": [["tau2-bench/qwen2.5-7b_airline_default_gpt-4.1-2025-04-14_1trials.json"],
                   ["tau2-bench/gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json"]],
    "atif": [[f"harbor/{n}.trajectory.json"] for n in ("hello-world-context-summarization", "hello-world-timeout",
                                                       "hello-world-invalid-json", "openhands-hello-world")]
    + [["nemo-agent-toolkit/exmp06_atif.json"]],
    "swe-agent": [["swe-agent/v0/pydicom__pydicom-1458.traj", "swe-agent/v0/all_preds.jsonl"],
                  ["swe-agent/v1/6e44b9__sweagenttestrepo-1c2844.traj"]],
    "mini-swe-agent": [["mini-swe-agent/deepseek_reasoner_dev"]],
    "swe-bench": [["swe-bench/harness_deepseek_chat_dev"]],
    "openhands": [["openhands/v0_multi_swe_bench/output.jsonl"], ["openhands/v1_sdk_openagentsafety/output.jsonl"]],
    "lm-eval": [["lm-eval/negotiationtom_Qwen3-8B"]],
    "agentbench": [["agentbench/medagentbench-std_gemini-2.0/runs.jsonl"]],
    "agentlab": [["agentlab"]],
    "tau-bench": [["tau-bench/gpt-4o-airline.json"]],
}


def _files(rel: str) -> list[Path]:
    path = EXTERNAL / rel
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())


def _baseline(path: Path) -> None:
    name = path.name
    if name.endswith(".jsonl"):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    json.loads(line)
    elif name.endswith((".yaml", ".yml")):
        import yaml

        yaml.safe_load(path.read_text(encoding="utf-8"))
    elif name.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as fh:
            list(csv.reader(fh))
    elif name.endswith((".json", ".traj")):
        with open(path, encoding="utf-8") as fh:
            json.load(fh)


def real_child(mode: str, fmt: str | Path, out: Path) -> tuple[int, int | None]:
    """In the child: `real-load` reads every file of the format's sources; `real-import` imports
    each source; returns (episodes, steps) (episodes from the import, for both)."""
    from rollout_cards.importers import import_source

    fmt = str(fmt)
    if mode == "real-load":
        import yaml  # noqa: F401  (module loading is not the baseline's cost)

        for source in SOURCES[fmt]:
            for rel in source:
                for path in _files(rel):
                    _baseline(path)
        return 0, None
    episodes = steps = 0
    for i, source in enumerate(SOURCES[fmt]):
        result = import_source(fmt, [EXTERNAL / rel for rel in source], out / str(i))
        episodes += result.episodes
        steps += result.steps
    return episodes, steps


def real_bench(measure: Callable[[str, str, Path], dict], repeats: int) -> int:
    if not EXTERNAL.exists():
        raise SystemExit(f"{EXTERNAL} is absent: --real imports the real files of ../shared/data/external")
    from _common import WORK

    out = WORK / "import-real"
    print(f"every importer on its real files (../shared/data/external); median of {repeats} runs in fresh "
          "processes; CPU s = the child's process time (less sensitive than wall time to a loaded machine)")
    widths = (16, 9, 9, 10, 11, 10, 11, 9, 10)
    print(row("format", "episodes", "steps", "import s", "import CPU", "eps/CPU-s", "load CPU s", "ratio",
              "peak MB", widths=widths))
    for fmt in SOURCES:
        base = measure("real-load", fmt, out)
        ours = measure("real-import", fmt, out)
        n = ours["episodes"]
        print(row(fmt, n, ours["steps"], f"{ours['seconds']:.2f}", f"{ours['cpu_seconds']:.2f}",
                  f"{n / ours['cpu_seconds']:.0f}", f"{base['cpu_seconds']:.3f}",
                  f"{ours['cpu_seconds'] / max(base['cpu_seconds'], 1e-9):.1f}x", f"{ours['peak_rss_mb']:.0f}",
                  widths=widths))
    print("ratio = import CPU / json.load (etc.) CPU of the same files")
    return 0
