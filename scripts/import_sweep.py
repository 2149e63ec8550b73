"""Real files of every importer's format (../shared/data/external), mutated, through `rcard import`.

Usage: python scripts/import_sweep.py [CASES_PER_SOURCE] [SEED] [--only FORMAT] [--case K] [--keep]

tests/importers/test_importer_fuzz.py mutates the bytes of small seeds written by the tests;
this sweep starts from the real outputs of the other tools (one or more per format of
`rcard import --help`) and mutates them where those seeds do not go:

- a JSON node at a random path of a real document (or JSONL record, or .eval member) set to a
  hostile value: null, a wrong type, "", 1e999, -1e400, an integer beyond int64, a lone
  surrogate escape, a deep nest, a long string, or deleted;
- the file truncated at a random byte, or a JSONL file cut inside its last line;
- .eval archives: a member set or mutated and repacked with the member's own method (zstd,
  deflate), a zip bomb under the ratio cap, a member whose declared size lies (huge, or small),
  zip-slip member names (`../x`, `/abs`, `samples/../../x`), duplicate names, a symlink member;
- the file system: a source file replaced by a FIFO, by a symlink out of the source (and a
  dangling one), by a directory; a file of a source directory made a FIFO.

Every case runs in-process twice, without and with --keep-going. A run is BAD when it exits 2,
raises, prints a traceback / "internal error" / a Python repr, exits 1 without naming a file of
the input, takes more than TIMEOUT s (a hang: SIGALRM), takes the process's peak RSS past
MAX_RSS_MIB, or exits 0 with a card `rcard validate` refuses; and under --keep-going when a drop
says samples "were never written" although the log holds them (a .eval's sample members).
Each BAD line starts with its case number: `--case K` (same SEED) reruns it alone, verbosely.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
EXTERNAL = REPO.parent / "shared" / "data" / "external"
if not EXTERNAL.is_dir():
    EXTERNAL = Path("/work/shared/data/external")

from json_mutations import MISSING, paths, with_value  # noqa: E402 (scripts/ is sys.path[0])
from typer.testing import CliRunner  # noqa: E402

from rollout_cards.cli import app  # noqa: E402

MAX_RSS_MIB = 900
TIMEOUT = 60

#: format -> real sources as a user passes them (paths under external), and options
SOURCES: dict[str, list[tuple[list[str], list[str]]]] = {
    "inspect": [(["inspect/inspect-0.3.285/2026-12-01T08-28-14-00-00_arith_VdKqNirU4VLYR5rpgCL6Mg.eval"], []),
                (["inspect/inspect-0.3.285/2026-12-01T08-28-36-00-00_mcq_eyWbPhBuprdGGCQYdr8DEK.eval"], []),
                (["inspect/inspect-0.3.285/2026-12-01T08-30-51-00-00_mcq_7AZHZLVce5zatHdaC2RYF8.json"], []),
                (["inspect/log_message_deduplication.eval"], []),
                (["inspect/2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"], []),
                (["inspect/retry-2-then-success.legacy.eval"], []),
                (["inspect/2025-05-12T20-27-36-04-00_browser.json"], [])],
    "tau-bench": [(["tau-bench/gpt-4o-airline.json"], [])],
    "tau2-bench": [(["tau2-bench/gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json"], [])],
    "swe-bench": [(["swe-bench/harness_deepseek_chat_dev/deepseek__deepseek-chat.deepseek_chat_dev.json"], [])],
    "swe-agent": [(["swe-agent/v1/6e44b9__sweagenttestrepo-1c2844.traj"], []),
                  (["swe-agent/v0/pydicom__pydicom-1458.traj", "swe-agent/v0/all_preds.jsonl"], [])],
    "mini-swe-agent": [(["mini-swe-agent/deepseek_reasoner_dev"], [])],
    "openhands": [(["openhands/v1_sdk_openagentsafety/output.jsonl"], [])],
    "lm-eval": [(["lm-eval/negotiationtom_Qwen3-8B"], [])],
    "agentbench": [(["agentbench/medagentbench-std_gemini-2.0/runs.jsonl"], [])],
    "agentlab": [(["agentlab/result_df_trial_1_of_3.csv"], []),
                 (["agentlab/2024-08-01_10-20-52_GenericAgent_on_miniwob.ascending-numbers_64_e6d2d5"], [])],
    "atif": [(["harbor/hello-world-context-summarization.trajectory.json",
               "harbor/hello-world-context-summarization.trajectory.summarization-1-summary.json",
               "harbor/hello-world-context-summarization.trajectory.summarization-1-questions.json",
               "harbor/hello-world-context-summarization.trajectory.summarization-1-answers.json"], []),
             (["nemo-agent-toolkit/exmp06_atif.json"], [])],
}

#: raw JSON texts (json.dumps cannot write some of them)
HOSTILE: list = ["null", '"x"', '""', "0", "-1", "1.5", "true", "[]", "{}", "1e999", "-1e400",
                 "9223372036854775808", "-99999999999999999999999", "9" * 5000, '"\\ud800"', '"a\\udfffb"',
                 "[" * 300 + "]" * 300, '"' + "y" * 200_000 + '"', '["a", 1, null]', "-0.0", "NaN", "Infinity",
                 '"2024-13-45T99:99:99"', '{"a": {"b": [1, {"c": null}]}}', MISSING]


# ------------------------------------------------------------------------- JSON mutations

def mutate_json_text(text: str, rng: random.Random) -> tuple[str, str] | None:
    """(new text, what) with one node of a JSON document or of one JSONL record set hostile."""
    try:
        doc = json.loads(text)
        lines = None
    except ValueError:
        lines = text.splitlines(keepends=True)
        candidates = [i for i, t in enumerate(lines) if t.strip()]
        if not candidates:
            return None
        i = rng.choice(candidates)
        try:
            doc = json.loads(lines[i])
        except ValueError:
            return None
    nodes = list(paths(doc, items=50))[1:]  # the first 50 items of a long list: enough shapes
    if not nodes:
        return None
    path = rng.choice(nodes)
    raw = rng.choice(HOSTILE)
    new = with_value(doc, path, raw)
    what = f"{'/'.join(map(str, path))[:120]} = {'<deleted>' if raw is MISSING else raw[:30]}"
    if lines is not None:
        lines[i] = new + ("\n" if lines[i].endswith("\n") else "")
        return "".join(lines), f"line {i + 1}: {what}"
    return new, what


# ------------------------------------------------------------------------- zip (.eval)

def read_zip(path: Path) -> list[tuple[str, int, bytes]]:
    """(name, method, raw data) of every member, decompressed (stored, deflate, zstd)."""
    import zipfile

    import zstandard

    out = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            with open(path, "rb") as fh:
                fh.seek(info.header_offset)
                head = fh.read(30)
                n, m = struct.unpack("<HH", head[26:30])
                fh.seek(info.header_offset + 30 + n + m)
                packed = fh.read(info.compress_size)
            if info.compress_type == 93:
                data = zstandard.ZstdDecompressor().decompress(packed, max_output_size=info.file_size)
            elif info.compress_type == 8:
                data = zlib.decompress(packed, -15)
            else:
                data = packed
            out.append((info.filename, info.compress_type, data))
    return out


def write_zip(path: Path, members: list[tuple[str, int, bytes]], *, size_lie: dict[str, int] | None = None,
              symlinks: frozenset[str] = frozenset()) -> None:
    """A zip of (name, method, data); `size_lie` declares another uncompressed size for a member."""
    import zstandard

    out, central = bytearray(), []
    for name, method, data in members:
        if method == 93:
            packed = zstandard.ZstdCompressor().compress(data)
        elif method == 8:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            packed = c.compress(data) + c.flush()
        else:
            packed = data
        size = (size_lie or {}).get(name, len(data))
        crc, raw = zlib.crc32(data), name.encode("utf-8", "surrogatepass")
        offset = len(out)
        version = 63 if method == 93 else 20
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0x800, method, 0, 0x21, crc, len(packed),
                           size & 0xFFFFFFFF, len(raw), 0)
        out += raw + packed
        attrs = (0o120777 << 16) if name in symlinks else 0
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | version, version, 0x800, method, 0,
                                   0x21, crc, len(packed), size & 0xFFFFFFFF, len(raw), 0, 0, 0, 0, attrs, offset) + raw)
    start = len(out)
    for entry in central:
        out += entry
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(out) - start, start, 0)
    path.write_bytes(bytes(out))


def mutate_eval(path: Path, rng: random.Random) -> str | None:
    members = read_zip(path)
    kind = rng.choice(["member-json", "member-json", "member-json", "bomb", "size-lie-huge", "size-lie-small",
                       "zip-slip", "duplicate", "symlink", "member-truncated", "header-huge-string"])
    names = [n for n, _, _ in members]
    jsons = [i for i, (n, _, d) in enumerate(members) if n.endswith(".json") and d.strip()]
    if kind == "member-json" and jsons:
        i = rng.choice(jsons)
        name, method, data = members[i]
        got = mutate_json_text(data.decode("utf-8", "surrogatepass"), rng)
        if got is None:
            return None
        members[i] = (name, method, got[0].encode("utf-8", "surrogatepass"))
        write_zip(path, members)
        return f"member {name}: {got[1]}"
    if kind == "bomb":  # a sample member of ~190 MiB of one repeated byte, packed small (ratio ~ 1000-50000)
        victim = rng.choice([i for i, (n, _, _) in enumerate(members) if n.startswith("samples/")] or jsons)
        name, method, data = members[victim]
        filler = b'{"id": 1, "epoch": 1, "pad": "' + b"a" * (190 << 20) + b'"}'
        members[victim] = (name, method if method in (8, 93) else 8, filler)
        write_zip(path, members)
        return f"bomb in {name}"
    if kind in ("size-lie-huge", "size-lie-small"):
        name = rng.choice(names)
        lie = 0xFFFFFFF0 if kind == "size-lie-huge" else 3
        write_zip(path, members, size_lie={name: lie})
        return f"{kind} {name}"
    if kind == "zip-slip":
        evil = rng.choice(["../evil.json", "/etc/evil.json", "samples/../../evil.json", "samples/..\\..\\x.json",
                           "samples/a\u0000b.json", "C:/x.json", "samples/\udcff.json"])
        source = rng.choice(members)
        members.append((evil, source[1], source[2]))
        write_zip(path, members)
        return f"zip-slip name {evil!r}"
    if kind == "duplicate":
        source = rng.choice(members)
        members.append((source[0], source[1], b'{"other": true}'))
        write_zip(path, members)
        return f"duplicate member {source[0]}"
    if kind == "symlink":
        name = rng.choice(names)
        members = [(n, 0 if n == name else m, b"/etc/passwd" if n == name else d) for n, m, d in members]
        write_zip(path, members, symlinks=frozenset({name}))
        return f"symlink member {name}"
    if kind == "member-truncated" and jsons:
        i = rng.choice(jsons)
        name, method, data = members[i]
        members[i] = (name, method, data[: rng.randrange(len(data))])
        write_zip(path, members)
        return f"member {name} truncated"
    if kind == "header-huge-string" and "header.json" in names:
        i = names.index("header.json")
        name, method, data = members[i]
        doc = json.loads(data)
        doc.setdefault("eval", {})["task"] = "t" * (60 << 20)
        members[i] = (name, method, json.dumps(doc).encode())
        write_zip(path, members)
        return "header.json with a 60 MiB task name"
    return None


# ------------------------------------------------------------------------- file-system mutations

def mutate_fs(files: list[Path], root: Path, rng: random.Random) -> str | None:
    victim = rng.choice(files)
    kind = rng.choice(["fifo", "symlink-out", "symlink-dangling", "directory", "devzero"])
    victim.unlink()
    if kind == "fifo":
        os.mkfifo(victim)
    elif kind == "symlink-out":
        outside = root.parent / "outside.json"
        outside.write_text('{"secret": 1}')
        victim.symlink_to(outside)
    elif kind == "symlink-dangling":
        victim.symlink_to(root / "nowhere")
    elif kind == "devzero":
        victim.symlink_to("/dev/zero")
    else:
        victim.mkdir()
    return f"{kind} at {victim.relative_to(root)}"


def mutate_bytes(files: list[Path], root: Path, rng: random.Random) -> str | None:
    victim = rng.choice(files)
    data = victim.read_bytes()
    if not data:
        return None
    if victim.suffix == ".jsonl" and rng.random() < 0.5:
        cut = data.rstrip(b"\n").rfind(b"\n") + 1 + rng.randrange(1, 40)
    else:
        cut = rng.randrange(len(data))
    victim.write_bytes(data[:cut])
    return f"{victim.relative_to(root)} truncated at byte {cut}"


def mutate_text(files: list[Path], root: Path, rng: random.Random) -> str | None:
    candidates = [f for f in files if f.suffix in (".json", ".jsonl", ".traj") and f.stat().st_size < (8 << 20)]
    if not candidates:
        return None
    victim = rng.choice(candidates)
    got = mutate_json_text(victim.read_text("utf-8", "surrogatepass"), rng)
    if got is None:
        return None
    victim.write_text(got[0], "utf-8", "surrogatepass")
    return f"{victim.relative_to(root)}: {got[1]}"


# ------------------------------------------------------------------------- runs

class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"more than {TIMEOUT} s")


_PEAK = [0]
VERBOSE = [False]
CODES: dict[int, int] = {}
REPR = re.compile(r"object at 0x|Traceback|internal error|KeyError:|TypeError:|AttributeError:|IndexError:|"
                  r"ValueError:|pyarrow\.lib\.|pydantic_core|UnicodeEncodeError|RecursionError")


def run_import(fmt: str, sources: list[Path], options: list[str], out: Path, keep_going: bool) -> list[str]:
    args = ["import", fmt, *map(str, sources), "-o", str(out), *options, *(["--keep-going"] if keep_going else [])]
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT)
    problems = []
    started = time.process_time()
    try:
        result = CliRunner().invoke(app, args, catch_exceptions=True)
    except Hang as exc:
        return [f"hang: {exc}"]
    finally:
        signal.alarm(0)
    seconds = time.process_time() - started
    output = result.output
    CODES[result.exit_code] = CODES.get(result.exit_code, 0) + 1
    if VERBOSE[0]:
        print(f"  {'--keep-going ' if keep_going else ''}exit {result.exit_code}: {output.strip()[-300:]}", flush=True)
    if isinstance(result.exception, Hang):
        return [f"hang: {result.exception}"]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append(f"raised {type(result.exception).__name__}: {str(result.exception)[:300]}")
    if result.exit_code not in (0, 1):
        problems.append(f"exit {result.exit_code}")
    if REPR.search(output):
        problems.append("traceback / internal error / Python repr in the output")
    if result.exit_code == 1:
        named = [str(s) for s in sources] + [s.name for s in sources]
        for s in sources:
            if s.is_dir():
                named += [p.name for p in s.rglob("*")]
        if not any(n in output for n in named):
            problems.append("exit 1 names no file of the input")
        if out.exists() and any(out.iterdir()):
            problems.append(f"a refused import left files in {out}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    if peak > MAX_RSS_MIB and _PEAK[0] <= MAX_RSS_MIB:
        problems.append(f"peak RSS {peak} MiB (more than {MAX_RSS_MIB})")
    _PEAK[0] = peak
    if seconds > TIMEOUT / 2:
        problems.append(f"{seconds:.0f} s CPU")
    if result.exit_code == 0 and not problems:
        from rollout_cards.validate import validate

        try:
            report = validate(out)
        except Exception as exc:  # noqa: BLE001 - reported as a problem of the import
            problems.append(f"validate of the imported card raised {exc!r}"[:300])
        else:
            if not report.valid:
                problems.append(f"imported card invalid: {[str(f) for f in report.findings if f.severity == 'error'][:3]}")
            if keep_going and fmt == "inspect":
                problems += _never_written(out, sources)
    return [f"{p}\n      output: {output[-600:]!r}" for p in problems]


def _never_written(out: Path, sources: list[Path]) -> list[str]:
    """A drop that says samples were never written while the .eval holds sample members."""
    text = json.dumps(json.loads((out / "card.json").read_text()).get("drops", ""))
    if "never written" not in text:
        return []
    for s in sources:
        if s.suffix == ".eval" and s.is_file() and not s.is_symlink():
            try:
                n = sum(1 for name, _, _ in read_zip(s) if name.startswith("samples/"))
            except Exception:  # noqa: BLE001, S112 - an archive this script cannot list: nothing to compare
                continue
            if n and re.search(rf"logs {n}\b", text) is None and "never written" in text:
                return [f"--keep-going: a drop says samples were never written, but {s.name} holds {n} sample members"]
    return []


MUTATORS: list[tuple[str, Callable]] = [("json", mutate_text), ("json", mutate_text), ("json", mutate_text),
                                       ("truncate", mutate_bytes), ("fs", mutate_fs)]


def one_case(k: int, fmt: str, rels: list[str], options: list[str], rng: random.Random, tmp: Path,
             verbose: bool) -> list[str]:
    case = tmp / f"case{k}"
    src = case / "src"
    src.mkdir(parents=True)
    sources = []
    for rel in rels:
        origin = EXTERNAL / rel
        target = src / origin.name
        if origin.is_dir():
            shutil.copytree(origin, target)
        else:
            shutil.copyfile(origin, target)
        sources.append(target)
    files = [p for s in sources for p in ([s] if s.is_file() else sorted(x for x in s.rglob("*") if x.is_file()))]
    evals = [f for f in files if f.suffix == ".eval"]
    if evals and rng.random() < 0.6:
        what = mutate_eval(rng.choice(evals), rng)
    else:
        name, mutator = rng.choice(MUTATORS)
        what = mutator(files, src, rng)
    if what is None:
        shutil.rmtree(case, ignore_errors=True)
        return []
    if verbose:
        print(f"case {k}: {fmt} {rels[0]}: {what}", flush=True)
    bad = []
    for keep_going in (False, True):
        out = case / f"card{int(keep_going)}"
        for problem in run_import(fmt, sources, options, out, keep_going):
            bad.append(f"BAD case {k} {fmt} {Path(rels[0]).name} [{what}]{' --keep-going' if keep_going else ''}: "
                       f"{problem}")
    shutil.rmtree(case, ignore_errors=True)
    return bad


def numbered(per_source: int) -> Iterator[tuple[int, str, list[str], list[str]]]:
    """(case number, format, sources, options) of every case, in the order case numbers count them."""
    k = 0
    for fmt, seeds in SOURCES.items():
        for rels, options in seeds:
            for _ in range(per_source):
                yield k, fmt, rels, options
                k += 1


def case_rng(seed: int, k: int) -> random.Random:
    """The mutations' random source of case `k` of a sweep with `seed` (what --case reruns)."""
    return random.Random(f"{seed}:{k}")  # noqa: S311 (reproducible, not a secret)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="?", type=int, default=20, help="cases per source")
    parser.add_argument("seed", nargs="?", type=int, default=0)
    parser.add_argument("--only")
    parser.add_argument("--case", type=int)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    VERBOSE[0] = args.verbose or args.case is not None
    if not EXTERNAL.is_dir():
        print(f"{EXTERNAL} is absent: this sweep needs the real files of ../shared", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="import_sweep."))
    started = time.process_time()
    n_bad, ran = 0, 0
    for k, fmt, rels, options in numbered(args.cases):
        if (args.only is None or args.only == fmt) and (args.case is None or args.case == k):
            bad = one_case(k, fmt, rels, options, case_rng(args.seed, k), tmp, args.verbose or args.case is not None)
            ran += 1
            for line in bad:
                print(line, flush=True)
            n_bad += bool(bad)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"cases {ran} bad {n_bad} exit codes {dict(sorted(CODES.items()))} cpu {time.process_time() - started:.0f} s "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MiB")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
