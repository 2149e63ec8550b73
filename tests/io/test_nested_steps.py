"""Nested agents (format 0.2): parent_seq and depth written, read, validated, selected by rules;
cards of format 0.1 (without the columns) keep reading, validating and re-scoring."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rollout_cards as rc
from rollout_cards.errors import WriterError
from rollout_cards.io.finalize import refresh_manifest
from rollout_cards.release.redact import episode_digest_line
from rollout_cards.validate import validate

RULE = """\
rule: t.top_calls
kind: diagnostic
description: calls made by the top-level agent only
features:
  top_calls: {where: "kind == 'tool_call' and coalesce(depth, 0) == 0", agg: count}
  sub_steps: {where: "depth > 0", agg: count}
score: "top_calls"
aggregate: {group_by: [agent]}
"""


def _card(path: Path) -> Path:
    with rc.CardWriter(path, id="nest", title="nested", timestamps=False) as card:
        with card.episode(task_id="t1", agent="lead") as ep:
            ep.message("user", "do it")                                          # 0
            ep.tool_call("delegate", args={"to": "helper"}, call_id="c1")       # 1
            ep.step("span_begin", name="helper", parent_seq=1, depth=1)          # 2
            ep.tool_call("search", call_id="c2", agent="helper", parent_seq=1, depth=1)   # 3
            ep.tool_result("c2", "found", agent="helper", parent_seq=1, depth=1)          # 4
            ep.step("span_end", name="helper", parent_seq=1, depth=1)            # 5
            ep.tool_result("c1", "helper done", depth=0)                         # 6
            ep.score("done", 1.0)
    return path


def test_parent_links_round_trip_and_rules_select_by_depth(tmp_path):
    path = _card(tmp_path / "card")
    card = rc.open(path)
    assert card.manifest.format == "rollout-card/0.2"
    steps = card.steps(columns=["seq", "parent_seq", "depth", "agent"]).to_pylist()
    assert [s["parent_seq"] for s in steps] == [None, None, 1, 1, 1, 1, None]
    assert [s["depth"] for s in steps] == [None, None, 1, 1, 1, 1, 0]
    assert validate(path).valid
    rule = tmp_path / "r.yaml"
    rule.write_text(RULE)
    report = rc.rescore(card, [str(rule)])
    result = next(r for r in report.results if r.rule == "t.top_calls")
    assert result.value == 1.0  # c1 only; c2 belongs to the helper (depth 1)


@pytest.mark.parametrize(("parent", "depth", "msg"), [(5, 1, "parent_seq"), (-1, 1, "parent_seq"),
                                                      (0, 0, "depth is at least 1"), (None, -2, "depth")])
def test_writer_refuses_impossible_links(tmp_path, parent, depth, msg):
    with rc.CardWriter(tmp_path / "c", id="x", title="x") as card, card.episode(task_id="t") as ep:
        ep.message("user", "a")
        with pytest.raises(WriterError, match=msg):
            ep.message("assistant", "b", parent_seq=parent, depth=depth)


def _as_format_0_1(path: Path) -> None:
    """Rewrite a card as a 0.1 writer wrote it: steps without the 0.2 columns, format 0.1."""
    table = pq.read_table(path / "steps.parquet")
    table = table.drop_columns(["parent_seq", "depth"])
    pq.write_table(table, path / "steps.parquet")
    doc = json.loads((path / "card.json").read_text())
    doc["format"] = "rollout-card/0.1"
    (path / "card.json").write_text(json.dumps(doc))
    refresh_manifest(path)


def test_a_format_0_1_card_reads_validates_and_rescores(tmp_path):
    path = tmp_path / "old"
    with rc.CardWriter(path, id="old", title="old", timestamps=False) as card:
        with card.episode(task_id="t1", agent="a") as ep:
            ep.message("user", "hi")
            ep.tool_call("f", call_id="c")
            ep.tool_result("c", "ok")
            ep.score("done", 1.0)
    _as_format_0_1(path)
    assert "parent_seq" not in pq.read_schema(path / "steps.parquet").names
    card = rc.open(path)
    assert card.manifest.format == "rollout-card/0.1"
    assert card.steps(columns=["depth"]).column("depth").null_count == 3
    report = validate(path)
    assert report.valid, [f for f in report.findings if f.severity == "error"]
    rule = tmp_path / "r.yaml"
    rule.write_text(RULE)
    result = next(r for r in rc.rescore(card, [str(rule)]).results if r.rule == "t.top_calls")
    assert result.value == 1.0  # unknown nesting read as top level through coalesce


def test_digest_line_of_a_step_without_nesting_is_the_0_1_line():
    # 14 values after episode_id in a 0.1 card; the two 0.2 columns add nothing when null.
    base = [0, "message", None, "user", None, None, None, "hi", None, None, None, None, None, None]
    assert episode_digest_line([*base, None, None]) == episode_digest_line(base)
    assert hashlib.sha256(episode_digest_line([*base, None, None])).hexdigest() == hashlib.sha256(
        (json.dumps(base, separators=(",", ":")) + "\n").encode()).hexdigest()
    assert episode_digest_line([*base, 3, 1]) != episode_digest_line(base)
