from __future__ import annotations

import itertools
import json
from collections import defaultdict

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.tau_bench import terminal_state
from tests.conftest import external
from tests.importers.conftest import SOURCES, assert_valid, run_import

FIXTURE = SOURCES / "tau-bench" / "synthetic-agent.json"


def _pass_hat(records, k):
    """pass^k by enumerating every k-subset of each task's trials (not the C(c,k)/C(n,k) shortcut)."""
    by_task = defaultdict(list)
    for r in records:
        by_task[r["task_id"]].append(r["reward"] == 1.0)
    per_task = [sum(all(c) for c in itertools.combinations(v, k)) / len(list(itertools.combinations(v, k)))
                for v in by_task.values()]
    return sum(per_task) / len(per_task)


def _reported(result, rule):
    return {r["rule"]: r["reported"] for r in result.rules}[rule][0]["value"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return run_import("tau-bench", [FIXTURE], tmp_path_factory.mktemp("tau") / "card")


def test_every_record_is_an_episode_keyed_by_agent_task_and_trial(synthetic):
    result, card = synthetic
    records = json.loads(FIXTURE.read_text())
    ep = card.episodes().to_pylist()
    assert result.episodes == len(records) == 8
    assert {e["episode_id"] for e in ep} == {f"synthetic-agent/{r['task_id']}/{r['trial']}" for r in records}
    assert {e["agent"] for e in ep} == {"synthetic-agent"}  # the file name stem
    assert all(isinstance(e["task_id"], str) for e in ep)


def test_terminal_states_follow_info_source(synthetic):
    _, card = synthetic
    status = {e["episode_id"].split("/", 1)[1]: (e["status"], e["error_message"]) for e in card.episodes().to_pylist()}
    assert status["0/0"] == ("completed", None)  # the user ended the conversation
    assert status["1/0"] == ("completed", None)  # hand-off to a human
    assert status["2/0"][0] == "limit" and "middle of a tool call (cancel_order)" in status["2/0"][1]
    assert status["3/0"][0] == "limit" and "before the simulated user ended" in status["3/0"][1]
    assert status["2/1"][0] == "error"


def test_an_exception_record_keeps_message_traceback_and_type(synthetic):
    _, card = synthetic
    row = next(e for e in card.episodes().to_pylist() if e["status"] == "error")
    assert row["error_message"] == "RateLimitError: too many requests"
    assert row["error_traceback"].startswith("Traceback") and row["error_type"] == "litellm.RateLimitError"
    assert row["n_steps"] == 0 and row["score.reward"] == 0.0


def test_task_specification_and_info_columns(synthetic):
    _, card = synthetic
    row = next(e for e in card.episodes().to_pylist() if e["episode_id"].endswith("/0/0"))
    assert row["task.user_id"] == "user_0" and row["task.instruction"].startswith("You are user_0")
    assert json.loads(row["task.actions"]) == [{"kwargs": {"order_id": "#100"}, "name": "cancel_order"}]
    assert json.loads(row["task.outputs"]) == []
    assert row["meta.source"] == "user" and row["meta.user_cost"] == 0.0012
    assert json.loads(row["meta.reward_info"])["reward"] == 1.0
    assert row["started_at"] is None and row["input_tokens"] is None  # never invented


def test_steps_from_the_conversation(synthetic):
    _, card = synthetic
    steps = card.episode_steps("synthetic-agent/0/0").to_pylist()
    kinds = [s["kind"] for s in steps]
    assert kinds[:4] == ["message", "message", "tool_call", "tool_result"]
    call = steps[2]
    assert call["name"] == "get_order" and json.loads(call["args"]) == {"order_id": "#100"}
    assert steps[3]["call_id"] == call["call_id"] == "call_0a"
    # the model reused call_0a: the second call is call_0a#2 and its result follows it
    assert [s["call_id"] for s in steps if s["kind"] in ("tool_call", "tool_result")] == ["call_0a", "call_0a", "call_0a#2", "call_0a#2"]
    assert all(s["t"] is None and s["input_tokens"] is None for s in steps)


def test_declared_rules_carry_tau_bench_numbers(synthetic):
    result, card = synthetic
    records = json.loads(FIXTURE.read_text())
    assert _reported(result, "tau_bench.original") == pytest.approx(sum(r["reward"] for r in records) / len(records))
    assert _reported(result, "tau_bench.pass_hat_2") == pytest.approx(_pass_hat(records, 2)) == pytest.approx(0.25)
    assert set(card.rule_files()) == {"tau_bench.original", "tau_bench.pass_hat_2"}


def test_missing_timestamps_and_tokens_are_declared(synthetic):
    result, card = synthetic
    drops = {d.target: d for d in card.manifest.drops}
    assert drops["steps.t"].declaration == "source_missing" and drops["steps.t"].count == result.steps
    assert drops["steps.t"].loss_class == "unavailable_source_field"
    for target in ("steps.input_tokens", "steps.output_tokens", "episodes.started_at", "episodes.input_tokens"):
        assert target in drops


def test_plan_provenance_and_validity(synthetic):
    result, card = synthetic
    plan = card.manifest.plan
    assert plan.tasks == ["0", "1", "2", "3"] and plan.trials == 2 and plan.agents == ["synthetic-agent"]
    source = card.manifest.provenance.sources[0]
    assert source.name == FIXTURE.name and source.bytes == FIXTURE.stat().st_size and len(source.sha256) == 64
    assert card.manifest.provenance.harness.name == "tau-bench"
    assert_valid(result.path)


def test_agent_option_names_the_agent(tmp_path):
    result, card = run_import("tau-bench", [FIXTURE], tmp_path / "c", agent="gpt-x", urls=["https://example.org/r.json"])
    assert set(card.episodes(columns=["agent"]).column("agent").to_pylist()) == {"gpt-x"}
    assert card.manifest.provenance.sources[0].url == "https://example.org/r.json"


@pytest.mark.parametrize(
    ("name", "record", "message"),
    [
        ("truncated.json", "1", "truncated"),
        ("missing-field.json", "1 (task_id 0, trial 1)", "missing required field(s) reward"),
        ("not-an-array.json", None, "JSON array"),
    ],
)
def test_bad_input_names_file_and_record_and_leaves_nothing(tmp_path, name, record, message):
    path = SOURCES / "tau-bench" / "bad" / name
    with pytest.raises(SourceFormatError) as exc:
        run_import("tau-bench", [path], tmp_path / "out")
    assert exc.value.file == str(path) and exc.value.record == record and message in str(exc.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["truncated.json", "missing-field.json"])
def test_keep_going_imports_the_good_records_and_declares_the_bad(tmp_path, name):
    result, card = run_import("tau-bench", [SOURCES / "tau-bench" / "bad" / name], tmp_path / "out", keep_going=True)
    assert result.episodes == 1
    (drop,) = [d for d in card.manifest.drops if d.declaration == "source_malformed"]
    assert drop.count == 1 and drop.target == "episodes" and name in drop.reason
    assert card.manifest.plan.expected_episodes == 2  # the bad record stays in the plan, covered by the drop
    assert_valid(result.path)


def test_a_result_whose_call_is_not_in_the_record_is_kept_and_the_call_declared(tmp_path):
    source = json.loads((SOURCES / "tau-bench" / "orphan-result.json").read_text())
    (orphan,) = [m for m in source[1]["traj"] if m.get("tool_call_id") == "call_never_issued"]
    result, card = run_import("tau-bench", [SOURCES / "tau-bench" / "orphan-result.json"], tmp_path / "out")
    assert result.episodes == 2
    assert_valid(result.path)
    rows = card.steps(columns=["kind", "role", "call_id", "content", "payload"]).to_pylist()
    kept = [r for r in rows if r["payload"] and json.loads(r["payload"]).get("source_call_id") == "call_never_issued"]
    assert [(r["kind"], r["role"], r["call_id"], r["content"]) for r in kept] == [
        ("message", "tool", None, orphan["content"])]
    (drop,) = [d for d in card.manifest.drops if "answer a tool call the source does not hold" in d.reason]
    assert (drop.target, drop.action, drop.declaration, drop.count) == ("steps", "unobserved", "source_missing", 1)


def test_keep_going_does_not_excuse_a_file_that_is_not_tau_bench(tmp_path):
    with pytest.raises(SourceFormatError):
        run_import("tau-bench", [SOURCES / "tau-bench" / "bad" / "not-an-array.json"], tmp_path / "o", keep_going=True)


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"source": "user", "reward_info": {"reward": 1}}, "completed"),
        ({"source": "transfer_to_human_agents", "reward_info": {"reward": 0}}, "completed"),
        ({"source": "book_reservation", "reward_info": None}, "limit"),
        ({"source": "user", "reward_info": None}, "limit"),
        ({"source": "user"}, "completed"),  # results from before reward_info existed
        ({"source": "search_flights"}, "limit"),
    ],
)
def test_terminal_state_table(info, expected):
    assert terminal_state(info)[0] == expected


