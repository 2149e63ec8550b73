from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import rollout_cards as rc
from rollout_cards.errors import CardFormatError
from tests.conftest import FIXTURE_CARDS

SYNTH = FIXTURE_CARDS / "synthetic"


def test_open_reads_only_the_manifest(synthetic_copy):
    (synthetic_copy / "steps.parquet").write_bytes(b"garbage")  # never touched by open()
    card = rc.open(synthetic_copy)
    assert card.manifest.tables.episodes.rows == 216
    assert card.id == "synthetic-airline"


def test_projection_and_filter():
    card = rc.open(SYNTH)
    t = card.episodes(columns=["episode_id", "status"], filter=pc.field("agent") == "beta")
    assert t.column_names == ["episode_id", "status"]
    assert t.num_rows == 108
    assert all(e.startswith("beta-") for e in t.column("episode_id").to_pylist())


def test_batches_cover_the_table():
    card = rc.open(SYNTH)
    batches = list(card.iter_steps(columns=["episode_id", "seq"], batch_size=100))
    assert max(b.num_rows for b in batches) <= 100
    assert sum(b.num_rows for b in batches) == card.manifest.tables.steps.rows


def test_episode_steps_in_order():
    card = rc.open(SYNTH)
    steps = card.episode_steps("alpha-task-00-0")
    assert steps.column("seq").to_pylist() == list(range(steps.num_rows))
    assert set(steps.column("episode_id").to_pylist()) == {"alpha-task-00-0"}


def test_enum_columns_are_dictionary_encoded():
    schema = rc.open(SYNTH).schema("episodes")
    assert pa.types.is_dictionary(schema.field("status").type)


def test_rule_files():
    rules = rc.open(SYNTH).rule_files()
    assert list(rules) == ["synthetic.success_rate"]
    assert "reported:" in rules["synthetic.success_rate"]


def test_symlinked_table_is_not_followed(synthetic_copy, tmp_path):
    outside = tmp_path / "outside.parquet"
    os.replace(synthetic_copy / "steps.parquet", outside)
    os.symlink(outside, synthetic_copy / "steps.parquet")
    card = rc.open(synthetic_copy)
    with pytest.raises(CardFormatError, match="symbolic link"):
        card.steps()


def test_missing_card():
    with pytest.raises(CardFormatError, match="does not exist"):
        rc.open(FIXTURE_CARDS / "no-such-card")


def test_artifact_names_are_checked():
    with pytest.raises(CardFormatError, match="not a sha256"):
        rc.open(SYNTH).read_artifact("../card.json")
