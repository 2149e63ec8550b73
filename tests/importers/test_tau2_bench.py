from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.tau2_bench import STATUS
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

REAL = ("tau2-bench/qwen2.5-7b_airline_default_gpt-4.1-2025-04-14_1trials.json",
        "tau2-bench/gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json")


def _pass_hat(sims, k):
    """pass^k by enumerating every k-subset of each task's trials (not the C(c,k)/C(n,k) shortcut)."""
    by_task = defaultdict(list)
    for s in sims:
        by_task[s["task_id"]].append(abs(s["reward_info"]["reward"] - 1) <= 1e-6)
    per = [sum(all(c) for c in itertools.combinations(v, k)) / len(list(itertools.combinations(v, k)))
           for v in by_task.values()]
    return sum(per) / len(per)


def _reported(result):
    return {r["rule"]: r["reported"][0]["value"] for r in result.rules}


@pytest.mark.parametrize("rel", REAL)
def test_real_results_import_validate_and_replay_tau2s_numbers(rel, tmp_path):
    path = external(rel)
    doc = json.loads(path.read_text())
    result, card = run_import("tau2-bench", [path], tmp_path / "card")
    assert_valid(tmp_path / "card")
    sims = doc["simulations"]
    assert result.episodes == len(sims)
    expected = Counter(STATUS[s["termination_reason"]] for s in sims)
    assert result.statuses == dict(expected)
    evaluated = [s for s in sims if s["termination_reason"] != "infrastructure_error"]
    reported = _reported(result)
    assert reported["tau2_bench.avg_reward"] == pytest.approx(
        sum(s["reward_info"]["reward"] for s in evaluated) / len(evaluated))
    for k in range(1, doc["info"]["num_trials"] + 1):
        assert reported[f"tau2_bench.pass_hat_{k}"] == pytest.approx(_pass_hat(evaluated, k))
    ep = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    for s in sims:
        row = ep[s["id"]]
        assert row["task_id"] == s["task_id"] and row["trial"] == s["trial"] and row["seed"] == s["seed"]
        assert row["meta.termination_reason"] == s["termination_reason"]
        assert row["meta.start_time"] == s["start_time"] and row["started_at"] is None  # no UTC offset
        usage = [m["usage"] for m in s["messages"] if m["role"] == "assistant"]
        expected_in = None if None in usage else sum(u["prompt_tokens"] for u in usage)
        assert row["input_tokens"] == expected_in  # unknown when one model message has no usage
    # steps: every tool message is a result linked to an earlier call with its id
    steps = card.steps().to_pylist()
    calls = {(s["episode_id"], s["call_id"]) for s in steps if s["kind"] == "tool_call"}
    results = [s for s in steps if s["kind"] == "tool_result"]
    assert len(results) == sum(1 for s in sims for m in s["messages"] if m["role"] == "tool")
    assert all((r["episode_id"], r["call_id"]) in calls for r in results)
    assert sum(bool(r["is_error"]) for r in results) == sum(
        1 for s in sims for m in s["messages"] if m["role"] == "tool" and m.get("error"))


def test_qwen_run_error_reasons_are_kept_and_unpriced_cost_is_unknown(tmp_path):
    path = external(REAL[0])
    _, card = run_import("tau2-bench", [path], tmp_path / "card")
    rows = card.episodes().to_pylist()
    errors = [r for r in rows if r["status"] == "error"]
    assert Counter(r["error_type"] for r in errors) == {"agent_error": 9, "too_many_errors": 1}
    assert all(r["error_message"].startswith("termination_reason ") for r in errors)
    # agent_cost is 0.0 everywhere although the local model used tokens: unknown, not free
    assert all(r["cost_usd"] is None for r in rows)
    drops = {d.target: d for d in card.manifest.drops}
    assert drops["episodes.cost_usd"].count == 50


