from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import WriterError


def _writer(path: Path, **kw) -> rc.CardWriter:
    return rc.CardWriter(path, id="t", title="T", timestamps=False, **kw)


def test_issue_example(tmp_path):
    with rc.CardWriter(tmp_path / "card", id="demo", title="Demo") as card:
        with card.episode(task_id="t1", agent="gpt-4o", trial=0, cond={"wind": "calm"}) as ep:
            ep.message("user", "hello")
            ep.tool_call("search", args={"q": "x"}, call_id="c1")
            ep.tool_result("c1", "found", is_error=False)
            ep.score("reward", 1.0)
    card = rc.open(tmp_path / "card")
    row = card.episodes().to_pylist()[0]
    assert row["status"] == "completed"
    assert row["score.reward"] == 1.0 and row["cond.wind"] == "calm"
    assert row["n_steps"] == 3 and row["started_at"] is not None and row["ended_at"] >= row["started_at"]
    steps = card.steps().to_pylist()
    assert [s["kind"] for s in steps] == ["message", "tool_call", "tool_result"]
    assert json.loads(steps[1]["args"]) == {"q": "x"}
    assert steps[2]["call_id"] == "c1" and steps[2]["is_error"] is False


def test_exception_records_error_with_traceback_and_propagates(tmp_path):
    card = _writer(tmp_path / "c")
    with pytest.raises(ZeroDivisionError):
        with card.episode(task_id="t", agent="a", episode_id="e1") as ep:
            ep.message("user", "divide")
            _ = 1 / 0
    with card.episode(task_id="t", agent="a", episode_id="e2", suppress_errors=True) as ep:
        raise KeyError("seat")
    card.close()
    rows = {r["episode_id"]: r for r in rc.open(tmp_path / "c").episodes().to_pylist()}
    assert rows["e1"]["status"] == "error"
    assert rows["e1"]["error_type"] == "ZeroDivisionError"
    assert "division by zero" in rows["e1"]["error_message"]
    assert "ZeroDivisionError" in rows["e1"]["error_traceback"] and "Traceback" in rows["e1"]["error_traceback"]
    assert rows["e2"]["status"] == "error" and rows["e2"]["error_type"] == "KeyError"


@pytest.mark.parametrize("status", ["timeout", "limit", "cancelled", "skipped", "error", "completed"])
def test_explicit_terminal_state(tmp_path, status):
    with _writer(tmp_path / "c") as card, card.episode(task_id="t", agent="a") as ep:
        ep.end(status, message="why")
    assert rc.open(tmp_path / "c").episodes(columns=["status"]).column(0).to_pylist() == [status]


def test_misuse_is_an_error_at_the_call(tmp_path):
    card = _writer(tmp_path / "c")
    ep = card.episode(task_id="t", agent="a", episode_id="e1")
    with pytest.raises(WriterError, match="already written"):
        card.episode(task_id="t", agent="a", episode_id="e1")
    with pytest.raises(WriterError, match="unknown status 'crashed'"):
        ep.end("crashed")
    with pytest.raises(WriterError, match="no earlier tool_call"):
        ep.tool_result("nope", "x")
    with pytest.raises(WriterError, match="finite"):
        ep.score("reward", float("nan"))
    with pytest.raises(WriterError, match="timezone-aware"):
        ep.message("user", "x", t=datetime(2026, 1, 1))
    with pytest.raises(WriterError, match="unknown step kind"):
        ep.step("thought", content="x")
    ep.score("reward", 1)
    ep.end("completed")
    with pytest.raises(WriterError, match="no step may follow its end"):
        ep.message("user", "late")
    with pytest.raises(WriterError, match="has already ended"):
        ep.end("completed")
    ep2 = card.episode(task_id="t", agent="a")
    with pytest.raises(WriterError, match="keeps one type"):
        ep2.score("reward", "high")
    card.close()
    with pytest.raises(WriterError, match="closed"):
        card.episode(task_id="t")


def test_refuses_non_empty_directory(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "precious.txt").write_text("keep me")
    with pytest.raises(WriterError, match="not empty"):
        _writer(tmp_path / "c")
    with pytest.raises(WriterError, match="not a rollout card"):
        _writer(tmp_path / "c", overwrite=True)
    assert (tmp_path / "c" / "precious.txt").read_text() == "keep me"


def test_bad_metadata_fails_at_construction(tmp_path):
    with pytest.raises(WriterError, match="SPDX"):
        _writer(tmp_path / "c", scope={"license": "whatever"})
    assert not (tmp_path / "c").exists()


