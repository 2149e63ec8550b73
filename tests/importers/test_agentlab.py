from __future__ import annotations

import csv
import json
import math
import os
import pickle

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.agentlab import parse_experiment_name, terminal_state
from tests.conftest import external
from tests.importers.conftest import assert_valid, run_import

OLD = "agentlab/2024-08-01_10-20-52_GenericAgent_on_miniwob.ascending-numbers_64_e6d2d5"
NEW = "agentlab/2025-01-22_11-03-29_GenericAgent-gpt-4o-mini_on_miniwob.click-checkboxes_20"
CSV = "agentlab/result_df_trial_1_of_3.csv"


def _summary(**kw):
    base = {"n_steps": 3, "cum_reward": 1.0, "cum_raw_reward": 0, "err_msg": None, "stack_trace": None,
            "stats.cum_input_tokens": 100, "stats.cum_output_tokens": 10, "stats.cum_cost": 0.5,
            "stats.cum_step_elapsed": 1.5, "terminated": True, "truncated": False}
    return {**base, **kw}


def _experiment(root, name, summary, extra=()):
    d = root / name
    d.mkdir(parents=True)
    (d / "summary_info.json").write_text(json.dumps(summary))
    for f in extra:
        (d / f).write_bytes(b"x")
    return d


def test_real_experiments_and_study_table(tmp_path):
    old, new, table = external(OLD), external(NEW), external(CSV)
    result, card = run_import("agentlab", [old, new, table], tmp_path / "c")
    rows = list(csv.DictReader(table.open()))
    names = {r["exp_dir"].rsplit("/", 1)[-1] for r in rows} | {old.name, new.name}
    assert result.episodes == len(names) == 5  # the new experiment is also a row of the table
    eps = {e["episode_id"]: e for e in card.episodes().to_pylist()}
    summary = json.loads((old / "summary_info.json").read_text())
    e = eps[old.name]
    assert e["status"] == "error" and e["error_message"] == summary["err_msg"]  # err_msg wins over truncated
    assert (e["agent"], e["task_id"], e["seed"]) == ("GenericAgent", "miniwob.ascending-numbers", 64)
    assert e["input_tokens"] == summary["stats.cum_openai_prompt_tokens"]
    assert e["cost_usd"] == summary["stats.cum_openai_total_cost"]
    assert e["meta.n_steps"] == summary["n_steps"] and e["meta.truncated"] is True
    for r in rows:
        e = eps[r["exp_dir"].rsplit("/", 1)[-1]]
        assert e["score.cum_reward"] == float(r["cum_reward"]) and e["seed"] == int(r["env.task_seed"])
        assert e["cond.agent.chat_model.model_name"] == r["agent.chat_model.model_name"]
        assert e["input_tokens"] == int(r["stats.cum_input_tokens"])
    # AgentLab's summarize: mean of cum_reward per agent (plain Python over the sources)
    by_agent = {}
    for r in rows:
        by_agent.setdefault(r["agent.agent_name"], []).append(float(r["cum_reward"]))
    by_agent.setdefault("GenericAgent", []).append(summary["cum_reward"])
    (rule,) = result.rules
    assert {x["group"]["agent"]: x["value"] for x in rule["reported"]} == {
        a: sum(v) / len(v) for a, v in by_agent.items()}
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize(("summary", "status"), [
    ({"err_msg": "boom", "truncated": True}, "error"),
    ({"truncated": True, "terminated": False}, "limit"),
    ({"terminated": True}, "completed"),
    ({"terminated": False, "truncated": False}, "cancelled"),
])
def test_terminal_states(summary, status):
    assert terminal_state(summary)[0] == status


