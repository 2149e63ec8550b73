"""Reading Inspect logs: .json streaming (one or two passes, size caps), .eval archives, journals."""

from __future__ import annotations

import json
import zipfile

import pytest

from rollout_cards.errors import SourceFormatError
from tests.importers.conftest import SOURCES, run_import

SYNTHETIC = SOURCES / "inspect" / "synthetic.json"


def test_samples_before_the_header_are_read_in_a_second_pass(tmp_path):
    log = json.loads(SYNTHETIC.read_text())
    reordered = {"samples": log.pop("samples"), **log}
    path = tmp_path / "reordered.json"
    path.write_text(json.dumps(reordered))
    result, _ = run_import("inspect", [path], tmp_path / "card")
    assert result.episodes == 4


def test_truncated_json_log_names_the_sample(tmp_path):
    data = SYNTHETIC.read_bytes()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: data.index(b'"uuid-2-1"')])
    with pytest.raises(SourceFormatError) as exc:
        run_import("inspect", [path], tmp_path / "out")
    assert exc.value.record == "samples[2]" and "truncated" in str(exc.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json"]


def test_a_zip_that_is_not_an_inspect_log(tmp_path):
    with pytest.raises(SourceFormatError, match="not an Inspect log"):
        run_import("inspect", [SOURCES / "inspect" / "not-an-inspect-log.eval"], tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_an_unfinished_eval_log_is_read_from_its_journal(tmp_path):
    log = json.loads(SYNTHETIC.read_text())
    samples = log.pop("samples")
    start = {k: log[k] for k in ("version", "eval", "plan")}
    path = tmp_path / "running.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("_journal/start.json", json.dumps(start))
        zf.writestr(f"samples/{samples[0]['id']}_epoch_{samples[0]['epoch']}.json", json.dumps(samples[0]))
    result, card = run_import("inspect", [path], tmp_path / "card")
    assert result.episodes == 1 and result.rules == []
    assert "no header.json" in " ".join(result.notes)
    (missing,) = [d for d in card.manifest.drops if d.target == "episodes"]
    assert missing.count == 3  # 2 samples x 2 epochs planned, 1 logged


def test_json_logs_and_samples_are_size_capped(tmp_path, monkeypatch):
    from rollout_cards.importers import inspect_log

    monkeypatch.setattr(inspect_log, "MAX_JSON_LOG_BYTES", 1000)
    with pytest.raises(SourceFormatError, match="limit for a .json log"):
        run_import("inspect", [SYNTHETIC], tmp_path / "a")
    monkeypatch.setattr(inspect_log, "MAX_JSON_LOG_BYTES", 1 << 40)
    monkeypatch.setattr(inspect_log, "MAX_SAMPLE_CHARS", 1500)  # the header fits, a sample does not
    monkeypatch.setattr("rollout_cards.importers.json_stream._CHUNK", 64)
    with pytest.raises(SourceFormatError, match="refusing to buffer") as exc:
        run_import("inspect", [SYNTHETIC], tmp_path / "b")
    assert exc.value.record == "samples[0]"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_json_log_with_a_byte_order_mark_says_so(tmp_path):
    from typer.testing import CliRunner

    from rollout_cards.cli import app

    log = tmp_path / "bom.json"
    log.write_bytes(b"\xef\xbb\xbf" + json.dumps({"eval": {"task": "t", "model": "m"}, "samples": []}).encode())
    got = CliRunner().invoke(app, ["import", "inspect", str(log), "-o", str(tmp_path / "card")])
    assert got.exit_code == 1, got.output
    assert "bom.json: starts with a byte-order mark; remove it" in got.output
