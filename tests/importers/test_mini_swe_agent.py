from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.mini_swe_agent import terminal_state
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

RUN = "mini-swe-agent/deepseek_reasoner_dev"


def _as_output_dir(src: Path, dest: Path) -> Path:
    """The real run laid out as mini-swe-agent writes it: <id>/<id>.traj.json (the copy is flat)."""
    dest.mkdir()
    for p in src.iterdir():
        if p.name.endswith(".traj.json"):
            iid = p.name.removesuffix(".traj.json")
            (dest / iid).mkdir()
            shutil.copy(p, dest / iid / p.name)
        else:
            shutil.copy(p, dest / p.name)
    return dest


@pytest.mark.parametrize("layout", ["flat", "nested"])
def test_real_run_imports_every_listed_instance_and_validates(tmp_path, layout):
    src = external(RUN)
    source = src if layout == "flat" else _as_output_dir(src, tmp_path / "run")
    statuses = yaml.safe_load(next(src.glob("exit_statuses_*.yaml")).read_text())["instances_by_exit_status"]
    listed = {i: s for s, ids in statuses.items() for i in ids}
    result, card = run_import("mini-swe-agent", [source], tmp_path / "card")
    assert_valid(tmp_path / "card")
    rows = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert set(rows) == set(listed)
    assert {i: r["status"] for i, r in rows.items()} == {i: terminal_state(s) for i, s in listed.items()}
    assert result.statuses == {"completed": 5, "error": 6, "timeout": 4}
    # the source's figure: Submitted / listed, from the exit statuses file
    rule = next(r for r in result.rules if r["rule"] == "mini_swe_agent.submitted_rate")
    assert rule["reported"][0]["value"] == pytest.approx(len(statuses["Submitted"]) / len(listed))
    # 12 listed instances have no trajectory: declared, not a silent hole
    drop = next(d for d in card.manifest.drops if d.target == "steps")
    assert drop.count == 12 and drop.declaration == "source_missing"
    for p in src.glob("*.traj.json"):
        doc = json.loads(p.read_text())
        row = rows[doc["instance_id"]]
        assert row["cost_usd"] == doc["info"]["model_stats"]["instance_cost"]
        assert row["meta.api_calls"] == doc["info"]["model_stats"]["api_calls"]
        steps = card.episode_steps(row["episode_id"]).to_pylist()
        calls = sum(len(m.get("tool_calls") or []) for m in doc["messages"])
        assert sum(s["kind"] == "tool_call" for s in steps) == calls
        assert sum(s["kind"] == "tool_result" for s in steps) == sum(m["role"] == "tool" for m in doc["messages"])
        usage = [m["extra"]["response"]["usage"] for m in doc["messages"] if m["role"] == "assistant"]
        assert row["input_tokens"] == (sum(u["prompt_tokens"] for u in usage) if usage else None)
        if doc["info"]["exit_status"] != "Submitted":
            assert row["error_message"] == doc["info"]["exception_str"]
        assert steps[-1]["role"] == "exit"


def test_sqlfluff_trajectory_times_tokens_and_links(tmp_path):
    src = external(RUN)
    _, card = run_import("mini-swe-agent", [src], tmp_path / "card")
    doc = json.loads((src / "sqlfluff__sqlfluff-2419.traj.json").read_text())
    steps = card.episode_steps("deepseek/deepseek-reasoner/sqlfluff__sqlfluff-2419").to_pylist()
    first_call = next(s for s in steps if s["kind"] == "tool_call")
    msg = doc["messages"][2]
    assert first_call["call_id"] == msg["tool_calls"][0]["id"]
    assert first_call["input_tokens"] == msg["extra"]["response"]["usage"]["prompt_tokens"]
    assert first_call["t"].timestamp() == pytest.approx(msg["extra"]["timestamp"], abs=1e-6)
    ids = {s["call_id"] for s in steps if s["kind"] == "tool_call"}
    assert all(s["call_id"] in ids for s in steps if s["kind"] == "tool_result")


