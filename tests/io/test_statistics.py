"""Row-group statistics are never trusted (issue 9 item 5): a footer whose max(seq) was patched
to 0 must not make a rule skip the rows it selects, and a card reporting the value such a
pruned scan would give must not validate."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import rollout_cards as rc
from rollout_cards.rules.engine import apply_rule
from rollout_cards.rules.loader import parse_rule
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402

STEPS = 300  # per episode; max(seq) = 299 is the value patched in the footer
RULE = """\
rule: t.late
score: "n_late > 0"
features:
  n_late: {from: steps, where: "seq >= 100", agg: count}
aggregate: {group_by: [agent]}
reported:
  - {group: {agent: a}, value: VALUE, tolerance: 0.00005}
"""


def lying_card(root: Path, reported: float) -> Path:
    """Five episodes of 300 steps, one row group per episode, every footer saying max(seq) = 0."""
    card = root / "card"
    with rc.CardWriter(card, id="lying-stats", title="lying statistics", timestamps=False) as w:
        w.add_rule("t.late.yaml", text=RULE.replace("VALUE", str(reported)))
        for i in range(5):
            with w.episode(task_id=f"t{i}", agent="a") as ep:
                for j in range(STEPS):
                    ep.message("user", f"m{j}")
                ep.score("ok", 1.0)
    path = card / "steps.parquet"
    table = pq.read_table(path)
    pq.write_table(table, path, row_group_size=STEPS, compression="zstd")
    data = bytearray(path.read_bytes())
    (footer,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - footer
    old, new = struct.pack("<q", STEPS - 1), struct.pack("<q", 0)
    assert bytes(data[start:]).count(old) >= 5
    data[start:] = bytes(data[start:]).replace(old, new)
    path.write_bytes(bytes(data))
    bad_cards.rehash(card)  # as a careless (or hostile) publisher's tool would
    return card


def test_the_patched_statistics_do_make_a_pushed_down_scan_lie(tmp_path):
    card = lying_card(tmp_path, 1.0)
    scanned = ds.dataset(str(card / "steps.parquet")).to_table(filter=ds.field("seq") >= 100)
    assert scanned.num_rows == 0  # what pyarrow's pruning gives: the premise of the tests below
    assert pq.read_table(card / "steps.parquet").filter(pa.compute.field("seq") >= 100).num_rows == 5 * 200


def test_rules_and_filters_do_not_prune_on_statistics(tmp_path):
    card = rc.open(lying_card(tmp_path, 1.0))
    (result,) = apply_rule(card, parse_rule(RULE.replace("VALUE", "1.0"))).results
    assert result.value == 1.0 and result.n == 5
    assert card.steps(columns=["episode_id"], filter="seq >= 100").num_rows == 1000
    assert card.steps(columns=["episode_id"], filter=ds.field("seq") >= 100).num_rows == 1000
    assert sum(b.num_rows for b in card.iter_steps(columns=["kind"], filter="seq >= 290")) == 50


@pytest.mark.parametrize(("reported", "valid"), [(0.0, False), (1.0, True)])
def test_a_card_reporting_the_pruned_value_does_not_validate(tmp_path, reported, valid):
    report = rc.validate(lying_card(tmp_path, reported))
    assert report.valid is valid, report.findings
    if not valid:
        assert "reported-mismatch" in report.codes()
