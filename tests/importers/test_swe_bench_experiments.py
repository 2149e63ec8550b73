"""SWE-bench experiments-style submission directories (swe-bench/experiments layout).

No real submission directory is in ../shared, so one is laid out from the real harness
run (its predictions and its per-instance report.json files, ../shared/data/external/
swe-bench) with a results.json written as the experiments repository's get_results does:
category -> instance ids. Expected values are computed from those files by hand.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.rules.loader import parse_rule
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

RUN = "swe-bench/harness_deepseek_chat_dev"


def _submission(tmp_path, extra_lists=None):
    real = external(RUN)
    preds = json.loads((real / "preds.json").read_text())
    report = json.loads((real / "deepseek__deepseek-chat.deepseek_chat_dev.json").read_text())
    sub = tmp_path / "evaluation" / "verified" / "20250101_deepseek-chat"
    (sub / "results").mkdir(parents=True)
    (sub / "trajs").mkdir()
    (sub / "trajs" / "x.traj").write_text("{}")
    (sub / "metadata.yaml").write_text("name: DeepSeek Chat\noss: true\n")
    (sub / "all_preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds.values()))
    for inst in real.iterdir():
        if inst.is_dir():
            (sub / "logs" / inst.name).mkdir(parents=True)
            shutil.copy(inst / "report.json", sub / "logs" / inst.name / "report.json")
    ids = sorted(preds)
    unresolved = [i for i in report["unresolved_ids"]]
    results = {"resolved": report["resolved_ids"], "generated": ids, "with_logs": ids, "applied": ids[:-3],
               "no_generation": [], "no_apply": unresolved[:2], "test_timeout": unresolved[2:3],
               **(extra_lists or {})}
    (sub / "results" / "results.json").write_text(json.dumps(results))
    return sub, preds, report, results


def test_a_submission_directory_imports_with_each_category_kept(tmp_path):
    sub, preds, report, results = _submission(tmp_path)
    result, card = run_import("swe-bench", [sub], tmp_path / "card")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert set(eps) == set(preds)
    for iid, e in eps.items():
        assert e["score.resolved"] == (iid in results["resolved"])
        names = [n for n, ids in results.items() if iid in ids]
        assert e["meta.experiments_lists"].split(",") == names
        if iid in results["no_apply"]:
            assert e["status"] == "error" and "did not apply" in e["error_message"]
        elif iid in results["test_timeout"]:
            assert e["status"] == "timeout" and "timed out" in e["error_message"]
        else:
            assert e["status"] == "completed"
    # per-instance report.json under logs/<instance>/: the per-test results a rule regrades from
    for inst in (sub / "logs").iterdir():
        doc = json.loads((inst / "report.json").read_text())[inst.name]
        f2p = doc["tests_status"]["FAIL_TO_PASS"]
        assert eps[inst.name]["score.f2p_success"] == len(f2p["success"])
        assert eps[inst.name]["score.report_resolved"] == doc["resolved"]
    # the reported rate replays: resolved over every instance of the submission
    [ref] = [r for r in card.manifest.rules if r.id == "swe_bench.resolved_rate"]
    [reported] = parse_rule(card.read_text(ref.path), file=ref.path).reported
    assert reported.value == pytest.approx(len(results["resolved"]) / len(preds))
    agents = {e["agent"] for e in eps.values()}
    assert agents == {next(iter(preds.values()))["model_name_or_path"]}
    assert any("experiments-style submission" in n for n in result.notes)
    assert_valid(tmp_path / "card")


def test_unknown_categories_are_kept_and_named(tmp_path):
    first_id = sorted(json.loads((external(RUN) / "preds.json").read_text()))[0]
    sub, *_ = _submission(tmp_path, {"weird": [first_id]})
    result, card = run_import("swe-bench", [sub], tmp_path / "card")
    assert any("weird" in n and "not known" in n for n in result.notes)
    first = card.episodes(filter=f"task_id == '{first_id}'").to_pylist()[0]
    assert "weird" in first["meta.experiments_lists"].split(",")


def test_a_bad_results_file_and_a_linked_one_are_refused(tmp_path):
    sub, *_ = _submission(tmp_path)
    (sub / "results" / "results.json").write_text(json.dumps({"resolved": [1, 2]}))
    with pytest.raises(SourceFormatError, match="resolved is not a list of instance ids") as info:
        run_import("swe-bench", [sub], tmp_path / "card")
    assert "results.json" in str(info.value)
    (sub / "results" / "results.json").unlink()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"resolved": []}))
    os.symlink(outside, sub / "results" / "results.json")
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("swe-bench", [sub], tmp_path / "card2")


def _step_shape(card, episode_id):
    rows = card.steps(filter=f"episode_id == '{episode_id}'",
                      columns=["seq", "kind", "role", "name", "call_id", "content", "args", "t", "input_tokens"]).to_pylist()
    return [{k: v for k, v in r.items()} for r in rows]


def test_trajectories_under_trajs_are_merged_into_their_episodes_by_shape(tmp_path):
    """Real trajectories put under trajs/: two mini-swe-agent ones of instances of the run (one
    flat, one in <instance>/), a real SWE-agent .traj named as a third instance, notes that are no
    trajectory, one of an instance the submission lacks. Each merged episode has the steps the
    agent's own importer gives for the file, tokens and cost by plain Python over the file; the
    status and score stay the harness's; every other instance is declared without steps."""
    sub, preds, report, results = _submission(tmp_path)
    mini = external("mini-swe-agent/deepseek_reasoner_dev")
    swe = external("swe-agent/v0/pydicom__pydicom-1458.traj")
    trajs = sub / "trajs"
    shutil.copy(mini / "pvlib__pvlib-python-1606.traj.json", trajs / "pvlib__pvlib-python-1606.traj.json")
    (trajs / "sqlfluff__sqlfluff-2419").mkdir()
    shutil.copy(mini / "sqlfluff__sqlfluff-2419.traj.json", trajs / "sqlfluff__sqlfluff-2419" /
                "sqlfluff__sqlfluff-2419.traj.json")
    shutil.copy(swe, trajs / "pydicom__pydicom-1413.traj")
    (trajs / "marshmallow-code__marshmallow-1343.md").write_text("# what the agent thought\n")
    (trajs / "pvlib__pvlib-python-1072.json").write_text(json.dumps({"steps": []}))  # a shape neither agent's
    result, card = run_import("swe-bench", [sub], tmp_path / "card")
    assert_valid(tmp_path / "card")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    agent = next(iter(eps.values()))["agent"]
    merged = {"pvlib__pvlib-python-1606": (mini / "pvlib__pvlib-python-1606.traj.json", "mini-swe-agent",
                                           "trajs/pvlib__pvlib-python-1606.traj.json"),
              "sqlfluff__sqlfluff-2419": (mini / "sqlfluff__sqlfluff-2419.traj.json", "mini-swe-agent",
                                          "trajs/sqlfluff__sqlfluff-2419/sqlfluff__sqlfluff-2419.traj.json"),
              "pydicom__pydicom-1413": (swe, "swe-agent", "trajs/pydicom__pydicom-1413.traj")}
    for iid, (source, fmt, where) in merged.items():
        e = eps[iid]
        doc = json.loads(source.read_text())
        stats = doc["info"]["model_stats"]
        assert e["meta.trajectory_format"] == fmt and e["meta.traj_exit_status"] == doc["info"]["exit_status"]
        assert e["meta.trajectory"] == where
        assert json.loads(e["meta.traj_info"]) == doc["info"]
        assert e["cost_usd"] == pytest.approx(stats["instance_cost"])
        if fmt == "mini-swe-agent":
            usage = [m["extra"]["response"]["usage"] for m in doc["messages"] if m["role"] == "assistant"]
            assert (e["input_tokens"], e["output_tokens"]) == (sum(u["prompt_tokens"] for u in usage),
                                                               sum(u["completion_tokens"] for u in usage))
        else:
            assert (e["input_tokens"], e["output_tokens"]) == (stats["tokens_sent"], stats["tokens_received"])
        # the harness's outcome stands
        status = ("error" if iid in results["no_apply"] else "timeout" if iid in results["test_timeout"]
                  else "completed")
        assert e["score.resolved"] == (iid in results["resolved"]) and e["status"] == status
        # the steps are those the agent's own importer maps from the same file
        alone_dir = tmp_path / f"alone-{iid}"
        alone_src = alone_dir / (f"{iid}.traj" if fmt == "swe-agent" else source.name)
        alone_dir.mkdir()
        shutil.copy(source, alone_src)
        _r, alone = run_import(fmt, [alone_src], tmp_path / f"alone-card-{iid}")
        [alone_ep] = alone.episodes().to_pylist()
        assert _step_shape(card, e["episode_id"]) == _step_shape(alone, alone_ep["episode_id"])
        assert len(_step_shape(card, e["episode_id"])) >= len(doc.get("messages", doc.get("history")))
    text = "marshmallow-code__marshmallow-1343"  # the notes (.md): kept whole, no steps
    assert eps[text]["meta.trajectory_format"] == "text"
    unmerged = sorted(set(eps) - set(merged) - {text})
    for iid in unmerged + [text]:
        assert eps[iid]["meta.trajectory_format"] is None or iid == text
        assert card.steps(filter=f"episode_id == '{eps[iid]['episode_id']}'").num_rows == 0
    drops = {d.loss_class: d for d in card.manifest.drops if d.target == "steps"}
    assert drops["missing_trajectory"].count == len(unmerged) == len(preds) - 4
    assert drops["unsupported_format"].count == 1  # the unknown JSON shape
    assert drops["unstructured_source"].count == 1
    assert "a SWE-bench report holds outcomes only" not in " ".join(d.reason for d in card.manifest.drops)
    tokens = [d for d in card.manifest.drops if d.target == "episodes.input_tokens"]
    assert [d.count for d in tokens] == [len(preds) - 3]
    assert any("4 trajectory file(s) under trajs/ merged" in n for n in result.notes)
    assert any("trajectory file(s) under trajs/ are of instances the submission does not list (x)" in n
               for n in result.notes)
    [info] = [a for a in card.manifest.provenance.agents if a.name == agent]
    assert info.parameters["leaderboard_name"] == "DeepSeek Chat" and info.parameters["oss"] is True


