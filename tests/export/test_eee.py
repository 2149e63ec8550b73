"""`rcard export eee`: Every Eval Ever aggregates and instance records, validated by EEE's own schemas.

The schemas are EEE's (../shared/data/external/eee, schema 0.3.0), read by jsonschema; the
numbers are checked against plain Python over the source file, not against the engine.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import ExportError
from rollout_cards.export import export_eee, validate_eee
from rollout_cards.stats import zero_event_upper_bound
from tests.conftest import FIXTURE_CARDS, external
from tests.importers.conftest import run_import

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the export against EEE's schemas")

TAU2 = "tau2-bench/gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json"
INSPECT = "inspect/inspect-0.3.285/2026-12-01T08-28-13-00-00_arith_Hh2t2nyvhoxHw7V9XZW4PJ.eval"


def _schemas() -> Path:
    return external("eee/eval.schema.json").parent


def _validate_by_hand(out: Path) -> int:
    """jsonschema over every file, directly (not through validate_eee); returns the records checked."""
    agg = json.loads((_schemas() / "eval.schema.json").read_text())
    inst = json.loads((_schemas() / "instance_level_eval.schema.json").read_text())
    checked = 0
    for path in out.rglob("*.json"):
        jsonschema.validate(json.loads(path.read_text()), agg, cls=jsonschema.Draft7Validator)
        checked += 1
    for path in out.rglob("*_samples.jsonl"):
        for line in path.read_text().splitlines():
            jsonschema.validate(json.loads(line), inst, cls=jsonschema.Draft7Validator)
            checked += 1
    return checked


def _aggregate(out: Path) -> dict:
    [path] = list(out.rglob("*.json"))
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def tau2_card(tmp_path_factory):
    out = tmp_path_factory.mktemp("tau2") / "card"
    run_import("tau2-bench", [external(TAU2)], out)
    return out


def test_tau2_export_validates_and_its_numbers_are_tau2s(tau2_card, tmp_path):
    out = tmp_path / "eee"
    result = export_eee(rc.open(tau2_card), out, organization="Sierra", retrieved_at=1.0)
    assert result.skipped == [] and len(result.logs) == 1 and len(result.samples) == 1
    assert _validate_by_hand(out) == 1 + result.instances
    assert validate_eee(out, _schemas()) == []

    source = json.loads(external(TAU2).read_text())
    sims = [s for s in source["simulations"] if s.get("termination_reason") != "infrastructure_error"]
    rewards = [s["reward_info"]["reward"] for s in sims if (s.get("reward_info") or {}).get("reward") is not None]
    doc = _aggregate(out)
    by_metric = {r["metric_config"]["metric_id"]: r for r in doc["evaluation_results"]}
    avg = by_metric["tau2_bench.avg_reward"]
    assert avg["score_details"]["score"] == pytest.approx(sum(rewards) / len(rewards))
    details = avg["score_details"]["details"]
    assert int(details["n_observations"]) == len(rewards) == avg["score_details"]["uncertainty"]["num_samples"]
    assert details["independent_unit"] == "task_id"
    assert int(details["n_independent_units"]) == len({s["task_id"] for s in sims})
    ci = avg["score_details"]["uncertainty"]["confidence_interval"]
    assert ci["lower"] <= avg["score_details"]["score"] <= ci["upper"] and ci["confidence_level"] == 0.95
    assert ci["method"] == details["interval_method"]
    # pass^1 = mean over tasks of the share of successful trials (tau2's formula, by hand)
    tasks: dict[str, list[float]] = {}
    for s in sims:
        tasks.setdefault(s["task_id"], []).append(float(s["reward_info"]["reward"] == 1.0))
    pass1 = by_metric["tau2_bench.pass_hat_1"]["score_details"]["score"]
    assert pass1 == pytest.approx(sum(sum(v) / len(v) for v in tasks.values()) / len(tasks))

    # The identity EEE joins on, and the sidecar's checksum and row count.
    assert doc["model_info"]["id"] == source["info"]["agent_info"]["llm"]
    assert doc["source_metadata"]["source_organization_name"] == "Sierra"
    assert doc["eval_library"]["name"] == "tau2-bench"
    samples = result.samples[0]
    detailed = doc["detailed_evaluation_results"]
    assert detailed["checksum"] == hashlib.sha256(samples.read_bytes()).hexdigest()
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    assert detailed["total_rows"] == len(lines) == result.instances
    assert samples.relative_to(out).as_posix() == detailed["file_path"]

    # One instance record per observation of each headline, carrying its value.
    rows = [r for r in lines if r["evaluation_result_id"] == avg["evaluation_result_id"]]
    assert sorted(r["evaluation"]["score"] for r in rows) == sorted(rewards)
    assert all(r["evaluation_id"] == doc["evaluation_id"] and r["model_id"] == doc["model_info"]["id"] for r in rows)
    by_episode = {s["id"]: s for s in sims}
    for row in rows:  # the transcript: every tool call of the simulation, in order
        sim = by_episode[row["metadata"]["episode_id"]]
        calls = [c["name"] for m in sim["messages"] for c in (m.get("tool_calls") or [])]
        assert [c["name"] for m in row["messages"] for c in (m.get("tool_calls") or [])] == calls
        assert row["evaluation"]["tool_calls_count"] == len(calls)
        assert row["interaction_type"] == ("agentic" if calls else "multi_turn")


def test_a_re_export_writes_the_same_files(tau2_card, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    export_eee(rc.open(tau2_card), a, retrieved_at=5.0)
    export_eee(rc.open(tau2_card), b, retrieved_at=5.0)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_inspect_export_states_zero_event_bounds_as_the_card_does(tmp_path):
    card = tmp_path / "card"
    run_import("inspect", [external(INSPECT)], card)
    out = tmp_path / "eee"
    result = export_eee(rc.open(card), out)
    assert validate_eee(out, _schemas()) == [] and result.results > 0
    for entry in _aggregate(out)["evaluation_results"]:
        details, unc = entry["score_details"]["details"], entry["score_details"]["uncertainty"]
        n, successes = int(details["n_observations"]), details.get("successes")
        if successes is not None and int(successes) in (0, n):  # zero events: exact one-sided bound
            bound = zero_event_upper_bound(int(details["n_independent_units"]), 0.95)
            ci = unc["confidence_interval"]
            assert (ci["lower"], ci["upper"]) == pytest.approx((0.0, bound) if int(successes) == 0 else (1 - bound, 1))
            assert "standard_error" not in unc
            assert f"{ci['upper' if int(successes) == 0 else 'lower']:.4f}" in details["display"]


def test_several_agents_one_aggregate_each_and_ungrouped_rules_left_out_with_a_reason(tmp_path):
    card = rc.open(FIXTURE_CARDS / "synthetic")
    rule = tmp_path / "overall.yaml"
    rule.write_text("rule: all.success\nscore: score.success\n")
    out = tmp_path / "eee"
    result = export_eee(card, out, rules=["synthetic.success_rate", str(rule)], developer="acme")
    assert len(result.logs) == 2 and validate_eee(out, _schemas()) == []
    assert len(result.skipped) == 1 and "names no single agent" in result.skipped[0]
    episodes = card.episodes(columns=["agent", "status", "score.success"]).to_pylist()
    for path in result.logs:
        doc = json.loads(path.read_text())
        agent = doc["model_info"]["name"]
        assert doc["model_info"]["id"] == f"acme/{agent}" and path.parts[-3:-1] == ("acme", agent)
        [entry] = doc["evaluation_results"]
        mine = [e for e in episodes if e["agent"] == agent]  # the rule by hand: cancelled/skipped out, failures 0
        kept = [e for e in mine if e["status"] not in ("cancelled", "skipped")]
        values = [float(bool(e["score.success"])) if e["status"] == "completed" else 0.0 for e in kept]
        details = entry["score_details"]["details"]
        assert int(details["n_episodes"]) == len(kept) and int(details["n_excluded"]) == len(mine) - len(kept)
        assert entry["score_details"]["score"] == pytest.approx(sum(values) / len(values))


def test_nothing_to_export_and_unordered_steps_are_clear_errors(tmp_path, monkeypatch):
    runner = CliRunner()
    bare = tmp_path / "bare"
    run_import("atif", [external("harbor/hello-world-timeout.trajectory.json")], bare)
    res = runner.invoke(app, ["export", "eee", str(bare), "-o", str(tmp_path / "x")])
    assert res.exit_code == 1 and "declares no rules" in res.output
    res = runner.invoke(app, ["export", "eee", str(FIXTURE_CARDS / "synthetic"), "-o", str(tmp_path / "y"),
                              "--schemas", str(tmp_path)])
    assert res.exit_code == 1 and "eval.schema.json is missing" in res.output
    res = runner.invoke(app, ["export", "eee", str(FIXTURE_CARDS / "synthetic"), "-o", str(tmp_path / "z"),
                              "--schemas", str(_schemas())])
    assert res.exit_code == 0 and "valid against the EEE schemas" in res.output, res.output

    from rollout_cards.export import eee as module
    card = rc.open(FIXTURE_CARDS / "synthetic")
    real = card.iter_steps

    def shuffled(columns=None, **kw):  # the same rows, the first episode's split in two places
        table = card.steps(columns=columns)
        first = table.column("episode_id")[0].as_py()
        import pyarrow.compute as pc
        mine = table.filter(pc.equal(table.column("episode_id"), first))
        rest = table.filter(pc.not_equal(table.column("episode_id"), first))
        yield from (mine.slice(0, 1).to_batches() + rest.to_batches() + mine.slice(1).to_batches())

    monkeypatch.setattr(card, "iter_steps", shuffled)
    with pytest.raises(ExportError, match="are not stored together"):
        module.export_eee(card, tmp_path / "w")
    monkeypatch.setattr(card, "iter_steps", real)


def test_every_number_in_details_is_named_and_finite(tau2_card, tmp_path):
    out = tmp_path / "eee"
    export_eee(rc.open(tau2_card), out)
    for entry in _aggregate(out)["evaluation_results"]:
        details = entry["score_details"]["details"]
        for key in ("n_observations", "n_episodes", "n_excluded", "independent_unit", "n_independent_units",
                    "interval_method", "interval_level"):
            assert key in details
        assert math.isfinite(entry["score_details"]["score"])


def test_latency_is_computed_from_the_stored_timestamps_even_past_year_9999(tmp_path):
    """Arrow stores any int64 as a timestamp; converting one past year 9999 to a Python datetime
    made `rcard export eee` an internal error (OverflowError: date value out of range)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollout_cards.io.finalize import refresh_manifest

    card = tmp_path / "c"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    card.chmod(0o755)
    table = pq.read_table(card / "episodes.parquet")
    start = [1_700_000_000_000_000 + i for i in range(table.num_rows)]  # epoch microseconds
    end = [s + 1_500_250 for s in start]
    end[0] = 600_000_000_000_000_000  # year ~20983
    ts = pa.timestamp("us", "UTC")
    for name, values in (("started_at", start), ("ended_at", end)):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, pa.field(name, ts), pa.array(values, pa.int64()).cast(ts))
    (card / "episodes.parquet").chmod(0o644)
    pq.write_table(table, card / "episodes.parquet")
    refresh_manifest(card)
    result = CliRunner().invoke(app, ["export", "eee", str(card), "-o", str(tmp_path / "e")])
    assert result.exit_code == 0, result.output
    latencies = {}
    for path in (tmp_path / "e").rglob("*_samples.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            latencies[record["metadata"]["episode_id"]] = record["performance"]["latency_ms"]
    ids = table.column("episode_id").to_pylist()
    assert latencies[ids[0]] == pytest.approx((end[0] - start[0]) / 1000)
    assert {latencies[e] for e in ids[1:] if e in latencies} == {1500.25}