# -- synthetic variants: the terminal states and layouts the real files lack --------------------------
def _message(role, content, **kw):
    return {"role": role, "content": content, "turn_idx": 0, "timestamp": "2026-01-01T00:00:00+00:00", **kw}


def _sim(i, task, reason, reward=0.0, trial=0):
    return {
        "id": f"sim-{i}", "task_id": task, "trial": trial, "seed": i, "timestamp": "2026-01-01T00:00:09",
        "start_time": "2026-01-01T00:00:00+00:00", "end_time": "2026-01-01T00:00:09+00:00", "duration": 9.0,
        "termination_reason": reason, "agent_cost": 0.01, "user_cost": 0.002,
        "reward_info": {"reward": reward, "reward_basis": ["DB"], "reward_breakdown": {"DB": reward}},
        "messages": [
            _message("user", "hi", cost=0.001, usage={"prompt_tokens": 5, "completion_tokens": 2}),
            _message("assistant", None, cost=0.01, usage={"prompt_tokens": 10, "completion_tokens": 3},
                     tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": 1}, "requestor": "assistant"}]),
            {"role": "tool", "id": "c1", "content": "found", "requestor": "assistant", "error": False,
             "timestamp": "2026-01-01T00:00:02+00:00"},
        ],
    }


REASONS = [("user_stop", "completed"), ("agent_stop", "completed"), ("max_steps", "limit"),
           ("context_window_exceeded", "limit"), ("timeout", "timeout"), ("too_many_errors", "error"),
           ("user_error", "error"), ("unexpected_error", "error"), ("infrastructure_error", "error")]


def _results(sims, tasks, trials=1):
    return {"timestamp": "2026-01-01T00:00:00", "info": {
        "git_commit": "abc", "num_trials": trials, "max_steps": 30, "max_errors": 10, "seed": 1,
        "agent_info": {"implementation": "llm_agent", "llm": "model-x", "llm_args": {}},
        "user_info": {"implementation": "user_simulator", "llm": "model-u"},
        "environment_info": {"domain_name": "retail", "policy": "be nice", "tool_defs": None}},
        "tasks": [{"id": t, "description": None} for t in tasks], "simulations": sims}


def test_every_termination_reason_maps_and_infrastructure_errors_leave_the_rule(tmp_path):
    sims = [_sim(i, f"t{i}", reason, reward=1.0 if i % 2 else 0.0) for i, (reason, _) in enumerate(REASONS)]
    src = tmp_path / "results.json"
    src.write_text(json.dumps(_results(sims, [f"t{i}" for i in range(len(REASONS))])))
    result, card = run_import("tau2-bench", [src], tmp_path / "card")
    assert_valid(tmp_path / "card")
    status = {e["episode_id"]: e["status"] for e in card.episodes().to_pylist()}
    assert [status[f"sim-{i}"] for i in range(len(REASONS))] == [s for _, s in REASONS]
    kept = [s for s in sims if s["termination_reason"] != "infrastructure_error"]
    assert _reported(result)["tau2_bench.avg_reward"] == pytest.approx(
        sum(s["reward_info"]["reward"] for s in kept) / len(kept))
    row = next(e for e in card.episodes().to_pylist() if e["episode_id"] == "sim-0")
    assert row["started_at"] is not None and row["cost_usd"] == 0.01 and row["score.db"] == 0.0
    steps = card.episode_steps("sim-0").to_pylist()
    assert [s["kind"] for s in steps] == ["message", "tool_call", "tool_result"]
    assert steps[1]["input_tokens"] == 10 and steps[1]["t"] is not None and json.loads(steps[1]["args"]) == {"q": 1}


def test_directory_format_with_a_missing_simulation_file_is_a_declared_drop(tmp_path):
    run = tmp_path / "run"
    (run / "simulations").mkdir(parents=True)
    sims = [_sim(i, f"t{i}", "user_stop", reward=1.0) for i in range(3)]
    meta = _results([], ["t0", "t1", "t2"])
    meta["simulation_index"] = [{"id": s["id"], "task_id": s["task_id"], "trial": 0} for s in sims]
    (run / "results.json").write_text(json.dumps(meta))
    for s in sims[:2]:
        (run / "simulations" / f"{s['id']}.json").write_text(json.dumps(s))
    result, card = run_import("tau2-bench", [run], tmp_path / "card")
    assert result.episodes == 2
    assert_valid(tmp_path / "card")  # plan coverage: the absent one is covered by the drop
    drop = next(d for d in card.manifest.drops if d.target == "episodes")
    assert drop.count == 1 and "sim-2" in drop.reason and "t2" in drop.selector


def test_simulations_before_tasks_are_read_in_a_second_pass(tmp_path):
    doc = _results([_sim(0, "t0", "agent_stop", 1.0)], ["t0"])
    reordered = {"simulations": doc["simulations"], "info": doc["info"], "tasks": doc["tasks"]}
    src = tmp_path / "r.json"
    src.write_text(json.dumps(reordered))
    result, _ = run_import("tau2-bench", [src], tmp_path / "card")
    assert result.episodes == 1


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda s: s.update(termination_reason="exploded"), "termination_reason 'exploded'"),
    (lambda s: s.update(trial=1 << 70), "integer 1180591620717411303424 is outside the 64-bit range"),
    (lambda s: s["messages"][1].update(usage={"prompt_tokens": "10", "completion_tokens": 1}), "prompt_tokens"),
])
def test_bad_records_name_file_record_and_field_and_keep_going_skips_them(tmp_path, mutate, needle):
    sims = [_sim(0, "t0", "user_stop"), _sim(1, "t1", "user_stop")]
    mutate(sims[1])
    src = tmp_path / "r.json"
    src.write_text(json.dumps(_results(sims, ["t0", "t1"])))
    with pytest.raises(SourceFormatError) as err:
        run_import("tau2-bench", [src], tmp_path / "card")
    message = str(err.value)
    assert needle in message and "r.json" in message and ("sim-1" in message or "simulations[1]" in message)
    result, _ = run_import("tau2-bench", [src], tmp_path / "kept", keep_going=True)
    assert result.episodes == 1 and len(result.malformed) == 1
    assert_valid(tmp_path / "kept")


