"""Mutated fixture cards through every read command of the CLI, in-process.

Each case copies a fixture card (fixtures/cards/*), applies one or two mutations — card.json
values of the wrong type, huge numbers, NaN, deep nesting, long strings, duplicate keys; rule
YAML with alias bombs, Python tags, huge integers; Parquet files truncated, with a lying
footer (bytes flipped, or its varints nudged: counts, sizes, offsets) or another schema; files that are links, FIFOs or hard links; packed .rcard archives
with traversal names, links, lying sizes and duplicate members — re-hashes the inventory as
a publisher's tool would (so the mutation reaches past the integrity check), and runs a
seeded choice of the read commands on it (validate, info, rescore, report, card [--check], export,
power, rliable, verify, redact, pack or unpack). Asserted for every run: exit 0 or 1 (never 2, the
internal-error code), no traceback, an exit 1 message that names the card, and nothing
written anywhere but the command's output directory (the card itself unchanged). CI runs
`cases(24)` (about 10 s of CPU); `RCARD_FUZZ_SCALE=20` a long run. A counterexample becomes a plain
regression test below.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import sys
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases, seed

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402

pytestmark = pytest.mark.fuzz

RULE_ID = "synthetic.success_rate"
CANARY = "pwned-canary"
# Raw JSON texts put in place of a card.json value (kept as text: 1e999, lone surrogates and
# duplicate keys reach the parser as written).
JSON_VALUES = [
    "1e999", "-1e400", "NaN", "Infinity", "9223372036854775808", "9" * 5000, "-1", "0", "1.5", "true", "null",
    '""', "[]", "{}", '"\\ud800"', '"\\u0000"', '"\\u202e\\n::error::x"', "[" * 3000 + "]" * 3000,
    '{"a": ' * 2000 + "1" + "}" * 2000, '"' + "x" * 200_000 + '"', '{"a": 1, "a": 2}', '"../../../etc/passwd"',
    '"/etc/passwd"', '"rollout-card/\\u0661.\\u0662"', '"2026-13-45T99:00:00Z"', '["a", 1, null, {}]',
    '"' + "\\u0301" * 5000 + '"', '{"__proto__": {"x": 1}}',
]
# YAML put in place of a rule file's line or value.
YAML_PIECES = [
    "score: " + "9" * 5000, 'score: "score.success + ' + "9" * 5000 + '"', "score: !!int " + "9" * 5000,
    "aggregate: !!python/object/apply:os.system ['touch " + CANARY + "']",
    "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b]",
    "on_missing: .nan", "on_missing: 1e999", "version: 99999999999999999999999", "kind: !!binary ?",
    "reported:\n  - group: {agent: alpha}\n    value: .inf\n    tolerance: -1", "rule: " + "x" * 100_000,
    "aggregate: " + "[" * 500 + "]" * 500, "score: '\\ud800'", "score: \"\\ud800\"", "? [a, b]\n: c",
    "%YAML 1.1\n---\nscore: 1\n---\nscore: 2", "score: 1:2:3:4", "<<: {score: 1}", "score: \x1b[2J\u202e",
]


# -- mutations: each changes the card in place and says what it did ------------------------------

def _json_paths(value: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _json_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _json_paths(v, (*path, i))
    return out


def _manifest_value(card: Path, rng: random.Random) -> str:
    doc = bad_cards.manifest(card)
    path = rng.choice(_json_paths(doc)[1:])
    raw = rng.choice(JSON_VALUES)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = "\x00HOSTILE\x00"
    text = json.dumps(doc, indent=2).replace('"\\u0000HOSTILE\\u0000"', raw)
    (card / "card.json").write_text(text, encoding="utf-8")
    return f"card.json {'/'.join(map(str, path))} = {raw[:40]}"


def _manifest_duplicate(card: Path, rng: random.Random) -> str:
    doc = bad_cards.manifest(card)
    key = rng.choice(sorted(doc))
    text = json.dumps(doc, indent=2)
    (card / "card.json").write_text("{" + json.dumps(key) + ": " + rng.choice(JSON_VALUES[:14]) + "," + text[1:])
    return f"card.json duplicate {key}"


def _rule_yaml(card: Path, rng: random.Random) -> str:
    rule = card / bad_cards.RULE
    if not rule.exists():
        return _manifest_value(card, rng)
    lines = rule.read_text().splitlines()
    piece = rng.choice(YAML_PIECES)
    at = rng.randrange(len(lines))
    if rng.random() < 0.5:
        lines[at] = piece
    else:
        lines.insert(at, piece)
    rule.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bad_cards.rehash(card)
    return f"rule line {at}: {piece[:40]!r}"


def _parquet_bytes(card: Path, rng: random.Random) -> str:
    rel = rng.choice(["episodes.parquet", "steps.parquet"])
    data = bytearray((card / rel).read_bytes())
    how = rng.choice(["truncate", "footer-flip", "footer-nudge", "footer-length", "magic"])
    if how == "truncate":
        data = data[: rng.randrange(len(data))]
    elif how == "footer-flip":
        for _ in range(rng.randint(1, 8)):
            i = len(data) - 8 - rng.randrange(min(len(data) - 8, 600))
            data[i] = rng.randrange(256)
    elif how == "footer-nudge":  # Thrift varints off by a little: row counts, sizes, offsets that lie
        start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(start, len(data) - 8)
            data[i] = (data[i] + rng.choice([1, 2, -1, 64, 127])) % 256
    elif how == "footer-length":
        data[-8:-4] = rng.choice([0, 1, len(data), len(data) * 4, 2**31 - 1, 2**32 - 1]).to_bytes(4, "little")
    else:
        data[-4:] = b"PAR2"
    (card / rel).write_bytes(bytes(data))
    bad_cards.rehash(card)
    return f"{rel} {how}"


def _parquet_schema(card: Path, rng: random.Random) -> str:
    rel = rng.choice(["episodes.parquet", "steps.parquet"])
    table = pq.read_table(card / rel)
    name = rng.choice(table.column_names)
    n = table.num_rows
    array = rng.choice([
        pa.array(list(range(n)), pa.int64()), pa.array([str(i) * 3 for i in range(n)]), pa.array([None] * n, pa.null()),
        pa.array([[1, 2]] * n), pa.array([{"a": 1}] * n), pa.array([float("nan")] * n),
        pa.array([2**64 - 1] * n, pa.uint64()), pa.array([b"\xff"] * n, pa.binary()),
        pa.array(["\n::error::x\u202e"] * n), pa.array([True] * n),
    ])
    i = table.schema.get_field_index(name)
    table = table.set_column(i, pa.field(name, array.type), array)
    if rng.random() < 0.3:
        table = table.append_column("meta.extra" if rel == "steps.parquet" else "score.extra", array)
    pq.write_table(table, card / rel)
    bad_cards.rehash(card)
    return f"{rel} {name} as {array.type}"


STRINGS = ["", "\n::error::x", "\u202e\x1b[2J", "a" * 100_000, "\u0301" * 50, "漢字", "../../etc/passwd", " ", "null",
           "\ud7ff\U0010ffff", "=HYPERLINK(\"x\")", "<script>x</script>", "{\"a\": " * 500]


def _cell_values(card: Path, rng: random.Random) -> str:
    rel = rng.choice(["episodes.parquet", "steps.parquet"])
    table = pq.read_table(card / rel)
    name = rng.choice(table.column_names)
    field = table.schema.field(name)
    t = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        value = rng.choice(STRINGS)
    elif pa.types.is_integer(t):
        value = rng.choice([-(2**63), 2**63 - 1, -1, 0, None])
    elif pa.types.is_floating(t):
        value = rng.choice([float("nan"), float("inf"), -float("inf"), -0.0, 1e308, 5e-324, None])
    elif pa.types.is_timestamp(t):
        value = rng.choice([datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC),
                            datetime(1970, 1, 1, tzinfo=UTC), None])
    else:
        value = None
    rows = rng.sample(range(table.num_rows), rng.randint(1, table.num_rows))
    for row in rows:
        table = bad_cards.set_cell(table, name, row, value, None if t == field.type or pa.types.is_dictionary(field.type)
                                   else t)
    pq.write_table(table, card / rel)
    bad_cards.rehash(card)
    return f"{rel} {name}[{len(rows)} rows] = {str(value)[:30]!r}"


def _rows_lie(card: Path, rng: random.Random) -> str:
    which = rng.choice(["episodes", "steps"])
    rows = rng.choice([0, -1, 10**12, 2**63 - 1])
    bad_cards.edit_manifest(card, lambda d: d["tables"][which].update(rows=rows))
    return f"tables.{which}.rows = {rows}"


def _special_file(card: Path, rng: random.Random) -> str:
    outside = card.parent / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.txt"
    secret.write_text("secret\n")
    target = rng.choice(["notes.txt", "episodes.parquet", bad_cards.RULE if (card / bad_cards.RULE).exists()
                         else "steps.parquet"])
    how = rng.choice(["symlink", "symlink-dir", "hardlink", "fifo"])
    path = card / target
    if path.exists() and how != "symlink-dir":
        path.unlink()
    if how == "symlink":
        os.symlink(secret, path)
    elif how == "symlink-dir":
        path = card / "linked"
        os.symlink(outside, path)
        target = "linked/secret.txt"
    elif how == "hardlink":
        os.link(secret, path)
    else:
        os.mkfifo(path)
        return f"{target} {how}"  # rehash would block reading it
    bad_cards.rehash(card, add=(target,))
    return f"{target} {how}"


FRONT_MATTER = ["configs: 5", "configs: [1, [2], {data_files: 3}]", "configs: [{config_name: episodes, data_files: "
                "[{path: [1, {a: b}]}]}]", "license: [mit]", "license: {a: 1}", "pretty_name: [x]", "license: other",
                "extra_gated_fields: 5", "a: &a [x]\nb: *a", "license: !!python/object/apply:os.system ['touch "
                + CANARY + "']", "size_categories: " + "9" * 5000, "- a\n- b", "x: " + "[" * 2000 + "]" * 2000, ""]


def _readme(card: Path, rng: random.Random) -> str:
    """A README.md in the card (Hugging Face layout) whose front matter `rcard card --check` reads."""
    front = "\n".join(rng.sample(FRONT_MATTER, rng.randint(1, 3)))
    (card / "README.md").write_text(f"---\n{front}\n---\n# card\n", encoding="utf-8")
    bad_cards.rehash(card, add=("README.md",))
    return f"README front matter {front[:60]!r}"


def _signature(card: Path, rng: random.Random) -> str:
    """A detached signature beside the card (what `rcard verify` reads by default)."""
    good = {"format": "rollout-card-signature/1", "algorithm": "ed25519", "key_id": "0" * 64, "signature": "AAAA"}
    key = rng.choice(sorted(good))
    good[key] = "\x00HOSTILE\x00"
    text = json.dumps(good).replace('"\\u0000HOSTILE\\u0000"', rng.choice(JSON_VALUES))
    card.with_name(card.name + ".sig").write_text(text, encoding="utf-8")
    return f"signature {key}"


MUTATIONS: list[Callable[[Path, random.Random], str]] = [
    _manifest_value, _manifest_value, _manifest_duplicate, _rule_yaml, _rule_yaml, _parquet_bytes, _parquet_schema,
    _rows_lie, _special_file, _cell_values, _cell_values, _readme, _signature,
]


def _tar_member(tar: tarfile.TarFile, name: str, data: bytes = b"", **kw: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data) if info.isreg() else None)


def _packed(card: Path, rng: random.Random) -> tuple[Path, str]:
    how = rng.choice(["plain", "traversal", "absolute", "symlink", "hardlink", "duplicate", "device", "huge-size",
                      "truncated", "long-name"])
    return _packed_with(card, how, rng)


def _packed_with(card: Path, how: str, rng: random.Random | None = None) -> tuple[Path, str]:
    """The card as a .rcard with one hostile member (or none), built with tarfile."""
    rng = rng or random.Random(0)
    out = card.parent / "card.rcard"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in card.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(card).as_posix()
            _tar_member(tar, rel, path.read_bytes(), mtime=0, mode=0o644)
        if how == "traversal":
            _tar_member(tar, f"../{CANARY}", b"x")
        elif how == "absolute":
            _tar_member(tar, f"/tmp/{CANARY}", b"x")
        elif how == "symlink":
            _tar_member(tar, "notes.txt", type=tarfile.SYMTYPE, linkname="/etc/passwd")
            _tar_member(tar, "notes.txt/x", b"x")
        elif how == "hardlink":
            _tar_member(tar, "notes.txt", type=tarfile.LNKTYPE, linkname="../../etc/passwd")
        elif how == "duplicate":
            _tar_member(tar, "card.json", b'{"format": "rollout-card/0.2"}')
        elif how == "device":
            _tar_member(tar, "dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        elif how == "long-name":
            _tar_member(tar, "a/" * 2000 + "b", b"x")
    data = bytearray(buffer.getvalue())
    if how == "huge-size":
        # The first member's size field (octal, at 124) says 8 GiB; the checksum fixed up.
        header = next(i for i in range(0, len(data), 512) if data[i + 156:i + 157] in (b"0", b"\0"))
        data[header + 124:header + 136] = b"77777777777\0"
        data[header + 148:header + 156] = b" " * 8
        data[header + 148:header + 155] = (b"%06o\0" % sum(data[header:header + 512]))[:7]
    elif how == "truncated":
        data = data[: rng.randrange(512, len(data))]
    out.write_bytes(bytes(data))
    return out, f"packed {how}"


def _commands(card: Path, out: Path, rng: random.Random, packed: bool, rules: bool, key: Path) -> list[list[str]]:
    c = str(card)
    every = [
        ["validate", c], ["validate", c, "--format", "json"], ["validate", c, "--format", "github"],
        ["validate", c, "--format", "markdown"], ["info", c], ["info", c, "--format", "json"],
        ["rescore", c], ["rescore", c, "--format", "markdown"], ["rescore", c, "--format", "csv"], ["report", c, "-o", str(out / "r.html")],
        ["card", c], ["card", c, "-o", str(out / "README.md")], ["export", "eee", c, "-o", str(out / "eee")],
        ["verify", c, "--pubkey", str(key)],
        ["redact", c, "--spec", str(key.with_name("spec.yaml")), "-o", str(out / "redacted")],
    ]
    if (card / "README.md").is_file():
        every.append(["card", c, "--check", str(card / "README.md")])
    if rules:  # the card declares the rule (else --rule names no file: a usage error, exit 2)
        every += [["power", c, "--rule", RULE_ID],
                  ["rliable", c, "--rule", RULE_ID, "--runs", "trial", "--tasks", "task_id"],
                  ["export", "inspect-scores", c, "--rule", RULE_ID, "-o", str(out / "s.jsonl")]]
    every.append(["unpack", c, "-o", str(out / "u")] if packed else ["pack", c, "-o", str(out / "p.rcard")])
    return rng.sample(every, 5)


def _tree(root: Path, skip: Path) -> dict[str, tuple]:
    """Every entry under `root` but `skip`: its kind, size and modification time (not followed)."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == skip:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            if Path(dirpath, name) == skip:
                continue
            st = os.lstat(os.path.join(dirpath, name))
            seen[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def _run_case(tmp: Path, rng: random.Random, monkeypatch: pytest.MonkeyPatch, key: Path) -> None:
    base = rng.choice(sorted(p.name for p in FIXTURE_CARDS.iterdir() if p.is_dir()))
    case = tmp / f"case{rng.randrange(10**9)}"
    card = case / "card"
    shutil.copytree(FIXTURE_CARDS / base, card)
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        if any("fifo" in d for d in done):
            break  # a later mutation's re-hash would block reading the FIFO (the harness, not rcard)
        mutate = rng.choice(MUTATIONS)
        try:
            done.append(mutate(card, rng))
        except Exception:  # noqa: BLE001 - the first mutation broke what this one reads (the harness, not rcard)
            done.append(f"{mutate.__name__} skipped")
    target, packed = card, False
    if rng.random() < 0.3 and not any("fifo" in d for d in done):
        target, what = _packed(card, rng)
        done.append(what)
        packed = True
    out = case / "out"
    out.mkdir()
    cwd = case / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a default output (report.html, <card>.sig) would land here
    manifest = (card / "card.json").read_bytes() if (card / "card.json").is_file() else b""
    for argv in _commands(target, out, rng, packed, RULE_ID.encode() in manifest, key):
        before = _tree(case, out)
        result = CliRunner().invoke(app, argv)
        where = f"{base} + {done}: rcard {' '.join(a[:60] for a in argv)} -> {result.exit_code}\n{result.output[-2000:]}"
        assert result.exit_code in (0, 1), where
        assert result.exception is None or isinstance(result.exception, SystemExit), where
        assert "Traceback" not in result.output and "internal error" not in result.output, where
        if result.exit_code == 1:  # the message names the card (or a file of it), or the output it refused
            assert str(target) in result.output or str(out) in result.output, where
        assert _tree(case, out) == before, where  # nothing written but the output directory
        assert not list(Path("/tmp").glob(CANARY)) and not (tmp / CANARY).exists(), where
        shutil.rmtree(out)
        out.mkdir()


def test_mutated_cards_through_every_read_command(tmp_path, monkeypatch):
    pytest.importorskip("cryptography", reason="rcard verify needs the sign extra")
    rng = random.Random(seed() * 1_000_003 + 17)
    root = tmp_path / "fuzz"
    root.mkdir()
    key = tmp_path / "k.pub.pem"
    keys = CliRunner().invoke(app, ["keygen", "--private", str(tmp_path / "k.pem"), "--public", str(key)])
    assert keys.exit_code == 0, keys.output
    key.with_name("spec.yaml").write_text("redact:\n  - target: steps.content\n    reason: personal data\n")
    for _ in range(cases(24)):
        _run_case(root, rng, monkeypatch, key)


# -- counterexamples the fuzzer found ---------------------------------------------------------------

def test_an_unsafe_member_of_a_packed_card_names_the_archive(tmp_path):
    """'../x: '..' would leave the card' named only the member: which file to fix was not said."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    archive, _ = _packed_with(card, "traversal")
    for argv in (["info", str(archive)], ["rescore", str(archive)], ["unpack", str(archive), "-o", str(tmp_path / "u")]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 1, result.output
        assert f"{archive}: ../{CANARY}: '..' would leave the card [parent-reference]" in result.output, result.output
    assert not (tmp_path / "u").exists() and not (tmp_path / CANARY).exists()


@pytest.mark.parametrize("argv", [["export", "eee", "{card}", "-o", "{out}/eee"], ["card", "{card}"]])
def test_a_card_without_rules_or_license_is_named_in_the_message(tmp_path, argv):
    """'the card declares no rules ... nothing to export' and 'README: license: ...' did not say
    which card (a script running over many cards could not tell)."""
    card = str(FIXTURE_CARDS / "minimal")
    result = CliRunner().invoke(app, [a.format(card=card, out=tmp_path) for a in argv])
    assert result.exit_code == 1, result.output
    assert f"rcard: {card}: the card declares no rules" in result.output or \
        f"rcard: the README of {card}: license: no license is declared" in result.output, result.output


@pytest.mark.parametrize("command", [["rescore"], ["power", "--rule", RULE_ID], ["report", "-o", "{out}/r.html"],
                                     ["export", "eee", "-o", "{out}/eee"]])
def test_a_status_outside_the_enum_met_while_scoring_names_the_card(tmp_path, command):
    """'episodes.status holds 'aaa', which is not a terminal state' (raised where a rule scores,
    without the card's path) did not say which card; the CLI now puts the card in front."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    bad_cards.edit_table(card, "episodes.parquet", lambda t: bad_cards.set_cell(t, "status", 0, "aaa"))
    argv = [*command[:1], *(command[1:2] if command[0] == "export" else []), str(card),
            *[a.format(out=tmp_path) for a in command[2 if command[0] == "export" else 1:]]]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1, result.output
    assert f"rcard: {card}: episodes.status holds 'aaa', which is not a terminal state" in result.output, result.output


def _lfs_pointer(data: bytes) -> bytes:
    """What `git lfs` leaves under a file's name in a checkout without the LFS content (git-lfs spec v1)."""
    import hashlib

    return (b"version https://git-lfs.github.com/spec/v1\noid sha256:" + hashlib.sha256(data).hexdigest().encode()
            + b"\nsize " + str(len(data)).encode() + b"\n")


def test_a_card_checked_out_without_git_lfs_is_named_as_such(tmp_path):
    """A card on a Git host (a Hugging Face dataset repository) keeps its Parquet, or the .rcard,
    in Git LFS; cloned without `git lfs`, each is a 130-byte pointer. Every command said "is 130
    bytes, the inventory lists 12,412: the file changed after the card was written (or is corrupt);
    restore it" or "too short to be a tar archive ... repack it": the card was never changed. Now
    each names the pointer (for a table, that its oid is the inventory's sha256) and `git lfs pull`."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    original = (card / "episodes.parquet").read_bytes()
    (card / "episodes.parquet").write_bytes(_lfs_pointer(original))
    packed = tmp_path / "card.rcard"
    assert CliRunner().invoke(app, ["pack", str(FIXTURE_CARDS / "synthetic"), "-o", str(packed)]).exit_code == 0
    size = packed.stat().st_size
    packed.write_bytes(_lfs_pointer(packed.read_bytes()))
    table = "it is a Git LFS pointer to the listed content (its oid is the inventory's sha256): the card was " \
            "checked out without its LFS content; run `git lfs pull` in that repository"
    archive = f"is a Git LFS pointer, not the packed card of {size:,} bytes it stands for: it was checked out " \
              "without its LFS content; run `git lfs pull --include card.rcard` in that repository"
    for argv, expected in [(["validate", str(card)], f"episodes.parquet: is 130 bytes, the inventory says "
                                                     f"{len(original):,}; {table}"),
                           (["info", str(card)], f"episodes.parquet is 130 bytes, the inventory lists "
                                                 f"{len(original):,}: {table}"),
                           (["rescore", str(card)], table), (["pack", str(card), "-o", str(tmp_path / "p.rcard")], table),
                           (["validate", str(packed)], archive), (["info", str(packed)], archive),
                           (["unpack", str(packed), "-o", str(tmp_path / "u")], archive)]:
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 1, (argv, result.output)
        flat = " ".join(result.output.split())
        assert " ".join(expected.split()) in flat, (argv, result.output)
        for line in result.output.splitlines():  # no line about the file tells to restore or repack it
            if "episodes.parquet" in line and "mismatch" in line or "card.rcard" in line:
                assert "restore it" not in line and "repack" not in line, (argv, line)
    assert not (tmp_path / "p.rcard").exists() and not (tmp_path / "u").exists()
