"""redaction-copy-remains across tables and files (issue 9 item 6): the validator used to look
for a redacted value only in the other columns of its own row, so a redacted step's text left
in its episode's row (error_message, meta.*), in card.json, a rule file or an artifact, or an
episode's redacted value left in its steps, validated."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rollout_cards as rc
from rollout_cards.io.finalize import refresh_manifest

SECRET = "sk-live-0123456789abcdef"
OWNER = "owner-secret-9876543210"
SPEC_STEPS = "redact:\n  - target: steps.content\n    where: \"role == 'user'\"\n    reason: privacy\n"
SPEC_EPISODES = "redact:\n  - target: episodes.meta.owner\n    reason: privacy\n"


def _card(tmp_path):
    path = tmp_path / "card"
    with rc.CardWriter(path, id="c", title="C", timestamps=False, scope={"license": "CC-BY-4.0"}) as w:
        for i in range(3):
            with w.episode(task_id=f"t{i}", agent="a", episode_id=f"e{i}",
                           meta={"owner": OWNER if i == 1 else f"owner-{i}"}) as ep:
                ep.message("user", SECRET if i == 1 else f"hello {i}")
                ep.message("assistant", "ok")
    return path


def _redacted(tmp_path, spec_text):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    out = tmp_path / "red"
    rc.redact_card(_card(tmp_path), spec, out)
    assert rc.validate(out).valid
    return out


def _set(path, rel, column, row, value):
    table = pq.read_table(path / rel)
    i = table.schema.get_field_index(column)
    values = table.column(i).to_pylist()
    values[row] = value
    table = table.set_column(i, pa.field(column, pa.string()), pa.array(values, pa.string()))
    pq.write_table(table, path / rel)


def _copies(path):
    report = rc.validate(path)
    return sorted((f.location.file, f.location.row, f.location.column, f.location.pointer)
                  for f in report.findings if f.code == "redaction-copy-remains")


@pytest.mark.parametrize("value", [SECRET, json.dumps({"note": SECRET})])
def test_a_redacted_steps_value_in_its_episodes_row(tmp_path, value):
    out = _redacted(tmp_path, SPEC_STEPS)
    rows = rc.open(out).episodes(columns=["episode_id"]).column(0).to_pylist()
    _set(out, "episodes.parquet", "error_message", rows.index("e1"), value)
    refresh_manifest(out)
    assert _copies(out) == [("episodes.parquet", rows.index("e1"), "error_message", None)]


def test_a_redacted_episodes_value_in_its_steps(tmp_path):
    out = _redacted(tmp_path, SPEC_EPISODES)
    steps = rc.open(out).steps(columns=["episode_id", "role"]).to_pylist()
    row = steps.index({"episode_id": "e1", "role": "assistant"})
    _set(out, "steps.parquet", "payload", row, json.dumps({"said": OWNER}))
    refresh_manifest(out)
    assert _copies(out) == [("steps.parquet", row, "payload", None)]


def test_a_redacted_value_in_card_json_a_rule_or_an_artifact(tmp_path):
    out = _redacted(tmp_path, SPEC_STEPS)
    (out / "rules").mkdir()
    (out / "rules" / "leak.yaml").write_text(f"rule: leak\nscore: \"content == '{SECRET}'\"\n")
    (out / "artifacts").mkdir()
    (out / "artifacts" / hashlib.sha256(SECRET.encode()).hexdigest()).write_text(SECRET)
    refresh_manifest(out, description=f"contact {SECRET!r}")
    found = _copies(out)
    assert ("card.json", None, None, "/description") in found
    assert ("rules/leak.yaml", None, None, None) in found
    assert (f"artifacts/{hashlib.sha256(SECRET.encode()).hexdigest()}", None, None, None) in found
    assert len(found) == 3


def test_values_equal_to_a_redacted_one_in_other_episodes_are_not_copies(tmp_path):
    """The check follows the redactor: a step's copies live in its own row and its episode's row."""
    out = _redacted(tmp_path, SPEC_STEPS)
    rows = rc.open(out).episodes(columns=["episode_id"]).column(0).to_pylist()
    _set(out, "episodes.parquet", "error_message", rows.index("e0"), "hello 2")  # e2's redacted text, in e0
    refresh_manifest(out)
    assert _copies(out) == []
