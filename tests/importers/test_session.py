from __future__ import annotations

import hashlib
import os

import pyarrow as pa
import pytest

import rollout_cards as rc
from rollout_cards.errors import SourceFormatError, WriterError
from rollout_cards.importers.session import ImportSession
from rollout_cards.importers.steps import StepBuffer


def _episode(session: ImportSession, i: int, **extra) -> None:
    steps = StepBuffer(f"ep-{i}", file="src.json", record=str(i))
    steps.add("message", role="user", content=f"hello {i}")
    steps.tool_call("f", "{}", "c")
    steps.tool_result("c", "ok")
    session.add_episode({"episode_id": f"ep-{i}", "task_id": f"t{i % 3}", "agent": "a", "trial": i // 3,
                         "status": "completed", **extra}, steps)


def _session(out, **kw) -> ImportSession:
    return ImportSession(out, format="test", card_id="c", title="T", **kw)


def test_finish_moves_a_complete_card_into_place(tmp_path):
    session = _session(tmp_path / "card")
    for i in range(5):
        _episode(session, i, **{"score.x": float(i)})
    assert not (tmp_path / "card").exists()  # written elsewhere until finished
    result = session.finish()
    assert result.episodes == 5 and result.steps == 15 and result.statuses == {"completed": 5}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card"]
    card = rc.open(tmp_path / "card")
    assert card.episodes(columns=["n_steps"]).column("n_steps").to_pylist() == [3] * 5
    assert card.manifest.meta["import"]["format"] == "test"


def test_small_chunks_give_the_same_tables(tmp_path):
    tables = []
    for name, kw in (("big", {}), ("small", {"chunk_episodes": 2, "chunk_steps": 4})):
        session = _session(tmp_path / name, **kw)
        for i in range(7):
            # a column that is null in the first chunk and typed later must still unify
            _episode(session, i, **({"meta.late": 1.5} if i == 6 else {}))
        session.finish()
        card = rc.open(tmp_path / name)
        tables.append((card.episodes().sort_by("episode_id"), card.steps().sort_by([("episode_id", "ascending"), ("seq", "ascending")])))
    assert tables[0][0].equals(tables[1][0]) and tables[0][1].equals(tables[1][1])
    assert tables[1][0].column("meta.late").type == pa.float64()


def test_abort_leaves_nothing(tmp_path):
    session = _session(tmp_path / "card")
    _episode(session, 0)
    session.abort()
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_is_refused_unless_it_is_a_card_and_overwrite(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("keep me")
    with pytest.raises(WriterError, match="not empty"):
        _session(tmp_path / "busy")
    with pytest.raises(WriterError, match="not a rollout card"):
        _session(tmp_path / "busy", overwrite=True)
    assert (tmp_path / "busy" / "x").read_text() == "keep me"
    session = _session(tmp_path / "card")
    _episode(session, 0)
    session.finish()
    session = _session(tmp_path / "card", overwrite=True)
    _episode(session, 1)
    _episode(session, 2)
    session.finish()
    assert rc.open(tmp_path / "card").manifest.tables.episodes.rows == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "card"]


def test_a_column_keeps_one_type(tmp_path):
    session = _session(tmp_path / "card")
    _episode(session, 0, **{"score.x": 1})
    _episode(session, 1, **{"score.x": 0.5})  # int widens to float
    with pytest.raises(SourceFormatError, match="score.x holds str"):
        _episode(session, 2, **{"score.x": "yes"})
    session.abort()


def test_duplicate_episode_ids_are_source_errors(tmp_path):
    session = _session(tmp_path / "card")
    _episode(session, 0)
    with pytest.raises(SourceFormatError, match="occurs twice"):
        _episode(session, 0)
    session.abort()


def test_keep_going_counts_bad_records_as_one_malformed_drop_per_file(tmp_path):
    session = _session(tmp_path / "card", keep_going=True)
    for i in range(3):
        with session.record():
            if i == 1:
                raise SourceFormatError("is broken", file="src.json", record="1")
            _episode(session, i)
    result = session.finish()
    drops = [d for d in result.drops if d.declaration == "source_malformed"]
    assert len(drops) == 1 and drops[0].count == 1 and drops[0].target == "episodes"
    assert "record 1: is broken" in drops[0].reason
    assert [m.record for m in result.malformed] == ["1"]


