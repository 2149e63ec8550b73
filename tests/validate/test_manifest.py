"""card.json checks: every problem reported with its pointer; sections validated on their own."""

from __future__ import annotations

import bad_cards

from rollout_cards.validate import validate


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
