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