def test_the_published_gpt_4o_airline_results(tmp_path):
    path = external("tau-bench/gpt-4o-airline.json")
    result, card = run_import("tau-bench", [path], tmp_path / "tau")
    records = json.loads(path.read_text())
    assert result.episodes == 200 and len({r["task_id"] for r in records}) == 50
    assert card.manifest.plan.tasks == [str(i) for i in range(50)] and card.manifest.plan.trials == 4
    assert result.statuses == {"completed": 195, "limit": 5}
    sources = {e["meta.source"] for e in card.episodes().to_pylist() if e["status"] == "limit"}
    assert sources == {"search_direct_flight", "update_reservation_flights", "book_reservation", "user"}
    assert _reported(result, "tau_bench.original") == pytest.approx(0.42)
    for k in (2, 3, 4):
        assert _reported(result, f"tau_bench.pass_hat_{k}") == pytest.approx(_pass_hat(records, k))
    n_steps = sum(len(r["traj"]) + sum(1 for m in r["traj"] if m.get("tool_calls") and m.get("content") is not None)
                  for r in records)
    assert result.steps == n_steps
    assert_valid(result.path)


def test_an_object_where_text_belongs_is_the_sources_fault(tmp_path):
    # Found by the importer fuzzer: a tool name given as an object reached pa.array at flush
    # and ended as an internal error (exit 2).
    import json

    from rollout_cards.errors import SourceFormatError
    from tests.importers.conftest import SOURCES, run_import

    data = json.loads((SOURCES / "tau-bench" / "synthetic-agent.json").read_text())
    results = [m for r in data for m in r.get("traj", []) if m.get("role") == "tool" and "name" in m]
    results[0]["name"] = {"a": [None]}  # a tool message's name
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SourceFormatError, match=r"record \d+ .*name must be text, not a dict"):
        run_import("tau-bench", [bad], tmp_path / "card")
    assert not (tmp_path / "card").exists()