def test_metadata_yaml_of_the_info_and_tags_form_names_the_model(tmp_path):
    sub, preds, *_ = _submission(tmp_path)
    (sub / "metadata.yaml").write_text(
        "info:\n  name: Agentless + DeepSeek\n  site: https://example.org/agent\n  report: https://example.org/r\n"
        "tags:\n  checked: false\n  model:\n  - deepseek-chat\n  org:\n  - Example Lab\n  os_model: true\n"
        "  os_system: true\n  system:\n    attempts: '1'\n")
    _r, card = run_import("swe-bench", [sub], tmp_path / "card")
    [info] = card.manifest.provenance.agents
    assert info.model == "deepseek-chat"
    assert info.parameters == {"leaderboard_name": "Agentless + DeepSeek", "site": "https://example.org/agent",
                               "report": "https://example.org/r", "org": ["Example Lab"], "os_model": True,
                               "os_system": True, "checked": False, "attempts": "1"}
    assert card.manifest.meta["swe_bench_experiments"]["metadata"]["tags"]["model"] == ["deepseek-chat"]
    (sub / "metadata.yaml").write_text("tags:\n  model: {a: 1}\n")
    with pytest.raises(SourceFormatError, match="tags.model is not a model name") as err:
        run_import("swe-bench", [sub], tmp_path / "card2")
    assert "metadata.yaml" in str(err.value) and "line 2" in str(err.value)


