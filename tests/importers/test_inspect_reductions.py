"""Inspect's per-sample reductions (each sample's score reduced over epochs, one set per scorer x
reducer) are kept whole as an artifact of the card, referenced from meta.inspect.logs[].reductions
with what each set holds — for .eval logs (reductions.json, which the importer did not read) and
.json logs (the header's `reductions`, which were copied into card.json). References: Inspect's own
`read_eval_log` for .eval logs; json.load of the file for .json logs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.conftest import external

LOGS = ["inspect/inspect-0.3.285/2026-12-01T08-28-13-00-00_arith_Hh2t2nyvhoxHw7V9XZW4PJ.eval",
        "inspect/inspect-0.3.285/2026-12-01T08-28-36-00-00_mcq_eyWbPhBuprdGGCQYdr8DEK.eval",
        "inspect/log_streaming.eval",
        "inspect/inspect-0.3.285/2026-12-01T08-30-51-00-00_mcq_7AZHZLVce5zatHdaC2RYF8.json",
        "inspect/2025-05-12T20-27-36-04-00_browser.json"]


def _card(log: Path, out: Path) -> dict:
    result = CliRunner().invoke(app, ["import", "inspect", str(log), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(app, ["validate", str(out)]).exit_code == 0
    return json.loads((out / "card.json").read_text())


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _reference(log: Path) -> list[dict]:
    if log.suffix == ".json":
        return json.loads(log.read_text()).get("reductions") or []
    read_eval_log = pytest.importorskip("inspect_ai.log", reason="needs inspect-ai (the inspect extra)").read_eval_log
    return [r.model_dump(exclude_defaults=True) for r in read_eval_log(str(log)).reductions or []]


@pytest.mark.parametrize("rel", LOGS)
def test_reductions_are_kept_whole_as_an_artifact(rel, tmp_path):
    log = external(rel)
    card = _card(log, tmp_path / "card")
    meta = card["meta"]["inspect"]["logs"][0]
    reference = _reference(log)
    if not reference:
        assert "reductions" not in meta
        return
    kept = meta["reductions"]
    data = (tmp_path / "card" / "artifacts" / kept["artifact"]).read_bytes()
    assert kept["bytes"] == len(data)
    stored = json.loads(data)
    assert [(s["scorer"], s["reducer"], s["samples"]) for s in kept["sets"]] == [
        (r["scorer"], r.get("reducer"), len(r["samples"])) for r in reference]
    for ours, theirs in zip(stored, reference, strict=True):
        assert ours["scorer"] == theirs["scorer"] and ours.get("reducer") == theirs.get("reducer")
        pairs = [(s["sample_id"], s["value"]) for s in ours["samples"]]
        assert len(pairs) == len(theirs["samples"])
        for (sid, value), expected in zip(pairs, theirs["samples"], strict=True):
            assert sid == expected["sample_id"] and _same(value, expected["value"]), (sid, value, expected)
    # card.json holds the reference and the summary, not the values
    assert set(kept) == {"artifact", "bytes", "sets"}
    assert all(set(s) == {"scorer", "reducer", "samples"} and isinstance(s["samples"], int) for s in kept["sets"])


def test_a_reductions_member_that_does_not_decode_is_kept_and_noted(tmp_path):
    import zipfile

    source = external("inspect/log_streaming.eval")
    broken = tmp_path / "broken.eval"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(broken, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                pytest.skip("this log's members are not deflate/stored")
            zout.writestr(info.filename, b'[{"scorer": ' if info.filename == "reductions.json" else zin.read(info))
    out = tmp_path / "card"
    result = CliRunner().invoke(app, ["import", "inspect", str(broken), "-o", str(out)])
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "card.json").read_text())["meta"]["inspect"]["logs"][0]["reductions"]
    assert (out / "artifacts" / meta["artifact"]).read_bytes() == b'[{"scorer": '
    assert meta["sets"] == []
    notes = json.dumps(json.loads((out / "card.json").read_text()).get("provenance", {}))
    assert "reductions.json" in notes or "reductions.json" in result.output
