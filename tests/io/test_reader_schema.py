"""The reader checks the standard columns' types when it opens a table: a card whose
`steps.content` is binary or whose `agent` is string_view is refused at once, naming the file,
the column and the type the format requires (TableSchemaError, exit 1), by every command that
reads the table — before, validate flagged it (table-column-type) while info, rescore, report,
card and export failed later inside Arrow's kernels or the report's JSON encoder."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import TableSchemaError
from rollout_cards.tables import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    episodes_schema,
    standard_column_problems,
    steps_schema,
)
from tests.conftest import FIXTURE_CARDS, REPO

sys.path.insert(0, str(REPO / "fixtures"))
import bad_cards  # noqa: E402


def _changed(tmp_path, rel: str, change: Callable[[pa.Table], pa.Table]):
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    bad_cards.write_table(card, rel, change(bad_cards.read_table(card, rel)))
    bad_cards.rehash(card)
    return card


def _cast(name: str, type_: pa.DataType) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        i = table.schema.get_field_index(name)
        return table.set_column(i, pa.field(name, type_), table.column(i).cast(type_))
    return change


CASES = {
    "steps.content binary": ("steps.parquet", _cast("content", pa.binary()), "content", "binary", "string"),
    "episodes.agent string_view": ("episodes.parquet", _cast("agent", pa.string_view()), "agent", "string_view",
                                   "string"),
    "episodes.trial float": ("episodes.parquet", _cast("trial", pa.float64()), "trial", "double", "int64"),
    "steps.seq int32": ("steps.parquet", _cast("seq", pa.int32()), "seq", "int32", "int64"),
    "episodes.task_id absent": ("episodes.parquet", lambda t: t.drop_columns(["task_id"]), "task_id", None, "string"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_standard_column_of_another_type_is_refused_when_the_table_is_opened(tmp_path, case):
    rel, change, column, stored, required = CASES[case]
    card = rc.open(_changed(tmp_path, rel, change))
    table = rel.removesuffix(".parquet")
    with pytest.raises(TableSchemaError) as exc:
        card.schema(table)
    message = str(exc.value)
    assert message.startswith(f"{card.path}: {rel}: ")
    if stored is None:
        assert f"required {table} column {column!r} is absent; add it (type {required})" in message
    else:
        assert f"column {column!r} has type {stored!r}, the format requires {required}; cast it" in message
    with pytest.raises(TableSchemaError):  # every way in: a scan too, not only the first call
        list(getattr(card, f"iter_{table}")())


@pytest.mark.parametrize(("case", "commands"), [
    ("episodes.agent string_view", ["info", "rescore", "report", "card", "eee"]),
    ("steps.content binary", ["report", "redact"]),
])
def test_every_command_that_reads_the_table_exits_1_naming_file_and_column(tmp_path, case, commands):
    rel, change, column, stored, required = CASES[case]
    card = _changed(tmp_path, rel, change)
    out = tmp_path / "out"
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.content\n    action: replace\n    reason: privacy\n")
    argv = {"info": ["info", str(card)], "rescore": ["rescore", str(card)],
            "report": ["report", str(card), "-o", str(out / "r.html")], "card": ["card", str(card)],
            "eee": ["export", "eee", str(card), "-o", str(out / "eee")],
            "redact": ["redact", str(card), "--spec", str(spec), "-o", str(out / "red")]}
    for command in commands:
        result = CliRunner().invoke(app, argv[command])
        assert result.exit_code == 1, (command, result.output)
        assert f"{card}: {rel}: column {column!r} has type {stored!r}, the format requires {required}" in result.output
        assert "internal error" not in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["validate", str(card)])
    assert result.exit_code == 1 and "table-column-type" in result.output
    assert "could not be recomputed: TableSchemaError" not in result.output


def test_the_standard_schemas_have_no_problem_and_the_check_agrees_with_the_format():
    assert standard_column_problems("episodes", episodes_schema()) == []
    assert standard_column_problems("steps", steps_schema()) == []
    # Optional columns may be absent; each required one, when absent, is named.
    for table, columns in (("episodes", EPISODE_COLUMNS), ("steps", STEP_COLUMNS)):
        schema = pa.schema([pa.field(c.name, c.type) for c in columns if not c.required])
        missing = {p.column for p in standard_column_problems(table, schema)}
        assert missing == {c.name for c in columns if c.required}
