"""Parquet fuzzer (issue 9, "Fuzzing in CI"): hostile table files behind a re-hashed inventory.

Categories: random byte flips, truncations, footer (statistics) byte patches, wrong schemas,
and decode bombs. Every mutated card is validated and re-scored in ONE child process under
an address-space limit (RLIMIT_AS), so an abort, a crash or a runaway allocation shows as
the child dying on that case rather than taking the suite down. Asserted per case: the
validator's outcome is never internal-error, rescore ends or refuses with a RolloutCardError
(exit 1) and never with another exception (exit 2), and the child survives within the limit.
For footer patches (lying statistics) the reader's filtered reads must equal a filter over
a plain read of the same file, and a card that still validates must replay to the numbers
of the untouched card. CI runs `cases(n)` per category; `RCARD_FUZZ_SCALE=50` a long run.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollout_cards.io import decode
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases, seed
from tests.validate.conftest import bad_cards

pytestmark = pytest.mark.fuzz

LIMIT = 2 << 30  # address space of the child: far above a legitimate read of these cards

CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
import pyarrow.compute as pc, pyarrow.parquet as pq
import rollout_cards as rc
from rollout_cards.errors import RolloutCardError
from rollout_cards.rules.rescore import rescore

for line in sys.stdin:
    case = json.loads(line)
    out = {"name": case["name"]}
    report = rc.validate(case["path"])
    out["outcome"], out["codes"] = report.outcome, sorted(report.codes())
    try:
        out["values"] = [r.value for r in rescore(rc.open(case["path"])).results]
        out["rescore"] = 0
    except RolloutCardError as exc:
        out["rescore"], out["error"] = 1, str(exc)[:200]
    except Exception as exc:  # noqa: BLE001 - what the test is looking for
        out["rescore"], out["error"] = 2, f"{type(exc).__name__}: {exc}"[:300]
    if case["stats"] and out["rescore"] == 0:
        try:
            got = rc.open(case["path"]).steps(columns=["seq"], filter="seq >= 3")["seq"].to_pylist()
            plain = pq.read_table(case["path"] + "/steps.parquet", columns=["seq"])
            want = plain.filter(pc.greater_equal(plain["seq"], 3))["seq"].to_pylist()
            out["filter_agrees"] = sorted(got) == sorted(want)
        except RolloutCardError:
            out["filter_agrees"] = True  # refused: no wrong answer
        except Exception as exc:  # noqa: BLE001
            out["rescore"], out["error"] = 2, f"filtered read: {type(exc).__name__}: {exc}"[:300]
    print(json.dumps(out), flush=True)
"""


def _copy(root: Path, name: str) -> Path:
    card = root / name
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    return card


def _flip(card: Path, rng: random.Random) -> None:
    path = card / rng.choice(["steps.parquet", "episodes.parquet"])
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def _truncate(card: Path, rng: random.Random) -> None:
    path = card / rng.choice(["steps.parquet", "episodes.parquet"])
    data = path.read_bytes()
    cut = rng.choice([rng.randrange(len(data)), len(data) - rng.randint(1, 16)])
    path.write_bytes(data[:cut] + (b"PAR1" if rng.random() < 0.5 else b""))


def _footer(card: Path, rng: random.Random) -> None:
    """Patch bytes of the footer (where the statistics are), as a lying writer would."""
    path = card / "steps.parquet"
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - length
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(start, len(data) - 8)
        data[at] = rng.randrange(256)
    path.write_bytes(bytes(data))


