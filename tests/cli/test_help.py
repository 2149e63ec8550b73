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
    assert not re.search(r"<bool>|list\[|<class |NoneType|<(str|int|float)\b|\b(int|float) range", text), text


def test_root_help_offers_completion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--install-completion" in capsys.readouterr().out


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "rollout_cards", "--version"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.startswith("rcard (rollout-cards)")


def _callbacks() -> list[tuple[str, object]]:
    import typer

    from rollout_cards.cli import app

    def walk(t: typer.Typer, prefix: str) -> list[tuple[str, object]]:
        found = [(f"{prefix}{c.name or c.callback.__name__}", c.callback) for c in t.registered_commands]
        for g in t.registered_groups:
            found += walk(g.typer_instance, f"{prefix}{g.name} ")
            if g.typer_instance.registered_callback:
                found.append((f"{prefix}{g.name}", g.typer_instance.registered_callback.callback))
        return found

    return [*walk(app, ""), ("(root)", app.registered_callback.callback)]


@pytest.mark.parametrize(("name", "callback"), _callbacks(), ids=lambda v: v if isinstance(v, str) else "")
def test_command_annotations_are_objects_not_strings(name: str, callback: object) -> None:
    # typer evals string annotations (`from __future__ import annotations`) on every run:
    # ~40 ms of a small `rcard validate`. The command modules keep real annotations.
    import inspect

    strings = {k: v for k, v in inspect.get_annotations(callback).items() if isinstance(v, str)}
    assert not strings, f"rcard {name}: string annotations {sorted(strings)}; drop `from __future__ import annotations`"
