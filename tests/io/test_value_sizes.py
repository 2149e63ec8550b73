"""The per-value cap in CardWriter (io.value_sizes): the row API refuses the value at the call
(nothing moves, the card still closes), the bulk path refuses the table naming the episode,
the step and the column — a ValueTooLargeError, never an abort inside Arrow's Parquet writer."""

from __future__ import annotations

import pyarrow as pa
import pytest

import rollout_cards as rc
from rollout_cards.errors import ValueTooLargeError, WriterError
from rollout_cards.io.value_sizes import MAX_VALUE_BYTES, check_table

LIMIT = 1000


def _writer(tmp_path, **kw):
    return rc.CardWriter(tmp_path / "card", id="cap", title="cap", timestamps=False, max_value_bytes=LIMIT, **kw)


def test_the_default_cap_is_64_mib():
    assert MAX_VALUE_BYTES == 64 * 1024**2


@pytest.mark.parametrize(("call", "needle"), [
    (lambda ep: ep.message("user", "a" * (LIMIT + 1)), "step 1 of episode 'e': content is 1,001 bytes, more than the 1,000 bytes"),
    (lambda ep: ep.message("user", "é" * (LIMIT // 2 + 1)), "content is"),  # 1,002 bytes in 501 characters
    (lambda ep: ep.tool_call("t", args={"q": "a" * LIMIT}), "step 1 of episode 'e': args is"),
    (lambda ep: ep.observation("x", payload={"p": "a" * LIMIT}), "payload is"),
    (lambda ep: ep.set("task.input", "a" * (LIMIT + 1)), "episode 'e': task.input is"),
    (lambda ep: ep.end("error", traceback="a" * (LIMIT + 1)), "episode 'e': traceback is"),
])
def test_the_row_api_refuses_the_value_at_the_call(tmp_path, call, needle):
    writer = _writer(tmp_path)
    ep = writer.episode(task_id="t", episode_id="e")
    ep.message("user", "a" * LIMIT)  # exactly the cap fits
    with pytest.raises(ValueTooLargeError, match=needle) as err:
        call(ep)
    assert err.value.limit == LIMIT and err.value.size > LIMIT
    if not ep.ended:
        ep.end("completed")
    writer.close()
    card = rc.open(tmp_path / "card")
    assert card.steps(columns=["seq"]).column("seq").to_pylist() == [0]  # the refused step left no gap


def test_episode_columns_given_at_the_start_are_checked(tmp_path):
    writer = _writer(tmp_path)
    with pytest.raises(ValueTooLargeError, match="episode 'e': meta.note is"):
        writer.episode(task_id="t", episode_id="e", meta={"note": "n" * (LIMIT + 1)})
    writer.close()


def test_the_bulk_path_names_the_episode_step_and_column(tmp_path):
    writer = _writer(tmp_path)
    writer.write_episodes(pa.table({"episode_id": ["a", "b"], "task_id": ["t", "t"], "agent": ["m", "m"],
                                     "status": ["completed"] * 2}))
    steps = pa.table({"episode_id": ["a", "b", "b"], "seq": [0, 0, 1], "kind": ["message"] * 3,
                      "content": ["ok", "ok", "z" * (LIMIT + 5)]})
    with pytest.raises(ValueTooLargeError) as err:
        writer.write_steps(steps)
    e = err.value
    assert (e.episode_id, e.seq, e.column, e.size, e.limit, e.table) == ("b", 1, "content", LIMIT + 5, LIMIT, "steps")
    assert "steps table, episode 'b', step 1: content is" in str(e) and isinstance(e, WriterError)
    with pytest.raises(ValueTooLargeError, match="episodes table, episode 'c': task.spec is"):
        writer.write_episodes(pa.table({"episode_id": ["c"], "task_id": ["t"], "agent": ["m"], "status": ["completed"],
                                        "task.spec": ["s" * (LIMIT + 1)]}))
    writer.abort()


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
def test_check_table_locates_the_row_across_chunks(typ):
    small, big = ("a" * 10, "b" * 50) if typ in (pa.string(), pa.large_string()) else (b"a" * 10, b"b" * 50)
    column = pa.chunked_array([pa.array([small] * 3, typ), pa.array([small, None, big], typ)])
    table = pa.table({"episode_id": pa.chunked_array([["e0", "e1", "e2"], ["e3", "e4", "e5"]]), "x": column})
    check_table(table, "episodes", 50)  # at the cap: fine
    with pytest.raises(ValueTooLargeError) as err:
        check_table(table, "episodes", 49)
    assert (err.value.episode_id, err.value.column, err.value.size) == ("e5", "x", 50)


def test_a_dictionary_column_is_checked_on_its_values():
    column = pa.array(["k" * 60, "a", "k" * 60]).dictionary_encode()
    table = pa.table({"episode_id": ["e0", "e1", "e2"], "kind": column})
    with pytest.raises(ValueTooLargeError) as err:
        check_table(table, "steps", 59)
    assert err.value.episode_id == "e0"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, 2048 * 1024**2])
def test_an_unusable_cap_is_a_writer_error(tmp_path, bad):
    with pytest.raises(WriterError, match="max_value_bytes"):
        rc.CardWriter(tmp_path / "c", id="c", title="c", max_value_bytes=bad)