def test_a_symlinked_simulation_file_is_refused(tmp_path):
    run = tmp_path / "run"
    (run / "simulations").mkdir(parents=True)
    meta = _results([], ["t0"])
    (run / "results.json").write_text(json.dumps(meta))
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_sim(0, "t0", "user_stop")))
    (run / "simulations" / "sim-0.json").symlink_to(outside)
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("tau2-bench", [run], tmp_path / "card")
    assert not (tmp_path / "card").exists()


def test_truncated_file_is_an_error_naming_it(tmp_path):
    src = tmp_path / "r.json"
    src.write_text(json.dumps(_results([_sim(0, "t0", "user_stop")], ["t0"]))[:-40])
    with pytest.raises(SourceFormatError, match="r.json"):
        run_import("tau2-bench", [src], tmp_path / "card")


def _canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize("rel", REAL)
def test_json_texts_of_the_real_results_are_the_sources_values_in_canonical_form(rel, tmp_path):
    # reward_info, the results artifact (tasks), step payloads and tool-call arguments are written
    # as canonical JSON (sorted keys, compact, UTF-8 kept) — here compared with plain json.dumps of
    # the file's own values (the import encodes them with msgspec where that gives the same text).
    import hashlib

    path = external(rel)
    doc = json.loads(path.read_text())
    _, card = run_import("tau2-bench", [path], tmp_path / "card")
    ep = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    for s in doc["simulations"]:
        assert ep[s["id"]]["meta.reward_info"] == _canonical(s["reward_info"])
    sha = next(iter(ep.values()))["meta.results_artifact"]
    blob = (tmp_path / "card" / "artifacts" / sha).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == sha
    assert json.loads(blob) == {k: v for k, v in doc.items() if k != "simulations"}
    steps = card.steps().to_pylist()
    by_episode = defaultdict(list)
    for st in steps:
        by_episode[st["episode_id"]].append(st)
    for s in doc["simulations"]:
        got = by_episode[s["id"]]
        assert all(st["payload"] is None or st["payload"] == _canonical(json.loads(st["payload"])) for st in got)
        args = [st["args"] for st in got if st["kind"] == "tool_call"]
        sent = [c["arguments"] for m in s["messages"] for c in (m.get("tool_calls") or [])]
        assert args == [_canonical(a) if a else None for a in sent]


