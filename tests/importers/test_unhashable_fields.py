"""A source field that an importer looks up in a table of known values (`source` -> role) may be
any JSON value in a hostile or broken file: a list or an object there is the file's error (exit 1
naming the file and the field), not a TypeError from the lookup (exit 2, internal error). Found by
an exhaustive sweep replacing each value of the fuzz seeds with other JSON types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import REPO

UNHASHABLE = ([1, {}], {"a": [None]})


def _import(fmt: str, source: Path, out: Path):
    return CliRunner().invoke(app, ["import", fmt, str(source), "-o", str(out)])


@pytest.mark.parametrize("value", UNHASHABLE, ids=["array", "object"])
def test_atif_step_source_of_another_type(tmp_path, value):
    doc = json.loads((REPO / "fixtures" / "sources" / "atif" / "trajectory.json").read_text())
    doc["steps"][0]["source"] = value
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(doc))
    result = _import("atif", path, tmp_path / "card")
    assert result.exit_code == 1, result.output
    assert "trajectory.json" in result.output and "steps[0].source is a JSON" in result.output
    assert "internal error" not in result.output


def _openhands_line(history: list) -> str:
    return json.dumps({"instance_id": "i0", "instruction": "do", "metadata": {"llm": {"model": "m"}},
                       "history": history, "metrics": None, "error": None, "test_result": {}}) + "\n"


@pytest.mark.parametrize("value", UNHASHABLE, ids=["array", "object"])
@pytest.mark.parametrize("history", [
    # V0 event stream (OpenHands <= 0.x): source / action / message
    [{"id": 0, "source": "user", "action": "message", "message": "hi", "args": {"content": "hi"}},
     {"id": 1, "source": "agent", "action": "finish", "args": {}}],
    # V1 SDK events: kind / source
    [{"kind": "MessageEvent", "source": "user",
      "llm_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
     {"kind": "PauseEvent", "source": "user"}],
], ids=["v0", "v1"])
def test_openhands_event_source_of_another_type(tmp_path, history, value):
    history[1]["source"] = value
    path = tmp_path / "output.jsonl"
    path.write_text(_openhands_line(history))
    result = _import("openhands", path, tmp_path / "card")
    assert result.exit_code == 1, result.output
    assert "output.jsonl" in result.output and ".source is a JSON" in result.output
    assert "internal error" not in result.output


@pytest.mark.parametrize("value", UNHASHABLE, ids=["array", "object"])
def test_inspect_span_type_of_another_type(tmp_path, value):
    doc = json.loads((REPO / "fixtures" / "sources" / "inspect" / "synthetic.json").read_text())
    events = doc["samples"][0]["events"]
    at = next(i for i, ev in enumerate(events) if ev.get("event") == "span_begin" and "type" in ev)
    events[at]["type"] = value
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc))
    result = _import("inspect", path, tmp_path / "card")
    assert result.exit_code == 1, result.output
    assert "log.json" in result.output and f"events[{at}].type is a JSON" in result.output
    assert "internal error" not in result.output