def test_study_directory_with_pickles_never_opens_them(tmp_path):
    study = tmp_path / "study"
    trace = "Traceback (most recent call last):\n  File x\nValueError: bad bid"
    _experiment(study, "2025-01-01_00-00-00_MyAgent_on_webarena.12_0", _summary(),
                extra=["step_0.pkl.gz", "step_1.pkl.gz", "exp_args.pkl", "screenshot_step_0.png",
                       "experiment.log"])
    _experiment(study, "2025-01-01_00-00-00_MyAgent_on_webarena.13_0",
                _summary(err_msg="bad bid", stack_trace=trace, cum_reward=0.0, terminated=False))
    _experiment(study, "2025-01-01_00-00-00_MyAgent_on_webarena.14_0",
                _summary(terminated=False, truncated=False, cum_reward=None))
    # a pickle that would run code if loaded
    (study / "2025-01-01_00-00-00_MyAgent_on_webarena.12_0" / "step_0.pkl.gz").write_bytes(
        pickle.dumps(os.system))
    result, card = run_import("agentlab", [study], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert eps["webarena.13"]["status"] == "error" and eps["webarena.13"]["error_type"] == "ValueError"
    assert eps["webarena.13"]["error_traceback"] == trace
    assert eps["webarena.14"]["status"] == "cancelled" and eps["webarena.14"]["score.cum_reward"] is None
    drops = {(d.target, d.loss_class): d for d in card.manifest.drops}
    assert drops[("steps", "unsafe_format")].count == 3
    assert drops[("artifacts", "channel_excluded")].count >= 1
    (rule,) = result.rules
    assert rule["reported"] == [{"group": {"agent": "MyAgent"}, "value": 0.5, "tolerance": 1e-6}]
    assert_valid(tmp_path / "c")


def test_an_unfinished_experiment_with_a_reward_counts_in_the_reported_mean_and_replays(tmp_path):
    # Fuzzer counterexample (a renamed `terminated` key): the reported mean took the unfinished
    # experiment's cum_reward, as AgentLab's summarize does, while the rule excluded cancelled
    # episodes, so the imported card failed validation (reported-mismatch).
    study = tmp_path / "study"
    _experiment(study, "2025-01-01_00-00-00_MyAgent_on_webarena.1_0", _summary(cum_reward=1.0))
    _experiment(study, "2025-01-01_00-00-00_MyAgent_on_webarena.2_0",
                _summary(terminated=False, truncated=False, cum_reward=0.0))
    result, card = run_import("agentlab", [study], tmp_path / "c")
    assert {e["status"] for e in card.episodes().to_pylist()} == {"completed", "cancelled"}
    assert result.rules[0]["reported"][0]["value"] == 0.5  # (1.0 + 0.0) / 2, pandas' mean of cum_reward
    assert_valid(tmp_path / "c")


def test_a_link_in_the_source_is_refused_not_followed(tmp_path):
    study = tmp_path / "study"
    d = _experiment(study, "2025-01-01_00-00-00_A_on_t_1", _summary())
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    (d / "notes.json").symlink_to(outside)
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("agentlab", [study], tmp_path / "c")


@pytest.mark.parametrize(("summary", "message"), [
    ('{"cum_reward": "lots", "terminated": true}', "cum_reward is 'lots', not a number"),
    ('{"cum_reward": 1e999, "terminated": true}', "summary_info.json"),
    ('{"terminated": "yes"}', "terminated is 'yes', not true or false"),
    ('{"stats.cum_input_tokens": 1e30, "terminated": true}', "not a 64-bit integer"),
    ('[1, 2]', "is not a JSON object"),
    ('{"cum_reward": 1', "summary_info.json"),
    ('{"err_msg": {"a": 1}}', "err_msg is dict"),
])
def test_bad_summaries_name_the_file_and_field(tmp_path, summary, message):
    d = tmp_path / "2025-01-01_00-00-00_A_on_t_1"
    d.mkdir()
    (d / "summary_info.json").write_text(summary)
    with pytest.raises(SourceFormatError) as info:
        run_import("agentlab", [d], tmp_path / "c")
    assert message in str(info.value) and "summary_info.json" in str(info.value)


def test_keep_going_skips_a_bad_experiment_and_declares_it(tmp_path):
    study = tmp_path / "study"
    _experiment(study, "2025-01-01_00-00-00_A_on_t_1", _summary())
    _experiment(study, "2025-01-01_00-00-00_A_on_t_2", _summary(cum_reward="x"))
    result, card = run_import("agentlab", [study], tmp_path / "c", keep_going=True)
    assert result.episodes == 1 and len(result.malformed) == 1
    assert any(d.declaration == "source_malformed" for d in card.manifest.drops)


def test_bad_csv_rows_are_located(tmp_path):
    path = tmp_path / "result_df.csv"
    path.write_text("exp_dir,cum_reward,terminated\n/x/A_on_t_1,1.0,True\n/x/A_on_t_2,1.0\n")
    with pytest.raises(SourceFormatError, match="row 2: has 2 cells for 3 columns"):
        run_import("agentlab", [path], tmp_path / "c")


def test_a_study_summary_csv_names_what_to_import(tmp_path):
    # ServiceNow/AgentLab@0578daba tests/data/error_analysis/summary_df_trial_1_of_3.csv and
    # @1b47afb5 tests/data/test_study/study_summary.csv: one row per agent and benchmark (averages). Given
    # as a source it was "is not an AgentLab result table (no exp_dir / cum_reward column)", no fix.
    path = tmp_path / "study_summary.csv"
    path.write_text("agent.agent_name,env.benchmark,avg_reward,std_err,avg_steps,n_completed,n_err\n"
                    "GenericAgent,miniwob,0.0,0.0,10.0,1/2,1\n")
    with pytest.raises(SourceFormatError, match="is an AgentLab study summary .*import the study directory, "
                       "its result_df") as exc:
        run_import("agentlab", [path], tmp_path / "c")
    assert (exc.value.file, exc.value.record) == (str(path), "header")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(SourceFormatError, match="not an AgentLab result table .*; import a study or experiment"):
        run_import("agentlab", [other], tmp_path / "c2")


def test_experiment_names():
    assert parse_experiment_name("2024-08-01_10-20-52_GenericAgent_on_miniwob.ascending-numbers_64_e6d2d5") == (
        "GenericAgent", "miniwob.ascending-numbers", 64)
    assert parse_experiment_name("A-b_on_workarena.servicenow.order_3") == ("A-b", "workarena.servicenow.order", 3)
    assert parse_experiment_name("no-structure") is None
    # AgentLab loop.py @69cd893 _make_dir: `<date>_<exp_name>_<i>` when that directory already exists (same
    # name, same second); the tag was read as the seed and the seed as part of the task name
    assert parse_experiment_name("2025-03-20_10-00-00_GenericAgent_on_miniwob.click-dialog_28_1") == (
        "GenericAgent", "miniwob.click-dialog", 28)
    assert parse_experiment_name("2025-03-20_10-00-00_G_on_webarena.310_7_12") == ("G", "webarena.310", 7)
    assert parse_experiment_name("G_on_t_28_1") == ("G", "t_28", 1)  # no date prefix: no tag


def test_nan_stats_and_an_experiment_without_summary_info(tmp_path):
    # ServiceNow/AgentLab src/agentlab/experiments/loop.py @69cd893: _aggregate_episode_stats turns a stat
    # that is None into np.nan and takes np.nanmax, and save_summary_info json.dump()s it: summary_info.json
    # then holds NaN (was exit 1, "non-standard JSON constant NaN"). ExpArgs writes exp_args.pkl and
    # experiment.log when an experiment starts and summary_info.json only when it ends: a killed or running
    # experiment was silently absent from a study import.
    study = tmp_path / "study"
    d = _experiment(study, "2025-01-22_11-00-01_GenericAgent_on_miniwob.y_2", {})
    (d / "summary_info.json").write_text(json.dumps(_summary(**{"stats.max_cost": "NANX"})).replace('"NANX"', "NaN"))
    _experiment(study, "2025-01-22_11-00-00_GenericAgent_on_miniwob.x_1", _summary())
    killed = study / "2025-01-22_11-00-03_GenericAgent_on_miniwob.w_4"
    killed.mkdir()
    (killed / "exp_args.pkl").write_bytes(b"\x80\x04N.")  # never opened
    (killed / "experiment.log").write_text("started\n")
    result, card = run_import("agentlab", [study], tmp_path / "c")
    assert_valid(tmp_path / "c")
    rows = {r["episode_id"]: r for r in card.episodes().to_pylist()}
    assert rows["2025-01-22_11-00-01_GenericAgent_on_miniwob.y_2"]["meta.stats.max_cost"] is None
    assert rows["2025-01-22_11-00-01_GenericAgent_on_miniwob.y_2"]["cost_usd"] == 0.5
    drop = next(d for d in card.manifest.drops if d.loss_class == "missing_summary")
    assert drop.count == 1 and killed.name in drop.reason
    with pytest.raises(SourceFormatError, match="have not finished"):
        run_import("agentlab", [killed], tmp_path / "c2")


def test_a_seed_in_the_name_beyond_64_bits_is_located(tmp_path):
    """The name's seed went into the int64 seed column: OverflowError (an internal error)."""
    d = _experiment(tmp_path, "2025-01-01_00-00-00_A_on_t_" + "9" * 30, _summary())
    with pytest.raises(SourceFormatError) as info:
        run_import("agentlab", [d], tmp_path / "c")
    assert "does not fit in 64 bits" in str(info.value) and d.name[:40] in str(info.value)
    assert not (tmp_path / "c").exists()


def test_infinite_rewards_and_stats_import_null_counted_and_kept(tmp_path):
    """AgentLab's json.dump writes numpy's inf / nan as Infinity / NaN (np.nanmax over an infinite
    stat; a reward function's nan), and pandas' to_csv writes inf as 'inf': the import was refused
    (exit 1, "cum_reward is inf, not a finite number"). Now each is null in its column, the
    source's literal in meta.non_finite, and a drop per key counts it; an infinite reward is unscored."""
    study = tmp_path / "study"
    odd = "2025-01-22_11-00-01_GenericAgent_on_miniwob.y_2"
    d = _experiment(study, odd, {})
    text = json.dumps(_summary(**{"cum_reward": "INF", "stats.cum_cost": "-INF", "stats.max_step_elapsed": "INF",
                                  "stats.max_cost": "NAN", "extra": {"a": ["INF"]}}))
    (d / "summary_info.json").write_text(text.replace('"INF"', "Infinity").replace('"-INF"', "-Infinity")
                                         .replace('"NAN"', "NaN"))
    _experiment(study, "2025-01-22_11-00-00_GenericAgent_on_miniwob.x_1", _summary(cum_reward=0.5))
    table = tmp_path / "result_df.csv"
    table.write_text("exp_dir,agent.agent_name,env.task_name,env.task_seed,cum_reward,terminated,truncated\n"
                     "/s/2025-01-22_11-00-02_B_on_t_3,B,t,3,inf,True,False\n"
                     "/s/2025-01-22_11-00-03_B_on_t_4,B,t,4,0.25,True,False\n")
    result, card = run_import("agentlab", [study, table], tmp_path / "c")
    assert_valid(tmp_path / "c")
    source = json.loads((d / "summary_info.json").read_text())  # Python's json reads the literals
    assert source["cum_reward"] == math.inf and source["stats.cum_cost"] == -math.inf
    rows = {r["episode_id"]: r for r in card.episodes().to_pylist()}
    e = rows[odd]
    assert e["score.cum_reward"] is None and e["cost_usd"] is None and e["meta.stats.cum_cost"] is None
    assert e["meta.stats.max_step_elapsed"] is None and e["meta.stats.max_cost"] is None
    assert json.loads(e["meta.non_finite"]) == {"cum_reward": "Infinity", "stats.cum_cost": "-Infinity",
                                                "stats.max_step_elapsed": "Infinity", "extra.a[0]": "Infinity"}
    assert json.loads(e["meta.record"]) == {"extra": {"a": [None]}}
    assert rows["2025-01-22_11-00-02_B_on_t_3"]["score.cum_reward"] is None
    assert json.loads(rows["2025-01-22_11-00-02_B_on_t_3"]["meta.non_finite"]) == {"cum_reward": "Infinity"}
    drops = {d.target: d for d in card.manifest.drops if d.loss_class == "non_finite_value"}
    assert set(drops) == {"episodes.score.cum_reward", "episodes.meta.stats.cum_cost",
                          "episodes.meta.stats.max_step_elapsed", "episodes.meta.record"}
    assert drops["episodes.score.cum_reward"].count == 2 and "unscored" in drops["episodes.score.cum_reward"].reason
    assert drops["episodes.score.cum_reward"].affects == ["agentlab.avg_reward"]
    (rule,) = result.rules  # the finite rewards only, per agent (plain Python over the sources)
    assert {x["group"]["agent"]: x["value"] for x in rule["reported"]} == {"GenericAgent": 0.5, "B": 0.25}
