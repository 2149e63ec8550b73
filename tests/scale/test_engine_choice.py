"""Choosing an engine: without Ray installed, --engine ray is one clear usage error naming the
extra (exit 2); unknown engines and --address without Ray are usage errors too. No Ray needed."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.errors import EngineError, RuleError
from rollout_cards.rules.rescore import rescore
from tests.conftest import FIXTURE_CARDS

CARD = str(FIXTURE_CARDS / "synthetic")


@pytest.fixture
def no_ray(monkeypatch):
    """Ray made unimportable, as on an install without the extra."""
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)


def test_without_ray_the_library_names_the_extra(no_ray):
    with pytest.raises(EngineError, match=r"pip install 'rollout-cards\[ray\]'"):
        rescore(CARD, engine="ray")


def test_without_ray_the_cli_exits_2_naming_the_extra(no_ray):
    result = CliRunner().invoke(app, ["rescore", CARD, "--engine", "ray"])
    assert result.exit_code == 2
    assert "rollout-cards[ray]" in result.stderr and "Traceback" not in result.output
    assert result.stdout == ""


def test_an_unknown_engine_is_a_usage_error():
    with pytest.raises(RuleError, match="unknown engine 'spark'"):
        rescore(CARD, engine="spark")
    assert CliRunner().invoke(app, ["rescore", CARD, "--engine", "spark"]).exit_code == 2


def test_address_without_the_ray_engine_is_a_usage_error():
    result = CliRunner().invoke(app, ["rescore", CARD, "--address", "ray://head:10001"])
    assert result.exit_code == 2 and "--engine ray" in result.stderr
