"""A card's names must not drive the terminal: an agent named with an ANSI escape (ESC[2J clears
the screen) or a bidi override (U+202E shows the rest of the line reversed, so two groups can
look swapped) is printed escaped by info, rescore, power and rliable's text output — before,
only error messages were escaped and these printed the raw characters. JSON output keeps the
exact names (json escapes what JSON must)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app

NAMES = ["\x1b[2Jclear", "\u202egpt-4o", "plain"]
RULE = """rule: h.success
version: 1
kind: regrade
score: "score.success"
on_missing: 0
aggregate:
  statistic: mean
  group_by: [agent]
  unit: task_id
  interval: {method: cluster_t, level: 0.95}
"""


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    n = 24  # every (agent, run, task) cell once: 3 x 2 x 4
    ids = [f"e{i}" for i in range(n)]
    writer = rc.CardWriter(root / "card", id="names", title="names", timestamps=False)
    writer.write_episodes(pa.table({
        "episode_id": ids, "task_id": [f"t{i // 6}" for i in range(n)], "agent": [NAMES[i % 3] for i in range(n)],
        "run_id": [f"r{i // 3 % 2}" for i in range(n)], "status": ["completed"] * n,
        "score.success": [float(i % 5 == 0) for i in range(n)]}))
    writer.write_steps(pa.table({"episode_id": ids, "seq": [0] * n, "kind": ["message"] * n}))
    writer.close()
    (root / "r.yaml").write_text(RULE)
    return root / "card", root / "r.yaml"


@pytest.mark.parametrize("command", ["info", "rescore", "power", "rliable"])
def test_names_are_escaped_in_text_output(card, command):
    path, rule = card
    argv = [command, str(path)] + ([] if command == "info" else ["--rule", str(rule)])
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "\\x1b[2Jclear" in result.output and "\\u202egpt-4o" in result.output


def test_json_output_keeps_the_exact_names(card):
    path, rule = card
    result = CliRunner().invoke(app, ["rescore", str(path), "--rule", str(rule), "--format", "json"])
    assert result.exit_code == 0, result.output
    groups = {r["group"]["agent"] for r in json.loads(result.output)["results"]}
    assert groups == set(NAMES)
