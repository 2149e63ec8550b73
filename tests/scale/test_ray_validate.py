"""`validate(card, engine="ray")`: the table scans run on the workers (a local Ray with 2 worker
CPUs) and the report equals the local validator's, field for field — on every fixture card,
every package of the hostile corpus, the same cut into small row groups (episodes spanning
blocks), and random hostile cards; a killed worker is retried or one EngineError."""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_cards.errors import EngineError
from rollout_cards.tables import EPISODE_COLUMNS, STEP_COLUMNS
from rollout_cards.validate import CODES, ray_tables, semantics, validate
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases
from tests.scale.conftest import run_killing

pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402 - fixtures/ is on the path from here

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _json(report) -> dict:
    return report.model_dump(mode="json")


@pytest.fixture
def scans(monkeypatch):
    """What each Ray validation's table scans returned (to check they ran on the workers)."""
    seen: list[dict] = []
    real = ray_tables._scan_tables

    def spy(ctx):
        fresh = "ray_tables" not in ctx.facts
        out = real(ctx)
        if fresh:
            seen.append(ctx.facts["ray_tables_stats"])
        return out

    monkeypatch.setattr(ray_tables, "_scan_tables", spy)
    return seen


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus") / "bad"
    bad_cards.build(root, runtime=True)
    return root


def _cards(corpus: Path) -> list[Path]:
    return ([p for p in sorted(corpus.iterdir()) if p.is_dir() and not p.name.startswith("_")]
            + [p for p in sorted(FIXTURE_CARDS.iterdir()) if p.is_dir()])


def test_every_fixture_card_and_bad_package_gives_the_local_report(ray_session, corpus, scans):
    cards = _cards(corpus)
    assert len(cards) > 60
    differ, scanned = [], 0
    for card in cards:
        local, before = _json(validate(card)), len(scans)
        if _json(validate(card, engine="ray")) != local:
            differ.append(card.name)
        ran = {c["name"] for c in local["checks"] if c["status"] != "skipped" or c["note"] is None}
        if {"semantics.episodes", "semantics.steps"} & ran:
            scanned += 1
            assert len(scans) == before + 1 and scans[-1]["runs"] >= 1, card.name  # on the workers
    assert differ == []
    assert scanned > 50


def _reblock(card: Path, rows: int) -> None:
    """Rewrite the card's tables in row groups of `rows` rows (digests renewed)."""
    tables = bad_cards.manifest(card)["tables"]
    for rel in (*tables["episodes"]["paths"], *tables["steps"]["paths"]):
        pq.write_table(pq.read_table(card / rel), card / rel, row_group_size=rows, compression="zstd")
    bad_cards.rehash(card)


def test_table_packages_cut_into_small_blocks_give_the_local_report(ray_session, corpus, tmp_path, scans):
    """Every fixture card and every hostile package of a table check, its tables rewritten in row
    groups of 3 rows: most episodes span blocks and every check meets a block boundary."""
    expected = bad_cards.build(tmp_path / "unused", runtime=True)["packages"]
    tables = [name for name, e in expected.items() if any(CODES[c].group == "semantics" for c in e["codes"])]
    cards = [corpus / name for name in tables] + [p for p in sorted(FIXTURE_CARDS.iterdir()) if p.is_dir()]
    differ = []
    for card in cards:
        copy = tmp_path / "cut" / card.name
        shutil.copytree(card, copy)
        _reblock(copy, 3)
        local = _json(validate(copy))
        assert local["outcome"] != "internal-error", card.name
        if _json(validate(copy, engine="ray")) != local:
            differ.append(card.name)
    assert len(tables) >= 14 and differ == []


# ------------------------------------------------------------------------------ random cards


def _typed(rows: list[dict], which: str) -> pa.Table:
    """`rows` with the standard columns in their standard types, values as given (bad ones too)."""
    table = pa.Table.from_pylist(rows)
    standard = {c.name: c.type for c in (EPISODE_COLUMNS if which == "episodes" else STEP_COLUMNS)}
    return pa.table({n: table.column(n).cast(standard.get(n, table.column(n).type)) for n in table.column_names})


