"""The per-value cap (io.value_sizes) seen through the importers: one text or JSON value over
`max_value_mb` is exit 1 naming the source file, the record, the episode (and step), the
column, the size and the cap, with the fix; a value under the cap imports. One check in the
writer's bulk path serves every importer; five formats of different shapes show it."""

from __future__ import annotations

import json
import zipfile

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.errors import ImporterError, SourceFormatError
from tests.importers.conftest import SOURCES, assert_valid, run_import
from tests.importers.test_tau2_bench import _results, _sim

MIB = 1024**2
OVER = "x" * (MIB + MIB // 2)  # 1.5 MiB: over a 1 MiB cap
UNDER = "é" * (MIB // 2 - 1000)  # just under 1 MiB of UTF-8 (2 bytes a character)


def _inspect_log(result: str) -> dict:
    log = json.loads((SOURCES / "inspect" / "synthetic.json").read_text())
    tool = next(e for e in log["samples"][0]["events"] if e["event"] == "tool")
    tool["result"] = result
    return log


def _inspect_eval(tmp_path, text: str):
    log = _inspect_log(text)
    samples = log.pop("samples")
    path = tmp_path / "big.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", json.dumps(log))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
    return "inspect", path, {}, "samples/1_epoch_1.json", "content"


def _inspect_json(tmp_path, text: str):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_inspect_log(text)))
    return "inspect", path, {}, "samples[0]", "content"


def _tau2(tmp_path, text: str):
    sim = _sim(0, "t0", "user_stop", reward=1.0)
    sim["messages"][2]["content"] = text
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_results([sim], ["t0"])))
    return "tau2-bench", path, {}, "sim-0", "content"


def _chat(tmp_path, text: str):
    lines = (SOURCES / "chat" / "chat.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record["messages"][0]["content"] = text
    lines[1] = json.dumps(record)
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return "chat-jsonl", path, {"mapping": str(SOURCES / "chat" / "mapping.yaml")}, "line 2", "content"


def _swe_agent(tmp_path, text: str):
    doc = {"environment": "main", "info": {"exit_status": "submitted", "submission": "diff"},
           "history": [{"role": "system", "content": "s"}],
           "trajectory": [{"action": "ls", "observation": "a", "response": "r", "thought": "t"}],
           "replay_config": None}
    doc["history"].append({"role": "user", "content": text})
    path = tmp_path / "x__y-1.traj"
    path.write_text(json.dumps(doc))
    return "swe-agent", path, {}, "x__y-1.traj", "content"


SOURCES_OF = {"inspect-eval": _inspect_eval, "inspect-json": _inspect_json, "tau2-bench": _tau2,
              "chat-jsonl": _chat, "swe-agent": _swe_agent}


@pytest.mark.parametrize("kind", sorted(SOURCES_OF))
def test_a_value_over_the_cap_stops_the_import_naming_where_it_is(tmp_path, kind):
    fmt, path, options, record, column = SOURCES_OF[kind](tmp_path, OVER)
    with pytest.raises(SourceFormatError) as err:
        run_import(fmt, [path], tmp_path / "card", options=options, max_value_mb=1)
    text = str(err.value)
    assert str(path) in text and record in text, text
    assert f"{column} is 1.5 MiB ({len(OVER):,} bytes), more than the 1.0 MiB" in text, text
    assert "episode " in text and ", step " in text and "--max-value-mb" in text, text
    assert not (tmp_path / "card").exists()  # nothing left behind
    # the same source under a cap it fits imports whole, the value intact
    _, card = run_import(fmt, [path], tmp_path / "card2", options=options, max_value_mb=2)
    assert max(len(c or "") for c in card.steps(columns=["content"]).column("content").to_pylist()) == len(OVER)


@pytest.mark.parametrize("kind", ["inspect-eval", "chat-jsonl"])
def test_a_value_just_under_the_cap_imports_and_validates(tmp_path, kind):
    fmt, path, options, _, _ = SOURCES_OF[kind](tmp_path, UNDER)
    _, card = run_import(fmt, [path], tmp_path / "card", options=options, max_value_mb=1)
    assert UNDER in card.steps(columns=["content"]).column("content").to_pylist()
    assert_valid(tmp_path / "card")


def test_the_cli_option_is_exit_1_over_and_0_once_raised(tmp_path):
    fmt, path, options, _, _ = _chat(tmp_path, OVER)
    base = ["import", fmt, str(path), "--mapping", options["mapping"]]
    result = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "a"), "--max-value-mb", "1"])
    assert result.exit_code == 1, result.output
    assert "more than the 1.0 MiB a single value" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "b"), "--max-value-mb", "2"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "c"), "--max-value-mb", "0"])
    assert result.exit_code == 2  # a usage error, not a finding


def test_the_default_cap_is_64_mib(tmp_path):
    big = "y" * (64 * MIB + 1)
    fmt, path, options, _, _ = _chat(tmp_path, big)
    del big
    with pytest.raises(SourceFormatError, match=r"more than the 64\.0 MiB a single value"):
        run_import(fmt, [path], tmp_path / "card", options=options)


@pytest.mark.parametrize("bad", [0, 2048, 1.5, True, "64"])
def test_the_library_keyword_is_checked(tmp_path, bad):
    fmt, path, options, _, _ = _chat(tmp_path, "short")
    with pytest.raises(ImporterError, match="max_value_mb"):
        run_import(fmt, [path], tmp_path / "card", options=options, max_value_mb=bad)


def test_an_episode_column_over_the_cap_is_named_too(tmp_path):
    log = _inspect_log("3")
    log["samples"][0]["input"] = OVER  # becomes the episode's task.input (JSON text)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(log))
    with pytest.raises(SourceFormatError) as err:
        run_import("inspect", [path], tmp_path / "card", max_value_mb=1)
    text = str(err.value)
    assert "samples[0]" in text and "task.input is 1.5 MiB" in text and ", step" not in text, text
