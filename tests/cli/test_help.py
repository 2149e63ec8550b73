"""Every command's --help: an example, no Python type names, completion available."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rollout_cards.cli import EXAMPLES, cli_command, main


def _commands() -> list[str]:
    return sorted(cli_command().commands)


@pytest.mark.parametrize("name", _commands())
def test_help_has_an_example_and_no_type_names(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert name in EXAMPLES, f"add an example for `rcard {name}` to rollout_cards.cli.EXAMPLES"
    assert main([name, "--help"]) == 0
    text = capsys.readouterr().out
    assert "Example:" in text and EXAMPLES[name].split()[1] == name
    assert not re.search(r"<bool>|list\[|<class |NoneType", text), text


def test_root_help_offers_completion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--install-completion" in capsys.readouterr().out


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "rollout_cards", "--version"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.startswith("rcard (rollout-cards)")
