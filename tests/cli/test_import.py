from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from tests.conftest import REPO

SOURCES = REPO / "fixtures" / "sources"


def _run(*args: str):
    return CliRunner().invoke(app, ["import", *args])


def test_import_prints_a_summary_and_writes_the_card(tmp_path):
    out = tmp_path / "tau"
    result = _run("tau-bench", str(SOURCES / "tau-bench" / "synthetic-agent.json"), "-o", str(out), "--license", "MIT")
    assert result.exit_code == 0, result.output
    assert "imported 8 episodes (5 completed, 1 error, 2 limit)" in result.output
    assert "rule tau_bench.original (original): as the source reported it, agent=synthetic-agent: 0.5" in result.output
    card = rc.open(out)
    assert card.id == "tau" and card.manifest.scope.license == "MIT"


def test_json_output_and_id_title_agent(tmp_path):
    result = _run("swe-bench", str(SOURCES / "swe-bench" / "demo-model.demo-run.json"), "-o", str(tmp_path / "c"),
                  "--id", "swe-demo", "--title", "Demo", "--agent", "m1", "--format", "json",
                  "--predictions", str(SOURCES / "swe-bench" / "predictions.jsonl"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["id"] == "swe-demo" and data["episodes"] == 6
    assert data["statuses"] == {"completed": 4, "error": 1, "skipped": 1}
    assert [d["declaration"] for d in data["drops"]].count("source_malformed") == 1
    assert rc.open(tmp_path / "c").manifest.title == "Demo"


def test_field_options_reach_the_chat_importer(tmp_path):
    result = _run("chat-jsonl", str(SOURCES / "chat" / "chat.jsonl"), "-o", str(tmp_path / "c"),
                  "--field", "task=metadata.task", "--field", "score.reward=reward")
    assert result.exit_code == 0, result.output
    assert rc.open(tmp_path / "c").episodes(columns=["score.reward"]).column("score.reward").to_pylist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("fmt", "source", "message"),
    [
        ("tau-bench", "tau-bench/bad/truncated.json", "truncated.json, record 1"),
        ("tau-bench", "tau-bench/bad/missing-field.json", "record 1 (task_id 0, trial 1): is missing required field(s) reward"),
        ("inspect", "inspect/not-an-inspect-log.eval", "not an Inspect log"),
    ],
)
def test_bad_input_exits_1_with_file_and_record_and_leaves_nothing(tmp_path, fmt, source, message):
    out = tmp_path / "out"
    result = _run(fmt, str(SOURCES / source), "-o", str(out))
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_keep_going_exits_0_and_reports_the_malformed_records(tmp_path):
    result = _run("tau-bench", str(SOURCES / "tau-bench" / "bad" / "missing-field.json"), "-o", str(tmp_path / "c"),
                  "--keep-going")
    assert result.exit_code == 0, result.output
    assert "1 malformed record(s) left out" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["nope", "x.json"],
        ["chat-jsonl", str(SOURCES / "chat" / "chat.jsonl"), "--field", "no-equals-sign"],
        ["swe-bench", str(SOURCES / "swe-bench" / "demo-model.demo-run.json"), "--field", "task=x"],
    ],
)
def test_usage_errors_exit_2(tmp_path, args):
    result = _run(*args, "-o", str(tmp_path / "c"))
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_is_not_overwritten(tmp_path):
    out = tmp_path / "c"
    src = str(SOURCES / "tau-bench" / "synthetic-agent.json")
    assert _run("tau-bench", src, "-o", str(out)).exit_code == 0
    again = _run("tau-bench", src, "-o", str(out))
    assert again.exit_code == 2 and "not empty" in again.output
    assert _run("tau-bench", src, "-o", str(out), "--overwrite").exit_code == 0


def test_missing_source_exits_1(tmp_path):
    result = _run("tau-bench", str(tmp_path / "absent.json"), "-o", str(tmp_path / "c"))
    assert result.exit_code == 1 and "does not exist" in result.output


def test_a_source_file_name_cannot_add_a_line_to_the_summary(tmp_path):
    """tau-bench's agent is the results file's stem: a newline in the file name printed a line
    of its own (here one that reads as another declared rule)."""
    fake = "\n  rule fake.rule (original): as the source reported it, agent=gpt: 1"
    source = tmp_path / f"agent{fake}.json"
    source.write_bytes((REPO / "fixtures" / "sources" / "tau-bench" / "synthetic-agent.json").read_bytes())
    plain = tmp_path / f"agent{'x' * len(fake)}.json"
    plain.write_bytes(source.read_bytes())
    outputs = []
    for src, out in ((source, "c1"), (plain, "c2")):
        result = CliRunner().invoke(app, ["import", "tau-bench", str(src), "-o", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert len(outputs[0].splitlines()) == len(outputs[1].splitlines()), outputs[0]
    assert "agent=agent\\n  rule fake.rule" in outputs[0]
    assert not any(line.startswith("  rule fake.rule") for line in outputs[0].splitlines())
