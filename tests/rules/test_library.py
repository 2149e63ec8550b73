"""The rule library on real data: every value pinned against a plain-Python computation
over the source file in the test (never the engine against itself)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import rollout_cards as rc
from rollout_cards.errors import RuleError
from rollout_cards.importers.run import import_source as run_import
from rollout_cards.io.writer import CardWriter
from rollout_cards.rules import apply_rule, load_rule
from rollout_cards.rules.library import library_rule, library_rules

from ..conftest import external

READ_ONLY_PREFIXES = ("get_", "search_", "list_")
READ_ONLY_NAMES = ("calculate", "think")


def value_of(card, rule_id: str, group: dict | None = None):
    run = apply_rule(card, load_rule(f"lib:{rule_id}"), file=f"lib:{rule_id}")
    (result,) = [r for r in run.results if group is None or r.group == group]
    return result


def canonical(value) -> str:
    def norm(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def is_write(name: str) -> bool:
    return not name.startswith(READ_ONLY_PREFIXES) and name not in READ_ONLY_NAMES


def test_every_library_rule_is_indexed_parsed_and_tested():
    rules = library_rules()
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids)) >= 16
    here = Path(__file__).read_text()
    for entry in rules:
        assert entry.rule.rule == entry.id and entry.rule.description and entry.source
        path, _, test = entry.test.partition("::")
        assert path == "tests/rules/test_library.py" and f"def {test}(" in here, entry.id
    files = {p.stem for p in (Path(rc.__file__).parent / "rules" / "library_rules").glob("*.yaml")}
    assert files - {"index"} == set(ids)


def test_unknown_library_rule_names_the_closest():
    with pytest.raises(RuleError, match=r"no rule 'tau_bench.write_sets' in the rule library; did you mean 'tau_bench.write_set'"):
        library_rule("lib:tau_bench.write_sets")
    with pytest.raises(RuleError, match="no rule '../../etc/passwd'"):
        load_rule("lib:../../etc/passwd")


# ------------------------------------------------------------------------ tau-bench


@pytest.fixture(scope="module")
def tau(tmp_path_factory):
    source = external("tau-bench/gpt-4o-airline.json")
    out = tmp_path_factory.mktemp("tau") / "card"
    run_import("tau-bench", [source], out)
    return rc.open(out), json.loads(source.read_text())


def _completed(record) -> bool:
    return record["info"].get("reward_info") is not None


def test_tau_bench_write_rules_on_the_gpt_4o_airline_run(tau):
    card, records = tau
    as_set, as_seq = [], []
    for rec in records:
        calls = [
            call["function"]["name"] + canonical(json.loads(call["function"]["arguments"]))
            for msg in rec["traj"]
            if msg.get("role") == "assistant"
            for call in msg.get("tool_calls") or []
            if is_write(call["function"]["name"])
        ]
        gold = [a["name"] + canonical(a["kwargs"]) for a in rec["info"]["task"]["actions"] if is_write(a["name"])]
        done = _completed(rec)
        as_set.append(done and Counter(calls) == Counter(gold))
        as_seq.append(done and calls == gold)
    write_set = value_of(card, "tau_bench.write_set")
    write_seq = value_of(card, "tau_bench.write_sequence")
    assert write_set.n == write_seq.n == 200
    assert write_set.value == pytest.approx(sum(as_set) / 200)
    assert write_seq.value == pytest.approx(sum(as_seq) / 200)
    assert write_set.unit == "task_id" and write_set.interval.n_units == 50
    # the regrade is far from tau-bench's own 0.42 on this run
    assert sum(as_set) / 200 < 0.42


def test_tau_bench_transfer_is_failure_on_the_gpt_4o_airline_run(tau):
    card, records = tau
    values = []
    for rec in records:
        transferred = any(
            call["function"]["name"] == "transfer_to_human_agents"
            for msg in rec["traj"]
            if msg.get("role") == "assistant"
            for call in msg.get("tool_calls") or []
        )
        values.append(0.0 if transferred or not _completed(rec) else rec["reward"])
    result = value_of(card, "tau_bench.transfer_is_failure")
    assert result.value == pytest.approx(np.mean(values)) and result.n == 200


# ------------------------------------------------------------------------ tau2-bench

# tau2-bench's terminal states (its TerminationReason), as a user reads them: a run that
# stopped normally completed; the step limit is a limit; every other reason an error.
_TAU2_STATUS = {"user_stop": "completed", "agent_stop": "completed", "max_steps": "limit"}
_TAU2_RUNS = ["qwen2.5-7b_airline_default_gpt-4.1-2025-04-14_1trials.json",
              "gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json"]


@pytest.fixture(scope="module", params=_TAU2_RUNS)
def tau2(request, tmp_path_factory):
    # imported by the real importer (`rcard import tau2-bench`), which keeps each
    # simulation's reward_info as meta.reward_info, the column the rules read
    source = external(f"tau2-bench/{request.param}")
    out = tmp_path_factory.mktemp("tau2") / "card"
    run_import("tau2-bench", [source], out)
    card = rc.open(out)
    assert "meta.reward_info" in card.schema("episodes").names
    return card, json.loads(source.read_text())["simulations"]


def test_tau2_bench_reward_basis_rules_on_the_qwen_airline_run(tau2):
    # and on the telecom run (4 trials of 5 tasks, env assertions): both files in ../shared
    card, sims = tau2

    def expected(score):
        values, excluded = [], 0
        for s in sims:
            if _TAU2_STATUS.get(s["termination_reason"], "error") != "completed":
                values.append(0.0)
                continue
            v = score(s["reward_info"])
            if v is None:
                excluded += 1
            else:
                values.append(float(v))
        return (float(np.mean(values)) if values else None), len(values), excluded

    def all_met(key, field):
        def score(info):
            checks = info.get(key)
            return None if not checks else all(c.get(field) is True for c in checks)

        return score

    cases = {
        "tau2_bench.db_only": lambda info: None if not info.get("db_check") else info["db_check"]["db_match"] is True,
        "tau2_bench.actions_only": all_met("action_checks", "action_match"),
        "tau2_bench.communicate_only": all_met("communicate_checks", "met"),
        "tau2_bench.nl_assertions_only": all_met("nl_assertions", "met"),
    }
    seen = set()
    for rule_id, score in cases.items():
        mean, n, excluded = expected(score)
        result = value_of(card, rule_id)
        assert result.n == n and result.n_missing_excluded == excluded, rule_id
        if n:
            assert result.value == pytest.approx(mean), rule_id
        seen.add(round(mean, 6) if n else None)
    assert seen - {None}  # some basis grades the run
    if card.manifest.tables.episodes.rows == 50:  # the qwen airline run
        assert len(seen) > 1  # the bases grade this run differently


# --------------------------------------------------------------------------- Inspect


@pytest.fixture(scope="module")
def mcq(tmp_path_factory):
    source = external("inspect/inspect-0.3.285/2026-12-01T08-30-51-00-00_mcq_7AZHZLVce5zatHdaC2RYF8.json")
    out = tmp_path_factory.mktemp("mcq") / "card"
    run_import("inspect", [source], out)
    return rc.open(out), json.loads(source.read_text())


def test_inspect_answer_rules_on_the_mcq_log(mcq):
    import re

    card, log = mcq
    strict, letter, full = [], [], []
    for sample in log["samples"]:
        target = sample["target"]
        answers = [m for m in sample["messages"] if m["role"] == "assistant"]
        content = answers[-1]["content"] if answers else None
        if isinstance(content, list):  # content parts: the text ones, joined as the importer does
            content = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
        strict.append(content is not None and content.endswith("ANSWER: " + target))
        m = re.search(r"(?i)ANSWER\s*:\s*\(?([A-Z])\b", content or "")
        letter.append(m is not None and m.group(1).upper() == target.upper())
        choice = sample["choices"][ord(target.upper()) - ord("A")]
        full.append(content is not None and choice.lower() in content.lower())
    n = len(log["samples"])
    agent = log["eval"]["model"]
    for rule_id, expected in (("inspect.strict_match", strict), ("inspect.letter_only", letter), ("inspect.full_answer", full)):
        result = value_of(card, rule_id, {"agent": agent})
        assert result.n == n, rule_id
        assert result.value == pytest.approx(sum(expected) / n), rule_id
    assert sum(letter) > sum(full)  # a bare letter is not the full answer


# --------------------------------------------------------------------------- lm-eval


@pytest.fixture(scope="module")
def negotiationtom(tmp_path_factory):
    # imported by the real importer (`rcard import lm-eval`); the reference reads the jsonl
    root = external("lm-eval/negotiationtom_Qwen3-8B")
    out = tmp_path_factory.mktemp("lm-eval") / "card"
    run_import("lm-eval", [root], out)
    samples = {}
    for path in sorted(root.glob("samples_*.jsonl")):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    results = json.loads(next(root.glob("results_*.json")).read_text())["results"]
    return rc.open(out), samples, results


def test_lm_eval_rules_on_the_negotiationtom_run(negotiationtom):
    import re

    card, samples, results = negotiationtom
    agent = "Qwen/Qwen3-8B"
    # multiple choice (belief, desire): resps[i] = [[loglikelihood, is_greedy]] per choice, as text
    run = apply_rule(card, load_rule("lib:lm_eval.acc_from_loglikelihoods"))
    by_task = {r.group["task.name"]: r for r in run.results}
    for task in ("negotiationtom_belief", "negotiationtom_desire"):
        hits = []
        for sample in samples[task]:
            lls = [float(resp[0][0]) for resp in sample["resps"]]
            hits.append(lls.index(max(lls)) == int(sample["target"]))
        result = by_task[task]
        assert result.n == len(hits) == 20
        assert result.value == pytest.approx(sum(hits) / len(hits))
        assert result.value == pytest.approx(results[task]["acc,none"])  # lm-eval's own figure
    # generate_until (intention) has no log-likelihoods: excluded and counted, not scored 0
    intention = by_task["negotiationtom_intention"]
    assert intention.n == 0 and intention.n_missing_excluded == len(samples["negotiationtom_intention"])

    # Inspect's answer rules on lm-eval's text answers: the last response of each sample
    # (loglikelihood tasks have none: a null score, counted as 0 by the rules' default)
    finals = []
    for task in sorted(samples):
        for sample in samples[task]:
            texts = sample["resps"][-1] if sample["resps"] else None
            text = "\n".join(texts) if texts and all(isinstance(t, str) for t in texts) else None
            finals.append((text, sample["target"]))
    strict = [None if t is None else t.endswith("ANSWER: " + target) for t, target in finals]
    letters = [re.search(r"(?i)ANSWER\s*:\s*\(?([A-Z])\b", t or "") for t, _ in finals]
    letter = [None if m is None else m.group(1).upper() == target.upper() for m, (_, target) in zip(letters, finals, strict=True)]
    for rule_id, expected in (("inspect.strict_match", strict), ("inspect.letter_only", letter)):
        result = value_of(card, rule_id, {"agent": agent})
        assert result.n == len(expected) == 60, rule_id
        assert result.n_missing == sum(v is None for v in expected), rule_id
        assert result.value == pytest.approx(sum(bool(v) for v in expected) / len(expected)), rule_id
    # lm-eval's targets are labels ('Callout-Fairness'), not letters: no answer letter matches
    assert sum(v is not None for v in letter) > 0 and not any(letter)
    # the full-answer rule needs the choices as task.choices, which lm-eval cards do not have
    with pytest.raises(RuleError, match="unknown column 'task.choices'"):
        value_of(card, "inspect.full_answer")


# ------------------------------------------------------------------------- SWE-bench


def test_swe_bench_rules_on_the_deepseek_chat_run(tmp_path):
    source = external("swe-bench/harness_deepseek_chat_dev/deepseek__deepseek-chat.deepseek_chat_dev.json")
    report = json.loads(source.read_text())
    run_import("swe-bench", [source], tmp_path / "card")
    card = rc.open(tmp_path / "card")
    resolved, errors, empty = (set(report[k]) for k in ("resolved_ids", "error_ids", "empty_patch_ids"))
    submitted = set(report["submitted_ids"])
    scored = submitted  # skipped (never submitted) instances are excluded by default
    not_error = [i for i in scored if i not in errors]
    result = value_of(card, "swe_bench.error_excluded")
    assert result.n == len(not_error) and result.excluded_by_status.get("error", 0) == len(scored & errors)
    assert result.value == pytest.approx(len(resolved & set(not_error)) / len(not_error))
    non_empty = [i for i in scored if i not in empty]
    result = value_of(card, "swe_bench.empty_patch_excluded")
    assert result.n_selected_out == len(scored & empty)
    assert result.value == pytest.approx(len([i for i in non_empty if i in resolved and i not in errors]) / len(non_empty))


def test_swe_bench_pass_to_pass_rules_on_the_instance_reports(tmp_path):
    # per-instance tests_status as the importer's score.f2p_*/p2p_* counts; the reference
    # values come from the real report.json files in plain Python
    root = external("swe-bench/harness_deepseek_chat_dev")
    reports = {}
    for path in sorted(root.glob("*/report.json")):
        reports.update(json.loads(path.read_text()))
    ids = sorted(reports)
    with CardWriter(tmp_path / "card", id="swe", title="swe", timestamps=False) as w:
        w.write_episodes(
            pa.table(
                {
                    "episode_id": ids,
                    "task_id": ids,
                    "status": ["completed"] * len(ids),
                    "agent": ["deepseek-chat"] * len(ids),
                    "score.resolved": [reports[i]["resolved"] for i in ids],
                    # the columns the swe-bench importer writes from tests_status (docs/importers.md)
                    **{
                        f"score.{short}_{outcome}": [
                            len((reports[i].get("tests_status") or {}).get(cat, {}).get(outcome) or []) for i in ids
                        ]
                        for short, cat in (("f2p", "FAIL_TO_PASS"), ("p2p", "PASS_TO_PASS"))
                        for outcome in ("success", "failure")
                    },
                }
            )
        )
    card = rc.open(tmp_path / "card")

    def ok(i, keys):
        status = reports[i].get("tests_status") or {}
        f2p = status.get("FAIL_TO_PASS", {})
        good = bool(f2p.get("success")) and not f2p.get("failure")
        return good and all(not status.get(k, {}).get("failure") for k in keys)

    with_p2p = [ok(i, ["PASS_TO_PASS"]) for i in ids]
    without = [ok(i, []) for i in ids]
    assert value_of(card, "swe_bench.resolved_with_p2p").value == pytest.approx(np.mean(with_p2p))
    assert value_of(card, "swe_bench.resolved_without_p2p").value == pytest.approx(np.mean(without))
    # the harness's own verdict is the with-PASS_TO_PASS one; pydicom-1413 passes only without
    assert with_p2p == [reports[i]["resolved"] for i in ids]
    assert without[ids.index("pydicom__pydicom-1413")] and not with_p2p[ids.index("pydicom__pydicom-1413")]


# ------------------------------------------------------------------------- MLE-bench


def test_mle_bench_medal_rules_on_a_synthetic_card(tmp_path):
    # No MLE-bench grading report is in ../shared: a synthetic card with the grading
    # report's fields, half of the competitions lower-is-better.
    rng = np.random.default_rng(7)
    rows = []
    for c in range(12):
        lower = c % 2 == 0
        bronze = float(rng.uniform(0.2, 0.8))
        for agent in ("a", "b"):
            for seed in range(3):
                score = float(rng.uniform(0, 1)) if rng.random() > 0.1 else None
                valid = score is not None and rng.random() > 0.15
                rows.append(dict(episode_id=f"{agent}/{c}/{seed}", task_id=f"comp-{c}", agent=agent, status="completed",
                                 **{"score.score": score, "score.valid_submission": valid,
                                    "task.bronze_threshold": bronze, "task.is_lower_better": lower}))
    with CardWriter(tmp_path / "card", id="mle", title="mle", timestamps=False) as w:
        w.write_episodes(pa.Table.from_pylist(rows))
    card = rc.open(tmp_path / "card")
    for agent in ("a", "b"):
        mine = [r for r in rows if r["agent"] == agent]

        def medal(r):
            s, t = r["score.score"], r["task.bronze_threshold"]
            return r["score.valid_submission"] and s is not None and (s <= t if r["task.is_lower_better"] else s >= t)

        medal_rate = np.mean([medal(r) for r in mine])
        assert value_of(card, "mle_bench.any_medal", {"agent": agent}).value == pytest.approx(medal_rate)
        valid_rate = np.mean([r["score.valid_submission"] for r in mine])
        assert value_of(card, "mle_bench.valid_submission", {"agent": agent}).value == pytest.approx(valid_rate)
