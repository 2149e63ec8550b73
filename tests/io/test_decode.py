"""Decode bombs (issue 9 item 8): a small Parquet file whose dictionary holds one 1 MiB string
repeated over 3,000 rows decoded to 3 GiB (validate 1.65 GB, replay 1.66 GB, card VALID). Now
strings are read dictionary-encoded and their plain size checked before they are expanded."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rollout_cards as rc
from rollout_cards.errors import DecodeLimitError
from rollout_cards.io import decode
from rollout_cards.numpy_arrow import dictionary_codes
from tests.conftest import REPO
from tests.validate.conftest import bad_cards

RULE = """\
rule: t.mentions
score: "n > 0"
features:
  n: {from: steps, where: "content == 'needle'", agg: count}
aggregate: {group_by: [agent]}
reported:
  - {group: {agent: a}, value: 0.0, tolerance: 0.00005}
"""

CHILD = """
def _peak_mb():
    # VmHWM: this program's own high-water mark; ru_maxrss keeps the parent's RSS at fork across exec
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:")) / 1024
import json, resource, sys
import rollout_cards as rc
from rollout_cards.errors import DecodeLimitError
from rollout_cards.numpy_arrow import dictionary_codes
try:
    rc.open(sys.argv[1]).steps(columns=["content"])
    read = "read"
except DecodeLimitError as exc:
    read = str(exc)
report = rc.validate(sys.argv[1])
print(json.dumps({"read": read, "codes": sorted(report.codes()), "valid": report.valid,
                  "rss_mb": _peak_mb()}))