def _text_parts(content):
    """A message content as OpenHands sends it with prompt caching: a list of text parts."""
    return [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]


def test_chat_message_arrays_free_text_traces_and_unknown_formats_under_trajs(tmp_path):
    """trajs/ as other scaffolds fill it. An OpenHands submission's <instance>.json is the `messages`
    of the latest LLM completion log (convert_oh_folder_to_swebench_submission.sh): here the real
    mini-swe-agent messages of pvlib-1606 without mini's own `extra` and exit message (litellm chat
    messages, as OpenHands logs them), two contents as cached text parts. An Agentless-style .log is
    kept whole; a Moatless file (`transitions`) is declared by its kind. Expected steps by plain Python
    over the array."""
    sub, preds, report, results = _submission(tmp_path)
    real = json.loads((external("mini-swe-agent/deepseek_reasoner_dev") / "pvlib__pvlib-python-1606.traj.json")
                      .read_text())
    messages = [{k: v for k, v in m.items() if k != "extra"} for m in real["messages"] if m["role"] != "exit"]
    messages[1]["content"] = _text_parts(messages[1]["content"])
    messages[3]["content"] = _text_parts(messages[3]["content"])
    trajs = sub / "trajs"
    (trajs / "pvlib__pvlib-python-1154.json").write_text(json.dumps(messages))
    log = b"2024-06-01 10:00:00,000 - INFO - ### localize\n\xe2\x9c\x93 found the file\n"
    (trajs / "pydicom__pydicom-901.log").write_bytes(log)
    (trajs / "pydicom__pydicom-1139.json").write_text(json.dumps({"transitions": [{"name": "SearchCode"}],
                                                                   "info": {"total_cost": 0.1}}))
    _r, card = run_import("swe-bench", [sub], tmp_path / "card")
    assert_valid(tmp_path / "card")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    chat = eps["pvlib__pvlib-python-1154"]
    assert chat["meta.trajectory_format"] == "chat-messages" and chat.get("meta.traj_info") is None
    assert chat["input_tokens"] is None and chat["cost_usd"] is None
    assert chat["score.resolved"] == ("pvlib__pvlib-python-1154" in results["resolved"])
    expected = []
    for m in messages:
        content = m["content"] if not isinstance(m["content"], list) else m["content"][0]["text"]
        if m["role"] == "tool":
            expected.append(("tool_result", "tool", None, m["tool_call_id"], content))
            continue
        if content is not None or not m.get("tool_calls"):
            expected.append(("message", m["role"], None, None, content))
        for call in m.get("tool_calls") or []:
            expected.append(("tool_call", m["role"], call["function"]["name"], call["id"], None))
    got = [(r["kind"], r["role"], r["name"], r["call_id"], r["content"]) for r in _step_shape(card, chat["episode_id"])]
    assert got == expected
    assert sum(k == "tool_call" for k, *_ in got) == sum(k == "tool_result" for k, *_ in got) == 4
    [parts] = [r for r in card.steps(filter=f"episode_id == '{chat['episode_id']}' and seq == 1",
                                     columns=["payload"]).to_pylist()]
    assert json.loads(parts["payload"])["content"] == messages[1]["content"]  # the parts, cache marks and all
    text = eps["pydicom__pydicom-901"]
    assert text["meta.trajectory_format"] == "text" and text["meta.trajectory"] == "trajs/pydicom__pydicom-901.log"
    assert (tmp_path / "card" / "artifacts" / text["meta.trajectory_artifact"]).read_bytes() == log
    assert eps["pydicom__pydicom-1139"]["meta.trajectory_format"] is None
    drops = {d.loss_class: d for d in card.manifest.drops if d.target == "steps"}
    assert drops["missing_final_response"].count == 1
    assert "convert_oh_folder_to_swebench_submission.sh" in drops["missing_final_response"].reason
    assert drops["unstructured_source"].count == 1 and "pydicom__pydicom-901" in drops["unstructured_source"].selector
    assert drops["unsupported_format"].count == 1 and "Moatless" in drops["unsupported_format"].reason
    assert "trajs/pydicom__pydicom-1139.json" in drops["unsupported_format"].reason
    assert drops["missing_trajectory"].count == len(preds) - 2  # the chat array and the text trace are read


def test_a_directory_above_submissions_or_predictions_alone_say_what_to_import(tmp_path):
    # The experiments repository lays submissions out as evaluation/<split>/<submission>/. Given the split
    # directory, two submissions' logs/<instance>/report.json collided: "is a second report.json for
    # instance ..."; one submission's split directory had its logs read as a run without its results.json.
    # Predictions alone said only "holds no SWE-bench run report ... and no instance report.json".
    sub, _preds, _report, _results = _submission(tmp_path)
    shutil.copytree(sub, sub.parent / "20250202_other")
    for source in (sub.parent, tmp_path / "evaluation", tmp_path):
        with pytest.raises(SourceFormatError, match=r"holds experiments-style submission directories below it "
                           r"\(2, e\.g\. .*20250101_deepseek-chat\).*import one submission directory") as exc:
            run_import("swe-bench", [source], tmp_path / "c")
        assert exc.value.file == str(source)
    result, _card = run_import("swe-bench", [sub], tmp_path / "c-one")  # a submission itself imports
    assert result.episodes == 23
    with pytest.raises(SourceFormatError, match=r"holds predictions only .*give the harness's run report"):
        run_import("swe-bench", [sub / "all_preds.jsonl"], tmp_path / "c-preds")
