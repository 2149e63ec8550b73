"""OpenHands resolver output.jsonl (ResolverOutput lines), built as the resolver writes them.

Writer: All-Hands-AI/OpenHands @156d0686 openhands/resolver/issue_resolver.py (process_issue:
`ResolverOutput(...)`, `histories = [dataclasses.asdict(event) for event in state.history]`, a crashed run
written with history [], metrics None, success False, error 'Agent failed to run or crashed'; resolve_issue:
`output_fp.write(output.model_dump_json() + '\\n')`), openhands/resolver/resolver_output.py,
interfaces/issue.py (Issue). Shapes of the asdict events as in tests/unit/resolver/mock_output/output.jsonl.
These lines were exit 1 ("instance_id None is not an id") before.
"""

from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from tests.importers.conftest import assert_valid, run_import

INSTRUCTION = "Please fix the following issue for the repository in /workspace.\n# Problem Statement\nAdd a LICENSE"


def _history():
    # dataclasses.asdict(event): the dataclass fields only (no id, cause, source, timestamp)
    return [
        {"content": INSTRUCTION, "image_urls": None, "wait_for_response": False, "action": "message",
         "security_risk": -1},
        {"command": "touch LICENSE", "is_input": False, "thought": "Create the file.", "blocking": False,
         "action": "run", "security_risk": -1},
        {"content": "", "command": "touch LICENSE", "observation": "run",
         "metadata": {"exit_code": 0, "pid": -1}, "hidden": False},
        {"code": "open('LICENSE','w').write(MIT)", "thought": "", "include_extra": True, "action": "run_ipython",
         "kernel_init_code": ""},
        {"content": "NameError: name 'MIT' is not defined", "error_id": "", "observation": "error"},
        {"content": "Done, please review.", "image_urls": None, "wait_for_response": True, "action": "message",
         "security_risk": -1},
        {"content": "Please continue working on the task.", "image_urls": None, "wait_for_response": False,
         "action": "message", "security_risk": -1},
        {"content": "agent state changed", "agent_state": "running", "reason": "", "observation":
         "agent_state_changed"},
        {"outputs": {}, "thought": "The license is added.", "final_thought": "", "action": "finish"},
    ]


def _line(number, **kw):
    line = {"issue": {"owner": "neubig", "repo": "pr-viewer", "number": number, "title": "Add MIT license",
                      "body": "license it", "thread_comments": None, "closing_issues": None,
                      "review_comments": None, "review_threads": None, "thread_ids": None, "head_branch": None,
                      "base_branch": None},
            "issue_type": "issue", "instruction": INSTRUCTION, "base_commit": "0a1b2c",
            "git_patch": "diff --git a/LICENSE b/LICENSE\n", "history": _history(),
            "metrics": {"accumulated_cost": 0.07, "costs": [0.03, 0.04]}, "success": True,
            "comment_success": None, "result_explanation": "The LICENSE file was added.", "error": None}
    line.update(kw)
    return line


def _write(tmp_path, *lines):
    src = tmp_path / "output.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return src


def test_resolver_lines_import_with_calls_linked_by_order(tmp_path):
    pr = _line(7, issue_type="pr", comment_success=[True, False], success=False,
               result_explanation=json.dumps(["fixed the typo", "did not add tests"]))
    crashed = _line(9, history=[], metrics=None, success=False, git_patch="",
                    result_explanation="Agent failed to run", error="Agent failed to run or crashed")
    limited = _line(11, error="RuntimeError: Agent reached maximum iteration in headless mode. Current iteration: "
                    "30, max iteration: 30")
    src = _write(tmp_path, _line(5), pr, crashed, limited)
    result, card = run_import("openhands", [src], tmp_path / "c")
    assert_valid(tmp_path / "c")
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    assert {k: (e["status"], e["score.success"], e["agent"]) for k, e in eps.items()} == {
        "neubig/pr-viewer#5": ("completed", True, "openhands-resolver"),
        "neubig/pr-viewer#7": ("completed", False, "openhands-resolver"),
        "neubig/pr-viewer#9": ("error", False, "openhands-resolver"),
        "neubig/pr-viewer#11": ("limit", True, "openhands-resolver")}
    ok = eps["neubig/pr-viewer#5"]
    assert ok["task.instruction"] == INSTRUCTION and json.loads(ok["task.instance"])["number"] == 5
    assert ok["cost_usd"] == 0.07 and ok["meta.base_commit"] == "0a1b2c" and ok["meta.issue_type"] == "issue"
    assert (tmp_path / "c" / "artifacts" / ok["meta.patch_artifact"]).read_text() == "diff --git a/LICENSE b/LICENSE\n"
    assert (eps["neubig/pr-viewer#7"]["score.comments_resolved"], eps["neubig/pr-viewer#7"]["score.comments"]) == (1, 2)
    assert eps["neubig/pr-viewer#9"]["error_message"] == "Agent failed to run or crashed"
    assert eps["neubig/pr-viewer#9"]["n_steps"] == 0 and eps["neubig/pr-viewer#9"]["meta.patch_artifact"] is None
    assert eps["neubig/pr-viewer#11"]["error_type"] == "RuntimeError"

    steps = card.steps(filter="episode_id == 'neubig/pr-viewer#5'").to_pylist()
    history = _history()
    assert len(steps) == len(history)  # every event is one step
    assert [(s["kind"], s["role"], s["name"]) for s in steps] == [
        ("message", "user", None), ("tool_call", "assistant", "run"), ("tool_result", "tool", "run"),
        ("tool_call", "assistant", "run_ipython"), ("tool_result", "tool", "error"),
        ("message", None, None), ("message", None, None), ("observation", "tool", "agent_state_changed"),
        ("tool_call", "assistant", "finish")]
    assert steps[2]["call_id"] == steps[1]["call_id"] and steps[4]["call_id"] == steps[3]["call_id"]
    assert steps[4]["is_error"] is True and steps[4]["content"] == history[4]["content"]
    assert json.loads(steps[1]["args"])["command"] == "touch LICENSE" and steps[1]["content"] == "Create the file."
    assert steps[5]["content"] == "Done, please review."
    roles = [d for d in card.manifest.drops if d.target == "steps.role"]
    assert [d.count for d in roles] == [3 * 2]  # two unknown-role messages in each of the 3 histories
    assert {d.target for d in card.manifest.drops} >= {"episodes.input_tokens", "episodes.output_tokens"}
    assert any("resolver output" in n for n in result.notes)