def _traj(iid, exit_status, messages=None):
    return {"info": {"model_stats": {"instance_cost": 0.5, "api_calls": 2}, "mini_version": "1.0.0",
                     "config": {"model": {"model_name": "m"}}, "exit_status": exit_status, "submission": "diff"},
            "messages": messages if messages is not None else [
                {"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
                {"role": "assistant", "content": "ls", "extra": {"timestamp": 1.0e9, "cost": 0.25,
                                                                 "response": {"usage": {"prompt_tokens": 3, "completion_tokens": 1}}}},
                {"role": "user", "content": "<output>ok</output>", "extra": {"timestamp": 1.0e9 + 1}},
                {"role": "exit", "content": exit_status, "extra": {"exit_status": exit_status, "submission": ""}}],
            "trajectory_format": "mini-swe-agent-1.0", "instance_id": iid}


def _write_run(root: Path, statuses: dict[str, list[str]], trajs: dict[str, dict], preds: dict[str, str]):
    root.mkdir()
    (root / "exit_statuses_1.yaml").write_text(yaml.safe_dump({"instances_by_exit_status": statuses}))
    (root / "preds.json").write_text(json.dumps({i: {"model_name_or_path": "m", "instance_id": i, "model_patch": p}
                                                 for i, p in preds.items()}))
    for iid, doc in trajs.items():
        (root / iid).mkdir()
        (root / iid / f"{iid}.traj.json").write_text(json.dumps(doc))
    return root


def test_terminal_states_the_real_run_lacks_and_an_instance_without_outcome(tmp_path):
    statuses = {"Submitted": ["a"], "LimitsExceeded": ["b"], "TimeExceeded": ["c"], "RepeatedFormatError": ["d"]}
    trajs = {i: _traj(i, s) for s, ids in statuses.items() for i in ids}
    root = _write_run(tmp_path / "run", statuses, trajs, {"a": "diff", "b": "", "c": "", "d": "", "e": ""})
    result, card = run_import("mini-swe-agent", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    status = {e["task_id"]: e["status"] for e in card.episodes().to_pylist()}
    assert status == {"a": "completed", "b": "limit", "c": "timeout", "d": "error"}
    drop = next(d for d in card.manifest.drops if d.target == "episodes")
    assert drop.count == 1 and "'e'" in drop.selector  # in preds only: no terminal state known
    steps = card.episode_steps("m/b").to_pylist()
    assert [s["kind"] for s in steps] == ["message", "message", "message", "message", "limit"]
    assert steps[2]["cost_usd"] == 0.25 and steps[2]["input_tokens"] == 3


def test_a_run_whose_listed_instances_all_lack_trajectories_validates(tmp_path):
    # Fuzzer counterexample (missing-file a.traj.json): the submitted-rate rule reads
    # meta.listed_exit_status, which only trajectory episodes had; with none, the column did
    # not exist and the imported card failed validation (rule-invalid).
    root = _write_run(tmp_path / "run", {"Submitted": ["a"], "LimitsExceeded": ["b"]}, {}, {"a": "diff", "b": ""})
    result, card = run_import("mini-swe-agent", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    rows = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert {i: r["meta.listed_exit_status"] for i, r in rows.items()} == {"a": "Submitted", "b": "LimitsExceeded"}
    assert result.rules[0]["reported"][0]["value"] == 0.5


@pytest.mark.parametrize(("write", "needle"), [
    (lambda r: (r / "a" / "a.traj.json").write_text('{"info": {'), "a.traj.json"),
    (lambda r: (r / "exit_statuses_1.yaml").write_text("instances_by_exit_status: &x\n  Submitted: *x\n"), "exit_statuses_1.yaml"),
])
def test_bad_files_are_errors_naming_the_file(tmp_path, write, needle):
    root = _write_run(tmp_path / "run", {"Submitted": ["a", "b"]}, {"a": _traj("a", "Submitted"), "b": _traj("b", "Submitted")}, {})
    write(root)
    with pytest.raises(SourceFormatError) as err:
        run_import("mini-swe-agent", [root], tmp_path / "card")
    assert needle in str(err.value)


def test_keep_going_skips_a_broken_trajectory_and_declares_it(tmp_path):
    root = _write_run(tmp_path / "run", {"Submitted": ["a", "b"]}, {"a": _traj("a", "Submitted"), "b": _traj("b", "Submitted")}, {})
    (root / "a" / "a.traj.json").write_text(json.dumps(_traj("a", "Submitted", [{"role": 3}])))
    result, _ = run_import("mini-swe-agent", [root], tmp_path / "card", keep_going=True)
    assert result.episodes == 1 and len(result.malformed) == 1
    assert_valid(tmp_path / "card")


def test_a_symlinked_trajectory_is_not_followed(tmp_path):
    root = _write_run(tmp_path / "run", {"Submitted": ["a"]}, {}, {})
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(_traj("a", "Submitted")))
    (root / "a").mkdir()
    (root / "a" / "a.traj.json").symlink_to(outside)
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("mini-swe-agent", [root], tmp_path / "card")


def _call(call_id, **extra):
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}, **extra}