def test_bulk_path_and_streaming_mix(tmp_path):
    card = _writer(tmp_path / "c", flush_rows=2)
    with card.episode(task_id="live", agent="a", episode_id="live-0") as ep:
        for i in range(5):
            ep.message("user", f"m{i}")
    card.write_episodes(pa.table({
        "episode_id": ["b0", "b1"], "task_id": ["x", "y"], "status": ["completed", "timeout"],
        "agent": ["bulk", "bulk"], "score.reward": [0.5, None],
    }))
    card.write_steps(pa.table({
        "episode_id": ["b0", "b0", "b1"], "seq": [0, 1, 0], "kind": ["message", "message", "limit"],
        "content": ["hi", "there", None],
    }))
    manifest = card.close()
    assert manifest.tables.episodes.rows == 3 and manifest.tables.steps.rows == 8
    assert manifest.tables.steps.paths == ["steps/part-00000.parquet", "steps/part-00001.parquet"]
    c = rc.open(tmp_path / "c")
    assert sorted(c.episodes(columns=["episode_id"]).column(0).to_pylist()) == ["b0", "b1", "live-0"]
    assert c.episode_steps("b0").column("content").to_pylist() == ["hi", "there"]
    assert c.episode_steps("live-0").column("seq").to_pylist() == [0, 1, 2, 3, 4]


def test_bulk_rejects_bad_tables(tmp_path):
    card = _writer(tmp_path / "c")
    with pytest.raises(WriterError, match="required column 'status' is missing"):
        card.write_episodes(pa.table({"episode_id": ["a"], "task_id": ["t"], "agent": ["x"]}))
    with pytest.raises(WriterError, match="outside its enum"):
        card.write_episodes(pa.table({"episode_id": ["a"], "task_id": ["t"], "status": ["won"], "agent": ["x"]}))
    with pytest.raises(WriterError, match="extra columns must be named"):
        card.write_episodes(pa.table({"episode_id": ["a"], "task_id": ["t"], "status": ["completed"],
                                      "agent": ["x"], "reward": [1.0]}))
    card.close()


def test_rules_artifacts_and_drops_reach_the_manifest(tmp_path):
    card = _writer(tmp_path / "c")
    rule_id = card.add_rule("inline", text="rule: demo.mean\nkind: original\nscore: score.reward\n")
    sha = card.add_artifact(b"diff --git a b")
    card.add_drop({"target": "steps.t", "action": "unobserved", "declaration": "source_missing",
                   "loss_class": "unavailable_source_field", "reason": "no clock"})
    manifest = card.close()
    assert rule_id == "demo.mean"
    assert manifest.rules[0].path == "rules/demo.mean.yaml" and manifest.rules[0].kind == "original"
    assert {f.path for f in manifest.inventory.files} >= {f"artifacts/{sha}", "rules/demo.mean.yaml"}
    assert manifest.drops[0].target == "steps.t"
    assert rc.open(tmp_path / "c").read_artifact(sha) == b"diff --git a b"


# -- round trip: any valid sequence of writer calls reads back identically -------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
step_plan = st.one_of(
    st.tuples(st.just("message"), st.sampled_from(["user", "assistant", "system"]), text),
    st.tuples(st.just("tool"), st.sampled_from(["search", "book"]), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), text, st.booleans()),
    st.tuples(st.just("observation"), text),
    st.tuples(st.just("error"), text),
)
episode_plan = st.fixed_dictionaries({
    "task": st.sampled_from(["t1", "t2", "t3"]),
    "agent": st.sampled_from(["a", "b"]),
    "trial": st.integers(0, 5),
    "steps": st.lists(step_plan, max_size=8),
    "score": st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False), st.booleans().map(float)),
    "status": st.sampled_from(["completed", "error", "timeout", "limit", "cancelled", "skipped"]),
    "cond": st.sampled_from(["calm", "windy"]),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans=st.lists(episode_plan, max_size=6), flush_rows=st.integers(1, 7))
def test_round_trip(tmp_path_factory, plans, flush_rows):
    path = tmp_path_factory.mktemp("rt") / "card"
    expected_eps, expected_steps = [], []
    with _writer(path, flush_rows=flush_rows) as card:
        for i, plan in enumerate(plans):
            eid = f"e{i}"
            with card.episode(task_id=plan["task"], agent=plan["agent"], trial=plan["trial"], episode_id=eid,
                              cond={"wind": plan["cond"]}, started_at=T0) as ep:
                seq = 0

                def add(kind, clock_s, **fields):
                    nonlocal seq
                    expected_steps.append({"episode_id": eid, "seq": seq, "kind": kind,
                                           "t": T0 + timedelta(seconds=clock_s), **fields})
                    seq += 1

                for j, s in enumerate(plan["steps"]):
                    t = T0 + timedelta(seconds=j)
                    if s[0] == "message":
                        ep.message(s[1], s[2], t=t)
                        add("message", j, role=s[1], content=s[2])
                    elif s[0] == "tool":
                        cid = ep.tool_call(s[1], s[2], call_id=f"c{j}", t=t)
                        add("tool_call", j, name=s[1], call_id=cid, args=json.dumps(s[2], sort_keys=True, ensure_ascii=False))
                        ep.tool_result(cid, s[3], is_error=s[4], t=t)
                        add("tool_result", j, call_id=cid, content=s[3], is_error=s[4])
                    elif s[0] == "observation":
                        ep.observation(s[1], t=t)
                        add("observation", j, content=s[1])
                    else:
                        ep.error(s[1], t=t)
                        add("error", j, content=s[1], is_error=True)
                ep.score("reward", plan["score"])
                ep.end(plan["status"], t=T0)
            expected_eps.append({"episode_id": eid, "task_id": plan["task"], "agent": plan["agent"],
                                 "trial": plan["trial"], "status": plan["status"], "n_steps": seq,
                                 "score.reward": plan["score"], "cond.wind": plan["cond"]})
    card = rc.open(path)
    cols = ["episode_id", "task_id", "agent", "trial", "status", "n_steps", "score.reward", "cond.wind"]
    got = card.episodes(columns=[c for c in cols if c in card.schema("episodes").names]).to_pylist()
    if not any(p["score"] is not None for p in plans):
        for row in expected_eps:  # a column never given a value is not invented
            row.pop("score.reward")
    assert got == expected_eps
    steps = card.steps().to_pylist()
    assert len(steps) == len(expected_steps)
    for g, e in zip(steps, expected_steps, strict=True):
        assert {k: g[k] for k in e} == e


