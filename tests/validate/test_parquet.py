"""Parquet footers with limits, Arrow schemas against the format."""

from __future__ import annotations

import bad_cards
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollout_cards.tables import ENUM, EPISODE_COLUMNS, STEP_COLUMNS, type_matches
from rollout_cards.validate import parquet, validate

COL = {c.name: c for c in EPISODE_COLUMNS + STEP_COLUMNS}


@pytest.mark.parametrize(("name", "type_", "ok"), [
    ("task_id", pa.string(), True),
    ("task_id", pa.large_string(), True),
    ("task_id", pa.binary(), False),
    ("agent", pa.string_view(), False),  # a card of it validated; every reader failed in Arrow's kernels
    ("status", pa.dictionary(pa.int32(), pa.string_view()), False),
    ("status", ENUM, True),
    ("status", pa.dictionary(pa.int8(), pa.large_string()), True),
    ("status", pa.string(), True),
    ("status", pa.dictionary(pa.int32(), pa.int64()), False),
    ("seq", pa.int64(), True),
    ("seq", pa.int32(), False),
    ("t", pa.timestamp("us", tz="UTC"), True),
    ("t", pa.timestamp("us"), False),
    ("t", pa.timestamp("ns", tz="UTC"), False),
    ("cost_usd", pa.float32(), False),
])
def test_type_matches(name, type_, ok):
    assert type_matches(COL[name], type_) is ok


def _replace_steps(card, data: bytes) -> None:
    (card / "steps.parquet").write_bytes(data)
    bad_cards.rehash(card)


@pytest.mark.parametrize(("mutate", "code"), [
    (lambda d: d[:10], "parquet-unreadable"),
    (lambda d: b"XXXX" + d[4:], "parquet-unreadable"),
    (lambda d: d[:-4] + b"PARE", "parquet-unreadable"),
    (lambda d: d[:-8] + (len(d)).to_bytes(4, "little") + b"PAR1", "parquet-unreadable"),
    (lambda d: d[:-8] + (2**31).to_bytes(4, "little") + b"PAR1", "parquet-limit-exceeded"),
    (lambda d: d[:-8] + b"\x00\x00\x00\x00PAR1", "parquet-unreadable"),
])
def test_footer_problems_are_findings(minimal_copy, mutate, code):
    _replace_steps(minimal_copy, mutate((minimal_copy / "steps.parquet").read_bytes()))
    report = validate(minimal_copy)
    assert report.codes() == {code}
    assert {c.name: c.status for c in report.checks}["semantics.steps"] == "skipped"


def test_declared_column_chunk_sizes_are_checked_before_reading(minimal_copy, monkeypatch):
    monkeypatch.setattr(parquet, "MAX_COLUMN_CHUNK_BYTES", 10)
    assert validate(minimal_copy).codes() == {"parquet-limit-exceeded"}


def test_extension_metadata_on_a_plain_field_is_refused(minimal_copy):
    table = pq.read_table(minimal_copy / "episodes.parquet")
    field = pa.field("meta.label", pa.string(), metadata={b"ARROW:extension:name": b"evil.pickled"})
    table = table.append_column(field, pa.array(["a", "b"]))
    pq.write_table(table, minimal_copy / "episodes.parquet")
    bad_cards.rehash(minimal_copy)
    assert validate(minimal_copy).codes() == {"table-extension-type"}


def test_extra_column_of_a_nested_type_is_a_type_error(minimal_copy):
    table = pq.read_table(minimal_copy / "episodes.parquet").append_column("score.list", pa.array([[1], [2]]))
    pq.write_table(table, minimal_copy / "episodes.parquet")
    bad_cards.rehash(minimal_copy)
    report = validate(minimal_copy)
    assert report.codes() == {"table-column-type"}
    assert next(f for f in report.findings if f.code == "table-column-type").location.column == "score.list"


def test_a_string_view_column_is_a_type_error_not_a_valid_card(synthetic_copy):
    """string_view is not a string type of the format: such a card validated (the replay only
    noted `replay-unavailable`) while info, rescore, report and export failed inside Arrow."""
    table = pq.read_table(synthetic_copy / "episodes.parquet")
    i = table.schema.get_field_index("agent")
    table = table.set_column(i, pa.field("agent", pa.string_view()), table.column(i).cast(pa.string_view()))
    pq.write_table(table, synthetic_copy / "episodes.parquet")
    bad_cards.rehash(synthetic_copy)
    report = validate(synthetic_copy)
    assert not report.valid and "table-column-type" in report.codes()
