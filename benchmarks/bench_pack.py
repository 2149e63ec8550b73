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


def timed(cmd: list[str], *, cwd: Path | None = None) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one child process (for a pipeline: its largest process)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark step failed ({proc.returncode}): {cmd}")
    return elapsed, usage.ru_maxrss / 1024


def py(code: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); {code}"]


def median_run(setup, cmd_factory, repeats: int) -> tuple[float, float]:
    times, rss = [], []
    for _ in range(repeats):
        setup()
        t, r = timed(*cmd_factory())
        times.append(t)
        rss.append(r)
    return statistics.median(times), max(rss)


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
        t0 = time.perf_counter()
        card = work / "card"
        if not (card / "card.json").is_file():
            shutil.rmtree(card, ignore_errors=True)
            # Generated in a child process: a child's peak RSS includes its parent's at fork time.
            subprocess.run([sys.executable, __file__, "--generate", str(work), str(target)], check=True)
        files = card_files(card)
        size = sum((card / f).stat().st_size for f in files)
        print(f"card: {size / 1e6:.1f} MB in {len(files)} files (generated in {time.perf_counter() - t0:.1f} s)")
        mb = size / 1e6
        out = work / "card.rcard"
        tar_out = work / "card.tar"
        unpack_dir = work / "unpacked"
        tar_dir = work / "tar-unpacked"

        def rm(*paths: Path):
            def setup() -> None:
                for p in paths:
                    if p.is_dir():
                        shutil.rmtree(p)
                    elif p.exists():
                        p.unlink()
            return setup

        startup = median_run(lambda: None, lambda: (py("import rollout_cards.io.archive"),), args.repeats)
        rows = [("python start + import (fixed)", startup, float("nan"))]
        pack = median_run(rm(out), lambda: (py(
            f"from rollout_cards.io.archive import pack_card; pack_card({str(card)!r}, {str(out)!r})"),), args.repeats)
        tar_c = median_run(rm(tar_out), lambda: (["tar", "-cf", str(tar_out), "-C", str(card), "--", *files],),
                           args.repeats)
        rows += [("pack (rcard)", pack, pack[0] / tar_c[0]), ("tar -cf", tar_c, 1.0)]

        def mk(d: Path):
            def setup() -> None:
                rm(d)()
                d.mkdir()
            return setup

        unpack = median_run(rm(unpack_dir), lambda: (py(
            f"from rollout_cards.io.archive import unpack_card; unpack_card({str(out)!r}, {str(unpack_dir)!r})"),),
            args.repeats)
        tar_x = median_run(mk(tar_dir), lambda: (["tar", "-xf", str(out), "-C", str(tar_dir)],), args.repeats)
        rows += [("unpack (rcard, hashed)", unpack, unpack[0] / tar_x[0]), ("tar -xf", tar_x, 1.0)]

        # Container alternatives (size and pack time only: neither is read in place).
        zst = work / "card.tar.zst"
        zipf = work / "card.zip"
        pipeline = f"tar -cf - -C {card} -- {' '.join(files)} | zstd -q -3 -T1 -o {zst}"
        zstd_c = (median_run(rm(zst), lambda: (["bash", "-c", pipeline],), args.repeats)
                  if shutil.which("zstd") else None)
        zip_code = (
            f"import zipfile; z = zipfile.ZipFile({str(zipf)!r}, 'w', zipfile.ZIP_STORED);\n"
            f"[z.write({str(card)!r} + '/' + f, f) for f in {files!r}]; z.close()")
        zip_c = median_run(rm(zipf), lambda: (py(zip_code),), args.repeats)

        # Opening and checking: parse + hash every member, the validator's digest pass.
        verify_code = (
            "import rollout_cards as rc; from rollout_cards.io.hashing import sha256_stream; c = rc.open(%r);"
            "bad = [f.path for f in c.manifest.inventory.files if sha256_stream(c.source.open_binary(f.path))"
            " != (f.sha256, f.bytes)]; assert not bad, bad")
        v_rcard = median_run(lambda: None, lambda: (py(verify_code % str(out)),), args.repeats)
        v_dir = median_run(lambda: None, lambda: (py(verify_code % str(card)),), args.repeats)
        read_code = ("import rollout_cards as rc; n = sum(b.num_rows for b in rc.open(%r).iter_steps()); "
                     "assert n > 0")
        r_rcard = median_run(lambda: None, lambda: (py(read_code % str(out)),), args.repeats)
        r_dir = median_run(lambda: None, lambda: (py(read_code % str(card)),), args.repeats)
        rows += [("open + hash all (rcard)", v_rcard, v_rcard[0] / v_dir[0]), ("open + hash all (dir)", v_dir, 1.0),
                 ("open + stream steps (rcard)", r_rcard, r_rcard[0] / r_dir[0]), ("open + stream steps (dir)", r_dir, 1.0)]
        validate = _validator()
        if validate is not None:
            val_code = f"from rollout_cards.validate import {validate} as v; v(%r)"
            val_rcard = median_run(lambda: None, lambda: (py(val_code % str(out)),), args.repeats)
            val_dir = median_run(lambda: None, lambda: (py(val_code % str(card)),), args.repeats)
            rows += [("validate (rcard)", val_rcard, val_rcard[0] / val_dir[0]), ("validate (dir)", val_dir, 1.0)]

        print(f"\nmedian of {args.repeats} runs; MB/s over the card's {mb:.1f} MB; RSS = peak of the child\n")
        print(f"{'operation':30} {'seconds':>8} {'MB/s':>8} {'peak RSS MB':>12} {'vs baseline':>12}")
        for name, (t, r), ratio in rows:
            print(f"{name:30} {t:8.3f} {mb / t:8.0f} {r:12.0f} {ratio:11.2f}x")
        print("\ncontainer sizes and pack times:")
        print(f"  rcard (uncompressed tar) {out.stat().st_size / 1e6:10.1f} MB  ratio "
              f"{out.stat().st_size / size:.4f}  {pack[0]:.3f} s")
        print(f"  tar                      {tar_out.stat().st_size / 1e6:10.1f} MB  ratio "
              f"{tar_out.stat().st_size / size:.4f}  {tar_c[0]:.3f} s")
        if zstd_c is not None:
            print(f"  tar | zstd -3            {zst.stat().st_size / 1e6:10.1f} MB  ratio "
                  f"{zst.stat().st_size / size:.4f}  {zstd_c[0]:.3f} s")
        print(f"  zip (stored)             {zipf.stat().st_size / 1e6:10.1f} MB  ratio "
              f"{zipf.stat().st_size / size:.4f}  {zip_c[0]:.3f} s")
        print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} CPUs (other processes make every figure slower)")
    finally:
        if keep:
            for p in work.iterdir():
                if p.name != "card":
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _validator() -> str | None:
    try:
        import rollout_cards.validate as v
    except ImportError:
        return None
    for name in ("validate_card", "validate"):
        if callable(getattr(v, name, None)):
            return name
    return None


if __name__ == "__main__":
    raise SystemExit(main())