def test_non_text_fields_fail_at_the_call(tmp_path):
    card = _writer(tmp_path / "c")
    ep = card.episode(task_id="t", agent="a")
    with pytest.raises(WriterError, match="role must be text"):
        ep.message(5, "hi")
    with pytest.raises(WriterError, match="name must be text"):
        ep.tool_call(3, {})
    ep.end("completed")
    card.close()
    assert rc.open(tmp_path / "c").episodes(columns=["status"]).column(0).to_pylist() == ["completed"]


def test_unwritable_target_is_a_writer_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(WriterError, match="cannot create the card directory"):
        _writer(tmp_path / "afile" / "sub")


def test_column_limit_is_the_validators(tmp_path):
    from rollout_cards.tables import MAX_COLUMNS

    card = _writer(tmp_path / "c")
    with pytest.raises(WriterError, match=f"more than {MAX_COLUMNS} episode columns"):
        card.episode(task_id="t", agent="a", cond={f"k{i}": i for i in range(MAX_COLUMNS)})
    card.close()


def test_lone_surrogates_are_refused_at_the_call_naming_the_field(tmp_path):
    """A lone surrogate ("\\ud800", e.g. from bytes decoded with surrogateescape) cannot be
    stored as UTF-8: it used to fail the next flush with UnicodeEncodeError (losing the steps
    buffered with it) or the journal write. Now a WriterError at the call, the card intact."""
    card = _writer(tmp_path / "c", flush_rows=100)
    with card.episode(task_id="t", agent="a", episode_id="kept") as ep:
        ep.message("user", "fine")
    ep = card.episode(task_id="t", agent="a", episode_id="e")
    for call, field in (
        (lambda: ep.message("user", "hi\ud800"), "content"),
        (lambda: ep.tool_call("f", {"q": ["a", "\udc80"]}), "args at /q/1"),
        (lambda: ep.tool_call("f", '{"q": "\\ud800"}'), "args at /q"),
        (lambda: ep.step("message", payload={"k\ud800": 1}), "payload at /k"),
        (lambda: ep.score("r", "\ud800"), "score.r"),
        (lambda: ep.end("error", message="m\ud800"), "message"),
        (lambda: card.episode(task_id="t\ud800", agent="a"), "task_id"),
        (lambda: card.episode(task_id="t", agent="a", cond={"w\ud800": "x"}), "cond key"),
        (lambda: card.add_rule("r.yaml", text="rule: x\nscore: \"\ud800\"\n"), "rule r.yaml"),
    ):
        with pytest.raises(WriterError, match=f"{re.escape(field)}.*lone surrogate"):
            call()
    with pytest.raises(WriterError, match="outside the range"):  # args text goes through the strict decoder
        ep.tool_call("f", '{"q": 1e999}')
    ep.message("user", "still writable")
    ep.end("completed")
    card.close()
    c = rc.open(tmp_path / "c")
    assert c.episodes(columns=["episode_id", "n_steps"]).to_pylist() == [
        {"episode_id": "kept", "n_steps": 1}, {"episode_id": "e", "n_steps": 1}]
    assert CliRunner().invoke(app, ["validate", str(tmp_path / "c")]).exit_code == 0


def test_an_exception_with_a_lone_surrogate_is_recorded_escaped(tmp_path):
    with pytest.raises(ValueError), rc.CardWriter(tmp_path / "c", id="x", title="X", timestamps=False) as card:
        with card.episode(task_id="t", agent="a", episode_id="e"):
            raise ValueError("no such file b'\\xff' -> \udcff")
    row = rc.open(tmp_path / "c").episodes().to_pylist()[0]
    assert row["status"] == "error" and "\\udcff" in row["error_message"]
    assert CliRunner().invoke(app, ["validate", str(tmp_path / "c")]).exit_code == 0