def _with_calls(*messages):
    return [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [_call("c1")], "extra": {"timestamp": 1.0e9}},
            {"role": "tool", "tool_call_id": "c1", "content": "ok", "extra": {"returncode": 0}}, *messages]


@pytest.mark.parametrize(("messages", "message"), [
    (_with_calls("x"), "messages[4] is not an object"),
    (_with_calls({"content": "hi"}), "messages[4] has no role"),
    (_with_calls({"role": "user", "content": 5}), "messages[4].content is not text"),
    (_with_calls({"role": "user", "content": "a", "extra": []}), "messages[4].extra is not an object"),
    (_with_calls({"role": "user", "content": "a", "extra": {"timestamp": "now"}}),
     "messages[4].extra.timestamp 'now' is not a time in epoch seconds"),
    (_with_calls({"role": "assistant", "content": "", "tool_calls": "ls"}), "messages[4].tool_calls is not a list"),
    (_with_calls({"role": "assistant", "content": "a", "tool_calls": [{"function": {"name": "bash"}}]}),
     "messages[4].tool_calls[0] is not a tool call with a function name and an id"),
    (_with_calls({"role": "assistant", "content": "a", "extra": {"response": {"usage": {"prompt_tokens": -1}}}}),
     "messages[4].extra.response.usage.prompt_tokens is -1, which is not between 0 and"),
    (_with_calls({"role": "assistant", "content": "a", "extra": {"cost": "1"}}), "messages[4].extra.cost is '1', not a number"),
    (_with_calls({"role": "tool", "tool_call_id": 5, "content": "a"}), "messages[4].tool_call_id is not a string"),
    # A step the StepBuffer refuses (a reused call id whose payload names another source id) comes
    # before a bad message after it: the first error in the file's order is the one raised.
    (_with_calls({"role": "assistant", "content": "", "tool_calls": [_call("c1", source_call_id="c9")]}, "x"),
     "step 4: payload.source_call_id is 'c9', but the source call id is 'c1'"),
])
def test_a_bad_message_is_an_error_naming_the_file_the_instance_and_the_message(tmp_path, messages, message):
    root = _write_run(tmp_path / "run", {"Submitted": ["a"]}, {"a": _traj("a", "Submitted", messages)}, {})
    with pytest.raises(SourceFormatError) as err:
        run_import("mini-swe-agent", [root], tmp_path / "card")
    assert message in str(err.value)
    assert (err.value.file, err.value.record) == (str(root / "a" / "a.traj.json"), "a")


@pytest.mark.parametrize("layout", ["file", "dir"])
def test_a_trajectory_rewritten_between_its_read_and_its_hash_is_refused(tmp_path, monkeypatch, layout):
    # The trajectory is read once and its bytes hashed; the version the session checks at the end
    # used to be taken after the read, so a same-size rewrite in between was unseen (exit 0, the card
    # naming the digest of bytes the file no longer holds).
    import os

    from rollout_cards.importers.session import ImportSession

    root = _write_run(tmp_path / "run", {"Submitted": ["a"]}, {"a": _traj("a", "Submitted")}, {})
    traj = root / "a" / "a.traj.json"
    original = ImportSession.add_source

    def rewrite_first(self, path, *args, **kw):
        if path == traj:  # another process rewrites it after the importer read it
            data = traj.read_bytes()
            traj.write_bytes(data.replace(b"Submitted", b"Submitxed"))
            os.utime(traj, ns=(0, 0))
        return original(self, path, *args, **kw)

    monkeypatch.setattr(ImportSession, "add_source", rewrite_first)
    with pytest.raises(SourceFormatError, match=r"a\.traj\.json: changed while it was imported \([0-9,]+ bytes, "
                                                r"rewritten\)"):
        run_import("mini-swe-agent", [traj if layout == "file" else root], tmp_path / "card")
    assert not (tmp_path / "card").exists()


