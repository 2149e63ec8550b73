from __future__ import annotations

import pyarrow as pa
import pytest

from rollout_cards.errors import TableSchemaError
from rollout_cards.tables import (
    EPISODE_COLUMNS,
    FORMAT,
    conform_table,
    episodes_schema,
    extra_column_problem,
    parse_format,
    steps_schema,
)


def test_format_version():
    assert FORMAT == "rollout-card/0.2"
    assert parse_format("rollout-card/2.13") == (2, 13)
    assert parse_format("rollout-card/1") is None
    assert parse_format("other/0.1") is None


def test_conform_adds_optional_columns_in_standard_order_and_sorts_extras():
    t = pa.table({"score.b": [1.0], "status": ["error"], "task_id": ["t"], "episode_id": ["e"],
                  "agent": ["x"], "cond.a": ["calm"]})
    out = conform_table(t, "episodes")
    assert out.column_names[: len(EPISODE_COLUMNS)] == [c.name for c in EPISODE_COLUMNS]
    assert out.column_names[len(EPISODE_COLUMNS):] == ["cond.a", "score.b"]
    assert out.schema.field("status").type == episodes_schema().field("status").type
    assert out.column("trial").null_count == 1


def test_conform_lists_every_problem():
    t = pa.table({"episode_id": ["e", None], "status": ["done", "completed"], "agent": ["x", "y"],
                  "extra": [1, 2], "meta.blob": pa.array([[1], [2]])})
    with pytest.raises(TableSchemaError) as info:
        conform_table(t, "episodes")
    msg = str(info.value)
    for part in ("'task_id' is missing", "'episode_id' has 1 null", "outside its enum: 'done'",
                 "'extra' is not a standard", "'meta.blob' has type list"):
        assert part in msg


def test_steps_kind_enum_and_extras():
    ok = pa.table({"episode_id": ["e"], "seq": [0], "kind": ["tool_call"], "meta.latency_ms": [3]})
    assert conform_table(ok, "steps").schema.field("kind").type == steps_schema().field("kind").type
    with pytest.raises(TableSchemaError, match="outside its enum"):
        conform_table(pa.table({"episode_id": ["e"], "seq": [0], "kind": ["thought"]}), "steps")
    assert extra_column_problem("steps", "score.x", pa.float64()) is not None  # scores live on episodes
    assert extra_column_problem("episodes", "score.", pa.float64()) is not None


def test_merge_kind_widens_numbers_only():
    from rollout_cards.tables import merge_kind

    assert merge_kind(None, "str") == "str"
    assert merge_kind("int", "float") == merge_kind("float", "int") == "float"
    assert merge_kind("bool", "int") is None
    assert merge_kind("str", "float") is None
