"""Shared by the scale tests: one Ray session per module (Ray starts slowly), and cards whose
steps are cut into small row groups so that episodes span blocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rollout_cards as rc
from rollout_cards.io import finalize, writer

#: The rules the identity tests run: every feature agg, episode columns in a feature, a float
#: sum (its order of addition shows), reduce, strata, compare — the engine's whole surface.
FEATURE_RULES = {
    "feat_count": """\
rule: feat.count
score: "n_search"
features:
  n_search: {from: steps, where: "kind == 'tool_call' and name == 'search_flights'", agg: count}
aggregate: {group_by: [agent], unit: task_id, interval: {method: cluster_t}}
compare: {baseline: {agent: alpha}}
""",
    "feat_float": """\
rule: feat.float
score: "cost + 0.1 * coalesce(mean_out, 0)"
features:
  cost: {from: steps, value: "coalesce(cost_usd, 0.0) * 1.0000001 + 1e-9 * seq", agg: sum}
  mean_out: {from: steps, where: "not is_null(output_tokens)", value: output_tokens, agg: mean}
aggregate: {group_by: [agent], strata: [task.category], interval: {method: bootstrap, seed: 7, resamples: 200}}
""",
    "feat_minmax": """\
rule: feat.minmax
score: "coalesce(max_seq, 0) - coalesce(min_seq, 0) + if(any_err, 1, 0) + if(all_ok, 1, 0)"
features:
  min_seq: {from: steps, where: "kind == 'tool_call'", value: seq, agg: min}
  max_seq: {from: steps, where: "kind == 'tool_call'", value: seq, agg: max}
  any_err: {from: steps, where: "kind == 'tool_result'", value: is_error, agg: any}
  all_ok: {from: steps, where: "kind == 'tool_result'", value: "not is_error", agg: all}
aggregate: {group_by: [agent]}
""",
    "feat_ordered": """\
rule: feat.ordered
score: "if(first_tool == 'search_flights', 1, 0) + if(last_kind == 'message', 1, 0) + len(calls) + len(tools)"
features:
  first_tool: {from: steps, where: "kind == 'tool_call'", value: name, agg: first}
  last_kind: {from: steps, value: kind, agg: last}
  calls: {from: steps, where: "kind == 'tool_call'", value: name, agg: list}
  tools: {from: steps, where: "kind == 'tool_call'", value: name, agg: set}
aggregate: {group_by: [agent], unit: task_id}
""",
    "feat_episode_column": """\
rule: feat.episode_column
score: "n_own"
features:
  n_own: {from: steps, where: "kind == 'message' and contains(content, task_id)", agg: count}
reduce: {by: [task_id, agent], with: max}
aggregate: {group_by: [agent]}
""",
}


def write_rules(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in FEATURE_RULES.items():
        path = directory / f"{name}.yaml"
        path.write_text(text)
        paths.append(path)
    return paths


def reblocked(source: rc.Card, path: Path, row_group_rows: int, monkeypatch: pytest.MonkeyPatch) -> rc.Card:
    """`source` rewritten with steps row groups of `row_group_rows` rows (episodes then span blocks)."""
    with monkeypatch.context() as m:
        m.setattr(writer, "ROW_GROUP_ROWS", row_group_rows)
        m.setattr(finalize, "ROW_GROUP_ROWS", row_group_rows)
        with writer.CardWriter(path, id=source.id, title="reblocked", timestamps=False) as w:
            w.write_episodes(source.episodes())
            w.write_steps(source.steps())
    return rc.open(path)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[object]:
    """A local Ray with 2 worker CPUs for the whole module, shut down after it."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    from rollout_cards.scale.ray_engine import quiet_data_context

    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    quiet_data_context(ray)
    yield ray
    ray.shutdown()


def row_groups(card: rc.Card) -> int:
    fs, base = card.source.filesystem()
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(fs.open_input_file(f"{base}/{rel}")).num_row_groups
               for rel in card.manifest.tables.steps.paths)


__all__ = ["FEATURE_RULES", "reblocked", "row_groups", "write_rules"]