# -- before 1.0: a trajectory was the message list alone ------------------------------------------------
def _pre_1_0_messages(iid: str, turns: int) -> list[dict[str, str]]:
    """What mini-swe-agent 1.0.0.dev3 saved as a trajectory (`json.dumps(agent.messages)`): a bare list
    of {role, content} — the system and instance prompts, then an assistant reply with one bash block
    and the observation for each turn; nothing else (no info, no timestamps, no usage)."""
    messages = [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
                {"role": "user", "content": f"Please solve this issue: {iid} fails on empty input."}]
    for t in range(turns):
        messages.append({"role": "assistant", "content": f"THOUGHT: look at the code ({t}).\n\n```bash\nls src\n```"})
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\nfile{t}.py\n</output>"})
    return messages


def _pre_1_0_run(root: Path, statuses: dict[str, list[str]], trajs: dict[str, int]) -> Path:
    root.mkdir()
    (root / "exit_statuses_1752000000.0.yaml").write_text(yaml.safe_dump({"instances_by_exit_status": statuses}))
    (root / "preds.json").write_text(json.dumps({i: {"model_name_or_path": "m", "instance_id": i, "model_patch": ""}
                                                 for i in trajs}))
    for iid, turns in trajs.items():
        (root / iid).mkdir()
        (root / iid / f"{iid}.traj.json").write_text(json.dumps(_pre_1_0_messages(iid, turns), indent=2))
    return root


def test_a_pre_1_0_trajectory_a_bare_message_list_imports_its_status_from_the_exit_statuses(tmp_path):
    # Refused before ("is not a mini-swe-agent trajectory"): mini-swe-agent up to 1.0.0.dev3 wrote
    # the messages alone. The status comes from the exit statuses file; an instance it does not list
    # has no recorded end: error / unrecorded_exit_status, declared — not guessed from the messages.
    root = _pre_1_0_run(tmp_path / "run", {"Submitted": ["a"], "LimitsExceeded": ["b"]}, {"a": 2, "b": 3, "c": 1})
    result, card = run_import("mini-swe-agent", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    rows = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert {i: (r["status"], r["error_type"]) for i, r in rows.items()} == {
        "a": ("completed", None), "b": ("limit", None), "c": ("error", "unrecorded_exit_status")}
    assert rows["c"]["meta.exit_status"] is None and rows["b"]["meta.exit_status"] == "LimitsExceeded"
    assert {r["meta.trajectory_shape"] for r in rows.values()} == {"message-list"}
    for iid, row in rows.items():  # every message a step, in order, as the file has them
        messages = json.loads((root / iid / f"{iid}.traj.json").read_text())
        steps = card.episode_steps(row["episode_id"]).to_pylist()
        assert [(s["kind"], s["role"], s["content"]) for s in steps] == [
            ("message", m["role"], m["content"]) for m in messages]
        assert row["cost_usd"] is None and row["input_tokens"] is None
    drop = next(d for d in card.manifest.drops if d.target == "episodes.status")
    assert (drop.count, drop.declaration, drop.selector) == (1, "source_missing", "error_type == 'unrecorded_exit_status'")
    assert any("bare message lists" in n and "c" in n for n in result.notes)
    assert {d.target for d in card.manifest.drops} >= {"episodes.cost_usd", "episodes.meta.api_calls"}
    rule = next(r for r in result.rules if r["rule"] == "mini_swe_agent.submitted_rate")
    assert rule["reported"][0]["value"] == 0.5  # over the two listed instances


def test_a_single_pre_1_0_trajectory_has_no_recorded_end(tmp_path):
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps(_pre_1_0_messages("x", 1)))
    result, card = run_import("mini-swe-agent", [path], tmp_path / "card")
    assert_valid(tmp_path / "card")
    (row,) = card.episodes().to_pylist()
    assert (row["status"], row["error_type"], row["agent"]) == ("error", "unrecorded_exit_status", tmp_path.name)
    assert result.statuses == {"error": 1}


def test_a_bad_message_of_a_pre_1_0_trajectory_names_the_file_and_the_message(tmp_path):
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps([*_pre_1_0_messages("x", 1), "oops"]))
    with pytest.raises(SourceFormatError, match=r"messages\[4\] is not an object") as err:
        run_import("mini-swe-agent", [path], tmp_path / "card")
    assert err.value.file == str(path)


# -- the agent name is never empty ---------------------------------------------------------------------
def _no_model_traj(iid: str) -> dict:
    doc = _traj(iid, "Submitted")
    del doc["info"]["config"]
    return doc


