from __future__ import annotations

import json

import pytest

from rollout_cards.errors import ImporterError, SourceFormatError
from tests.importers.conftest import SOURCES, assert_valid, run_import

CHAT = SOURCES / "chat" / "chat.jsonl"
MAPPING = SOURCES / "chat" / "mapping.yaml"
ATIF = SOURCES / "atif" / "trajectory.json"
ATIF_LINES = SOURCES / "atif" / "trajectories.jsonl"


def test_chat_jsonl_with_a_mapping_file(tmp_path):
    result, card = run_import("chat-jsonl", [CHAT], tmp_path / "card", options={"mapping": str(MAPPING)})
    rows = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    assert sorted(rows) == ["conv-0", "conv-1", "conv-2"]
    assert rows["conv-0"]["task_id"] == "lookup-0" and rows["conv-0"]["score.reward"] == 1.0
    assert rows["conv-0"]["meta.model"] == "demo-llm" and rows["conv-0"]["agent"] == "chat"
    # metadata was only partly mapped, so the record keeps it whole
    assert json.loads(rows["conv-0"]["meta.record"]) == {"metadata": {"model": "demo-llm", "task": "lookup-0"}}
    kinds = [s["kind"] for s in card.episode_steps("conv-0").to_pylist()]
    assert kinds == ["message", "message", "tool_call", "tool_result", "message"]
    (status_drop,) = [d for d in card.manifest.drops if d.target == "episodes.status"]
    assert status_drop.count == 3 and status_drop.declaration == "source_missing"
    assert any(d.target == "steps.t" and d.count == result.steps for d in card.manifest.drops)
    assert "not valid JSON" in " ".join(result.notes)
    assert_valid(result.path)


def test_fields_on_the_command_line_override_the_mapping(tmp_path):
    _, card = run_import("chat-jsonl", [CHAT], tmp_path / "card",
                         options={"mapping": str(MAPPING), "fields": {"task": "id", "agent": "metadata.model"}})
    rows = card.episodes(columns=["task_id", "agent"]).to_pylist()
    assert rows[0] == {"task_id": "conv-0", "agent": "demo-llm"}


def test_a_missing_task_field_says_how_to_name_it(tmp_path):
    with pytest.raises(SourceFormatError, match="--field task=PATH") as exc:
        run_import("chat-jsonl", [CHAT], tmp_path / "card")
    assert exc.value.record.startswith("line 1")
    assert list(tmp_path.iterdir()) == []


def test_status_values_map_source_states(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"task_id": "t", "outcome": o, "messages": []}) + "\n" for o in ("ok", "crash")))
    mapping = tmp_path / "m.yaml"
    mapping.write_text("status: outcome\nstatus_values: {ok: completed, crash: error}\n")
    _, card = run_import("chat-jsonl", [path], tmp_path / "card", options={"mapping": str(mapping)})
    assert card.episodes(columns=["status"]).column("status").to_pylist() == ["completed", "error"]
    mapping.write_text("status: outcome\n")
    with pytest.raises(SourceFormatError, match="status 'ok' is not a terminal state"):
        run_import("chat-jsonl", [path], tmp_path / "card2", options={"mapping": str(mapping)})


@pytest.mark.parametrize(
    ("mapping", "message"),
    [("[1, 2]", "must be an object"), ("nonsense: x", "unknown field key"), ("status_values: {a: won}", "not one of")],
)
def test_bad_mapping_files_are_usage_errors(tmp_path, mapping, message):
    path = tmp_path / "m.yaml"
    path.write_text(mapping)
    with pytest.raises(ImporterError, match=message):
        run_import("chat-jsonl", [CHAT], tmp_path / "card", options={"mapping": str(path)})


def test_atif_trajectories(tmp_path):
    result, card = run_import("atif", [ATIF, ATIF_LINES], tmp_path / "card",
                              options={"fields": {"task": "extra.task_id", "score.reward": "extra.reward"}})
    rows = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    assert sorted(rows) == ["sess-1", "sess-2", "sess-3"]
    one = rows["sess-1"]
    assert (one["agent"], one["task_id"], one["score.reward"]) == ("demo-agent", "price-lookup", 1)
    assert (one["input_tokens"], one["output_tokens"], one["total_tokens"], one["cost_usd"]) == (120, 18, 138, 0.0007)
    assert rows["sess-3"]["input_tokens"] is None  # no metrics: not invented
    steps = card.episode_steps("sess-1").to_pylist()
    assert [(s["kind"], s["role"]) for s in steps] == [
        ("message", "user"), ("message", "assistant"), ("tool_call", "assistant"), ("tool_result", "tool"),
        ("observation", "tool"), ("message", "assistant")]
    assert steps[1]["input_tokens"] == 50 and json.loads(steps[1]["payload"])["reasoning_content"] == "Need the price."
    assert steps[3]["call_id"] == "call_1" and steps[0]["t"] is not None
    assert card.manifest.provenance.agents[0].model == "demo-llm"
    assert_valid(result.path)


def test_atif_refuses_chat_records_and_chat_jsonl_reads_both(tmp_path):
    with pytest.raises(SourceFormatError, match="not an ATIF trajectory"):
        run_import("atif", [CHAT], tmp_path / "a", options={"mapping": str(MAPPING)})
    result, _ = run_import("chat-jsonl", [CHAT, ATIF], tmp_path / "b",
                           options={"fields": {"task": "extra.task_id"}}, keep_going=True)
    assert result.episodes == 1 and len(result.malformed) == 3  # chat lines lack extra.task_id


def test_an_atif_result_for_an_unknown_call_is_kept_and_the_call_declared_missing(tmp_path):
    """A result whose call the trajectory does not hold (trimmed history, a call never logged)
    is kept as a role-'tool' message with the source's id, and the missing call is a drop."""
    doc = json.loads(ATIF.read_text())
    result_text = doc["steps"][1]["observation"]["results"][0].get("content")
    doc["steps"][1]["observation"]["results"][0]["source_call_id"] = "ghost"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    result, card = run_import("atif", [path], tmp_path / "card", options={"fields": {"task": "extra.task_id"}})
    assert_valid(result.path)
    rows = card.steps(columns=["kind", "role", "call_id", "content", "payload"]).to_pylist()
    (kept,) = [r for r in rows if r["payload"] and json.loads(r["payload"]).get("source_call_id") == "ghost"]
    assert (kept["kind"], kept["role"], kept["call_id"]) == ("message", "tool", None)
    assert kept["content"] == result_text
    (drop,) = [d for d in result.drops if "answer a tool call the source does not hold" in d.reason]
    assert (drop.target, drop.action, drop.count) == ("steps", "unobserved", 1)


@pytest.mark.parametrize("part", ["²", "9" * 5000])
def test_a_mapping_path_index_that_is_not_ascii_digits_finds_nothing(part):
    """'²'.isdigit() is true and int('²') raised ValueError (as int() of 5,000 digits does)."""
    from rollout_cards.importers.chat_jsonl import _MISSING, lookup

    assert lookup({"a": [1, 2]}, f"a.{part}") is _MISSING
    assert lookup({"a": [1, 2]}, "a.1") == 2