def _schema(card: Path, rng: random.Random) -> None:
    rel = rng.choice(["steps.parquet", "episodes.parquet"])
    table = pq.read_table(card / rel)
    name = rng.choice(table.column_names)
    i = table.schema.get_field_index(name)
    change = rng.choice(["drop", "rename", "to_text", "to_float", "duplicate"])
    if change == "drop":
        table = table.remove_column(i)
    elif change == "rename":
        table = table.rename_columns([f"x{c}" if c == name else c for c in table.column_names])
    elif change == "to_text":
        table = table.set_column(i, name, pa.array([None if v is None else str(v) for v in table[name].to_pylist()],
                                                   pa.string()))
    elif change == "to_float":
        table = table.set_column(i, name, pa.array(rng.random() for _ in range(table.num_rows)))
    else:
        table = table.append_column(name, table.column(i))
    pq.write_table(table, card / rel)


def _bomb(card: Path, rng: random.Random) -> bool:
    """A dictionary page value repeated over every row; True when the validator reads the column
    and its decoded size is over the budget, so that validation must refuse it."""
    rel, column = rng.choice([("steps.parquet", "content"), ("episodes.parquet", "task_id"),
                              ("episodes.parquet", "agent"), ("steps.parquet", "name")])
    table = pq.read_table(card / rel)
    size = rng.choice([1 << 18, 1 << 20, 4 << 20])
    indices = pa.array(np.zeros(table.num_rows, dtype=np.int32))
    bomb = pa.DictionaryArray.from_arrays(indices, pa.array(["b" * size]))
    table = table.set_column(table.schema.get_field_index(column), column, bomb)
    pq.write_table(table, card / rel, store_schema=False, compression="zstd")
    over = table.num_rows * size > decode.DECODE_FLOOR + decode.DECODE_RATIO * (card / rel).stat().st_size
    return over and rel == "episodes.parquet"  # the plan check reads task_id and agent


MUTATIONS = {"flip": (_flip, 12), "truncate": (_truncate, 6), "footer": (_footer, 12), "schema": (_schema, 8),
             "bomb": (_bomb, 6)}


def test_hostile_parquet_never_crashes_never_exceeds_memory_and_never_lies(tmp_path):
    rng = random.Random(seed())
    batch = []
    for kind, (mutate, n) in MUTATIONS.items():
        for i in range(cases(n)):
            card = _copy(tmp_path, f"{kind}-{i}")
            must_refuse = mutate(card, rng)
            bad_cards.rehash(card)  # digests match: the table itself must be judged
            batch.append({"name": card.name, "path": str(card), "stats": kind == "footer",
                          "must_refuse": bool(must_refuse)})
    batch.append({"name": "original", "path": str(FIXTURE_CARDS / "synthetic"), "stats": True})
    stdin = "".join(json.dumps(c) + "\n" for c in batch)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(LIMIT)], input=stdin, capture_output=True, text=True,
                          cwd=REPO, timeout=1200)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    done = len(results)
    assert proc.returncode == 0 and done == len(batch), (
        f"child died (code {proc.returncode}) on case {batch[min(done, len(batch) - 1)]['name']}: "
        f"{proc.stderr[-2000:]}")
    by_name = {r["name"]: r for r in results}
    original = by_name.pop("original")
    assert original["outcome"] == "valid" and original["rescore"] == 0
    summary: dict[str, dict[str, int]] = {}
    for name, r in by_name.items():
        key = f"{r['outcome']}/rescore-exit-{r['rescore']}"
        summary.setdefault(name.split("-")[0], {}).setdefault(key, 0)
        summary[name.split("-")[0]][key] += 1
    print(f"parquet fuzz, seed {seed()}: {len(by_name)} cases: {json.dumps(summary, sort_keys=True)}")
    for name, r in by_name.items():
        assert r["outcome"] != "internal-error", r
        assert r["rescore"] in (0, 1), r
        if r.get("filter_agrees") is not None:
            assert r["filter_agrees"], r
        if r["outcome"] == "valid" and r["rescore"] == 0:
            assert r["values"] == pytest.approx(original["values"]), r
        if next(c for c in batch if c["name"] == name)["must_refuse"]:
            assert r["outcome"] == "invalid" and "parquet-decode-limit" in r["codes"], r
