"""card.json checks: every problem reported with its pointer; sections validated on their own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from unittest import mock

import bad_cards
import pytest
from hypothesis import HealthCheck, given, settings

from rollout_cards.validate import manifest as manifest_checks
from rollout_cards.validate import render_json, validate
from tests.conftest import FIXTURE_CARDS
from tests.fuzzing import cases
from tests.model.test_construct import mutated


def _findings(report, code):
    return [f for f in report.findings if f.code == code]


def test_each_schema_problem_is_its_own_finding_with_a_pointer(minimal_copy):
    def change(doc):
        doc["scope"]["access"] = "everyone"
        doc["inventory"]["files"][0]["bytes"] = -1
        doc["colour"] = "blue"
        doc["created"] = "yesterday"
    bad_cards.edit_manifest(minimal_copy, change)
    report = validate(minimal_copy)
    pointers = {f.location.pointer for f in _findings(report, "manifest-schema")}
    assert {"/scope/access", "/inventory/files/0/bytes", "/created"} <= pointers
    assert any(p in ("/", "/colour") for p in pointers)
    assert report.card_id is None


def test_long_values_are_not_echoed_in_schema_messages(minimal_copy):
    secret = "PERSONAL-" + "x" * 200
    bad_cards.edit_manifest(minimal_copy, lambda d: d.update(id=secret))
    report = validate(minimal_copy)
    messages = " ".join(f.message for f in _findings(report, "manifest-schema"))
    assert messages and secret[:60] not in messages


def test_unsafe_paths_in_tables_and_rules_are_reported_at_their_pointers(synthetic_copy):
    def change(doc):
        doc["tables"]["steps"]["paths"] = ["/etc/passwd"]
        doc["rules"][0]["path"] = "rules/../../x.yaml"
    bad_cards.edit_manifest(synthetic_copy, change)
    report = validate(synthetic_copy)
    assert {f.location.pointer for f in _findings(report, "path-unsafe")} == {"/tables/steps/paths/0",
                                                                               "/rules/0/path"}
    assert all(f.code != "internal-error" for f in report.findings)


def test_a_byte_order_mark_is_invalid_json(minimal_copy):
    path = minimal_copy / "card.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert validate(minimal_copy).codes() == {"manifest-invalid-json"}


def test_nan_in_card_json_is_invalid_json(minimal_copy):
    path = minimal_copy / "card.json"
    path.write_text(path.read_text().replace('"rows": 2', '"rows": NaN'))
    assert validate(minimal_copy).codes() == {"manifest-invalid-json"}


def test_a_manifest_that_is_not_an_object(minimal_copy):
    (minimal_copy / "card.json").write_text("[1, 2]")
    report = validate(minimal_copy)
    assert report.codes() == {"manifest-schema"}
    assert {c.name: c.status for c in report.checks}["inventory.digests"] == "skipped"


def test_malformed_inventory_entries_still_get_integrity_verdicts(minimal_copy):
    (minimal_copy / "steps.parquet").write_bytes(b"not parquet any more")

    def change(doc):
        doc["inventory"]["files"][0]["sha256"] = "not-a-digest"  # episodes.parquet
    bad_cards.edit_manifest(minimal_copy, change)
    report = validate(minimal_copy)
    assert {"manifest-schema", "file-size-mismatch", "file-digest-mismatch", "parquet-unreadable"} <= report.codes()
    assert {f.location.file for f in _findings(report, "file-digest-mismatch")} == {"steps.parquet"}


# -- the constructed manifest (model/_construct.py) against the validated one --------------------

@pytest.fixture(scope="module")
def card_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("construct")
    for name in ("minimal", "synthetic"):
        shutil.copytree(FIXTURE_CARDS / name, root / name)
    return {name: root / name for name in ("minimal", "synthetic")}


def _validated_way(cls, data):
    return cls.model_validate(data)


@settings(max_examples=cases(60), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated())
def test_the_constructed_manifest_gives_the_validated_manifest_s_report(card_dirs, doc):
    """Byte-identical JSON reports with and without the construct path (the pydantic path is the
    reference); card.json is outside the inventory, so a mutation reaches the manifest checks."""
    card = card_dirs["synthetic" if "rules" in doc and doc.get("id") == "synthetic-airline" else "minimal"]
    (card / "card.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    fast = render_json(validate(card, replay=False))
    with mock.patch.object(manifest_checks, "construct", lambda cls, data: None), \
            mock.patch.object(manifest_checks, "construct_or_validate", _validated_way):
        slow = render_json(validate(card, replay=False))
    assert fast == slow
