"""lm-evaluation-harness 0.3: results JSON (any name) and the --write_out files.

Shapes as lm-eval wrote them: main.py @v0.3.0 dumps {"results": {task: {metric, metric_stderr}},
"versions", "config"} (json.dumps indent 2) to --output_path; evaluator.py @80ae5a8b6 (master,
2023-05) with --write_out dumps one `<task>_write_out_info.json` per task: a list indexed by doc_id
of {doc_id, prompt_<i>, logit_<i> (the response: [logprob, is_greedy] or text), truth, <metric>:
str(value)}. The means are computed here in plain Python, as the harness aggregates them.
"""

from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from tests.importers.conftest import assert_valid, run_import

CHOICE = [(1, True), (0, False), (1, True), (1, False), (0, True)]  # (gold, model right?)
GEN = [(" 42", "42", True), (" 7", "8", False), (" 3", "3", True)]


def _choice_entries():
    out = []
    for i, (gold, right) in enumerate(CHOICE):
        pick = gold if right else 1 - gold
        out.append({"doc_id": i, "prompt_0": f"Q{i}: pick A or B? A", "prompt_1": f"Q{i}: pick A or B? B",
                    "logit_0": [-0.5 if pick == 0 else -2.0, pick == 0], "logit_1": [-0.5 if pick == 1 else -2.0,
                                                                                     pick == 1],
                    "truth": gold, "acc": str(1.0 if right else 0.0), "acc_norm": str(1.0 if right else 0.0)})
    return out


def _gen_entries():
    return [{"doc_id": i, "prompt_0": f"What is {t.strip()}?", "logit_0": resp, "truth": t, "exact_match": str(ok)}
            for i, (t, resp, ok) in enumerate(GEN)]


def _results():
    acc = sum(r for _g, r in CHOICE) / len(CHOICE)
    em = sum(ok for *_x, ok in GEN) / len(GEN)
    return {"results": {"toychoice": {"acc": acc, "acc_stderr": 0.2, "acc_norm": acc, "acc_norm_stderr": 0.2},
                        "toygen": {"exact_match": em}},
            "versions": {"toychoice": 0, "toygen": 1},
            "config": {"model": "hf-causal", "model_args": "pretrained=EleutherAI/pythia-70m", "num_fewshot": 0,
                       "batch_size": None, "device": None, "no_cache": False, "limit": None,
                       "bootstrap_iters": 100000, "description_dict": {}}}


def _run(root, results_name="results.json", with_results=True):
    root.mkdir(parents=True)
    if with_results:
        (root / results_name).write_text(json.dumps(_results(), indent=2))
    (root / "toychoice_write_out_info.json").write_text(json.dumps(_choice_entries(), indent=4))
    (root / "toygen_write_out_info.json").write_text(json.dumps(_gen_entries(), indent=4))
    return root


def test_write_out_files_are_the_samples_and_the_results_replay(tmp_path):
    root = _run(tmp_path / "out")
    result, card = run_import("lm-eval", [root], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert len(eps) == len(CHOICE) + len(GEN)
    for i, (_gold, right) in enumerate(CHOICE):
        assert eps[f"toychoice/{i}"]["score.acc"] == (1.0 if right else 0.0)
    for i, (target, _resp, ok) in enumerate(GEN):
        assert eps[f"toygen/{i}"]["score.exact_match"] == (1.0 if ok else 0.0)
        assert eps[f"toygen/{i}"]["task.target"] == target
    assert {e["agent"] for e in eps.values()} == {"EleutherAI/pythia-70m"}
    steps = card.steps(columns=["episode_id", "kind", "role", "content"]).to_pylist()
    gen0 = [(s["kind"], s["role"], s["content"]) for s in steps if s["episode_id"].endswith("toygen/0")]
    assert gen0 == [("message", "user", "What is 42?"), ("message", "assistant", "42")]
    rules = {r["rule"]: r for r in result.rules}
    expected = _results()["results"]
    assert rules["lm_eval.toychoice.acc"]["reported"][0]["value"] == expected["toychoice"]["acc"]
    assert rules["lm_eval.toygen.exact_match"]["reported"][0]["value"] == expected["toygen"]["exact_match"]
    assert_valid(tmp_path / "c")


def test_write_out_files_alone_import_without_rules(tmp_path):
    root = _run(tmp_path / "out", with_results=False)
    result, card = run_import("lm-eval", [root], tmp_path / "c")
    assert card.episodes().num_rows == len(CHOICE) + len(GEN) and result.rules == []
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize("name", ["results.json", "pythia-70m.json"])
def test_a_03_results_file_alone_is_refused_saying_what_is_needed(tmp_path, name):
    root = tmp_path / "out"
    root.mkdir()
    (root / name).write_text(json.dumps(_results(), indent=2))
    with pytest.raises(SourceFormatError) as err:
        run_import("lm-eval", [root / name], tmp_path / "c")
    assert "lm-eval 0.3" in str(err.value) and "--write_out" in str(err.value) and name in str(err.value)
