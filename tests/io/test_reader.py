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


def _many_row_groups(card_dir, rows_per_group=17):
    """The synthetic card with its steps rewritten in small row groups (digests refreshed)."""
    import sys

    import pyarrow.parquet as pq

    from tests.conftest import REPO

    sys.path.insert(0, str(REPO / "fixtures"))
    import bad_cards

    path = card_dir / "steps.parquet"
    pq.write_table(pq.read_table(path), path, row_group_size=rows_per_group)
    bad_cards.rehash(card_dir)
    return pq.ParquetFile(path).num_row_groups


def test_steps_of_some_episodes_read_only_their_row_groups(synthetic_copy):
    import random

    import pyarrow.parquet as pq

    groups = _many_row_groups(synthetic_copy)
    assert groups > 50
    every = pq.read_table(synthetic_copy / "steps.parquet")  # plain pyarrow, the reference
    ids = sorted(set(every.column("episode_id").to_pylist()))
    card = rc.open(synthetic_copy)
    rng = random.Random(3)
    for k in (1, 2, 5, 40):
        chosen = set(rng.sample(ids, k))
        batches = list(card.iter_steps(columns=["episode_id", "seq", "content"], episodes=chosen))
        read = pa.Table.from_batches(batches)
        mine = read.filter(pc.is_in(read.column("episode_id"), value_set=pa.array(sorted(chosen))))
        expected = every.filter(pc.is_in(every.column("episode_id"), value_set=pa.array(sorted(chosen))))
        key = [("episode_id", "ascending"), ("seq", "ascending")]
        assert mine.sort_by(key).to_pylist() == expected.select(mine.column_names).sort_by(key).to_pylist()
        if k <= 5:
            assert read.num_rows < every.num_rows / 4  # the other row groups were not read
    assert sum(b.num_rows for b in card.iter_steps(columns=["seq"], episodes=["no-such-episode"])) == 0


def test_episode_steps_over_many_row_groups(synthetic_copy):
    import pyarrow.parquet as pq

    _many_row_groups(synthetic_copy, rows_per_group=5)
    every = pq.read_table(synthetic_copy / "steps.parquet").to_pylist()
    card = rc.open(synthetic_copy)
    for eid in ("alpha-task-00-0", "beta-task-05-2"):
        expected = sorted((r for r in every if r["episode_id"] == eid), key=lambda r: r["seq"])
        assert expected and card.episode_steps(eid).to_pylist() == expected


def test_a_changed_steps_file_is_refused_before_row_groups_are_chosen(synthetic_copy):
    from rollout_cards.errors import IntegrityError

    _many_row_groups(synthetic_copy)
    path = synthetic_copy / "steps.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        list(rc.open(synthetic_copy).iter_steps(columns=["seq"], episodes=["alpha-task-00-0"]))
