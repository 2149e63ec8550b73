"""Benchmark: pack, unpack and open a packed card against tar (and zstd, zip) on the same files.

    python benchmarks/bench_pack.py                 # ~200 MB card, 3 repeats
    python benchmarks/bench_pack.py --scale 10      # ~2 GB card (the issue's scale)

Generates a card with the bulk writer (seeded random text, so Parquet compresses it
about as much as real transcripts), then times every operation in its own child
process and reports the median of the repeats, MB/s over the card's bytes, and the
child's peak RSS (`os.wait4` rusage). Baselines run in the same process tree on the
same files: `tar -cf` / `tar -xf` for pack and unpack, `tar | zstd -3` and a stored
zip for the container choice, and reading the directory for open/verify/read.
Targets (issue 6): pack and unpack within 1.5x of tar, peak RSS < 300 MB, opening and
checking the packed file within 1.2x of the directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BASE_MB = 200


def make_card(root: Path, target_bytes: int) -> Path:
    """A card of about `target_bytes`, episodes with ~100 steps of random-word text each."""
    import numpy as np
    import pyarrow as pa

    from rollout_cards.io.writer import CardWriter

    rng = np.random.default_rng(6)
    words = np.array([f"w{i:04x}" for i in range(4096)])
    card_dir = root / "card"
    steps_per_episode = 100
    batch_episodes = 2_000
    # ~63 bytes of Parquet per step with this text (measured); round up the episode count.
    n_episodes = max(batch_episodes, int(target_bytes / (63 * steps_per_episode)))
    n_batches = -(-n_episodes // batch_episodes)

    def step_batches():
        for b in range(n_batches):
            n = batch_episodes * steps_per_episode
            ids = np.repeat([f"ep-{b}-{i}" for i in range(batch_episodes)], steps_per_episode)
            seq = np.tile(np.arange(steps_per_episode), batch_episodes)
            text_words = words[rng.integers(0, len(words), size=(n, 24))]
            content = [" ".join(row) for row in text_words]
            yield pa.table({
                "episode_id": ids, "seq": seq,
                "kind": np.where(seq % 2 == 0, "message", "tool_call"),
                "role": np.where(seq % 2 == 0, "assistant", None),
                "content": content,
                "args": np.where(seq % 2 == 1, '{"query": "x"}', None),
            })

    with CardWriter(card_dir, id="bench", title="Benchmark card", timestamps=False,
                    scope={"license": "CC-BY-4.0"}) as card:
        for b in range(n_batches):
            card.write_episodes(pa.table({
                "episode_id": [f"ep-{b}-{i}" for i in range(batch_episodes)],
                "task_id": [f"task-{i % 500}" for i in range(batch_episodes)],
                "status": ["completed"] * batch_episodes,
                "agent": ["a" if i % 2 else "b" for i in range(batch_episodes)],
                "n_steps": [steps_per_episode] * batch_episodes,
            }))
        card.write_steps(step_batches())
    return card_dir


def card_files(card: Path) -> list[str]:
    import json

    manifest = json.loads((card / "card.json").read_text())
    return ["card.json"] + [f["path"] for f in manifest["inventory"]["files"]]


@dataclass
class Measure:
    """Median wall time of a child process, median time of the operation itself (wall minus
    interpreter start and imports, reported by the child), and the largest peak RSS."""

    wall: float
    op: float
    rss_mb: float
    cpu: float  # user + system seconds of the child: more than `wall` when it used both cores


def _once(cmd: list[str]) -> tuple[float, float, float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"benchmark step failed: {cmd}")
    ops = [float(line.split()[1]) for line in out.splitlines() if line.startswith("OP ")]
    return wall, ops[0] if ops else wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def measure(setup, cmd: list[str], repeats: int) -> Measure:
    runs = []
    for _ in range(repeats):
        setup()
        runs.append(_once(cmd))
    return Measure(statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                   max(r[2] for r in runs), statistics.median(r[3] for r in runs))


def py(imports: str, op: str) -> list[str]:
    """A child Python that imports, then times only `op` (printed as `OP <seconds>`)."""
    code = (f"import sys, time; sys.path.insert(0, {str(REPO)!r}); {imports}\n"
            f"t0 = time.perf_counter()\n{op}\nprint('OP', time.perf_counter() - t0)")
    return [sys.executable, "-c", code]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help=f"card size in units of {BASE_MB} MB (10 = 2 GB)")
    parser.add_argument("--size-gb", type=float, default=None, help="card size in GB (overrides --scale)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the generated card here and reuse it on the next run (default: a temp dir)")
    parser.add_argument("--generate", nargs=2, metavar=("DIR", "BYTES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate:
        make_card(Path(args.generate[0]), int(args.generate[1]))
        return 0
    target = int((args.size_gb * 1000 if args.size_gb else BASE_MB * args.scale) * 1e6)
    keep = args.workdir is not None
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rcard-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run_benchmark(work, target, args.repeats)
    finally:
        if keep:
            for path in work.iterdir():
                if path.name != "card":
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _clear(*paths: Path, mkdir: bool = False):
    def setup() -> None:
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        if mkdir:
            paths[0].mkdir()
    return setup


def run_benchmark(work: Path, target: int, repeats: int) -> None:
    t0 = time.perf_counter()
    card = work / "card"
    if not (card / "card.json").is_file():
        shutil.rmtree(card, ignore_errors=True)
        # Generated in a child process: a child's peak RSS includes its parent's at fork time.
        subprocess.run([sys.executable, __file__, "--generate", str(work), str(target)], check=True)
    files = card_files(card)
    size = sum((card / f).stat().st_size for f in files)
    mb = size / 1e6
    print(f"card: {mb:.1f} MB in {len(files)} files (ready in {time.perf_counter() - t0:.1f} s)")
    out, tar_out = work / "card.rcard", work / "card.tar"
    unpack_dir, tar_dir = work / "unpacked", work / "tar-unpacked"
    nothing = _clear()
    archive = "from rollout_cards.io.archive import pack_card, unpack_card"
    rows: list[tuple[str, Measure, Measure | None]] = []

    startup = measure(nothing, py("import rollout_cards.io.archive", "pass"), repeats)
    rows.append(("python start + import", startup, None))
    pack = measure(_clear(out), py(archive, f"pack_card({str(card)!r}, {str(out)!r})"), repeats)
    tar_c = measure(_clear(tar_out), ["tar", "-cf", str(tar_out), "-C", str(card), "--", *files], repeats)
    pack_fast = measure(_clear(out), py(archive, f"pack_card({str(card)!r}, {str(out)!r}, verify=False)"), repeats)
    unpack = measure(_clear(unpack_dir), py(archive, f"unpack_card({str(out)!r}, {str(unpack_dir)!r})"), repeats)
    tar_x = measure(_clear(tar_dir, mkdir=True), ["tar", "-xf", str(out), "-C", str(tar_dir)], repeats)
    rows += [("pack (rcard)", pack, tar_c), ("pack --no-verify (rcard)", pack_fast, tar_c), ("tar -cf", tar_c, None),
             ("unpack (rcard, hashed)", unpack, tar_x), ("tar -xf", tar_x, None)]

    # Opening and checking: parse card.json and hash every member (the validator's digest
    # pass), and stream the whole steps table, on the packed file and on the directory.
    hash_all = ("c = rc.open(PATH); bad = [f.path for f in c.manifest.inventory.files "
                "if sha256_stream(c.source.open_binary(f.path)) != (f.sha256, f.bytes)]; assert not bad")
    hashing = "import rollout_cards as rc; from rollout_cards.io.hashing import sha256_stream"
    stream = "assert sum(b.num_rows for b in rc.open(PATH).iter_steps()) > 0"
    for label, imports, op in (("open + hash all", hashing, hash_all),
                               ("open + stream steps", "import rollout_cards as rc", stream)):
        packed = measure(nothing, py(imports, op.replace("PATH", repr(str(out)))), repeats)
        directory = measure(nothing, py(imports, op.replace("PATH", repr(str(card)))), repeats)
        rows += [(f"{label} (rcard)", packed, directory), (f"{label} (dir)", directory, None)]
    validate = _validator()
    if validate is not None:
        imports = f"from rollout_cards.validate import {validate} as v"
        packed = measure(nothing, py(imports, f"assert v({str(out)!r}).valid"), repeats)
        directory = measure(nothing, py(imports, f"assert v({str(card)!r}).valid"), repeats)
        rows += [("validate (rcard)", packed, directory), ("validate (dir)", directory, None)]

    # Container alternatives: size and pack time (neither is read in place here).
    zst, zipf = work / "card.tar.zst", work / "card.zip"
    pipeline = f"tar -cf - -C {card} -- {' '.join(files)} | zstd -q -3 -T1 -o {zst}"
    zstd_c = measure(_clear(zst), ["bash", "-c", pipeline], repeats) if shutil.which("zstd") else None
    zip_c = measure(_clear(zipf), py("import zipfile", (
        f"z = zipfile.ZipFile({str(zipf)!r}, 'w', zipfile.ZIP_STORED)\n"
        f"for f in {files!r}: z.write({str(card)!r} + '/' + f, f)\nz.close()")), repeats)

    print(f"\nmedian of {repeats} runs; MB/s over the card's {mb:.1f} MB; RSS = peak of the child process;")
    print("'op' = the operation alone, without interpreter start and imports (tar: the whole run)\n")
    print(f"{'operation':28} {'wall s':>7} {'cpu s':>6} {'op s':>7} {'op MB/s':>8} {'peak RSS MB':>11} "
          f"{'wall vs base':>12} {'op vs base':>10}")
    for name, m, base in rows:
        vs = f"{m.wall / base.wall:11.2f}x" if base else ""
        op_vs = f"{m.op / base.op:9.2f}x" if base else ""
        print(f"{name:28} {m.wall:7.2f} {m.cpu:6.2f} {m.op:7.2f} {mb / max(m.op, 1e-6):8.0f} {m.rss_mb:11.0f} "
              f"{vs:>12} {op_vs:>10}")
    print("\ncontainer     size (MB)  size/files  pack s (wall)")
    for name, path, m in (("rcard (tar)", out, pack), ("tar", tar_out, tar_c), ("tar | zstd -3", zst, zstd_c),
                          ("zip (stored)", zipf, zip_c)):
        if m is not None:
            print(f"{name:13} {path.stat().st_size / 1e6:10.1f} {path.stat().st_size / size:11.4f} {m.wall:14.2f}")
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
          "(other processes make every figure slower)")


def _validator() -> str | None:
    import importlib

    try:
        v = importlib.import_module("rollout_cards.validate")  # the package re-exports a function of that name
    except ImportError:
        return None
    for name in ("validate_card", "validate"):
        if callable(getattr(v, name, None)):
            return name
    return None


if __name__ == "__main__":
    raise SystemExit(main())
