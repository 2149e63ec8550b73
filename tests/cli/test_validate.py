"""rcard validate: exit codes 0 / 1 / 2, text and JSON output, options."""

from __future__ import annotations

import importlib
import json
import sys

import jsonschema
import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import FIXTURE_CARDS, REPO

BAD = REPO / "fixtures" / "bad"
sys.path.insert(0, str(REPO / "fixtures"))


def run(*args):
    return CliRunner().invoke(app, ["validate", *map(str, args)])


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURE_CARDS.iterdir()))
def test_fixture_cards_exit_0(name):
    result = run(FIXTURE_CARDS / name)
    assert result.exit_code == 0, result.output
    assert ": VALID" in result.output.splitlines()[0]


def test_warnings_pass_unless_strict():
    assert run(FIXTURE_CARDS / "minimal").exit_code == 0
    result = run(FIXTURE_CARDS / "minimal", "--strict")
    assert result.exit_code == 1 and "INVALID" in result.output and "scope-license-missing" in result.output


def test_an_invalid_card_exits_1_and_names_the_code_and_place():
    result = run(BAD / "file-digest-mismatch")
    assert result.exit_code == 1
    assert "file-digest-mismatch" in result.output and "rules/synthetic.success_rate.yaml" in result.output


def test_json_output_follows_the_schema():
    result = run(BAD / "step-seq-not-contiguous", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    jsonschema.validate(data, json.loads((REPO / "schemas" / "report-0.2.schema.json").read_text()))
    assert data["outcome"] == "invalid" and data["counts"]["error"] == 1
    (finding,) = [f for f in data["findings"] if f["severity"] == "error"]
    assert finding["location"] == {"file": "steps.parquet", "pointer": None, "row": 1, "column": "seq"}


def test_max_findings_caps_and_says_so():
    data = json.loads(run(BAD / "drop-redaction-not-applied", "--format", "json", "--max-findings", "1").output)
    assert len(data["findings"]) == 1 and data["omitted"] == {"drop-redaction-not-applied": 2}
    assert data["counts"]["error"] == 3
    assert "2 more drop-redaction-not-applied" in run(BAD / "drop-redaction-not-applied", "--max-findings", "1").output


def test_no_replay_skips_replay():
    data = json.loads(run(FIXTURE_CARDS / "synthetic", "--no-replay", "-f", "json").output)
    assert {c["name"]: c["status"] for c in data["checks"]}["rules.replay"] == "skipped"


@pytest.mark.parametrize("args", [["/nonexistent/card"], [FIXTURE_CARDS / "minimal", "--max-findings", "0"],
                                  [FIXTURE_CARDS / "minimal", "--format", "xml"], []])
def test_usage_errors_exit_2(args):
    assert run(*args).exit_code == 2


def test_an_internal_failure_exits_2_and_is_not_called_invalid(monkeypatch):
    validate_module = importlib.import_module("rollout_cards.validate")

    def broken(ctx):
        raise RuntimeError("bug in a check")

    monkeypatch.setattr(validate_module, "CHECKS", (("layout.members", broken, False),))
    monkeypatch.delenv("RCARD_DEBUG", raising=False)
    result = run(FIXTURE_CARDS / "minimal")
    assert result.exit_code == 2
    assert "VALIDATION FAILED (internal error)" in result.output and "INVALID" not in result.output
    data = json.loads(run(FIXTURE_CARDS / "minimal", "-f", "json").output)
    assert data["outcome"] == "internal-error" and data["findings"][0]["code"] == "internal-error"
