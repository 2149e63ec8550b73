"""Inventory: hashing is streamed through open_binary; listing and digests against the stored files."""

from __future__ import annotations

import bad_cards
import pytest

from rollout_cards.io.reader import DirectorySource
from rollout_cards.validate import validate


class StreamOnlySource(DirectorySource):
    """Refuses whole-file reads of anything but small text files; records streamed files."""

    def __init__(self, root):
        super().__init__(root)
        self.streamed: list[str] = []

    def read_bytes(self, rel, *, limit):
        assert rel == "card.json" or rel.startswith("rules/"), f"{rel} read whole"
        return super().read_bytes(rel, limit=limit)

    def open_binary(self, rel):
        self.streamed.append(rel)
        return super().open_binary(rel)


def test_every_listed_file_is_hashed_by_streaming(synthetic_copy):
    source = StreamOnlySource(synthetic_copy)
    report = validate(source)
    assert report.valid
    listed = {f["path"] for f in bad_cards.manifest(synthetic_copy)["inventory"]["files"]}
    assert set(source.streamed) == listed


def test_a_truncated_file_fails_size_and_digest_however_the_rest_goes(minimal_copy):
    data = (minimal_copy / "episodes.parquet").read_bytes()
    (minimal_copy / "episodes.parquet").write_bytes(data[:100])
    report = validate(minimal_copy)
    assert {"file-size-mismatch", "file-digest-mismatch", "parquet-unreadable"} <= report.codes()


def test_a_listed_directory_is_missing_as_a_file(minimal_copy):
    (minimal_copy / "notes").mkdir()

    def change(doc):
        doc["inventory"]["files"].append({"path": "notes", "bytes": 0, "sha256": "0" * 64})
        doc["inventory"]["files"].sort(key=lambda f: f["path"])
        bad_cards.set_root(doc)
    bad_cards.edit_manifest(minimal_copy, change)
    report = validate(minimal_copy)
    assert report.codes() == {"file-missing"}


def test_a_referenced_table_absent_everywhere(minimal_copy):
    (minimal_copy / "steps.parquet").unlink()
    bad_cards.rehash(minimal_copy, drop=("steps.parquet",))
    report = validate(minimal_copy)
    assert report.codes() == {"reference-unlisted"}
    assert "does not exist" in next(f.message for f in report.findings if f.code == "reference-unlisted")


@pytest.mark.parametrize("inventory", [{"files": [{"path": ["a", 1, None, {}], "bytes": 1, "sha256": "0" * 64}]},
                                       {"files": [5, {"path": {"a": 1}}]}, {"files": {"a": 1}}, {"files": 5}, [], 5])
def test_an_inventory_of_another_shape_is_findings_not_an_internal_error(minimal_copy, inventory):
    """A list as an inventory path was used as a dict key (TypeError: unhashable type), and the
    check crashed: 'VALIDATION FAILED (internal error)', exit 2. Found by tests/cli/test_cli_fuzz.py."""
    bad_cards.edit_manifest(minimal_copy, lambda d: d.update(inventory=inventory))
    report = validate(minimal_copy)
    assert report.outcome == "invalid", [(f.code, f.message) for f in report.findings]
    assert "manifest-schema" in {f.code for f in report.findings}
