from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.openai_chat import ChatMapping, add_chat_messages, content_text
from rollout_cards.importers.steps import StepBuffer


def _steps(messages, counts=None):
    steps = StepBuffer("ep", file="f.jsonl", record="line 1")
    add_chat_messages(steps, messages, counts or ChatMapping())
    return steps.rows


def test_conversation_with_tool_call_and_result():
    rows = _steps([
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ])
    assert [(r[2], r[4], r[6], r[7], r[8], r[9]) for r in rows] == [
        ("message", "system", None, None, "sys", None),
        ("tool_call", "assistant", "f", "c1", None, '{"x": 1}'),
        ("tool_result", "tool", "f", "c1", "ok", None),
        ("message", "assistant", None, None, "done", None),
    ]


def test_text_and_calls_in_one_message_give_a_message_then_each_call():
    rows = _steps([{"role": "assistant", "content": "let me look", "tool_calls": [
        {"id": "a", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "function": {"name": "g", "arguments": {"k": 2}}},
    ]}])
    assert [(r[2], r[7], r[9]) for r in rows] == [("message", None, None), ("tool_call", "a", "{}"), ("tool_call", "b", '{"k":2}')]


def test_invalid_argument_json_is_kept_verbatim_in_payload():
    counts = ChatMapping()
    rows = _steps([{"role": "assistant", "content": None,
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{broken"}}]}], counts)
    assert rows[0][9] is None and json.loads(rows[0][14]) == {"arguments": "{broken", "arguments_invalid_json": True}
    assert counts.invalid_arguments == 1 and "not valid JSON" in counts.notes()[0]


def test_content_parts_are_joined_and_kept():
    assert content_text([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}])[0] == "a\nb"
    rows = _steps([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert rows[0][8] == "hi" and json.loads(rows[0][14])["content"] == [{"type": "text", "text": "hi"}]


def test_unknown_message_keys_go_to_payload():
    rows = _steps([{"role": "user", "content": "x", "name": "alice", "refusal": None, "weird": 1}])
    assert json.loads(rows[0][14]) == {"name": "alice", "refusal": None, "weird": 1}


def test_tool_message_without_call_id_is_an_observation():
    rows = _steps([{"role": "tool", "content": "env says hi"}])
    assert rows[0][2] == "observation" and rows[0][8] == "env says hi"


def test_result_for_an_unknown_call_is_kept_as_a_tool_message():
    (row,) = _steps([{"role": "tool", "tool_call_id": "nope", "content": "?"}])
    assert (row[2], row[4], row[7], row[8]) == ("message", "tool", None, "?")
    assert json.loads(row[14])["source_call_id"] == "nope"


@pytest.mark.parametrize("bad", [None, [1], [{"content": "no role"}], [{"role": "assistant", "tool_calls": "x"}]])
def test_malformed_messages_are_source_errors(bad):
    with pytest.raises(SourceFormatError):
        _steps(bad)
