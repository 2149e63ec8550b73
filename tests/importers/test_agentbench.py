from __future__ import annotations

import json
from collections import Counter

import pytest

import rollout_cards as rc
from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.agentbench import STATUS_MAP
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

REAL = "agentbench/medagentbench-std_gemini-2.0/runs.jsonl"


def _line(index, status="completed", history=None, **extra):
    return {"index": index, "error": None, "info": None,
            "output": {"index": index, "status": status, "result": "[1]",
                       "history": history if history is not None else [
                           {"role": "user", "content": "q"}, {"role": "agent", "content": "FINISH([1])"}]},
            "time": {"timestamp": 1737158137875, "str": "2025-01-17 15:55:37"}, **extra}


def _write(tmp_path, lines, name="runs.jsonl"):
    d = tmp_path / "outputs" / "gpt-x" / "webshop-std"
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_the_real_run_imports_with_agentbench_own_status_shares(tmp_path):
    path = external(REAL)
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    result, card = run_import("agentbench", [path], tmp_path / "c")
    assert result.episodes == len(lines) == 46
    statuses = Counter(x["output"]["status"] for x in lines)
    assert result.statuses == {"completed": statuses["completed"], "error": statuses["agent invalid action"]}
    reported = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
    # AgentBench's calculate_overall: count of the status / number of lines
    assert reported["agentbench.validation.completed"] == pytest.approx(25 / 46)
    assert reported["agentbench.validation.agent_invalid_action"] == pytest.approx(21 / 46)
    ep = {e["task.index"]: e for e in card.episodes().to_pylist()}
    first = lines[0]
    assert ep[str(first["index"])]["meta.result"] == first["output"]["result"]
    assert ep[str(first["index"])]["n_steps"] == len(first["output"]["history"])
    steps = card.steps(filter=f"episode_id == '{ep[str(first['index'])]['episode_id']}'").to_pylist()
    assert [s["role"] for s in steps] == [{"agent": "assistant"}.get(m["role"], m["role"])
                                          for m in first["output"]["history"]]
    assert [s["content"] for s in steps] == [m["content"] for m in first["output"]["history"]]
    assert_valid(tmp_path / "c")


def test_every_sample_status_maps_and_is_kept(tmp_path):
    lines = [_line(i, status) for i, status in enumerate(STATUS_MAP)]
    lines.append({**_line(99), "error": "worker died: ConnectionError"})
    result, card = run_import("agentbench", [_write(tmp_path, lines)], tmp_path / "c")
    eps = {e["task.index"]: e for e in card.episodes().to_pylist()}
    for i, status in enumerate(STATUS_MAP):
        assert eps[str(i)]["status"] == STATUS_MAP[status] and eps[str(i)]["meta.status"] == status
    assert eps["99"]["status"] == "error" and eps["99"]["error_message"] == "worker died: ConnectionError"
    assert eps["3"]["error_type"] == "agent invalid action" and eps["2"]["status"] == "limit"
    first = eps["0"]
    assert first["agent"] == "gpt-x" and first["task_id"] == "webshop-std/0" and first["ended_at"] is not None
    assert first["ended_at"].timestamp() == pytest.approx(1737158137.875)
    shares = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
    assert shares["agentbench.validation.completed"] == pytest.approx(2 / len(lines))  # 0 and the error line
    assert_valid(tmp_path / "c")


def test_openai_style_history_with_tool_calls(tmp_path):
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "click", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    _result, card = run_import("agentbench", [_write(tmp_path, [_line(0, history=history)])], tmp_path / "c")
    kinds = card.steps(columns=["kind", "call_id"]).to_pylist()
    assert kinds == [{"kind": "message", "call_id": None}, {"kind": "tool_call", "call_id": "c1"},
                     {"kind": "tool_result", "call_id": "c1"}]


@pytest.mark.parametrize(("line", "message"), [
    ('{"index": 1, "output": {"status": "finished"}}', "output.status 'finished' is not an AgentBench"),
    ('{"index": true, "output": {"status": "completed"}}', "index True is not a sample index"),
    ('{"index": 1, "output": {"status": "completed", "history": {"a": 1}}}', "output.history is dict"),
    ('{"index": 1, "output": {"status": "completed"}, "time": {"timestamp": 1e999}}', "line 2"),
    ('{"index": 1, "output": {"status": "completed"}, "time": {"timestamp": -5}}', "not epoch milliseconds"),
    ('{"index": 1, "output": [1]}', "output is list"),
    ('{"index": 1, "output": {"status": "completed"', "line 2"),
])
def test_bad_lines_name_file_line_and_field(tmp_path, line, message):
    path = _write(tmp_path, [_line(0), line])
    with pytest.raises(SourceFormatError) as info:
        run_import("agentbench", [path], tmp_path / "c")
    assert message in str(info.value) and "runs.jsonl" in str(info.value)
    assert not (tmp_path / "c").exists()


