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
    unmerged = sorted(set(eps) - set(merged))
    for iid in unmerged:
        assert eps[iid]["meta.trajectory_format"] is None
        assert card.steps(filter=f"episode_id == '{eps[iid]['episode_id']}'").num_rows == 0
    drops = {d.loss_class: d for d in card.manifest.drops if d.target == "steps"}
    assert drops["missing_trajectory"].count == len(unmerged) == len(preds) - 3
    assert drops["unsupported_format"].count == 2  # the notes (.md) and the unknown JSON shape
    assert "a SWE-bench report holds outcomes only" not in " ".join(d.reason for d in card.manifest.drops)
    tokens = [d for d in card.manifest.drops if d.target == "episodes.input_tokens"]
    assert [d.count for d in tokens] == [len(preds) - 3]
    assert any("3 trajectory file(s) under trajs/ merged" in n for n in result.notes)
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
