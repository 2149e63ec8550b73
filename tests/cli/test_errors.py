"""The CLI turns bad input into one escaped line and the right exit code, never a traceback."""

from __future__ import annotations

import shutil
import sys

from typer.testing import CliRunner

from rollout_cards.cli import app, printable
from tests.conftest import FIXTURE_CARDS, REPO

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402


def test_control_characters_are_escaped():
    assert printable("rules/\x1b]0;pwned\x07.yaml \u202e") == "rules/\\x1b]0;pwned\\x07.yaml \\u202e"
    assert printable("two\nlines") == "two\nlines"


def test_corrupt_table_is_invalid_input_not_an_internal_error(tmp_path):
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    (card / "episodes.parquet").write_bytes(b"not parquet at all" * 100)
    bad_cards.rehash(card)  # digests match: the table itself is what cannot be read
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.content\n    action: replace\n    reason: privacy\n")
    for args in (["info", str(card)], ["rescore", str(card)],
                 ["redact", str(card), "--spec", str(spec), "-o", str(tmp_path / "out")]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert "cannot be read" in result.output and "rcard validate" in result.output
        assert "internal error" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_rescore_flags_published_numbers_that_do_not_replay(tmp_path):
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    rule = card / "rules" / "synthetic.success_rate.yaml"
    rule.write_text(rule.read_text().replace("value: 0.3925", "value: 0.4925"))
    bad_cards.rehash(card)
    result = CliRunner().invoke(app, ["rescore", str(card)])
    assert result.exit_code == 0
    assert "1 of 2 published numbers do NOT match" in result.output
    assert "reported value 0.4925 for agent=alpha does not match the recomputed 0.39252" in result.output
    clean = CliRunner().invoke(app, ["rescore", str(FIXTURE_CARDS / "synthetic")])
    assert "all 2 published numbers match their recomputation" in clean.output


def test_unexpected_exception_outside_the_library_is_an_internal_error(monkeypatch, capsys):
    import importlib

    from rollout_cards.cli import main

    def broken(*args, **kwargs):
        raise KeyError("boom")

    # The command imports its renderer when it runs; patch the module it imports it from.
    monkeypatch.setattr(importlib.import_module("rollout_cards.rules.render"), "render", broken)
    monkeypatch.delenv("RCARD_DEBUG", raising=False)
    assert main(["rescore", str(FIXTURE_CARDS / "synthetic")]) == 2
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "Traceback" not in err
