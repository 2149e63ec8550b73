"""The exception tree's messages: one line per problem, whatever the package's names hold."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.errors import ManifestError, Problem
from tests.conftest import FIXTURE_CARDS


def test_a_manifest_problem_stays_on_its_line() -> None:
    err = ManifestError("card.json", [Problem("/a\nb", "bad\rvalue"), Problem("/c", "ok")])
    lines = str(err).splitlines()
    assert lines == ["card.json: 2 problem(s)", "  - /a\\nb: bad\\rvalue", "  - /c: ok"]


def test_a_newline_in_a_card_json_key_cannot_pose_as_a_line_of_rcard(tmp_path: Path) -> None:
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    manifest = json.loads((card / "card.json").read_text())
    manifest["evil\nrcard: the card is valid"] = 1
    (card / "card.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["info", str(card)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert not any(line.startswith("rcard: the card") for line in lines), result.output
    assert lines[0].startswith("rcard: ") and all(line.startswith("  - ") for line in lines[1:]), result.output
