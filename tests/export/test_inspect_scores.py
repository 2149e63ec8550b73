"""`rcard export inspect-scores`: the records Inspect's precomputed_scores reads, checked by Inspect."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.export.inspect_scores import score_records
from tests.conftest import external
from tests.importers.conftest import run_import

LOG = "inspect/inspect-0.3.285/2026-12-01T08-28-13-00-00_arith_Hh2t2nyvhoxHw7V9XZW4PJ.eval"
REGRADE = """\
rule: regrade.errors_excluded
kind: regrade
description: match accuracy with errored samples left out
score: "score.match"
on_status: {error: exclude}
aggregate: {group_by: [agent]}
"""


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    path = external(LOG)
    out = tmp_path_factory.mktemp("ins") / "card"
    run_import("inspect", [path], out)
    return out


def test_records_carry_sample_id_epoch_and_the_rule_value(card, tmp_path):
    rule = tmp_path / "r.yaml"
    rule.write_text(REGRADE)
    opened = rc.open(card)
    records = score_records(opened, str(rule))
    eps = opened.episodes(columns=["episode_id", "task_id", "meta.epoch", "status", "score.match"]).to_pylist()
    kept = [e for e in eps if e["status"] != "error"]
    assert len(records) == len(kept)
    by_episode = {r["metadata"]["episode_id"]: r for r in records}
    for e in kept:
        r = by_episode[e["episode_id"]]
        assert r["id"] == e["task_id"].split("/", 1)[1] and r["epoch"] == e["meta.epoch"]
        assert r["value"] == (e["score.match"] if e["score.match"] is not None else 0.0)


def test_a_reduced_rule_gives_records_without_epoch(card, tmp_path):
    out = tmp_path / "s.json"
    result = CliRunner().invoke(app, ["export", "inspect-scores", str(card), "--rule",
                                      "inspect.arith.match.accuracy", "-o", str(out)])
    assert result.exit_code == 0, result.output
    records = json.loads(out.read_text())
    assert records and all("epoch" not in r for r in records)
    assert len({r["id"] for r in records}) == len(records)


def test_an_unknown_rule_exits_with_a_message(card, tmp_path):
    result = CliRunner().invoke(app, ["export", "inspect-scores", str(card), "--rule", "no.such.rule",
                                      "-o", str(tmp_path / "s.jsonl")])
    assert result.exit_code in (1, 2) and "Traceback" not in result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_inspect_reads_the_scores_and_its_metric_equals_the_rule(card, tmp_path):
    pytest.importorskip("inspect_ai", reason="the round trip needs inspect-ai (pip install 'rollout-cards[inspect]')")
    from inspect_ai import score
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import precomputed_scores

    rule = tmp_path / "r.yaml"
    rule.write_text(REGRADE)
    out = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(app, ["export", "inspect-scores", str(card), "--rule", str(rule), "-o", str(out)])
    assert result.exit_code == 0, result.output
    log = read_eval_log(str(external(LOG)))
    scored = score(log, precomputed_scores(str(out)), action="overwrite", model="mockllm/model", display="none")
    records = {(r["id"], r["epoch"]): r["value"] for r in map(json.loads, out.read_text().splitlines())}
    got = {(str(s.id), s.epoch): next(iter(s.scores.values())).value for s in scored.samples if s.scores}
    assert got == records  # every record reached its sample and epoch, and nothing else was scored
    accuracy = scored.results.scores[0].metrics["accuracy"].value
    ours = next(r for r in rc.rescore(rc.open(card), [str(rule)]).results if r.rule == "regrade.errors_excluded")
    assert accuracy == pytest.approx(ours.value)


@pytest.mark.parametrize("epoch", [["abc", "x"], [float("nan"), 1.0], [float("inf"), 1.0], [1.5, 2.0], [0, 1],
                                   [True, False]])
def test_a_meta_epoch_that_is_not_a_whole_number_from_1_is_the_cards_error(tmp_path, epoch):
    """int() of the card's meta.epoch raised ValueError / OverflowError (exit 2), and 1.5 became
    epoch 1 (a false "two values" error); now exit 1 naming the card, the episode and the value."""
    import pyarrow as pa

    root = tmp_path / "card"
    writer = rc.CardWriter(root, id="e", title="e", timestamps=False)
    ids = ["e0", "e1"]
    writer.write_episodes(pa.table({"episode_id": ids, "task_id": ["t0", "t0"], "agent": ["a", "a"],
                                    "status": ["completed"] * 2, "score.match": [1.0, 0.0], "meta.epoch": epoch}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0, 0], "kind": ["message"] * 2}))
    writer.close()
    rule = tmp_path / "r.yaml"
    rule.write_text(REGRADE)
    result = CliRunner().invoke(app, ["export", "inspect-scores", str(root), "--rule", str(rule),
                                      "-o", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 1, result.output
    assert f"{root}: episode 'e0' has meta.epoch {epoch[0]!r}" in result.output, result.output
    assert not (tmp_path / "s.jsonl").exists()