@pytest.mark.parametrize("layout", ["file", "flat-dot", "nested-dot"])
def test_a_relative_source_of_a_run_without_a_model_name_is_named_after_its_directory(tmp_path, monkeypatch, layout):
    # `rcard import mini-swe-agent x.traj.json` (or `.`) in the run's directory, no model named in
    # it: the agent was Path('.').name == '' and the card writer refused it — exit 2, "internal error".
    from typer.testing import CliRunner

    from rollout_cards.cli import app

    run = tmp_path / "my-run"
    run.mkdir()
    if layout == "nested-dot":
        (run / "a").mkdir()
        (run / "a" / "a.traj.json").write_text(json.dumps(_no_model_traj("a")))
    else:
        (run / "a.traj.json").write_text(json.dumps(_no_model_traj("a")))
    monkeypatch.chdir(run)
    result = CliRunner().invoke(app, ["import", "mini-swe-agent", "a.traj.json" if layout == "file" else ".",
                                      "-o", str(tmp_path / "card")])
    assert result.exit_code == 0, result.output
    import rollout_cards as rc

    (row,) = rc.open(tmp_path / "card").episodes().to_pylist()
    assert (row["agent"], row["episode_id"]) == ("my-run", "my-run/a")


def test_an_empty_agent_name_is_an_error_naming_the_record_and_the_fix(tmp_path):
    from rollout_cards.importers.session import ImportSession
    from rollout_cards.importers.steps import StepBuffer

    session = ImportSession(tmp_path / "card", format="mini-swe-agent", card_id="c", title="t")
    try:
        with pytest.raises(SourceFormatError, match="agent name is empty; name the agent with --agent") as err:
            session.add_episode({"episode_id": "/a", "task_id": "a", "agent": "", "status": "completed"},
                                StepBuffer("/a", file="src.json", record="a"))
        assert (err.value.file, err.value.record) == ("src.json", "a")
        with pytest.raises(SourceFormatError, match="agent's name is empty"):
            session.add_agent({"name": ""})
    finally:
        session.abort()


def _responses_api_messages() -> list[dict]:
    """A trajectory of a mini-swe-agent 2.x Responses API model (litellm_response_model): the
    model's message is the response object (no role; text and calls in `output`), a tool result
    is a `function_call_output` item, a format error a `message` item with `input_text` parts."""
    usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
             "output_tokens_details": {"reasoning_tokens": 5}}
    return [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
        {"id": "resp_1", "object": "response", "created_at": 1767398400, "model": "gpt-5-mini", "status": "completed",
         "output": [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
                    {"type": "message", "id": "msg_1", "role": "assistant",
                     "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
                    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash",
                     "arguments": '{"command": "ls"}', "status": "completed"}],
         "usage": usage, "extra": {"actions": [{"command": "ls", "tool_call_id": "call_1"}], "cost": 0.01,
                                   "timestamp": 1767398401.0}},
        {"type": "function_call_output", "call_id": "call_1", "output": "<returncode>1</returncode>",
         "extra": {"raw_output": "", "returncode": 1, "timestamp": 1767398402.0, "exception_info": None}},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "No tool calls found"}],
         "extra": {"interrupt_type": "FormatError"}},
        {"id": "resp_2", "object": "response", "model": "gpt-5-mini",
         "output": [{"type": "function_call", "call_id": "call_2", "name": "bash", "arguments": '{"command": "echo done"}'}],
         "usage": {"input_tokens": 150, "output_tokens": 10},
         "extra": {"actions": [{"command": "echo done", "tool_call_id": "call_2"}], "cost": 0.01, "timestamp": 1767398404.0}},
        {"role": "exit", "content": "diff", "extra": {"exit_status": "Submitted", "submission": "diff"}},
    ]


