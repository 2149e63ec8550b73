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


def _two_parts(tmp_path, table: str, change: Callable[[pa.Table], pa.Table]):
    """The synthetic card with `table` split in two part files, `change` applied to the second."""
    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    whole = bad_cards.read_table(card, f"{table}.parquet")
    half = whole.num_rows // 2
    parts = [f"{table}/part-00000.parquet", f"{table}/part-00001.parquet"]
    bad_cards.write_table(card, parts[0], whole.slice(0, half))
    bad_cards.write_table(card, parts[1], change(whole.slice(half)))
    (card / f"{table}.parquet").unlink()
    doc = bad_cards.manifest(card)
    doc["tables"][table]["paths"] = parts
    bad_cards.save_manifest(card, doc)
    bad_cards.rehash(card, add=tuple(parts), drop=(f"{table}.parquet",))
    return card, parts[1]


PART_CASES = {
    "content binary": ("steps", _cast("content", pa.binary()), "stores column 'content' as binary, the first part as string"),
    "content large_string": ("steps", _cast("content", pa.large_string()),
                             "stores column 'content' as large_string, the first part as string"),
    "seq int32": ("steps", _cast("seq", pa.int32()), "stores column 'seq' as int32, the first part as int64"),
    "kind absent": ("steps", lambda t: t.drop_columns(["kind"]), "lacks column 'kind', which the first part has"),
    "content absent": ("steps", lambda t: t.drop_columns(["content"]),
                       "lacks column 'content', which the first part has"),
    "extra column": ("episodes", lambda t: t.append_column("score.late", pa.array([1.0] * t.num_rows)),
                     "has column 'score.late', which the first part lacks"),
    "trial float": ("episodes", _cast("trial", pa.float64()), "stores column 'trial' as double, the first part as int64"),
}


@pytest.mark.parametrize("case", list(PART_CASES))
def test_a_later_part_of_another_schema_is_refused_naming_that_part(tmp_path, case):
    # The dataset takes its schema from the first part: before, a later part's other type was
    # cast, its extra column dropped and its absent column (even a required one) read as nulls,
    # and report rendered the card (exit 0); validate alone said table-parts-inconsistent.
    table, change, how = PART_CASES[case]
    path, part = _two_parts(tmp_path, table, change)
    card = rc.open(path)
    with pytest.raises(TableSchemaError) as exc:
        card.schema(table)
    assert str(exc.value).startswith(f"{card.path}: {part}: this part of the {table} table {how}"), str(exc.value)
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 1 and f"{part}: this part of the {table} table {how}" in result.output, result.output
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 1 and f"part 1 of the {table} table {how}" in result.output, result.output


def test_parts_of_one_schema_read_as_one_table(tmp_path):
    path, _ = _two_parts(tmp_path, "steps", lambda t: t)
    card = rc.open(path)
    whole = rc.open(FIXTURE_CARDS / "synthetic").steps()
    assert card.steps().num_rows == whole.num_rows
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
