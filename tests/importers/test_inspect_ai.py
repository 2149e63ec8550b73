from __future__ import annotations

import json
import math
import statistics
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.inspect_ai import value_to_float
from tests.conftest import external
from tests.importers.conftest import SOURCES, assert_valid, run_import

SYNTHETIC = SOURCES / "inspect" / "synthetic.json"
SCORED = "inspect/2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"
UNSCORED = "inspect/2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval"
BROWSER = "inspect/2025-05-12T20-27-36-04-00_browser.json"
SECURITY = "inspect/2025-05-12T20-28-26-04-00_security-guide.json"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return run_import("inspect", [SYNTHETIC], tmp_path_factory.mktemp("inspect") / "card")


def _rows(card):
    return {e["episode_id"]: e for e in card.episodes().to_pylist()}


def test_one_episode_per_sample_and_epoch(synthetic):
    result, card = synthetic
    rows = _rows(card)
    assert sorted(rows) == [f"arith/TASKRUN1/{s}/{e}" for s in (1, 2) for e in (1, 2)]
    row = rows["arith/TASKRUN1/1/2"]
    assert row["task_id"] == "arith/1" and row["trial"] == 1 and row["meta.epoch"] == 2
    assert row["agent"] == "mockllm/model" and row["run_id"] == "RUN1"


def test_sample_errors_and_limits_are_terminal_states(synthetic):
    _, card = synthetic
    rows = _rows(card)
    err = rows["arith/TASKRUN1/2/2"]
    assert err["status"] == "error" and err["error_type"] == "RuntimeError"
    assert err["error_traceback"].startswith("Traceback") and "sandbox died" in err["error_message"]
    assert rows["arith/TASKRUN1/1/2"]["status"] == "limit"
    assert rows["arith/TASKRUN1/1/2"]["error_message"] == "message limit of 4 reached"
    assert rows["arith/TASKRUN1/1/1"]["status"] == "completed"


def test_scores_use_inspect_value_mapping_and_keep_the_raw_score(synthetic):
    _, card = synthetic
    rows = _rows(card)
    assert [rows[f"arith/TASKRUN1/{k}"]["score.match"] for k in ("1/1", "1/2", "2/1", "2/2")] == [1.0, 0.5, 0.0, None]
    assert json.loads(rows["arith/TASKRUN1/1/2"]["meta.scores"])["match"]["value"] == "P"
    assert card.manifest.meta["inspect"]["value_to_float"]["C"] == 1.0


def test_tokens_task_columns_and_attachments(synthetic):
    _, card = synthetic
    row = _rows(card)["arith/TASKRUN1/1/1"]
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (20, 5, 25)
    assert row["task.input"] == "What is 1 + 2? (sample 1)"  # attachment resolved
    assert json.loads(row["task.metadata"]) == {"difficulty": "easy"}
    assert json.loads(row["meta.attachments"]) == {"a1": "What is 1 + 2? (sample 1)"}


def test_events_become_steps_none_dropped(synthetic):
    _, card = synthetic
    steps = card.episode_steps("arith/TASKRUN1/1/2").to_pylist()
    assert [(s["kind"], s["name"]) for s in steps] == [
        ("state", "sample_init"), ("span_begin", "generate"), ("message", "mockllm/model"), ("tool_call", "add"),
        ("tool_result", "add"), ("annotation", "checkpoint"), ("limit", "message"), ("span_begin", "match"),
        ("score", "match"), ("span_end", "match"), ("span_end", "generate"),
    ]
    by_kind = {s["kind"]: s for s in steps}
    assert by_kind["message"]["input_tokens"] == 20 and by_kind["message"]["output_tokens"] == 5
    assert json.loads(by_kind["tool_call"]["args"]) == {"x": 1, "y": 2} and by_kind["tool_result"]["content"] == "3"
    assert by_kind["tool_result"]["call_id"] == by_kind["tool_call"]["call_id"] == "t12"
    assert json.loads(by_kind["annotation"]["payload"])["note"] == "an event type no importer knows"
    assert by_kind["score"]["content"] == "P"
    errored = card.episode_steps("arith/TASKRUN1/2/2").to_pylist()
    assert [s["content"] for s in errored if s["kind"] == "error"] == ["RuntimeError('sandbox died')"]


def test_the_reported_metric_is_a_declared_rule(synthetic, tmp_path):
    result, card = synthetic
    rule, spread = result.rules
    assert rule["rule"] == "inspect.arith.match.accuracy" and rule["reported"][0]["value"] == 0.375
    assert spread["rule"] == "inspect.arith.match.stderr"  # replayed: assert_valid below checks its value
    text = card.rule_files()["inspect.arith.match.accuracy"]
    import yaml

    doc = yaml.safe_load(text)
    assert list(doc) == ["rule", "version", "kind", "description", "select", "score", "on_status", "on_missing",
                         "reduce", "aggregate", "reported"]
    # Inspect counts every sample-epoch that carries the score, whatever its status; the errored one has none
    assert doc["reduce"] == {"by": ["task_id"], "with": "mean"} and set(doc["on_status"].values()) == {"score"}
    assert doc["on_missing"] == "exclude"
    assert doc["reported"] == [{"group": {"agent": "mockllm/model"}, "value": 0.375, "tolerance": 1e-09}]
    assert_valid(result.path)