def test_a_responses_api_trajectory_maps_its_output_items(tmp_path):
    # mini-swe-agent 2.x with a Responses API model (litellm_response, openrouter_response,
    # portkey_response) saves the response object as the model's message; before, the import
    # stopped at it: "messages[2] has no role" (exit 1)
    messages = _responses_api_messages()
    root = _write_run(tmp_path / "run", {"Submitted": ["a"]}, {"a": _traj("a", "Submitted", messages)}, {"a": "diff"})
    _, card = run_import("mini-swe-agent", [root], tmp_path / "card")
    assert_valid(tmp_path / "card")
    steps = card.episode_steps("m/a").to_pylist()
    assert [(s["kind"], s["role"]) for s in steps] == [
        ("message", "system"), ("message", "user"), ("message", "assistant"), ("tool_call", "assistant"),
        ("tool_result", "tool"), ("message", "user"), ("tool_call", "assistant"), ("state", "exit")]
    first, call, result, _, second = steps[2:7]
    assert first["content"] == "Let me look." and (first["input_tokens"], first["output_tokens"]) == (100, 20)
    assert first["cost_usd"] == 0.01 and call["input_tokens"] is None  # usage once per model message
    assert (call["name"], call["call_id"], call["args"]) == ("bash", "call_1", '{"command": "ls"}')
    assert (result["call_id"], result["content"], result["is_error"]) == ("call_1", "<returncode>1</returncode>", True)
    assert (second["call_id"], second["input_tokens"], second["output_tokens"]) == ("call_2", 150, 10)
    # nothing dropped: the reasoning and message items, the response's own fields, the call item's id
    payload = json.loads(first["payload"])
    assert [o["type"] for o in payload["output"]] == ["reasoning", "message"]
    assert payload["response"]["usage"] == messages[2]["usage"] and payload["response"]["created_at"] == 1767398400
    assert json.loads(call["payload"]) == {"item_id": "fc_1", "status": "completed"}
    assert json.loads(result["payload"])["type"] == "function_call_output"
    episode = card.episodes().to_pylist()[0]
    assert (episode["input_tokens"], episode["output_tokens"]) == (250, 30)


def test_a_bad_responses_api_message_names_the_message(tmp_path):
    bad = _responses_api_messages()
    bad[2]["output"][2] = {"type": "function_call", "name": "bash"}
    root = _write_run(tmp_path / "run", {"Submitted": ["a"]}, {"a": _traj("a", "Submitted", bad)}, {})
    with pytest.raises(SourceFormatError, match=r"messages\[2\].output\[2\] is a function_call without a call_id"):
        run_import("mini-swe-agent", [root], tmp_path / "card")
    bad[2]["output"] = "x"
    (root / "a" / "a.traj.json").write_text(json.dumps(_traj("a", "Submitted", bad)))
    with pytest.raises(SourceFormatError, match=r"messages\[2\] is a Responses API response whose output is not a list"):
        run_import("mini-swe-agent", [root], tmp_path / "card")


def test_each_instance_gets_its_own_patch_from_a_preds_file_read_by_byte_ranges(tmp_path):
    # preds.json is streamed and each prediction read again by its byte range: non-ASCII patches
    # (ranges in bytes, not characters), values past the stream's 1 MiB buffer and a repeated key
    # (the last value wins, as json.loads keeps it) must give each instance the patch json.loads gives.
    import hashlib

    ids = [f"i{k}" for k in range(40)]
    statuses = {"Submitted": ids}
    root = _write_run(tmp_path / "run", statuses, {i: _traj(i, "Submitted") for i in ids[:3]}, {})
    parts = [f'"{i}": {json.dumps({"model_name_or_path": "m", "instance_id": i, "model_patch": "é😀 " * (k * 4000) + i})}'
             for k, i in enumerate(ids)]
    parts.append('"i5": {"model_name_or_path": "m", "instance_id": "i5", "model_patch": "the last i5 ✓"}')
    text = "{\n  " + ",\n  ".join(parts) + "\n}"
    (root / "preds.json").write_text(text, encoding="utf-8")
    expected = json.loads(text)
    _, card = run_import("mini-swe-agent", [root], tmp_path / "card")
    rows = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert sorted(rows) == sorted(ids)
    for iid, row in rows.items():
        if iid in ids[:3]:
            continue  # a trajectory's own submission may be what its patch artifact holds
        blob = (tmp_path / "card" / "artifacts" / row["meta.patch_artifact"]).read_bytes()
        assert blob.decode("utf-8") == expected[iid]["model_patch"], iid
        assert hashlib.sha256(blob).hexdigest() == row["meta.patch_artifact"]


def test_a_preds_file_that_is_not_an_object_names_the_file(tmp_path):
    root = _write_run(tmp_path / "run", {"Submitted": ["a"]}, {}, {})
    (root / "preds.json").write_text('[{"instance_id": "a"}]')
    with pytest.raises(SourceFormatError, match="not a JSON object keyed by instance id") as err:
        run_import("mini-swe-agent", [root], tmp_path / "card")
    assert "preds.json" in str(err.value)
