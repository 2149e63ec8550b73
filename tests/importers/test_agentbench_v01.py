"""AgentBench v0.1 task output, written as branch v0.1 @873b35a src/task.py writes it.

`Task.save_single` appends `{index, input, output, history, exception_raised}` to generation.jsonl
as each sample finishes (json.dumps, ensure_ascii=False); `save_runs_all` then appends
`{index, input, output, target}` per sample to runs.jsonl and writes results.json (indent 4); a
sample whose prediction raised keeps output None.
"""

from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from tests.importers.conftest import assert_valid, run_import

SAMPLES = [  # (input, target, output, history, exception_raised)
    ({"question": "2+2?"}, "4", "4", [{"role": "user", "content": "2+2?"}, {"role": "agent", "content": "4"}], False),
    ({"question": "capital of France?"}, "Paris", "Lyon",
     [{"role": "user", "content": "capital of France?"}, {"role": "agent", "content": "Lyon"}], False),
    ({"question": "ls /nope"}, "error", None, [{"role": "user", "content": "ls /nope"}], True),
]


def _task(root, *, evaluations=1, generation=True):
    d = root / "outputs" / "2023-10-08-00-09-40" / "dbbench-std"
    d.mkdir(parents=True)
    for _ in range(evaluations):
        if generation:
            with open(d / "generation.jsonl", "a", encoding="utf-8") as f:
                for i, (inp, _t, out, hist, exc) in enumerate(SAMPLES):
                    f.write(json.dumps({"index": i, "input": inp, "output": out, "history": hist,
                                        "exception_raised": exc}, ensure_ascii=False) + "\n")
        with open(d / "runs.jsonl", "a", encoding="utf-8") as f:
            for i, (inp, target, out, _h, _e) in enumerate(SAMPLES):
                f.write(json.dumps({"index": i, "input": inp, "output": out, "target": target},
                                   ensure_ascii=False) + "\n")
    em = sum(out == target for _i, target, out, _h, _e in SAMPLES) / len(SAMPLES)
    (d / "results.json").write_text(json.dumps({"EM": em}, ensure_ascii=False, indent=4))
    return d


def test_v01_task_output_imports_with_its_histories(tmp_path):
    d = _task(tmp_path)
    result, card = run_import("agentbench", [d], tmp_path / "c", agent="chatglm2-6b")
    eps = {e["task.index"]: e for e in card.episodes().to_pylist()}
    for i, (inp, target, out, hist, exc) in enumerate(SAMPLES):
        ep = eps[str(i)]
        assert ep["task.target"] == target and json.loads(ep["task.input"]) == inp
        assert ep["status"] == ("error" if exc or out is None else "completed")
        assert ep["n_steps"] == len(hist)
    steps = card.steps(columns=["episode_id", "role", "content"]).to_pylist()
    assert [(s["role"], s["content"]) for s in steps if s["episode_id"] == "chatglm2-6b/dbbench-std/1"] == [
        ("user", "capital of France?"), ("assistant", "Lyon")]
    assert card.manifest.meta["agentbench_v01"]["results"] == {"chatglm2-6b/dbbench-std": {"EM": 1 / 3}}
    assert result.rules == []
    assert_valid(tmp_path / "c")


def test_a_second_evaluation_appended_is_one_set_of_episodes(tmp_path):
    d = _task(tmp_path, evaluations=2)
    _r, card = run_import("agentbench", [d], tmp_path / "c")
    assert card.episodes().num_rows == len(SAMPLES)
    assert {e["agent"] for e in card.episodes().to_pylist()} == {"2023-10-08-00-09-40"}
    (drop,) = [x for x in card.manifest.drops if x.loss_class == "retried_attempt"]
    assert drop.count == len(SAMPLES)
    assert_valid(tmp_path / "c")


def test_without_generation_the_steps_are_declared_missing(tmp_path):
    d = _task(tmp_path, generation=False)
    _r, card = run_import("agentbench", [d / "runs.jsonl"], tmp_path / "c")
    assert card.steps().num_rows == 0
    assert any(x.target == "steps" and x.count == len(SAMPLES) for x in card.manifest.drops)
    assert_valid(tmp_path / "c")


def test_a_v02_line_in_a_v01_file_names_the_line(tmp_path):
    d = _task(tmp_path)
    with open(d / "runs.jsonl", "a") as f:
        f.write(json.dumps({"index": 9, "output": {"status": "completed"}, "time": {"timestamp": 1}}) + "\n")
    with pytest.raises(SourceFormatError, match="line 4") as err:
        run_import("agentbench", [d], tmp_path / "c")
    assert "v0.1" in str(err.value)


@pytest.mark.parametrize("name", ["generation.jsonl", "results.json"])
def test_a_special_file_beside_runs_jsonl_is_refused_by_name(tmp_path, name):
    d = _task(tmp_path)
    (d / name).unlink()
    (d / name).symlink_to(tmp_path)
    with pytest.raises(SourceFormatError) as err:  # runs.jsonl named: the directory listing's own check not met
        run_import("agentbench", [d / "runs.jsonl"], tmp_path / "c")
    assert name in str(err.value) and "link" in str(err.value)