def test_a_bad_step_before_a_bad_message_is_the_error_raised(tmp_path):
    # The steps are handed to the StepBuffer in bulk after the messages are read; the first error in
    # the file's order must still be the one raised: here a reused call id whose call names another
    # source id (message 3), before a message that is not an object (message 4).
    sim = _sim(0, "t0", "user_stop")
    sim["messages"] += [
        _message("assistant", None, tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": 2},
                                                 "requestor": "assistant", "source_call_id": "c9"}]),
        "not a message"]
    src = tmp_path / "results.json"
    src.write_text(json.dumps(_results([sim], ["t0"])))
    with pytest.raises(SourceFormatError, match=r"step 3: payload\.source_call_id is 'c9', but the source call id "
                                                r"is 'c1'") as err:
        run_import("tau2-bench", [src], tmp_path / "card")
    assert err.value.file == str(src) and err.value.record == "simulation sim-0"
    sim["messages"].pop()  # without the bad message after it: the same error
    src.write_text(json.dumps(_results([sim], ["t0"])))
    with pytest.raises(SourceFormatError, match=r"step 3: payload\.source_call_id is 'c9'"):
        run_import("tau2-bench", [src], tmp_path / "card2")


def test_a_run_that_wrote_no_simulation_says_so(tmp_path):
    # tau2-bench's own feature/gym data holds results files with "simulations": [] (runs stopped
    # before a simulation finished); before, the error was only "no episodes could be imported"
    src = tmp_path / "results.json"
    src.write_text(json.dumps(_results([], ["t0", "t1"], trials=2)))
    with pytest.raises(SourceFormatError) as err:
        run_import("tau2-bench", [src], tmp_path / "card")
    assert str(err.value) == ("no episodes could be imported from results.json: 4 planned simulation(s) "
                              "(task x trial of info.num_trials) are not in the source")
    assert not (tmp_path / "card").exists()


def test_the_results_artifact_is_the_canonical_text_of_the_header_and_every_task(tmp_path):
    # Tasks are encoded in batches with the floats msgspec writes unlike repr marked as decoded (and
    # one by one where a task was decoded strictly): the text must be json.dumps' canonical text of
    # each task whatever the path — floats in exponent form, past a batch, a task read strictly.
    import hashlib

    doc = json.loads(external(REAL[0]).read_text())
    base = doc["tasks"][0]
    extra = [dict(base, id=f"extra-{i}", weight=[1e-05, 2.5e-7, 1e16, 1.5e20, 0.5, -0.0, i / 7][i % 7])
             for i in range(600)]
    extra[300]["note"] = "1234567890123456789012345"  # a long digit run: decoded strictly
    doc["tasks"] = doc["tasks"] + extra
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    _, card = run_import("tau2-bench", [path], tmp_path / "card")
    sha = card.episodes(columns=["meta.results_artifact"]).column(0)[0].as_py()
    blob = (tmp_path / "card" / "artifacts" / sha).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == sha
    rest = _canonical({k: v for k, v in doc.items() if k not in ("simulations", "tasks")})
    assert blob.decode() == rest[:-1] + ',"tasks":[' + ",".join(_canonical(t) for t in doc["tasks"]) + "]}"