def test_without_keep_going_the_error_propagates(tmp_path):
    session = _session(tmp_path / "card")
    with pytest.raises(SourceFormatError), session.record():
        raise SourceFormatError("is broken", file="src.json", record="1")
    session.abort()


def test_a_broken_stream_ends_the_file_under_keep_going(tmp_path):
    session = _session(tmp_path / "card", keep_going=True)

    def records():
        yield 0
        raise SourceFormatError("ends inside a JSON value", file="src.json", record="1")

    assert list(session.guard(records())) == [0]
    assert "rest of the file was not read" in session.malformed[0].message
    session.abort()


def test_no_episodes_is_an_error_and_leaves_nothing(tmp_path):
    session = _session(tmp_path / "card")
    with pytest.raises(SourceFormatError, match="no episodes"):
        session.finish()
    session.abort()
    assert list(tmp_path.iterdir()) == []


def test_time_inversions_are_noted(tmp_path):
    session = _session(tmp_path / "card")
    steps = StepBuffer("e", file="f", record="0")
    steps.add("message", t=2_000_000)
    steps.add("message", t=1_000_000)
    session.add_episode({"episode_id": "e", "task_id": "t", "agent": "a", "status": "completed"}, steps)
    assert "earlier than the step before" in " ".join(session.finish().notes)


def test_parents_made_for_the_output_are_removed_on_failure(tmp_path):
    session = _session(tmp_path / "a" / "b" / "card")
    assert (tmp_path / "a" / "b").is_dir()
    session.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(WriterError):
        _session(tmp_path / "x" / "card", license="not a license")
    assert list(tmp_path.iterdir()) == []


def _rule(**over):
    from rollout_cards.importers.rule_files import rule_document

    doc = dict(rule="t.mean", kind="original", description="mean of x", score="score.x",
               on_status={"completed": "score"}, on_missing="exclude",
               aggregate={"statistic": "mean", "group_by": ["agent"], "unit": "task_id"},
               reported=[{"group": {"agent": "a"}, "value": 1.0}])
    return rule_document(**{**doc, **over})


@pytest.mark.parametrize(("over", "needle"), [
    ({"reported": [{"group": {"agent": "a" * 70_000}, "value": 1.0}]}, "reported[0].group.agent"),
    ({"description": "d" * 70_000}, "at description"),
    ({"select": "task.name in ['" + "n" * 20_000 + "']"}, "an expression of 20,0"),
    ({"features": {"f": "len(" + "x" * 12_000 + ")"}}, "features.f"),
    ({"rule": "t." + "r" * 200}, "rule id"),
])
def test_a_rule_value_no_rule_file_can_hold_is_a_source_error(tmp_path, over, needle):
    session = _session(tmp_path / "card")
    session.add_source(_source(tmp_path), "test")
    with pytest.raises(SourceFormatError) as err:
        session.add_rule(_rule(**over))
    assert needle in str(err.value) and "src.json" in str(err.value)
    assert not list(session._tmp.glob("rules/*"))  # refused before anything was written
    session.abort()


def _source(tmp_path):
    path = tmp_path / "src.json"
    path.write_text("{}")
    return path


def test_a_long_selector_is_left_out_and_said_so(tmp_path):
    session = _session(tmp_path / "card")
    _episode(session, 0)
    ids = [f"missing-{i:05d}-" + "x" * 40 for i in range(300)]
    session.add_drop(target="episodes", action="unobserved", declaration="source_missing", loss_class="missing",
                     reason="300 episodes are missing", count=300,
                     selector="episode_id in [" + ", ".join(f"'{i}'" for i in ids) + "]")
    session.finish()
    from rollout_cards.validate import validate

    assert validate(tmp_path / "card").valid
    drop = next(d for d in rc.open(tmp_path / "card").manifest.drops if d.loss_class == "missing")
    assert drop.selector is None and drop.count == 300
    assert drop.reason.startswith("300 episodes are missing (the selector") and "it is left out" in drop.reason