"""


def bomb_card(root, rows=3000, value_bytes=1 << 20):
    card = root / "card"
    with rc.CardWriter(card, id="bomb", title="decode bomb", timestamps=False) as w:
        w.add_rule("t.mentions.yaml", text=RULE)
        with w.episode(task_id="t", agent="a") as ep:
            for i in range(rows):
                ep.message("user", f"m{i}")
    table = pq.read_table(card / "steps.parquet")
    bomb = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * value_bytes]))
    table = table.set_column(table.schema.get_field_index("content"), "content", bomb)
    pq.write_table(table, card / "steps.parquet", store_schema=False, compression="zstd")
    bad_cards.rehash(card)
    return card


def test_a_dictionary_bomb_is_refused_by_reader_validator_and_replay_in_bounded_memory(tmp_path):
    card = bomb_card(tmp_path)
    assert (card / "steps.parquet").stat().st_size < 64 * 1024
    out = subprocess.run([sys.executable, "-c", CHILD, str(card)], capture_output=True, text=True, cwd=REPO,
                         timeout=300, check=True)
    result = json.loads(out.stdout)
    assert "decompression bomb" in result["read"] and "'content'" in result["read"]
    assert not result["valid"] and "parquet-decode-limit" in result["codes"]
    assert result["rss_mb"] < 700, result


def test_cli_exit_1(tmp_path):
    from typer.testing import CliRunner

    from rollout_cards.cli import app

    card = bomb_card(tmp_path, rows=200)  # 200 MiB: over the budget of a 5 KB file
    result = CliRunner().invoke(app, ["rescore", str(card)])
    assert result.exit_code == 1 and "decompression bomb" in result.output
    result = CliRunner().invoke(app, ["validate", str(card)])
    assert result.exit_code == 1 and "parquet-decode-limit" in result.output


def test_within_the_budget_batches_are_sliced_and_equal_the_plain_decode(monkeypatch):
    monkeypatch.setattr(decode, "BATCH_DECODED_BYTES", 1000)
    rng = np.random.default_rng(3)
    words = pa.array(["a" * int(n) for n in rng.integers(0, 400, 50)] + [None])
    indices = pa.array(rng.integers(0, 51, 300).astype(np.int32))
    batch = pa.record_batch({"s": pa.DictionaryArray.from_arrays(indices, words), "i": pa.array(range(300))})
    schema = pa.schema([("s", pa.string()), ("i", pa.int64())])
    pieces = list(decode.DecodeBudget("t", 10**9).decode(batch, schema, {"s"}))
    assert pa.Table.from_batches(pieces).equals(pa.Table.from_batches([batch.cast(schema)]))
    for piece in pieces:  # each slice under the batch budget, unless it is a single row
        size = sum(len(v) for v in piece.column("s").to_pylist() if v)
        assert size <= 1000 or piece.num_rows == 1


def test_the_budget_counts_across_batches():
    budget = decode.DecodeBudget("the t table", 0)
    one = pa.record_batch({"s": pa.DictionaryArray.from_arrays(pa.array([0] * 1024, pa.int32()), pa.array(["y" * 1024]))})
    schema = pa.schema([("s", pa.string())])
    for _ in range(decode.DECODE_FLOOR // (1 << 20)):
        list(budget.decode(one, schema, {"s"}))
    with pytest.raises(DecodeLimitError, match="the t table"):
        list(budget.decode(one, schema, {"s"}))


@pytest.mark.parametrize("offset", [0, 3, 17])
@pytest.mark.parametrize("size", [20, 4])  # counted by bincount / value by value
def test_charge_and_codes_read_from_the_buffers_equal_the_decoded_values(offset, size):
    # the per-batch accounting reads indices and value lengths from the Arrow buffers;
    # checked against the decoded strings, with nulls and a sliced (offset) array
    rng = np.random.default_rng(offset)
    words = pa.array(["w" * int(n) for n in rng.integers(0, 50, size)] + [None])
    indices = pa.array(rng.integers(0, size + 1, 200).astype(np.int32), mask=rng.random(200) < 0.2)
    column = pa.DictionaryArray.from_arrays(indices, words).slice(offset)
    codes = dictionary_codes(column, -1)
    assert codes.tolist() == [-1 if i is None else i for i in column.indices.to_pylist()]
    budget = decode.DecodeBudget("t", 10**9)
    charged = budget.charge(pa.record_batch({"s": column}), {"s"})
    # a null row is counted as the dictionary's first value, as the sliced decode path does
    first = len(words[0].as_py() or "")
    expected = sum(first if v is None and i is None else len(v or "") for v, i in
                   zip(column.to_pylist(), column.indices.to_pylist(), strict=True))
    assert charged == expected == budget.used


@pytest.mark.parametrize("words", [["ep-1", "ep-2", "ep-3"], ["lookup", "search", "book", "cancel", None],
                                   ["a", "bb", "cc", "dd", "ee", "ff", "g"], ["same", "xx"]])
def test_charge_is_exact_with_garbage_codes_under_nulls(words):
    # a null row's index slot may hold any value (here out of the dictionary's bounds); the
    # charge reads raw codes, so it must mask those rows and count them as the first value.
    # Reference: plain Python over the decoded values
    rng = np.random.default_rng(len(words))
    n = 500
    codes = rng.integers(0, len(words), n).astype(np.int32)
    null = rng.random(n) < 0.4
    codes[null] = rng.integers(-7, 90, int(null.sum()))
    bits = pa.py_buffer(np.packbits(~null, bitorder="little"))
    indices = pa.Array.from_buffers(pa.int32(), n, [bits, pa.py_buffer(codes)], null_count=int(null.sum()))
    column = pa.DictionaryArray.from_arrays(indices, pa.array(words, pa.string())).slice(5)
    first = len(words[0] or "")
    expected = sum(first if i is None else len(words[i] or "") for i in column.indices.to_pylist())
    assert decode.DecodeBudget("t", 10**9).charge(pa.record_batch({"s": column}), {"s"}) == expected


def test_encoded_steps_decode_to_the_plain_batches(tmp_path):
    card = rc.open(bomb_card(tmp_path, rows=50, value_bytes=10))
    plain = pa.Table.from_batches(list(card.iter_steps(columns=["episode_id", "content", "seq"])))
    encoded = list(card.iter_steps(columns=["episode_id", "content", "seq"], encoded=True))
    assert all(pa.types.is_dictionary(b.schema.field("content").type) for b in encoded)
    assert pa.Table.from_batches([b.cast(plain.schema) for b in encoded]).equals(plain)
    with pytest.raises(ValueError, match="filter them after reading"):
        list(card.iter_steps(filter="seq > 1", encoded=True))