@pytest.mark.parametrize(("change", "message"), [
    ({"issue": {"owner": "o", "repo": "r", "number": "5"}}, "issue.number is '5'"),
    ({"issue": {"repo": "r", "number": 5}}, "issue.owner is None"),
    ({"success": "yes"}, "success is 'yes'"),
    ({"comment_success": [1]}, "comment_success is [1]"),
    ({"history": {"a": 1}}, "history is dict"),
])
def test_bad_resolver_lines_are_located(tmp_path, change, message):
    src = _write(tmp_path, _line(5, **change))
    with pytest.raises(SourceFormatError) as info:
        run_import("openhands", [src], tmp_path / "c")
    assert message in str(info.value) and "output.jsonl" in str(info.value) and "line 1" in str(info.value)


def test_a_line_that_is_neither_says_so(tmp_path):
    src = _write(tmp_path, {"issue_type": "issue", "history": []})
    with pytest.raises(SourceFormatError, match="has no instance_id: not an OpenHands EvalOutput line"):
        run_import("openhands", [src], tmp_path / "c")


def _eval_line(instance, score=None, error=None):
    return {"instance_id": instance, "test_result": {} if score is None else {"score": score}, "instruction": "q",
            "metadata": {"llm": {"model": "m"}}, "history": [], "metrics": None, "error": error}


def test_a_gaia_style_output_directory_replays_its_report(tmp_path):
    # OpenHands/benchmarks @4e5469e0 utils/evaluation_utils.py: error lines go to output_errors.jsonl;
    # gaia/eval_infer.py: output.report.json, submitted = output.jsonl ids + output_errors.jsonl ids
    run = tmp_path / "run"
    run.mkdir()
    good = [_eval_line("a", True), _eval_line("b", False)]
    bad = [_eval_line("c", error="Instance failed after 3 retries. Last error: boom")]
    (run / "output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in good))
    (run / "output_errors.jsonl").write_text("".join(json.dumps(x) + "\n" for x in bad))
    resolved = [x["instance_id"] for x in good if x["test_result"]["score"] is True]
    submitted = [x["instance_id"] for x in good + bad]
    report = {"total_instances": 3, "submitted_instances": 3, "completed_instances": 2, "incomplete_instances": 1,
              "resolved_instances": len(resolved), "unresolved_instances": 1, "empty_patch_instances": 0,
              "error_instances": 1, "submitted_ids": submitted, "completed_ids": ["a", "b"],
              "incomplete_ids": ["c"], "resolved_ids": resolved, "unresolved_ids": ["b"]}
    (run / "output.report.json").write_text(json.dumps(report))
    result, card = run_import("openhands", [run], tmp_path / "c")
    assert_valid(tmp_path / "c")
    reported = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
    assert reported == {"openhands.resolved_rate": pytest.approx(len(resolved) / len(submitted))}
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    assert {k: (e["status"], e["score.resolved"]) for k, e in eps.items()} == {
        "a": ("completed", True), "b": ("completed", False), "c": ("error", False)}
    # output.jsonl alone: the error line's instance is declared missing and no reported value is claimed
    result, card = run_import("openhands", [run / "output.jsonl"], tmp_path / "c2")
    assert_valid(tmp_path / "c2")
    assert [r.get("reported", []) for r in result.rules] == [[]]
    assert [d.count for d in card.manifest.drops if d.target == "episodes"] == [1]