def _random_card(rng: random.Random, root: Path) -> Path:
    """A card with hostile tables: duplicate episode ids, seq gaps and repeats, steps out of
    order, steps of unknown episodes, NaN/inf, bad enums, negative counts, wrong n_steps,
    decreasing times, orphan results and reused call ids, bad depths; random row groups."""
    n = rng.randint(1, 30)
    ids = [f"ep-{i:02d}" for i in range(n)]
    for _ in range(rng.randint(0, 3)):
        ids[rng.randrange(n)] = rng.choice(ids)  # duplicates
    episodes, steps = [], []
    for i, eid in enumerate(ids):
        k = rng.randint(0, 12)
        episodes.append({"episode_id": eid if rng.random() > 0.03 else None, "task_id": f"t{i % 4}", "agent": "x",
                         "status": rng.choice(["completed"] * 8 + ["exploded", "error"]),
                         "n_steps": rng.choice([k, k, k, k + 1, -1, None]),
                         "score.x": rng.choice([0.5, 1.0, float("nan"), float("inf"), None]),
                         "started_at": T0, "ended_at": T0 + timedelta(seconds=rng.choice([5, 5, -1]))})
        for s in range(k):
            kind = rng.choice(["message", "tool_call", "tool_result", "bogus" if rng.random() < 0.05 else "message"])
            parent = rng.choice([None, None, rng.randint(-1, s)])
            steps.append({"episode_id": eid if rng.random() > 0.03 else rng.choice(["ghost", None]),
                          "seq": s + rng.choice([0] * 12 + [1, -1]), "kind": kind,
                          "call_id": rng.choice([None, "c1", "c2", "c3"]) if kind != "message" else None,
                          "t": T0 + timedelta(seconds=s + rng.choice([0, 0, 0, -3])),
                          "parent_seq": parent, "depth": None if parent is None else rng.choice([0, 1, 2]),
                          "cost_usd": rng.choice([0.1, None, float("nan"), float("-inf")]),
                          "output_tokens": rng.choice([None, 3, -2])})
    if rng.random() < 0.3:
        rng.shuffle(steps)  # out of order: the local sorting passes
    card = root / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    bad_cards.edit_manifest(card, lambda d: d["scope"].update(license="CC0-1.0"))
    for rel, rows in (("episodes.parquet", episodes), ("steps.parquet", steps)):
        pq.write_table(_typed(rows, rel.split(".")[0]), card / rel, row_group_size=rng.randint(1, 9), compression="zstd")
    bad_cards.edit_manifest(card, lambda d: (d["tables"]["episodes"].update(rows=len(episodes)),
                                             d["tables"]["steps"].update(rows=len(steps))))
    bad_cards.rehash(card)
    return card


