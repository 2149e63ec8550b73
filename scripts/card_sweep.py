"""Hostile card directories and packed .rcard files through every read command of the CLI.

Usage: python scripts/card_sweep.py [CASES] [SEED] [--case K] [--only NAME] [--manifest]

Each case copies a fixture card (fixtures/cards/*), applies one to three mutations, and
may pack the result as a hostile .rcard; then EVERY read command runs on it in-process
(validate in four formats, info, rescore in three, report, card, export eee, verify,
redact, pack or unpack, and power / rliable / export inspect-scores when the card declares
the rule). The mutations are those of tests/cli/test_cli_fuzz.py, every package of the bad
corpus (fixtures/bad_cards.py PACKAGES), and these: Parquet with a corrupted data page
(re-hashed, or not: a digest mismatch in one column chunk), schema metadata that is garbage or huge,
a non-nullable field holding nulls; inventory entries with odd names (unicode, `..`,
absolute, very long, case twins) and huge declared sizes; files of odd names in the
directory; and packed archives that are a zip, a Git LFS pointer, or carry a pax size lie.
`--manifest` instead sweeps card.json exhaustively: every JSON node set to each of the
fuzz test's hostile values (a wrong type in every field), through validate and info.

A run is BAD when it exits 2, raises, prints a traceback, "internal error" or a Python
repr (`<... object at 0x`, a pyarrow/pydantic class name, `KeyError:`/`TypeError:`...),
exits 1 without naming the card or the output, writes outside its output directory, or
takes the process's peak RSS past MAX_RSS_MIB (flagged once per process: the peak only grows).
A case is SUSPECT when validate calls the card VALID yet another command refuses it for
a reason of the card (silent acceptance) — to read, not always a bug. Each BAD/SUSPECT
line starts with the case number: `--case K` (same SEED) reruns that case alone, verbose.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import re
import resource
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "fixtures"))

import bad_cards  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from rollout_cards.cli import app  # noqa: E402
from tests.cli import test_cli_fuzz as F  # noqa: E402

CARDS = REPO / "fixtures" / "cards"
#: a read of a fixture-sized card, however hostile, stays under this (the process's peak, so the first
#: run past it is the one flagged; rerun with --case to see it alone)
MAX_RSS_MIB = 600
_PEAK = 0
REPR = re.compile(r"object at 0x[0-9a-f]+|Traceback|internal error|\b(KeyError|TypeError|AttributeError|IndexError|"
                  r"UnboundLocalError|NameError|AssertionError|ZeroDivisionError|OverflowError|RecursionError):|"
                  r"pyarrow\.lib\.|pydantic_core|ValidationError|ScalarNode\(|<class '")


# -- extra mutations (card: the copy, rng) -------------------------------------------------------

def _page(card: Path, rng: random.Random) -> str:
    """A data page's bytes changed: re-hashed (the decoder meets it) or not (one chunk's digest lies)."""
    rel = rng.choice(["episodes.parquet", "steps.parquet"])
    meta = pq.ParquetFile(card / rel).metadata
    rg = meta.row_group(rng.randrange(meta.num_row_groups))
    col = rg.column(rng.randrange(rg.num_columns))
    start = col.data_page_offset
    data = bytearray((card / rel).read_bytes())
    for _ in range(rng.randint(1, 6)):
        i = start + rng.randrange(max(1, col.total_compressed_size))
        if i < len(data) - 8:
            data[i] = rng.randrange(256)
    (card / rel).write_bytes(bytes(data))
    rehashed = rng.random() < 0.6
    if rehashed:
        bad_cards.rehash(card)
    return f"{rel} page of {col.path_in_schema} changed ({'re-hashed' if rehashed else 'digest mismatch'})"


def _schema_meta(card: Path, rng: random.Random) -> str:
    rel = rng.choice(["episodes.parquet", "steps.parquet"])
    table = pq.read_table(card / rel)
    how = rng.choice(["arrow-garbage", "huge", "field-meta", "not-nullable", "pandas"])
    if how == "arrow-garbage":
        table = table.replace_schema_metadata({b"ARROW:schema": b"/////" + bytes(rng.randrange(256) for _ in range(64))})
    elif how == "huge":
        table = table.replace_schema_metadata({b"k" * 1000: b"v" * (4 << 20)})
    elif how == "field-meta":
        i = rng.randrange(table.num_columns)
        field = table.schema.field(i).with_metadata({b"\xff\xfe": b"\x00" * 1000, b"ARROW:extension:name": b"x.y"})
        table = table.cast(table.schema.set(i, field))
    elif how == "not-nullable":
        i = rng.randrange(table.num_columns)
        col = table.column(i).combine_chunks()
        values = col.to_pylist()
        values[0] = None
        schema = table.schema.set(i, pa.field(table.schema.field(i).name, col.type, nullable=False))
        arrays = [pa.array(values, col.type) if k == i else table.column(k) for k in range(table.num_columns)]
        table = pa.Table.from_arrays(arrays, schema=schema)  # declared not-null, holds a null
    else:
        table = table.replace_schema_metadata({b"pandas": b'{"index_columns": [{"kind": "range", "start": 0, '
                                               b'"stop": 1e999}], "columns": 5}'})
    pq.write_table(table, card / rel)
    bad_cards.rehash(card)
    return f"{rel} schema {how}"


ODD_NAMES = ["\u00e9t\u00e9.txt", "e\u0301te\u0301.txt", "../x.txt", "/etc/passwd", "a" * 300 + ".txt",
             "x/" * 60 + "y.txt", "EPISODES.parquet", "Card.json", "\u202ecod.exe", "con.txt", "nul", "a\\b.txt",
             "sp ace.txt", "\ud7ff.txt", "dir/./x.txt", "dir//x.txt", "", ".", "rules/../card.json", "x\n.txt"]


def _odd_inventory(card: Path, rng: random.Random) -> str:
    """An inventory entry with an odd name or a huge size (the root digest recomputed)."""
    doc = bad_cards.manifest(card)
    how = rng.choice(["name", "name", "size", "duplicate"])
    files = doc["inventory"]["files"]
    if how == "name":
        name = rng.choice(ODD_NAMES)
        files.append({"path": name, "bytes": 1, "sha256": hashlib.sha256(b"x").hexdigest()})
        what = f"inventory lists {name[:40]!r}"
    elif how == "size":
        entry = rng.choice(files)
        entry["bytes"] = rng.choice([2**62, 2**63 - 1, 10**30, -1, 0])
        what = f"inventory {entry['path']} bytes = {entry['bytes']}"
    else:
        files.append(dict(rng.choice(files)))
        what = "inventory entry twice"
    bad_cards.set_root(doc)
    bad_cards.save_manifest(card, doc)
    return what


def _odd_files(card: Path, rng: random.Random) -> str:
    """Files of odd names in the directory, listed (re-hashed) or not."""
    made = []
    for name in rng.sample([n for n in ODD_NAMES if n and not n.startswith(("/", "..", ".")) and "\\" not in n
                            and "//" not in n and "/./" not in n and "\ud7ff" not in n and "/.." not in n], 2):
        path = card / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"odd\n")
            made.append(name)
        except OSError:
            continue
    listed = rng.random() < 0.5
    if listed and made:
        try:
            bad_cards.rehash(card, add=tuple(made))
        except Exception:  # noqa: BLE001 - the harness cannot hash it (the name is refused): leave unlisted
            listed = False
    return f"files {[m[:30] for m in made]} ({'listed' if listed else 'unlisted'})"


EXTRA = [_page, _page, _schema_meta, _odd_inventory, _odd_inventory, _odd_files]


def _corpus(name: str):
    package = bad_cards.PACKAGES[name]

    def mutate(card: Path, rng: random.Random) -> str:
        outside = card.parent / "_outside"
        outside.mkdir(exist_ok=True)
        (outside / bad_cards.SECRET).write_text(bad_cards.SECRET_TEXT)
        package.mutate(card, outside)
        return f"corpus {name}"
    mutate.__name__ = f"corpus:{name}"
    return mutate


CORPUS = [_corpus(n) for n in sorted(bad_cards.PACKAGES) if n != "manifest-too-large"]
MUTATIONS = [*F.MUTATIONS, *EXTRA, *EXTRA, *CORPUS]


def _packed(card: Path, rng: random.Random) -> tuple[Path, str]:
    how = rng.choice(["fuzz", "fuzz", "fuzz", "zip", "lfs", "pax-size", "member-case", "member-unicode"])
    if how == "fuzz":
        return F._packed(card, rng)
    out = card.parent / "card.rcard"
    if how == "zip":
        with zipfile.ZipFile(out, "w") as z:
            for p in sorted(p for p in card.rglob("*") if p.is_file() and not p.is_symlink()):
                z.write(p, p.relative_to(card).as_posix())
        return out, "packed as a zip"
    good, _ = F._packed_with(card, "plain")
    data = good.read_bytes()
    if how == "lfs":
        out.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:" + hashlib.sha256(data).hexdigest()
                        .encode() + b"\nsize %d\n" % len(data))
        return out, "packed as a Git LFS pointer"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, tarfile.open(fileobj=buffer, mode="w",
                                                                     format=tarfile.PAX_FORMAT) as tar:
        for m in src.getmembers():
            body = src.extractfile(m).read() if m.isfile() else None
            if how == "pax-size" and m.name.endswith(".parquet"):
                m.pax_headers = {"size": rng.choice(["99999999999999999999", "-1", "1e3", "0x10", " 12"])}
            tar.addfile(m, io.BytesIO(body) if body is not None else None)
        if how == "member-case":
            F._tar_member(tar, "CARD.JSON", b"{}")
        elif how == "member-unicode":
            F._tar_member(tar, "e\u0301.txt", b"x")
            F._tar_member(tar, "\u00e9.txt", b"x")
    out.write_bytes(buffer.getvalue())
    return out, f"packed {how}"


# -- running ------------------------------------------------------------------------------------

def _all_commands(card: Path, out: Path, packed: bool, rules: bool, key: Path) -> list[list[str]]:
    c = str(card)  # the fuzz test's list (F._commands samples 5 of it), in full
    every = [
        ["validate", c], ["validate", c, "--format", "json"], ["validate", c, "--format", "github"],
        ["validate", c, "--format", "markdown"], ["info", c], ["info", c, "--format", "json"],
        ["rescore", c], ["rescore", c, "--format", "markdown"], ["rescore", c, "--format", "csv"],
        ["report", c, "-o", str(out / "r.html")], ["card", c], ["card", c, "-o", str(out / "README.md")],
        ["export", "eee", c, "-o", str(out / "eee")], ["verify", c, "--pubkey", str(key)],
        ["redact", c, "--spec", str(key.with_name("spec.yaml")), "-o", str(out / "redacted")],
    ]
    if not packed and (card / "README.md").is_file():
        every.append(["card", c, "--check", str(card / "README.md")])
    if rules:
        every += [["power", c, "--rule", F.RULE_ID],
                  ["rliable", c, "--rule", F.RULE_ID, "--runs", "trial", "--tasks", "task_id"],
                  ["export", "inspect-scores", c, "--rule", F.RULE_ID, "-o", str(out / "s.jsonl")]]
    every.append(["unpack", c, "-o", str(out / "u")] if packed else ["pack", c, "-o", str(out / "p.rcard")])
    return every


# exit-1 messages about the request or the card's declared contents, not a refusal of the card's data
_REQUEST = ("declares no rules", ".sig: ", "no license is declared", "signature", "no such rule", "--rule", "not signed",
            "public key", "redaction", "nothing to export", "license", "README", "rliable's statistics need",
            "give a rule whose select")


def _problems(result, names: tuple[str, ...]) -> list[str]:
    """What is wrong with one run: an exit code, a raise, a repr, an exit 1 naming none of `names`, memory."""
    problems = []
    global _PEAK
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10  # MiB; only ever grows
    if peak > MAX_RSS_MIB and _PEAK <= MAX_RSS_MIB:  # the run that took it past: rerun its case alone
        problems.append(f"peak RSS {peak} MiB (more than {MAX_RSS_MIB})")
    _PEAK = peak
    if result.exit_code not in (0, 1):
        problems.append(f"exit {result.exit_code}")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append(f"raised {type(result.exception).__name__}: {str(result.exception)[:200]}")
    if (m := REPR.search(result.output)) is not None:
        problems.append(f"repr {m.group(0)!r}")
    if result.exit_code == 1 and not any(n in result.output for n in names):
        problems.append("exit 1 names neither the card nor the output")
    return problems


def run_case(root: Path, seed: int, k: int, key: Path, verbose: bool, only: str | None) -> tuple[int, int, dict]:
    rng = random.Random(seed * 1_000_003 + k)  # noqa: S311 (reproducible, not a secret)
    base = rng.choice(sorted(p.name for p in CARDS.iterdir() if p.is_dir()))
    case = root / f"case{k}"
    card = case / "card"
    shutil.copytree(CARDS / base, card, symlinks=True)
    done = []
    pool = [m for m in MUTATIONS if only is None or only in m.__name__]
    for _ in range(rng.choice([1, 1, 2, 3])):
        if any("fifo" in d or "special" in d for d in done):
            break  # a later mutation's re-hash would block reading the FIFO (the harness, not rcard)
        mutate = rng.choice(pool)
        try:
            done.append(mutate(card, rng))
        except Exception as exc:  # noqa: BLE001 - an earlier mutation broke what this one reads (the harness)
            done.append(f"{mutate.__name__} skipped ({type(exc).__name__})")
    target, packed = card, False
    if rng.random() < 0.35 and not any("fifo" in d or "special" in d for d in done):
        target, what = _packed(card, rng)
        done.append(what)
        packed = True
    out, cwd = case / "out", case / "cwd"  # cwd: where a default output (report.html, <card>.sig) would land
    for made in (out, cwd):
        made.mkdir()
    old = os.getcwd()
    os.chdir(cwd)
    manifest = (card / "card.json").read_bytes() if (card / "card.json").is_file() else b""
    bad = suspect = 0
    codes: dict[int, int] = {}
    results = {}
    try:
        for argv in _all_commands(target, out, packed, F.RULE_ID.encode() in manifest, key):
            before = F._tree(case, out)
            t0 = time.process_time()
            result = CliRunner().invoke(app, argv)
            spent = time.process_time() - t0
            text = result.output
            codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
            results[argv[0] + (" " + argv[1] if argv[0] == "export" else "")] = (result.exit_code, text)
            problems = _problems(result, (str(target), str(out)))
            if F._tree(case, out) != before:
                problems.append("wrote outside its output directory")
            if list(Path(tempfile.gettempdir()).glob(F.CANARY)) or (root / F.CANARY).exists():
                problems.append("canary written")
            if problems:
                bad += 1
                print(f"BAD {k} {base} + {done}: rcard {' '.join(a[:60] for a in argv)}: {'; '.join(problems)}\n    "
                      + text[-600:].replace("\n", "\n    "), flush=True)
            elif verbose:
                print(f"ok {k} rcard {' '.join(a[:60] for a in argv)} -> {result.exit_code} ({spent:.2f} s CPU)\n    "
                      + text[-300:].replace("\n", "\n    "), flush=True)
            shutil.rmtree(out)
            out.mkdir()
    finally:
        os.chdir(old)
    valid = results.get("validate", (None, ""))[0] == 0
    if valid:
        for name, (code, text) in results.items():
            first = text.strip().splitlines()[0] if text.strip() else ""
            if code == 1 and not any(r in text for r in _REQUEST):
                suspect += 1
                print(f"SUSPECT {k} {base} + {done}: validate VALID but rcard {name} -> 1: {first[:300]}", flush=True)
    shutil.rmtree(case, ignore_errors=True)
    return bad, suspect, codes


def manifest_sweep(root: Path, key: Path) -> tuple[int, int]:
    """Every node of each fixture's card.json set to each hostile JSON value, through validate and info."""
    n = bad = 0
    for base in sorted(p.name for p in CARDS.iterdir() if p.is_dir()):
        doc = bad_cards.manifest(CARDS / base)
        for path in F._json_paths(doc)[1:]:
            for raw in F.JSON_VALUES:
                card = root / "m" / "card"
                if card.parent.exists():
                    shutil.rmtree(card.parent)
                shutil.copytree(CARDS / base, card)
                copy = json.loads(json.dumps(doc))
                parent = copy
                for part in path[:-1]:
                    parent = parent[part]
                parent[path[-1]] = "\x00HOSTILE\x00"
                (card / "card.json").write_text(json.dumps(copy, indent=2).replace('"\\u0000HOSTILE\\u0000"', raw))
                for argv in (["validate", str(card)], ["info", str(card)]):
                    n += 1
                    result = CliRunner().invoke(app, argv)
                    text = result.output
                    problems = _problems(result, (str(card),))
                    if problems:
                        bad += 1
                        print(f"BAD manifest {base} {'/'.join(map(str, path))} = {raw[:40]}: rcard {argv[0]}: "
                              f"{'; '.join(problems)}\n    " + "\n    ".join(
                                  [line for line in text.splitlines() if "crashed" in line or "internal" in line]
                                  + [text[-400:]]), flush=True)
    return n, bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="?", type=int, default=100)
    parser.add_argument("seed", nargs="?", type=int, default=0)
    parser.add_argument("--case", type=int, help="rerun this case alone, printing every command")
    parser.add_argument("--only", help="draw mutations whose name contains this only")
    parser.add_argument("--manifest", action="store_true", help="the exhaustive card.json sweep instead")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="card_sweep."))
    key = root / "k.pub.pem"
    keys = CliRunner().invoke(app, ["keygen", "--private", str(root / "k.pem"), "--public", str(key)])
    if keys.exit_code != 0:
        print("keygen failed (rcard verify needs the sign extra):", keys.output)
        return 2
    key.with_name("spec.yaml").write_text("redact:\n  - target: steps.content\n    reason: personal data\n")
    t0 = time.process_time()
    if args.manifest:
        n, bad = manifest_sweep(root, key)
        print(f"manifest sweep: {n} runs, {bad} bad, {time.process_time() - t0:.0f} s CPU")
        return 1 if bad else 0
    bad = suspect = 0
    codes: dict[int, int] = {}
    ks = [args.case] if args.case is not None else range(args.cases)
    for k in ks:
        b, s, c = run_case(root, args.seed, k, key, args.case is not None, args.only)
        bad, suspect = bad + b, suspect + s
        for code, count in c.items():
            codes[code] = codes.get(code, 0) + count
    shutil.rmtree(root, ignore_errors=True)
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"cases {len(ks)} seed {args.seed}: bad runs {bad}, suspect {suspect}, exit codes {dict(sorted(codes.items()))}, "
          f"{time.process_time() - t0:.0f} s CPU, load {load}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
