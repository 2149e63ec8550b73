"""Argument values taken without typer's pydantic adapters (cli/deferred_params.py): the same
values as typer's own coercion, and typer's own errors for everything else."""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path

import pytest

from rollout_cards.cli import cli_command, main

ROOT = Path(__file__).resolve().parents[2]
typer_coercion = pytest.importorskip("typer._coercion", reason="the deferral applies to typer's coercion layer")


def _params():
    def walk(command, prefix):
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{prefix} {name}")
        for param in command.params:
            if hasattr(param, "type_descriptor"):
                yield f"{prefix}:{param.name}", param

    return list(walk(cli_command(), "rcard"))


def _samples(annotation):
    """Values click hands to typer for `annotation`: what a command line gives and the defaults."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [*annotation, *(m.value for m in annotation), "no-such-choice"]
    if getattr(annotation, "__args__", None) == (str,):
        return [("a", "b/c"), ("",), ["x"]]
    return ["some text", "", "3", "0", "x", "1.5", "nan", "true"]


@pytest.mark.parametrize(("where", "param"), _params(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_parameter_coerces_as_typer_does(where, param):
    """The deferred parameter against typer's own, built from the same descriptor, on values of
    every kind (those typer would convert or refuse included)."""
    deferred = param._runtime_param
    assert type(deferred).__name__ == "_Deferred", where
    reference = typer_coercion.build_runtime_param(param.type_descriptor)
    ctx = cli_command().make_context("rcard", ["--help"], resilient_parsing=True)
    for value in _samples(param.type_descriptor.annotation):
        outcomes = []
        for runtime in (reference, deferred):
            try:
                got = runtime.coerce(value, param=param, ctx=ctx)
                outcomes.append(("value", type(got), repr(got)))  # repr: nan equals nan
            except Exception as exc:  # noqa: BLE001 - the error itself is compared
                outcomes.append(("error", type(exc), str(exc)))
        assert outcomes[0] == outcomes[1], (where, value)
    param._runtime_param = deferred  # a converted value above made typer's own the parameter's


def test_validating_the_minimal_card_builds_no_typer_adapter():
    """typer's adapters (pydantic TypeAdapters, one per parameter): the minimal card's arguments
    need none of them (fails on the old code). `validate --help` loads no pydantic at all
    (tests/test_package.py)."""
    code = ("import sys\nfrom rollout_cards.cli import main\n"
            "assert main(['validate', 'fixtures/cards/minimal', '--format', 'json']) in (0, 1)\n"
            "print('typer._adapters' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "False"


def test_a_value_to_convert_goes_through_typer(capsys):
    """--max-findings needs an int: typer converts it, and refuses 0 with its own message."""
    card = str(ROOT / "fixtures" / "cards" / "minimal")
    assert main(["validate", card, "--max-findings", "2"]) == 0
    assert main(["validate", card, "--max-findings", "0"]) == 2
    flat = " ".join(capsys.readouterr().err.replace("│", " ").split())  # the error box wraps
    assert "Invalid value for '--max-findings': Input should be greater than or equal to 1" in flat