def test_task_ids_that_look_like_digits_to_python_but_are_not_import(tmp_path):
    """'²'.isdigit() is true and int('²') raised ValueError when the plan sorted the task ids
    (an internal error); a non-ASCII "digit" id sorts as text after the numeric ones."""
    records = json.loads(FIXTURE.read_text())
    records[0]["task_id"] = records[1]["task_id"] = "²"
    records[2]["task_id"] = records[3]["task_id"] = "١٠"  # Arabic-Indic 10: int() reads it, the plan must not
    path = tmp_path / "r.json"
    path.write_text(json.dumps(records))
    _, card = run_import("tau-bench", [path], tmp_path / "card")
    assert card.manifest.plan.tasks[-2:] == ["²", "١٠"], card.manifest.plan


def test_a_huge_task_id_is_shortened_in_the_record_label(tmp_path):
    records = json.loads(FIXTURE.read_text())
    records[0]["task_id"] = "9" * 5000
    path = tmp_path / "r.json"
    path.write_text(json.dumps(records))
    with pytest.raises(SourceFormatError) as exc:
        run_import("tau-bench", [path], tmp_path / "card")
    assert exc.value.record.startswith("0 (task_id '9999") and "(5,002 characters)" in exc.value.record
    assert len(str(exc.value)) < 600