def test_keep_going_imports_the_rest_and_declares_what_it_skipped(tmp_path):
    path = _write(tmp_path, [_line(0), '{"index": 1, "output": {"status": "bogus"}}', _line(2), _line(2)])
    result, card = run_import("agentbench", [path], tmp_path / "c", keep_going=True)
    assert result.episodes == 2 and len(result.malformed) == 2
    assert {m.record.split(" ")[1] for m in result.malformed} == {"2", "4"}
    drop = next(d for d in card.manifest.drops if d.declaration == "source_malformed")
    assert drop.count == 2
    assert_valid(tmp_path / "c")


def test_error_jsonl_lines_are_errors_and_the_task_option_names_the_task(tmp_path):
    path = _write(tmp_path, [{**_line(0), "error": "boom", "output": None}], name="error.jsonl")
    _r, card = run_import("agentbench", [path], tmp_path / "c", options={"task": "alfworld"})
    (ep,) = card.episodes().to_pylist()
    assert ep["status"] == "error" and ep["task_id"] == "alfworld/0" and ep["n_steps"] == 0
    assert rc.open(tmp_path / "c").manifest.provenance.sources[0].name == "error.jsonl"


def test_output_directories_retried_attempts_and_the_rule_over_runs_only(tmp_path):
    # THUDM/AgentBench src/assigner.py @578c5e9: <output>/<agent>/<task>/runs.jsonl for finished samples,
    # error.jsonl for failed workers, retried with auto_retry=True (the default): an index then has an
    # error.jsonl line AND a later line. Importing the task directory was "does not exist or is not a
    # regular file"; both files together were "episode id occurs twice"; the validation rule counted the
    # error lines although calculate_overall sees only the completions (runs.jsonl).
    runs = _write(tmp_path, [_line(0), _line(1, "agent invalid action")])
    failed = {"error": "AGENT_FAILED", "info": "boom", "output": None, "time": {"timestamp": 1, "str": "x"}}
    _write(tmp_path, [{**failed, "index": 0}, {**failed, "index": 2}, {**failed, "index": 2}], name="error.jsonl")
    (runs.parent / "overall.json").write_text(json.dumps({"total": 2, "validation": {"completed": 0.5,
                                                          "agent invalid action": 0.5}, "custom": {"acc": 0.5}}))
    for source in (tmp_path / "outputs", runs.parent.parent, runs.parent):
        out = tmp_path / f"c-{source.name}"
        result, card = run_import("agentbench", [source], out)
        assert_valid(out)
        eps = {e["task.index"]: e for e in card.episodes().to_pylist()}
        assert sorted(eps) == ["0", "1", "2"] and eps["0"]["status"] == "completed"
        assert (eps["2"]["status"], eps["2"]["meta.file"]) == ("error", "error")
        drop = next(d for d in card.manifest.drops if d.loss_class == "retried_attempt")
        assert drop.count == 2  # index 0's failed attempt, index 2's first failure
        reported = {r["rule"]: r["reported"][0]["value"] for r in result.rules}
        assert reported == {"agentbench.validation.completed": 0.5, "agentbench.validation.agent_invalid_action": 0.5}
        assert {"runs.jsonl", "error.jsonl", "overall.json"} == {s.name for s in card.manifest.provenance.sources}
    with pytest.raises(SourceFormatError, match="holds no AgentBench runs.jsonl"):
        (tmp_path / "empty").mkdir()
        run_import("agentbench", [tmp_path / "empty"], tmp_path / "c-empty")


def test_a_v0_1_line_is_read_as_v0_1(tmp_path):
    # THUDM/AgentBench branch v0.1 src/task.py save_runs_all: {index, input, output, target}; it was
    # "output.status None is not an AgentBench SampleStatus", then refused as v0.1 (tests/importers/
    # test_agentbench_v01.py has the whole v0.1 task output)
    path = _write(tmp_path, [{"index": 0, "input": {"q": 1}, "output": "answer", "target": "answer"}])
    _r, card = run_import("agentbench", [path], tmp_path / "c")
    (ep,) = card.episodes().to_pylist()
    assert (ep["status"], ep["meta.result"], ep["task.target"]) == ("completed", "answer", "answer")
    assert_valid(tmp_path / "c")