@pytest.mark.parametrize("label", ["episode_id", "task_id", "agent"])
def test_a_label_too_long_for_any_expression_is_refused_at_its_record(tmp_path, label):
    session = _session(tmp_path / "card")
    long = "z" * 4097
    steps = StepBuffer(long if label == "episode_id" else "e", file="src.json", record="7")
    row = {"episode_id": "e", "task_id": "t", "agent": "a", "status": "completed", label: long}
    with pytest.raises(SourceFormatError) as err:
        session.add_episode(row, steps)
    assert f"src.json, record 7: {label} is 4,097 characters" in str(err.value)
    at_limit = "z" * 4096
    session.add_episode({**row, label: at_limit}, StepBuffer(at_limit if label == "episode_id" else "e",
                                                             file="src.json", record="8"))
    assert session.episodes_written == 1
    session.abort()


def test_a_card_json_over_the_reader_limit_is_a_source_error(tmp_path, monkeypatch):
    from rollout_cards.importers import session as session_module

    monkeypatch.setattr(session_module, "MAX_MANIFEST_BYTES", 50_000)
    session = _session(tmp_path / "card")
    session.add_source(_source(tmp_path), "test")
    _episode(session, 0)
    session.set_meta("source_header", {"notes": "n" * 60_000})
    with pytest.raises(SourceFormatError) as err:
        session.finish()
    assert "card.json would be" in str(err.value) and "src.json" in str(err.value)
    session.abort()
    assert not (tmp_path / "card").exists()


@pytest.mark.parametrize("chunk", [{}, {"chunk_episodes": 2, "chunk_steps": 4}])
def test_a_column_null_in_every_row_exists_all_null(tmp_path, chunk):
    """A field every source record leaves empty: the column the importer wrote (key given, value
    None) is in the card, all null, typed as declared, else float64 for score.* and string for
    the others — a rule the importer declares over it finds it (it was missing: rule-invalid)."""
    session = _session(tmp_path / "card", **chunk)
    session.declare("meta.flag", "bool")
    for i in range(5):
        _episode(session, i, **{"score.reward": None, "meta.note": None, "meta.flag": None, "score.typed": float(i)})
    session.finish()
    card = rc.open(tmp_path / "card")
    episodes = card.episodes()
    for column, typ in (("score.reward", pa.float64()), ("meta.note", pa.string()), ("meta.flag", pa.bool_()),
                        ("score.typed", pa.float64())):
        assert episodes.schema.field(column).type == typ, column
    assert episodes.column("score.reward").null_count == episodes.num_rows == 5
    assert episodes.column("score.typed").to_pylist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    from rollout_cards.validate import validate

    assert validate(tmp_path / "card").valid
    [run] = [r for r in rc.rescore(card, _mean_rule(tmp_path, "score.reward")).runs]
    assert run.results[0].n == 0 and run.results[0].n_missing_excluded == 5


def _mean_rule(tmp_path, column):
    path = tmp_path / "r.yaml"
    path.write_text(f"rule: t.mean\nscore: \"{column}\"\non_missing: exclude\n")
    return str(path)


def test_bytes_handed_in_are_checked_against_the_version_taken_before_their_read(tmp_path):
    from rollout_cards.importers.session import read_source

    path = _source(tmp_path)
    data, version = read_source(path, 1024)
    assert data == b"{}" and version[0] == 2
    assert read_source(path, 1) is None  # over the limit: hashed and read as a stream
    session = _session(tmp_path / "card")
    with pytest.raises(TypeError):
        session.add_source(path, "test", data=data)
    path.write_text("[]")  # same size, other bytes, after the read
    os.utime(path, ns=(0, 0))
    with pytest.raises(SourceFormatError, match=r"src\.json: changed while it was imported \(2 bytes, rewritten\)"):
        session.add_source(path, "test", data=data, version=version)
    data, version = read_source(path, 1024)
    assert session.add_source(path, "test", data=data, version=version).sha256 == hashlib.sha256(b"[]").hexdigest()
    session.abort()
