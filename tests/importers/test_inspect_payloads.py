"""The JSON texts an Inspect import writes (step payloads, meta.* columns) are the stdlib encoder's.

The import encodes decoded log values with msgspec where that gives the same text
(`jsondoc.fast_text` / `fast_texts`); the reference is the same import with that path switched
off, so every text comes from `json_text` (json.JSONEncoder). Real logs of both formats.
"""

from __future__ import annotations

import pytest

from rollout_cards.importers import inspect_ai, inspect_events, inspect_log
from tests.conftest import external
from tests.importers.conftest import run_import

LOGS = ["inspect/log_formats.json", "inspect/inspect-0.3.285/2026-12-01T08-30-51-00-00_mcq_7AZHZLVce5zatHdaC2RYF8.json",
        "inspect/inspect-0.3.285/2026-12-01T08-28-14-00-00_arith_VdKqNirU4VLYR5rpgCL6Mg.eval",
        "inspect/log_message_deduplication.eval"]


# every use of the fast encoder in the import (events' payloads, meta.* texts, tool payloads)
FAST = ((inspect_events, "fast_text"), (inspect_events, "fast_texts"), (inspect_log, "fast_text"),
        (inspect_ai, "fast_texts"))


@pytest.mark.parametrize("rel", LOGS)
def test_the_fast_encoder_writes_the_stdlib_encoders_texts(rel, tmp_path, monkeypatch):
    path = external(rel)
    used = []

    def counted(fn):
        def wrapper(value, **options):
            got = fn(value, **options)
            used.append(got is not None)
            return got
        return wrapper

    for module, name in FAST:
        monkeypatch.setattr(module, name, counted(getattr(module, name)))
    _, fast = run_import("inspect", [path], tmp_path / "fast")
    assert sum(used) >= 5, "the fast encoder was not used"
    for module, name in FAST:
        monkeypatch.setattr(module, name, lambda value, **options: None)
    _, slow = run_import("inspect", [path], tmp_path / "slow")
    assert fast.steps().equals(slow.steps())
    assert fast.episodes().equals(slow.episodes())


def _odd_floats_log(path):
    """The synthetic .json log with floats msgspec writes unlike repr in every place the import encodes:
    events (a model call's cost, a tool's arguments, an unknown event), metadata, scores' metadata,
    the model usage; and a sample whose text has a NaN literal (read by the strict decoder)."""
    import json
    import math

    from tests.importers.conftest import SOURCES

    odd = [2.65e-05, 1e16, -1.5e-07, 1.7976931348623157e308, 5e-324, 0.0001, 123.25, -0.0, 9.99e-05]
    log = json.loads((SOURCES / "inspect" / "synthetic.json").read_text())
    for n, sample in enumerate(log["samples"]):
        sample["metadata"] = {**(sample.get("metadata") or {}), "odd": odd[n:] + odd[:n]}
        for score in (sample.get("scores") or {}).values():
            score["metadata"] = {"tiny": odd[n]}
        for ev in sample["events"]:
            ev["working_start"] = odd[(n + len(ev)) % len(odd)]
            if ev["event"] == "model":
                ev.setdefault("output", {}).setdefault("usage", {})["total_cost"] = 2.65e-05 * (n + 1)
            if ev["event"] == "tool":
                ev["arguments"] = {"x": 1e-07, "y": 1e22}
    log["samples"][-1]["metadata"]["unscored"] = math.nan
    path.write_text(json.dumps(log))
    return path


def test_floats_of_a_json_log_are_written_as_the_stdlib_encoder_writes_them(tmp_path, monkeypatch):
    # the samples of a .json log are decoded with their odd floats marked (jsondoc.ReprFloat), so no
    # text is searched for floats to rewrite: the reference is every text by json_text
    path = _odd_floats_log(tmp_path / "odd.json")
    _, fast = run_import("inspect", [path], tmp_path / "fast")
    for module, name in FAST:
        monkeypatch.setattr(module, name, lambda value, **options: None)
    _, slow = run_import("inspect", [path], tmp_path / "slow")
    assert fast.steps().equals(slow.steps())
    assert fast.episodes().equals(slow.episodes())
    payloads = " ".join(p for p in fast.steps().column("payload").to_pylist() if p)
    assert '"total_cost":2.65e-05' in payloads and '"y":1e+22' in payloads and '"x":1e-07' in payloads


def test_an_eval_events_payload_is_its_source_text_even_with_nan_in_a_string(tmp_path):
    """Inspect's random ids hold 'NaN' (ZNaNwDB5inMAf9LzyhCRTo in the mcq log of 0.3.285): such an event's
    payload was re-encoded (sorted keys) while every other kept the member's text. A member msgspec
    decodes has no NaN or Infinity number, so every event keeps its text; in a member with a NaN
    literal (read by the strict decoder), an event whose text may hold one is encoded (JSON has no
    NaN: as "NaN"), the others keep theirs."""
    import json
    import zipfile

    from tests.importers.conftest import SOURCES

    log = json.loads((SOURCES / "inspect" / "synthetic.json").read_text())
    samples = log.pop("samples")[:2]
    texts = []
    with zipfile.ZipFile(tmp_path / "nan.eval", "w") as zf:
        zf.writestr("header.json", json.dumps(log))
        for n, sample in enumerate(samples):
            sample["events"][0]["id_note"] = "ZNaNwDB5 Infinity"  # 'NaN' and 'Infinity' in a string
            if n:
                sample["events"][-1]["nan_value"] = float("nan")
            items = [json.dumps(ev, allow_nan=True) for ev in sample["events"]]
            member = f'{{"id": {json.dumps(sample["id"])}, "epoch": {sample["epoch"]}, "events": [{", ".join(items)}]}}'
            zf.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", member)
            texts.append(items)
    _, card = run_import("inspect", [tmp_path / "nan.eval"], tmp_path / "card")
    steps = card.steps().to_pylist()
    payloads = [{s["payload"] for s in steps if s["episode_id"].endswith(f"/{sample['id']}/{sample['epoch']}")}
                for sample in samples]
    clean = [t for t in texts[0] if '"event": "tool"' not in t]  # a tool event's payload is without its result
    assert clean and all(t in payloads[0] for t in clean)  # incl. the one with 'NaN' in a string (the old code:
    # '{"event":"sample_init","id_note":"ZNaNwDB5 Infinity",...}', sorted and compact)
    assert all(t in payloads[1] for t in texts[1][1:-1] if '"event": "tool"' not in t)
    assert texts[1][0] not in payloads[1] and texts[1][-1] not in payloads[1]
    assert any(p and '"nan_value":"NaN"' in p for p in payloads[1])