def test_overall_json_alone_names_what_to_import_and_beside_runs_is_read_once(tmp_path):
    # THUDM/AgentBench outputs/Jan17v1/<model>/medagentbench-std/overall.json @45ae4f9e: a pretty-printed
    # JSON summary; given as the source it was read as JSON lines: "record line 1: is not valid JSON at
    # character 2" (exit 1, no hint). With its runs.jsonl it was the same failure.
    runs = _write(tmp_path, [_line(0), _line(1, "agent invalid action")])
    overall = runs.parent / "overall.json"
    overall.write_text(json.dumps({"total": 2, "validation": {"completed": 0.5, "agent invalid action": 0.5},
                                   "custom": {"accuracy": 0.5}}, indent=4))
    with pytest.raises(SourceFormatError, match="run summary .*import the task directory or the runs.jsonl") as exc:
        run_import("agentbench", [overall], tmp_path / "c-alone")
    assert exc.value.file == str(overall)
    for sources in ([runs, overall], [overall, runs.parent.parent]):
        out = tmp_path / f"c-{sources[-1].name}"
        _r, card = run_import("agentbench", sources, out)
        assert len(card.episodes().to_pylist()) == 2
        assert [s.name for s in card.manifest.provenance.sources].count("overall.json") == 1
        assert_valid(out)


def test_medagentbench_raw_results_grade_each_sample_and_the_accuracy_replays(tmp_path):
    # THUDM/AgentBench@45ae4f9e src/server/tasks/medagentbench/__init__.py calculate_overall: every output
    # with a result is graded, its status suffixed Correct / Incorrect, into overall.json custom.raw_results
    # (index as text), accuracy = correct / all samples. The grades were only in the artifact: no episode
    # had a score and the task's own figure was not declared.
    lines = [_line(0), _line(1), _line(2, "agent invalid action"), _line(3)]
    lines[2]["output"]["result"] = None
    runs = _write(tmp_path, lines)
    raw = [{"index": "0", "status": "completedCorrect", "result": "[1]", "history": "[...]"},
           {"index": "1", "status": "completedIncorrect", "result": "[2]", "history": "[...]"},
           {"index": "2", "status": "agent invalid action", "result": None, "history": "[...]"},
           {"index": "3", "status": "completedCorrect", "result": "[1]", "history": "[...]"},
           {"index": "9", "status": "completedCorrect", "result": "[1]", "history": "[...]"}]
    accuracy = 2 / 4  # plain count over raw_results of the lines runs.jsonl holds, as calculate_overall divides
    (runs.parent / "overall.json").write_text(json.dumps(
        {"total": 4, "validation": {"completed": 0.75, "agent invalid action": 0.25},
         "custom": {"accuracy": accuracy, "raw_results": raw}}, indent=4))
    result, card = run_import("agentbench", [runs.parent], tmp_path / "c")
    assert_valid(tmp_path / "c")
    eps = {e["task.index"]: e for e in card.episodes().to_pylist()}
    assert {i: e["score.correct"] for i, e in eps.items()} == {"0": True, "1": False, "2": None, "3": True}
    rule = next(r for r in result.rules if r["rule"] == "agentbench.custom.accuracy")
    assert rule["reported"][0]["value"] == accuracy
    scored = [(e["score.correct"] or False) if e["status"] == "completed" else False for e in eps.values()]
    assert sum(scored) / len(scored) == accuracy
    assert any("sample(s) 9 that runs.jsonl does not hold" in n for n in result.notes)
    # another task's custom (a figure, no raw_results) grades nothing and declares no accuracy rule
    (runs.parent / "overall.json").write_text(json.dumps({"total": 4, "custom": {"acc": 0.5}}))
    result, card = run_import("agentbench", [runs.parent], tmp_path / "c2")
    assert "score.correct" not in card.episodes().column_names
    assert all(r["rule"] != "agentbench.custom.accuracy" for r in result.rules)


def test_a_raw_result_that_is_not_an_object_names_its_place(tmp_path):
    runs = _write(tmp_path, [_line(0)])
    (runs.parent / "overall.json").write_text(json.dumps({"total": 1, "custom": {"raw_results": ["x"]}}))
    with pytest.raises(SourceFormatError, match="not a graded output") as exc:
        run_import("agentbench", [runs.parent], tmp_path / "c")
    assert exc.value.record == "custom.raw_results[0]"


def test_an_overall_json_with_nan_is_read(tmp_path):
    # AgentBench's assigner writes overall.json with json.dumps (src/assigner.py @578c5e9
    # calculate_overall_worker), which writes a NaN float as NaN; the import was exit 1 'non-standard JSON
    # constant NaN' although overall.json is only kept and checked.
    runs = _write(tmp_path, [_line(0), _line(1)])
    raw = [{"index": "0", "status": "completedCorrect"}, {"index": "1", "status": "completedIncorrect"}]
    (runs.parent / "overall.json").write_text(
        '{"total": 2, "validation": {"completed": 1.0, "average_history_length": NaN}, '
        '"custom": {"accuracy": NaN, "raw_results": ' + json.dumps(raw) + "}}")
    result, card = run_import("agentbench", [runs.parent], tmp_path / "c")
    assert_valid(tmp_path / "c")
    assert [e["score.correct"] for e in card.episodes().to_pylist()] == [True, False]
    assert all(r["rule"] != "agentbench.custom.accuracy" for r in result.rules)
    assert any("custom.accuracy is nan, not a finite number" in n for n in result.notes)
