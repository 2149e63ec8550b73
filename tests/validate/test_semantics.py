"""Table semantics: per-episode checks equal a plain reference whatever the row order and chunking."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bad_cards
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_cards.tables import conform_table
from rollout_cards.validate import semantics, validate
from tests.conftest import FIXTURE_CARDS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PER_EPISODE = {"step-seq-not-contiguous", "step-time-decreasing", "tool-result-orphan", "tool-call-id-duplicate"}


def write_card(root: Path, episodes: list[dict], steps: list[dict], *, conform: bool = True) -> Path:
    """A card with these episodes and steps (other columns standard and null; with
    `conform=False` the rows are written as given, bad values included)."""
    shape = conform_table if conform else (lambda table, which: table)
    card = root / "card"
    if card.exists():
        shutil.rmtree(card)
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    bad_cards.edit_manifest(card, lambda d: d["scope"].update(license="CC0-1.0"))
    bad_cards.write_table(card, "episodes.parquet", shape(pa.Table.from_pylist(episodes), "episodes"))
    steps_table = pa.Table.from_pylist(steps) if steps else pa.table({
        "episode_id": pa.array([], pa.string()), "seq": pa.array([], pa.int64()), "kind": pa.array([], pa.string())})
    bad_cards.write_table(card, "steps.parquet", shape(steps_table, "steps"))
    bad_cards.edit_manifest(card, lambda d: (d["tables"]["episodes"].update(rows=len(episodes)),
                                             d["tables"]["steps"].update(rows=len(steps))))
    bad_cards.rehash(card)
    return card


def reference(steps: list[dict]) -> dict[str, set]:
    """Per-episode findings computed the obvious way: episodes with a bad seq set; rows of
    decreasing times and of orphan results, in (seq, row) order."""
    out: dict[str, set] = {code: set() for code in PER_EPISODE}
    by_episode: dict[str, list[tuple[int, int, dict]]] = {}
    for row, s in enumerate(steps):
        by_episode.setdefault(s["episode_id"], []).append((s["seq"], row, s))
    for episode, items in by_episode.items():
        items.sort(key=lambda x: (x[0], x[1]))
        if sorted(seq for seq, _, _ in items) != list(range(len(items))):
            out["step-seq-not-contiguous"].add(episode)
        last_t, issued = None, set()
        for _, row, s in items:
            if s.get("t") is not None:
                if last_t is not None and s["t"] < last_t:
                    out["step-time-decreasing"].add(row)
                last_t = s["t"]
            if s["kind"] == "tool_call" and s.get("call_id") is not None:
                if s["call_id"] in issued:
                    out["tool-call-id-duplicate"].add(row)
                issued.add(s["call_id"])
            if s["kind"] == "tool_result" and s.get("call_id") not in issued:
                out["tool-result-orphan"].add(row)
    return out


def observed(report, steps: list[dict]) -> dict[str, set]:
    out: dict[str, set] = {code: set() for code in PER_EPISODE}
    for f in report.findings:
        if f.code == "step-seq-not-contiguous":
            out[f.code].add(steps[f.location.row]["episode_id"])
        elif f.code in PER_EPISODE:
            out[f.code].add(f.location.row)
    return out


step_strategy = st.fixed_dictionaries({
    "episode_id": st.sampled_from(["a", "b", "c"]),
    "seq": st.integers(0, 4),
    "kind": st.sampled_from(["message", "tool_call", "tool_result"]),
    "call_id": st.sampled_from([None, "c1", "c2"]),
    "t": st.one_of(st.none(), st.integers(0, 5).map(lambda s: T0 + timedelta(seconds=s))),
})


def _episodes(ids: set[str]) -> list[dict]:
    return [{"episode_id": e, "task_id": "t", "status": "completed", "agent": "x"} for e in sorted(ids or {"z"})]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step_strategy, max_size=14), chunk=st.integers(1, 6), sort_rows=st.integers(1, 8),
       grouped=st.booleans())
def test_per_episode_checks_match_the_reference(tmp_path_factory, steps, chunk, sort_rows, grouped):
    if grouped:  # the writer's order: by episode, then seq — exercises the one-pass path
        steps = sorted(steps, key=lambda s: (s["episode_id"], s["seq"]))
    card = write_card(tmp_path_factory.mktemp("sem"), _episodes({s["episode_id"] for s in steps}), steps)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(semantics, "CHUNK_ROWS", chunk)
        mp.setattr(semantics, "SORT_PASS_ROWS", sort_rows)
        report = validate(card)
    assert report.outcome != "internal-error", report.findings
    assert observed(report, steps) == reference(steps)
    assert report.codes() - PER_EPISODE - {"episode-step-count-mismatch"} == set()


def test_steps_stored_out_of_order_are_valid(tmp_path):
    steps = [{"episode_id": e, "seq": s, "kind": "message", "t": T0 + timedelta(seconds=s)}
             for s in range(3) for e in ("a", "b")][::-1]
    card = write_card(tmp_path, _episodes({"a", "b"}), steps)
    assert validate(card).valid


def test_a_result_answers_a_call_made_in_an_earlier_chunk(tmp_path, monkeypatch):
    steps = [{"episode_id": "a", "seq": 0, "kind": "tool_call", "call_id": "c1"},
             {"episode_id": "a", "seq": 1, "kind": "message"},
             {"episode_id": "a", "seq": 2, "kind": "tool_result", "call_id": "c1"},
             {"episode_id": "a", "seq": 3, "kind": "tool_result", "call_id": "c2"}]
    card = write_card(tmp_path, _episodes({"a"}), steps)
    monkeypatch.setattr(semantics, "CHUNK_ROWS", 1)
    report = validate(card)
    assert [(f.code, f.location.row) for f in report.findings if f.code != "replay-unavailable"] == [
        ("tool-result-orphan", 3)]


def test_row_checks_locate_file_row_and_column(tmp_path):
    episodes = _episodes({"a", "b"})
    episodes[1]["status"] = "exploded"
    episodes[0]["score.x"] = float("inf")
    episodes[1]["score.x"] = 1.0
    episodes[0]["started_at"], episodes[0]["ended_at"] = T0, T0 - timedelta(seconds=1)
    steps = [{"episode_id": "a", "seq": 0, "kind": "bogus"}, {"episode_id": "ghost", "seq": 0, "kind": "message"}]
    report = validate(write_card(tmp_path, episodes, steps, conform=False))
    where = {(f.code, f.location.file, f.location.row, f.location.column) for f in report.findings}
    assert where == {
        ("enum-invalid", "episodes.parquet", 1, "status"),
        ("value-not-finite", "episodes.parquet", 0, "score.x"),
        ("episode-time-reversed", "episodes.parquet", 0, "ended_at"),
        ("enum-invalid", "steps.parquet", 0, "kind"),
        ("step-episode-missing", "steps.parquet", 1, "episode_id"),
    }


def test_a_corrupt_page_is_unreadable_not_an_internal_error(minimal_copy):
    import pyarrow.parquet as pq

    path = minimal_copy / "steps.parquet"
    md = pq.ParquetFile(path).metadata
    names = [md.schema.column(i).name for i in range(md.num_columns)]
    offset = md.row_group(0).column(names.index("seq")).data_page_offset
    data = bytearray(path.read_bytes())
    data[offset: offset + 8] = b"\xff" * 8  # the page header of the seq column
    path.write_bytes(bytes(data))
    bad_cards.rehash(minimal_copy)
    report = validate(minimal_copy)
    assert report.outcome == "invalid"
    assert "parquet-unreadable" in report.codes()
    assert {c.name: c.status for c in report.checks}["semantics.steps"] == "skipped"


def depth_reference(steps: list[dict]) -> set[int]:
    """Rows whose depth is not their parent step's depth + 1, the obvious way (rows failing the
    row-local parent check are that check's, not this one's)."""
    by_key = {(s["episode_id"], s["seq"]): s for s in steps}
    bad = set()
    for row, s in enumerate(steps):
        p, d = s.get("parent_seq"), s.get("depth")
        if p is None or d is None or p >= s["seq"] or d < 1:
            continue
        parent_depth = by_key[(s["episode_id"], p)].get("depth")
        if d != (parent_depth or 0) + 1:
            bad.add(row)
    return bad


@st.composite
def nested_steps(draw):
    """Steps of up to three episodes with contiguous seq, random parents (earlier steps) and depths."""
    steps = []
    for episode in draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, min_size=1)):
        for seq in range(draw(st.integers(1, 6))):
            parent = draw(st.one_of(st.none(), st.integers(0, seq - 1))) if seq else None
            steps.append({"episode_id": episode, "seq": seq, "kind": "message", "parent_seq": parent,
                          "depth": draw(st.one_of(st.none(), st.integers(0, 3)))})
    return steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=nested_steps(), chunk=st.integers(1, 6), sort_rows=st.integers(1, 8), shuffle=st.randoms())
def test_depth_is_checked_against_the_parent_step_whatever_the_order(tmp_path_factory, steps, chunk, sort_rows,
                                                                      shuffle):
    if shuffle.random() < 0.5:  # out of order: exercises the sorted passes
        shuffle.shuffle(steps)
    card = write_card(tmp_path_factory.mktemp("depth"), _episodes({s["episode_id"] for s in steps}), steps)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(semantics, "CHUNK_ROWS", chunk)
        mp.setattr(semantics, "SORT_PASS_ROWS", sort_rows)
        report = validate(card)
    assert report.outcome != "internal-error", report.findings
    assert {f.location.row for f in report.findings if f.code == "step-depth-mismatch"} == depth_reference(steps)
    assert report.codes() - {"step-depth-mismatch", "step-parent-invalid", "replay-unavailable"} == set()


def test_a_depth_mismatch_names_the_parent_in_an_earlier_chunk(tmp_path, monkeypatch):
    steps = [{"episode_id": "a", "seq": 0, "kind": "tool_call", "call_id": "c1", "parent_seq": None, "depth": 0},
             {"episode_id": "a", "seq": 1, "kind": "span_begin", "parent_seq": 0, "depth": 1},
             {"episode_id": "a", "seq": 2, "kind": "message", "parent_seq": 1, "depth": 2},
             {"episode_id": "a", "seq": 3, "kind": "message", "parent_seq": 1, "depth": 1}]
    card = write_card(tmp_path, _episodes({"a"}), steps)
    monkeypatch.setattr(semantics, "CHUNK_ROWS", 1)
    report = validate(card)
    [finding] = [f for f in report.findings if f.code == "step-depth-mismatch"]
    assert finding.location.row == 3 and "parent step 1 has depth 1" in finding.message