@pytest.mark.fuzz
@settings(max_examples=cases(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_random_hostile_cards_give_the_local_report(ray_session, tmp_path_factory, rng):
    card = _random_card(rng, tmp_path_factory.mktemp("hostile"))
    max_findings = rng.choice([None, 1, 2, 5])
    reference = _json(validate(card, max_findings=max_findings))
    with pytest.MonkeyPatch.context() as mp:  # the local report does not depend on how it was cut
        mp.setattr(semantics, "CHUNK_ROWS", rng.randint(1, 7))
        mp.setattr(semantics, "SORT_PASS_ROWS", rng.randint(1, 20))
        assert _json(validate(card, max_findings=max_findings)) == reference
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray_tables, "TASKS_PER_CPU", rng.randint(1, 6))
        mp.setattr(ray_tables, "PARTITIONS_PER_CPU", rng.randint(1, 3))
        assert _json(validate(card, engine="ray", max_findings=max_findings)) == reference
    assert reference["outcome"] != "internal-error"


# ------------------------------------------------------------------------------ what travels


def _clean_card(root: Path, n: int, steps_per: int, row_group: int) -> Path:
    episodes = [{"episode_id": f"e{i:06d}", "task_id": f"t{i % 20}", "agent": "x", "status": "completed",
                 "n_steps": steps_per, "score.x": float("nan") if i % 2 else 1.0} for i in range(n)]
    steps = [{"episode_id": e["episode_id"], "seq": s, "kind": "message", "t": T0 + timedelta(seconds=s),
              "cost_usd": float("inf")} for e in episodes for s in range(steps_per)]
    card = root / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    for rel, rows in (("episodes.parquet", episodes), ("steps.parquet", steps)):
        pq.write_table(pa.Table.from_pylist(rows), card / rel, row_group_size=row_group, compression="zstd")
    bad_cards.edit_manifest(card, lambda d: (d["tables"]["episodes"].update(rows=n),
                                             d["tables"]["steps"].update(rows=n * steps_per)))
    bad_cards.rehash(card)
    return card


def test_what_reaches_the_driver_is_capped_not_the_rows(ray_session, tmp_path, scans):
    """Every episode and every step has a finding; 8 times the steps, in as many blocks, send the
    same findings (capped per code per run of blocks) and the same numbers, never the rows."""
    sizes = []
    for steps_per in (5, 40):
        card = _clean_card(tmp_path / str(steps_per), 400, steps_per, 50 * steps_per)  # 8 blocks each
        ray = validate(card, engine="ray", max_findings=20)
        assert _json(ray) == _json(validate(card, max_findings=20))
        assert ray.omitted["value-not-finite"] > 0
        # 8 steps blocks, 1 or 2 episodes blocks, 2 partitions per CPU
        assert scans[-1]["runs"] in (9, 10) and scans[-1]["partitions"] == 4, scans[-1]
        sizes.append(scans[-1]["bytes_to_driver"])
    assert sizes[1] < 1.2 * sizes[0], sizes  # 2,000 vs 16,000 steps
    assert sizes[1] < 16_000 * 24 / 4, sizes  # a quarter of seq, row and t of the steps alone


def test_steps_without_episode_ids_are_checked_alone_as_locally(ray_session, tmp_path):
    """Found by the random cards: a steps table without columns (no steps) routes nothing."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    pq.write_table(_typed([{"episode_id": None, "task_id": "t", "agent": "x", "status": "completed"}],
                          "episodes"), card / "episodes.parquet")
    pq.write_table(pa.Table.from_pylist([]), card / "steps.parquet")
    bad_cards.edit_manifest(card, lambda d: (d["tables"]["episodes"].update(rows=1),
                                             d["tables"]["steps"].update(rows=0)))
    bad_cards.rehash(card)
    local = _json(validate(card))
    assert {"table-column-missing", "value-null"} <= {f["code"] for f in local["findings"]}
    assert _json(validate(card, engine="ray")) == local


# ------------------------------------------------------------------------------ failures


@pytest.mark.slow
@pytest.mark.parametrize("task", ["_scan_blocks", "_check_partition"])
def test_a_killed_worker_is_retried_or_one_clear_error(ray_session, tmp_path, task, monkeypatch):
    card = _clean_card(tmp_path, 3000, 20, 3000)
    local = _json(validate(card))
    # a task slow enough to be seen running: it sleeps before its real work
    real = getattr(ray_tables, task)

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(ray_tables, task, slow)
    ray = run_killing("slow", lambda: _json(validate(card, engine="ray")))
    if ray is not None:
        assert ray == local


@pytest.mark.slow
def test_a_job_that_fails_is_an_engine_error_not_a_verdict(ray_session, tmp_path, monkeypatch):
    card = _clean_card(tmp_path, 10, 3, 5)

    def fails(*args, **kwargs):
        os._exit(3)  # the worker process dies every time: Ray's retries run out

    monkeypatch.setattr(ray_tables, "_check_partition", fails)
    with pytest.raises(EngineError, match="no result was computed"):
        validate(card, engine="ray")



def test_a_decode_bomb_over_several_runs_is_judged_in_table_order(ray_session, tmp_path, scans):
    """An episodes table of 200 rows whose task_id is one 1 MiB string (200 MiB decoded) in row
    groups of 20 rows: no run of blocks exceeds the budget alone, the table does at its 4th
    block; findings before it are kept (row 0), after it dropped (row 150), as locally."""
    import numpy as np

    card = _clean_card(tmp_path, 200, 1, 20)
    table = pq.read_table(card / "episodes.parquet")
    bomb = pa.DictionaryArray.from_arrays(pa.array(np.zeros(200, dtype=np.int32)), pa.array(["x" * (1 << 20)]))
    table = table.set_column(table.schema.get_field_index("task_id"), "task_id", bomb.cast(pa.string()))
    counts = table.column("n_steps").to_pylist()
    counts[0] = counts[150] = -1
    table = table.set_column(table.schema.get_field_index("n_steps"), "n_steps", pa.array(counts, pa.int64()))
    pq.write_table(table, card / "episodes.parquet", row_group_size=20, compression="zstd", store_schema=False)
    bad_cards.rehash(card)
    local = _json(validate(card))
    rows = {(f["code"], f["location"]["row"]) for f in local["findings"]}
    assert ("parquet-decode-limit", None) in rows and ("value-negative", 0) in rows
    assert ("value-negative", 150) not in rows
    assert _json(validate(card, engine="ray")) == local
    assert scans[-1]["runs"] > 2
