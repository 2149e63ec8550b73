"""Start-up time of the `rcard` command line against the imports it cannot avoid.

    python benchmarks/bench_startup.py              # 15 interleaved rounds
    python benchmarks/bench_startup.py --repeat 31

Each command runs in a fresh interpreter, the commands interleaved round by round so a
noisy, shared machine slows them alike; medians of wall time and of CPU time (user + sys
of the child, less sensitive to other load). The baseline is what any tool reading
Parquet into validated models pays: `python -c "import pyarrow.parquet, pydantic"`.
Targets (issue 14): `rcard --version` and `--help` load neither pyarrow nor pydantic
models nor importers; `rcard validate fixtures/cards/minimal` within 2x the baseline. The
references show the floor under it: the baseline with one pydantic model, with typer too, and
with typer and one model class that is never validated (validate of a valid card compiles no
pydantic validator, so that is its floor).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
_ONE_CLASS = "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int"
_ONE_MODEL = f"{_ONE_CLASS}\nM(x=1)"
COMMANDS = {
    "python (empty interpreter)": [PY, "-c", "pass"],
    "baseline: import pyarrow.parquet, pydantic": [PY, "-c", "import pyarrow.parquet, pydantic"],
    # `import pydantic` loads only its package (its models load lazily, on first use): this row
    # shows what any tool that validates with one pydantic model pays on top of the baseline.
    "reference: the baseline + one pydantic model": [PY, "-c", f"import pyarrow.parquet\n{_ONE_MODEL}"],
    # What a typer command line that validates with pydantic pays before any work of its own.
    "reference: ... + typer + one pydantic model": [PY, "-c", f"import pyarrow.parquet, typer\n{_ONE_MODEL}"],
    # The floor under `rcard validate` of a valid card: its manifest and report are pydantic
    # models, but it compiles no validator (model/_construct.py, validate/report.py), so it pays
    # for defining model classes and not for pydantic's schema building or importlib.metadata.
    "reference: ... + typer + one unbuilt model": [PY, "-c", f"import pyarrow.parquet, typer\n{_ONE_CLASS}"],
    "rcard --version": [PY, "-m", "rollout_cards", "--version"],
    "rcard --help": [PY, "-m", "rollout_cards", "--help"],
    "rcard validate --help": [PY, "-m", "rollout_cards", "validate", "--help"],
    "rcard validate fixtures/cards/minimal": [PY, "-m", "rollout_cards", "validate", "fixtures/cards/minimal"],
    "import rollout_cards": [PY, "-c", "import rollout_cards"],
}
BASELINE = "baseline: import pyarrow.parquet, pydantic"
# What --version and --help must not load (checked in the same run, not only timed).
HEAVY = ("pyarrow", "pydantic", "rollout_cards.importers", "rollout_cards.model", "jsonschema")


# As a user runs it: bytecode cached (pip compiles site-packages; an editable checkout's modules
# are cached on the first run). PYTHONDONTWRITEBYTECODE=1 would recompile every module of
# ours on every start and measure the compiler instead.
# PYDANTIC_DISABLE_PLUGINS: rcard sets it (rollout_cards/__main__.py), so the references do too;
# without it pydantic scans every installed distribution's entry points on its first model.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {
    "NO_COLOR": "1", "PYDANTIC_DISABLE_PLUGINS": "__all__"}


def run_once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, check=False, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr.decode()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def loaded_modules(args: list[str]) -> set[str]:
    """The modules `rcard ARGS` has imported when it exits (run in a fresh interpreter)."""
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['rcard', *{args!r}]\n"
        "try:\n    runpy.run_module('rollout_cards', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([PY, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False, env=ENV)
    return set(done.stderr.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    for argv in COMMANDS.values():  # warm the OS file cache and write the .pyc files
        run_once(argv)
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            wall, cpu = run_once(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
    base_wall, base_cpu = statistics.median(walls[BASELINE]), statistics.median(cpus[BASELINE])
    load = os.getloadavg()[0]
    print(f"rcard start-up, medians of {args.repeat} interleaved runs on {os.cpu_count()} cores "
          f"(load average {load:.1f}{'; the machine was loaded' if load > 1 else ''})")
    print(row("command", "wall s", "cpu s", "wall / base", "cpu / base", widths=(46, 9, 9, 13, 12)))
    for name in COMMANDS:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(row(name, f"{wall:.3f}", f"{cpu:.3f}", f"{wall / base_wall:.2f}x", f"{cpu / base_cpu:.2f}x",
                  widths=(46, 9, 9, 13, 12)))
    validate = statistics.median(walls["rcard validate fixtures/cards/minimal"]) / base_wall
    validate_cpu = statistics.median(cpus["rcard validate fixtures/cards/minimal"]) / base_cpu
    print(f"validate fixtures/cards/minimal: {validate:.2f}x the baseline's wall time, {validate_cpu:.2f}x its CPU "
          f"time (target <= 2x: {'met' if validate <= 2 else 'NOT met'})")
    import importlib.util

    if importlib.util.find_spec("pandas") is not None:
        print("pandas is installed here: pyarrow would import it on its first conversion of a Python object "
              "(~0.6 s); rcard commands other than import and --engine ray keep it out (cli/without_pandas.py)")
    floor = statistics.median(walls["reference: ... + typer + one unbuilt model"]) / base_wall
    print(f"the baseline + typer + one unbuilt model class is {floor:.2f}x: validate adds {validate - floor:.2f}x "
          "of the baseline on top (its own modules, models, checks and report)")
    compiled = loaded_modules(["validate", "fixtures/cards/minimal"]) & {"importlib.metadata", "pydantic.plugin._loader"}
    print("rcard validate fixtures/cards/minimal compiles " + (
        f"pydantic validators (it loads {', '.join(sorted(compiled))})" if compiled
        else "no pydantic validator (importlib.metadata and pydantic's plugin loader stay unloaded)"))
    for args_ in (["--version"], ["--help"], ["validate", "--help"]):
        heavy = sorted(m for m in loaded_modules(args_) if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
        print(f"rcard {' '.join(args_)} loads: {', '.join(heavy) if heavy else 'none of ' + ', '.join(HEAVY)}")


if __name__ == "__main__":
    main()
