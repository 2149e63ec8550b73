from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import FIXTURE_CARDS

CARDS = sorted(p.name for p in FIXTURE_CARDS.iterdir())


@pytest.mark.parametrize("name", CARDS)
def test_info_text_on_every_fixture(name):
    result = CliRunner().invoke(app, ["info", str(FIXTURE_CARDS / name)])
    assert result.exit_code == 0, result.output
    assert "Episodes by agent and terminal state" in result.output


def test_info_json_counts_match_the_table():
    result = CliRunner().invoke(app, ["info", str(FIXTURE_CARDS / "synthetic"), "--format", "json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["episodes"] == 216 and data["planned_episodes"] == 216
    by_agent = data["status_by_agent"]
    assert sum(sum(c.values()) for c in by_agent.values()) == 216
    assert by_agent["alpha"]["cancelled"] == 1 and by_agent["beta"]["skipped"] == 1
    assert data["scope"]["license"] == "CC-BY-4.0"
    assert data["drops"][0]["target"] == "steps.cost_usd"


def test_minimal_card_says_license_not_declared():
    result = CliRunner().invoke(app, ["info", str(FIXTURE_CARDS / "minimal")])
    assert "NOT DECLARED" in result.output


def test_info_on_missing_path_exits_1_with_a_message():
    result = CliRunner().invoke(app, ["info", "/nonexistent/card"])
    assert result.exit_code == 1
    assert "does not exist" in result.output
    assert "Traceback" not in result.output


def test_version():
    from rollout_cards import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output and "rollout-card/0.2" in result.output
