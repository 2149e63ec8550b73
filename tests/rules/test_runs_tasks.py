"""`rcard rliable` on a small card, against matrices built here from the rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollout_cards.cli import main
from rollout_cards.errors import RuleError
from rollout_cards.model.rule import Rule
from rollout_cards.rules.runs_tasks import runs_tasks_view
from rollout_cards.stats.runs_tasks import iqm_of, optimality_gap, probability_of_improvement
from tests.rules.conftest import build_card

RULE = Rule.model_validate({"rule": "t.r", "score": "score.x", "aggregate": {"group_by": ["agent"]}})


def _rows():
    rng = np.random.default_rng(2)
    rows, i = [], 0
    for agent, shift in (("a", 0.0), ("b", 0.15)):
        for run in range(5):
            for task in range(16):
                for _ in range(2):  # two attempts per (run, task): cells are means
                    rows.append({"episode_id": f"e{i}", "task_id": f"t{task:02d}", "run_id": f"r{run}", "status": "completed",
                                 "agent": agent, "score.x": float(np.clip(task / 16 + shift + rng.normal(0, 0.1), 0, 1.2))})
                    i += 1
    return rows


def _matrix(rows, agent):
    m = np.zeros((5, 16))
    for run in range(5):
        for task in range(16):
            m[run, task] = np.mean([r["score.x"] for r in rows if r["agent"] == agent and r["run_id"] == f"r{run}" and r["task_id"] == f"t{task:02d}"])
    return m


def test_view_matches_hand_built_matrices(tmp_path):
    rows = _rows()
    card = build_card(tmp_path / "c", rows)
    report = runs_tasks_view(card, RULE, resamples=200, taus=(0.5,))
    a, b = _matrix(rows, "a"), _matrix(rows, "b")
    ga, gb = report.groups
    assert ga["statistics"]["iqm"]["value"] == pytest.approx(iqm_of(a))
    assert gb["statistics"]["optimality_gap (gamma=1)"]["value"] == pytest.approx(optimality_gap(b))
    assert ga["profile"][0]["fraction_above"] == pytest.approx((a > 0.5).mean())
    (poi,) = report.improvement
    assert poi["probability"] == pytest.approx(probability_of_improvement(a, b))
    assert poi["low"] <= poi["probability"] <= poi["high"]


def test_cli_json_and_missing_cells(tmp_path, capsys):
    rows = _rows()
    path = tmp_path / "c"
    build_card(path, rows)
    rule = tmp_path / "r.yaml"
    rule.write_text("rule: t.r\nscore: score.x\naggregate: {group_by: [agent]}\n")
    assert main(["rliable", str(path), "--rule", str(rule), "--resamples", "100", "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["details"]["generator"].startswith("numpy.random.default_rng") and len(out["groups"]) == 2
    hole = [r for r in rows if not (r["agent"] == "a" and r["run_id"] == "r0" and r["task_id"] == "t03")]
    holes = build_card(tmp_path / "h", hole)
    with pytest.raises(RuleError, match=r"lacks 1 \(run, task\) cells"):
        runs_tasks_view(holes, RULE, resamples=100)