def test_a_bad_sample_member_is_skipped_with_keep_going(tmp_path):
    log = json.loads(SYNTHETIC.read_text())
    samples = log.pop("samples")
    path = tmp_path / "log.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps(log))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        zf.writestr("samples/9_epoch_1.json", "{not json")
    with pytest.raises(SourceFormatError) as exc:
        run_import("inspect", [path], tmp_path / "strict")
    assert exc.value.record == "samples/9_epoch_1.json"
    result, card = run_import("inspect", [path], tmp_path / "lenient", keep_going=True)
    assert result.episodes == 4 and [m.record for m in result.malformed] == ["samples/9_epoch_1.json"]


def test_a_log_with_fewer_samples_than_planned_declares_them(tmp_path):
    log = json.loads(SYNTHETIC.read_text())
    log["samples"] = log["samples"][:3]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(log))
    _, card = run_import("inspect", [path], tmp_path / "card")
    (drop,) = [d for d in card.manifest.drops if d.target == "episodes"]
    assert drop.count == 1 and drop.declaration == "source_missing"
    assert_valid(tmp_path / "card")


def test_a_header_only_log_declares_its_missing_samples(tmp_path):
    # inspect_ai@499e6152e tests/log/test_eval_log/log_valid.txt (version 2), log_version_3.txt (4),
    # log_with_nan.txt (1): status success, no `samples` key and no dataset.sample_ids (logs written with
    # log_samples=False). Nothing said why they gave no episode ("no episodes could be imported"), and
    # with another log the card declared nothing about them.
    log = json.loads(SYNTHETIC.read_text())
    del log["samples"], log["eval"]["dataset"]["sample_ids"], log["eval"]["dataset"]["samples"]
    header_only = tmp_path / "2024-05-05T07-59-35_wikipedia.json"
    header_only.write_text(json.dumps(log))
    result, card = run_import("inspect", [header_only, SYNTHETIC], tmp_path / "card")
    assert result.episodes == len(json.loads(SYNTHETIC.read_text())["samples"])
    (drop,) = [d for d in card.manifest.drops if d.target == "episodes"]
    # the count is the header's results.total_samples when it has one (the synthetic log's 4; log_valid.txt
    # has none: count unknown)
    assert (drop.declaration, drop.loss_class, drop.count) == ("source_missing", "missing_records",
                                                               log["results"]["total_samples"])
    assert drop.reason.startswith(f"{header_only.name} (status 'success', log version 2) holds no samples")
    assert_valid(tmp_path / "card")
    with pytest.raises(SourceFormatError, match=r"no episodes could be imported from .*wikipedia.json: .*"
                       r"\(status 'success', log version 2\) holds no samples: a header-only log"):
        run_import("inspect", [header_only], tmp_path / "alone")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("C", 1.0), ("I", 0.0), ("P", 0.5), ("N", 0.0), ("Yes", 1.0), ("false", 0.0), ("0.25", 0.25), (True, 1.0),
     (3, 3.0), ("-1", -1.0), ("1e-1", 0.1), (" 2", 2.0), ("nan", 0.0), ("inf", 0.0), (float("nan"), None),
     ("maybe", 0.0), (None, 0.0), ([1], 0.0), ({"a": 1}, 0.0)],
)
def test_value_to_float(value, expected):
    assert value_to_float(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_map_to_themselves(x):
    assert value_to_float(x) == x


# -- real logs from ../shared/data/external ---------------------------------------------------
def test_the_scored_eval_log(tmp_path):
    result, card = run_import("inspect", [external(SCORED)], tmp_path / "card")
    assert result.episodes == 10 and result.statuses == {"completed": 10}
    assert [r["rule"] for r in result.rules] == ["inspect.popularity.match.accuracy", "inspect.popularity.match.stderr"]
    scores = card.episodes(columns=["score.match"]).column("score.match").to_pylist()
    assert sum(scores) / len(scores) == pytest.approx(0.8) == result.rules[0]["reported"][0]["value"]
    # Inspect's stderr: the sample standard deviation (n - 1) over sqrt(n), here recomputed in plain Python
    assert statistics.stdev(scores) / math.sqrt(len(scores)) == pytest.approx(result.rules[1]["reported"][0]["value"])
    prov = card.manifest.provenance
    assert prov.harness.version == "0.3.58.dev16+g6a87748b" and prov.environment.name == "popularity"
    assert prov.environment.revision == "ef1d858c" and prov.agents[0].model == "openai/gpt-4o-mini"
    assert prov.packages == {"inspect_ai": "0.3.58.dev16+g6a87748b"}
    assert_valid(result.path)


def test_the_unscored_eval_log_declares_no_rule(tmp_path):
    result, card = run_import("inspect", [external(UNSCORED)], tmp_path / "card")
    assert result.episodes == 10 and result.rules == [] and not card.rule_files()
    assert "reports no scores" in " ".join(result.notes)


@pytest.mark.parametrize(("rel", "tool_calls"), [(BROWSER, 4), (SECURITY, 0)])
def test_the_json_logs_import_with_their_tool_events(tmp_path, rel, tool_calls):
    path = external(rel)
    log = json.loads(path.read_text())
    result, card = run_import("inspect", [path], tmp_path / "card")
    n_events = sum(len(s["events"]) for s in log["samples"])
    n_tools = sum(1 for s in log["samples"] for e in s["events"] if e["event"] == "tool")
    # system and user messages sent to a model (the solver's, a model grader's) become message steps, once each
    n_prompts = sum(len({m["id"] for e in s["events"] if e["event"] == "model" for m in e["input"]
                         if m["role"] in ("system", "user")}) for s in log["samples"])
    assert n_tools == tool_calls
    assert result.episodes == len(log["samples"])
    assert result.steps == n_events + n_tools + n_prompts  # a tool event is a call and a result
    steps = card.steps(columns=["kind", "call_id"]).to_pylist()
    calls = [s["call_id"] for s in steps if s["kind"] == "tool_call"]
    assert len(calls) == tool_calls and sorted(calls) == sorted(s["call_id"] for s in steps if s["kind"] == "tool_result")
    assert_valid(result.path)


def test_all_four_logs_in_one_card(tmp_path):
    paths = [external(r) for r in (SCORED, UNSCORED, BROWSER, SECURITY)]
    result, card = run_import("inspect", paths, tmp_path / "card")
    assert result.episodes == 24 and len(result.rules) == 5  # accuracy of 3 logs, stderr of the 2 with >= 2 samples
    assert sum(r["rule"].endswith(".stderr") for r in result.rules) == 2
    assert card.manifest.provenance.environment is None  # several tasks: named per log in meta
    assert len(card.manifest.meta["inspect"]["logs"]) == 4
    assert_valid(result.path)


ALL_LOGS = [
    SCORED, UNSCORED, BROWSER, SECURITY, "inspect/log_message_deduplication.eval", "inspect/log_formats.eval",
    "inspect/log_formats.json", "inspect/log_streaming.eval", "inspect/retry-2-then-success.legacy.eval",
    "inspect/inspect-0.3.285/2026-12-01T08-28-13-00-00_arith_Hh2t2nyvhoxHw7V9XZW4PJ.eval",
    "inspect/inspect-0.3.285/2026-12-01T08-28-14-00-00_arith_VdKqNirU4VLYR5rpgCL6Mg.eval",
    "inspect/inspect-0.3.285/2026-12-01T08-28-36-00-00_mcq_eyWbPhBuprdGGCQYdr8DEK.eval",
    "inspect/inspect-0.3.285/2026-12-01T08-30-51-00-00_mcq_7AZHZLVce5zatHdaC2RYF8.json",
]


@pytest.mark.parametrize("rel", ALL_LOGS)
def test_every_log_generation_imports_and_validates(tmp_path, rel):
    path = external(rel)
    if path.suffix == ".eval":  # count the sample members from the zip directory (no decompression needed)
        with zipfile.ZipFile(path) as zf:
            expected = sum(1 for n in zf.namelist() if n.startswith("samples/") and n.endswith(".json"))
    else:
        expected = len(json.loads(path.read_text())["samples"])
    result, _ = run_import("inspect", [path], tmp_path / "card")
    assert result.episodes == expected
    assert_valid(result.path)


def test_a_log_without_samples_says_why_nothing_was_imported(tmp_path):
    # Inspect's tests/analysis/test_logs/*_no-samples.json: a cancelled log whose samples are not
    # in it; before, the error was only "no episodes could be imported from no-samples.json"
    log = json.loads(SYNTHETIC.read_text())
    planned = len(log["samples"])
    log["samples"], log["status"] = [], "cancelled"
    path = tmp_path / "no-samples.json"
    path.write_text(json.dumps(log))
    with pytest.raises(SourceFormatError) as err:
        run_import("inspect", [path], tmp_path / "card")
    assert str(err.value).startswith("no episodes could be imported from no-samples.json: no-samples.json "
                                     f"(status 'cancelled') plans {planned} sample-epochs but logs 0")
    assert not (tmp_path / "card").exists()
