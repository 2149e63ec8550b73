"""Step features: every agg against a plain-Python reference, independent of batch size."""

from __future__ import annotations

import copy
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rollout_cards.errors import ExpressionError, RuleError
from rollout_cards.model.rule import Feature
from rollout_cards.rules.features import attach_features, compile_features, compute_features

SPECS = {
    "n_search": {"where": "kind == 'tool_call' and name == 'search_flights'", "agg": "count"},
    "any_error": {"where": "kind == 'tool_result'", "value": "is_error", "agg": "any"},
    "all_ok": {"where": "kind == 'tool_result'", "value": "not is_error", "agg": "all"},
    "tokens": {"value": "coalesce(input_tokens, 0)", "agg": "sum"},
    "mean_tokens": {"where": "not is_null(input_tokens)", "value": "input_tokens", "agg": "mean"},
    "min_seq": {"where": "kind == 'tool_call'", "value": "seq", "agg": "min"},
    "max_seq": {"where": "kind == 'tool_call'", "value": "seq", "agg": "max"},
    "first_tool": {"where": "kind == 'tool_call'", "value": "name", "agg": "first"},
    "last_kind": {"value": "kind", "agg": "last"},
    "calls": {"where": "kind == 'tool_call'", "value": "name", "agg": "list"},
    "tools": {"where": "kind == 'tool_call'", "value": "name", "agg": "set"},
}


def _reference(steps: list[dict], episodes: list[str]) -> dict[str, dict[str, object]]:
    by_ep: dict[str, list[dict]] = defaultdict(list)
    for s in sorted(steps, key=lambda s: (s["episode_id"], s["seq"])):
        by_ep[s["episode_id"]].append(s)
    out = {}
    for ep in episodes:
        rows = by_ep.get(ep, [])
        calls = [r for r in rows if r["kind"] == "tool_call"]
        results = [r for r in rows if r["kind"] == "tool_result"]
        tokens = [r["input_tokens"] for r in rows if r["input_tokens"] is not None]
        out[ep] = {
            "n_search": sum(r["name"] == "search_flights" for r in calls),
            "any_error": any(r["is_error"] for r in results),
            "all_ok": all(not r["is_error"] for r in results),
            "tokens": sum(tokens),
            "mean_tokens": sum(tokens) / len(tokens) if tokens else None,
            "min_seq": min((r["seq"] for r in calls), default=None),
            "max_seq": max((r["seq"] for r in calls), default=None),
            "first_tool": calls[0]["name"] if calls else None,
            "last_kind": rows[-1]["kind"] if rows else None,
            "calls": [r["name"] for r in calls],
            "tools": sorted({r["name"] for r in calls}),
        }
    return out


@pytest.fixture(scope="module")
def compiled(synthetic):
    return compile_features({k: Feature.model_validate(v) for k, v in SPECS.items()}, synthetic.schema("steps"))


@pytest.fixture(scope="module")
def reference(synthetic):
    steps = synthetic.steps().to_pylist()
    episodes = synthetic.episodes(columns=["episode_id"]).column("episode_id").to_pylist()
    return _reference(steps, episodes)


def test_every_agg_matches_a_plain_python_reference(synthetic, compiled, reference):
    episodes = synthetic.episodes(columns=["episode_id"])
    table = attach_features(episodes, compute_features(features=compiled, card=synthetic), compiled)
    got = {r["episode_id"]: r for r in table.to_pylist()}
    assert got.keys() == reference.keys()
    for ep, expected in reference.items():
        for name, value in expected.items():
            assert got[ep][name] == pytest.approx(value) if isinstance(value, float) else got[ep][name] == value, (ep, name)


@settings(max_examples=15, deadline=None)
@given(batch_size=st.integers(min_value=1, max_value=400))
def test_results_do_not_depend_on_batch_boundaries(synthetic, compiled, reference, batch_size):
    # Small batches split episodes across batches: partials must merge exactly.
    episodes = synthetic.episodes(columns=["episode_id"])
    table = attach_features(
        episodes, compute_features(features=compiled, card=synthetic, batch_size=batch_size), compiled
    )
    for row in table.to_pylist():
        expected = reference[row["episode_id"]]
        assert row["calls"] == expected["calls"]
        assert row["first_tool"] == expected["first_tool"]
        assert row["n_search"] == expected["n_search"]
        assert row["tokens"] == expected["tokens"]


def test_shuffled_batches_merge_to_the_same_answer(synthetic, compiled):
    steps = synthetic.steps(columns=["episode_id", "seq", "kind", "name", "is_error", "input_tokens"])
    batches = steps.to_batches(max_chunksize=37)[::-1]  # reversed order: merges must not care
    episodes = synthetic.episodes(columns=["episode_id"])
    a = attach_features(episodes, compute_features(batches, compiled), compiled)
    b = attach_features(episodes, compute_features(features=compiled, card=synthetic), compiled)
    assert a.equals(b)


def test_episodes_without_selected_steps_get_the_empty_values(synthetic, compiled):
    episodes = pa.table({"episode_id": ["no-such-episode"]})
    row = attach_features(episodes, {}, []).to_pylist()[0]
    assert row == {"episode_id": "no-such-episode"}
    computed = compute_features(features=compiled, card=synthetic)
    row = attach_features(episodes, computed, compiled).to_pylist()[0]
    assert row["n_search"] == 0 and row["tokens"] == 0 and row["any_error"] is False and row["all_ok"] is True
    assert row["calls"] == [] and row["tools"] == [] and row["first_tool"] is None and row["mean_tokens"] is None


def test_feature_expressions_are_checked_against_the_steps_columns(synthetic):
    with pytest.raises(ExpressionError) as info:
        compile_features({"n": Feature.model_validate({"where": "nme == 'x'", "agg": "count"})}, synthetic.schema("steps"), file="f.yaml")
    assert info.value.key == "features.n.where" and "did you mean 'name'" in str(info.value)
    with pytest.raises(RuleError, match="needs a number"):
        compile_features({"n": Feature.model_validate({"value": "name", "agg": "sum"})}, synthetic.schema("steps"))
    with pytest.raises(ExpressionError, match="expected a boolean"):
        compile_features({"n": Feature.model_validate({"where": "seq + 1", "agg": "count"})}, synthetic.schema("steps"))


def test_episode_columns_are_visible_in_step_features(synthetic):
    # task.category is an episode column; agent exists in both tables (the step's wins,
    # the episode's is episode.agent)
    specs = {
        "same_cat": {"where": "kind == 'tool_call' and contains(name, lower(task.category))", "agg": "count"},
        "tagged": {"where": "kind == 'tool_call'", "value": "episode.agent + ':' + name", "agg": "list"},
    }
    episodes_schema = synthetic.schema("episodes")
    compiled = compile_features(
        {k: Feature.model_validate(v) for k, v in specs.items()}, synthetic.schema("steps"), episodes_schema=episodes_schema
    )
    assert compiled[0].episode_columns == {"task.category": "task.category"}
    assert compiled[0].columns == {"kind", "name"}
    assert compiled[1].episode_columns == {"episode.agent": "agent"}
    episodes = synthetic.episodes(columns=["episode_id", "agent", "task.category"])
    table = attach_features(episodes, compute_features(features=compiled, card=synthetic, episodes=episodes, batch_size=50), compiled)
    info = {r["episode_id"]: r for r in episodes.to_pylist()}
    by_ep: dict[str, list[dict]] = defaultdict(list)
    for s in sorted(synthetic.steps().to_pylist(), key=lambda s: (s["episode_id"], s["seq"])):
        by_ep[s["episode_id"]].append(s)
    checked = 0
    for row in table.to_pylist():
        ep = info[row["episode_id"]]
        calls = [s for s in by_ep[row["episode_id"]] if s["kind"] == "tool_call"]
        category = (ep["task.category"] or "").lower() if ep["task.category"] is not None else None
        expected = sum(1 for s in calls if category is not None and s["name"] is not None and category in s["name"])
        assert row["same_cat"] == expected
        assert row["tagged"] == [None if s["name"] is None or ep["agent"] is None else f"{ep['agent']}:{s['name']}" for s in calls]
        checked += expected
    assert checked > 0  # the data exercises the episode column


def test_a_list_feature_over_a_huge_episode_is_capped(monkeypatch):
    from rollout_cards.rules import _feature_merge

    monkeypatch.setattr(_feature_merge, "MAX_LIST_ITEMS", 5)  # the one cap both the kernel and the merge read
    steps = pa.table({"episode_id": ["e1"] * 3 + ["e2"] * 7, "seq": list(range(3)) + list(range(7)), "name": ["x"] * 10})
    compiled = compile_features(
        {"calls": Feature.model_validate({"value": "name", "agg": "list"})}, steps.schema, file="alt.yaml", rule="my.rule"
    )
    with pytest.raises(RuleError) as info:
        compute_features(steps.to_batches(max_chunksize=4), compiled)  # e2 split across batches
    message = str(info.value)
    assert message.startswith("alt.yaml: features.calls: rule 'my.rule', feature 'calls': episode 'e2' has more than 5 items")
    assert "cap of a list or set feature" in message


def _encoded(batch: pa.RecordBatch, rng, *, repeat: bool) -> pa.RecordBatch:
    """The batch with its string columns dictionary-encoded, as `iter_steps(encoded=True)`
    gives them; with `repeat`, a dictionary holding each value twice (rows use either copy)."""
    columns = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if pa.types.is_string(column.type):
            column = column.dictionary_encode()
            if repeat:
                d = column.dictionary
                indices = column.indices.to_numpy(zero_copy_only=False)
                shift = np.where(rng.random(len(column)) < 0.5, len(d), 0)
                mask = column.indices.is_null().to_numpy(zero_copy_only=False)
                indices = pa.array(np.nan_to_num(indices, nan=0).astype(np.int32) + shift.astype(np.int32), mask=mask)
                column = pa.DictionaryArray.from_arrays(indices, pa.concat_arrays([d, d]))
        columns[name] = column
    return pa.record_batch(columns)


LAYOUTS = ["as stored", "episodes reversed", "step-less episode inside", "steps shuffled", "repeated dictionaries"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch_size", [7, 64, 100_000])
def test_every_layout_gives_the_plain_python_answer(synthetic, compiled, reference, layout, batch_size, monkeypatch):
    # The fast paths (episode rows while steps follow the episodes' order, adjacent merges,
    # per-value evaluation on dictionaries) and every fallback give the same values.
    from rollout_cards.rules import features as features_module

    monkeypatch.setattr(features_module, "_COMPACT_ROWS", 5)  # compaction on every few batches
    rng = np.random.default_rng(batch_size)
    steps = synthetic.steps(columns=["episode_id", "seq", "kind", "name", "is_error", "input_tokens"])
    episodes = synthetic.episodes(columns=["episode_id"])
    if layout == "episodes reversed":
        episodes = episodes.take(pa.array(np.arange(episodes.num_rows)[::-1]))
    elif layout == "step-less episode inside":
        ids = episodes.column("episode_id").to_pylist()  # episode rows are given up mid-scan
        half = len(ids) // 2
        episodes = pa.table({"episode_id": ids[:half] + ["no-steps"] + ids[half:]})
    elif layout == "steps shuffled":
        steps = steps.take(pa.array(rng.permutation(steps.num_rows)))
    batches = [_encoded(b, rng, repeat=layout == "repeated dictionaries") for b in steps.to_batches(max_chunksize=batch_size)]
    table = attach_features(episodes, compute_features(batches, compiled, episodes=episodes), compiled)
    expected = {**reference, "no-steps": _reference([], ["no-steps"])["no-steps"]}
    rows = table.to_pylist()
    assert [r["episode_id"] for r in rows] == episodes.column("episode_id").to_pylist()
    for row in rows:
        for name, value in expected[row["episode_id"]].items():
            got = row[name]
            assert got == pytest.approx(value) if isinstance(value, float) else got == value, (layout, row["episode_id"], name)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=12), st.booleans())
def test_picked_rows_are_the_first_or_last_selected_row_of_each_run(runs, first):
    from rollout_cards.rules._feature_partials import picked_rows

    mask = np.array([m for run in runs for m in run], dtype=bool)
    starts = np.cumsum([0] + [len(run) for run in runs[:-1]]).astype(np.int64)
    expected = []
    for start, run in zip(starts.tolist(), runs, strict=True):
        hits = [start + i for i, m in enumerate(run) if m]
        if hits:
            expected.append(hits[0] if first else hits[-1])
    assert picked_rows(mask, starts, first=first).tolist() == expected


def _id_batch(ids: list[str], how: str, rng) -> pa.Array:
    """`ids` as a scan may hand them out: plain, or dictionary-encoded with the dictionary in
    run order (Parquet's), shuffled, with unused values, or with a value listed twice."""
    if how == "plain":
        return pa.array(ids)
    values = list(dict.fromkeys(ids))
    if how == "shuffled":
        values = [values[i] for i in rng.permutation(len(values))]
    elif how == "unused":
        values = [*values, "zz-unused"]
    elif how == "sorted":
        values = sorted(values, key=lambda v: int(v[1:]))  # the episodes' order, not the runs'
    index = {v: i for i, v in enumerate(values)}
    codes = [index[i] for i in ids]
    if how == "twice":  # the first value listed twice, its later rows using the copy
        values = [values[0], *values]
        run = sum(1 for i in ids if i == ids[0]) if len(set(ids)) > 1 else len(ids)
        codes = [c + 1 if c or j >= (run + 1) // 2 else 0 for j, c in enumerate(codes)]
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values))


@settings(max_examples=150, deadline=None)
@example([2, 2, 2], [], ["sorted"], 0, False, 0)  # the dictionary in the episodes' order, the runs not
@example([4], [], ["twice"], 0, False, -1)  # one run split in two by a repeated value
@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.lists(st.integers(1, 9), max_size=5),
       st.lists(st.sampled_from(["plain", "run order", "shuffled", "unused", "twice", "sorted"]), min_size=1, max_size=8),
       st.integers(0, 2**16), st.booleans(), st.integers(-1, 11))
def test_positions_number_rows_by_their_episode_or_give_up(lengths, cuts, hows, seed, skip_one, swap):
    # Each step row gets its episode's row while the runs follow the episodes' order (checked
    # against plain Python over the ids), whatever the batches' dictionaries; the first batch
    # that leaves the order gets None.
    from rollout_cards.rules._feature_partials import Positions

    rng = np.random.default_rng(seed)
    episodes = [f"e{i}" for i in range(len(lengths))]
    stepped = [e for i, e in enumerate(episodes) if not (skip_one and i == len(episodes) // 2)]
    if 0 <= swap < len(stepped) - 1:  # two episodes' steps out of the episodes' order
        stepped[swap], stepped[swap + 1] = stepped[swap + 1], stepped[swap]
    rows = [e for e in stepped for _ in range(lengths[episodes.index(e)])]
    bounds = sorted({0, len(rows), *[c % (len(rows) + 1) for c in np.cumsum(cuts).tolist()]})
    positions = Positions(pa.chunked_array([pa.array(episodes)]))
    following, at = True, 0
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        ids = rows[a:b]
        batch = pa.record_batch({"episode_id": _id_batch(ids, hows[k % len(hows)], rng), "x": pa.array(range(b - a))})
        runs = [i for j, i in enumerate(ids) if j == 0 or ids[j - 1] != i]
        first = at - 1 if at and runs[0] == episodes[at - 1] else at
        following = following and episodes[first : first + len(runs)] == runs
        if hows[k % len(hows)] == "run order" and following:  # Parquet's layout takes the short way
            starts = np.array([j for j in range(len(ids)) if j == 0 or ids[j - 1] != ids[j]], dtype=np.int64)
            assert copy.copy(positions)._in_dictionary_order(batch, batch.column(0), starts) is not None
        got = positions.rows(batch)
        if not following:
            assert got is None
            return
        assert got is not None
        numbered, starts, run_rows = got.batch, got.starts, got.run_rows
        assert numbered.column("episode_id").to_pylist() == [episodes.index(i) for i in ids]
        assert numbered.column("x").to_pylist() == list(range(b - a))
        assert starts.tolist() == [j for j in range(len(ids)) if j == 0 or ids[j - 1] != ids[j]]
        assert run_rows.tolist() == [episodes.index(i) for i in runs]
        at = first + len(runs)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", ""]), max_size=3), st.booleans()), max_size=20),
       st.integers(0, 5), st.booleans())
def test_null_lists_become_empty_lists(rows, offset, chunked):
    # null lists whose slots are empty (as Arrow builds them) lose only the bitmap; a null
    # list over items (possible in Arrow) takes the if_else way: [] either way
    from rollout_cards.rules.features import _nulls_as_empty

    items = [v for items, _ in rows for v in items]
    offsets = np.concatenate([[0], np.cumsum([len(items) for items, _ in rows])]).astype(np.int32)
    mask = pa.array([null for _, null in rows], pa.bool_())
    column = pa.ListArray.from_arrays(pa.array(offsets), pa.array(items, pa.string()), mask=mask)
    column = column.slice(min(offset, len(rows)))
    expected = [[] if v is None else v for v in column.to_pylist()]
    arg = pa.chunked_array([column, column]) if chunked else column
    got = _nulls_as_empty(arg, pa.scalar([], pa.list_(pa.string())))
    assert got.null_count == 0
    assert got.to_pylist() == (expected * 2 if chunked else expected)
    assert got.type == column.type


@pytest.mark.parametrize("names", [["n_search"], ["n_search", "first_tool"]])
def test_a_count_alone_never_builds_the_numbered_batch(synthetic, reference, names, monkeypatch):
    # Positions numbers each batch; a count over a mask reads only the run starts and the
    # runs' episode rows, so the int64 episode-row column is built only when another feature
    # reads the batch (here first_tool), with the plain Python answer either way
    from rollout_cards.rules import _feature_partials as partials

    built, numbered = [], []
    original, init = partials.Numbered.batch.fget, partials.Numbered.__init__
    monkeypatch.setattr(partials.Numbered, "batch", property(lambda self: built.append(1) or original(self)))
    monkeypatch.setattr(partials.Numbered, "__init__", lambda self, *a: numbered.append(1) or init(self, *a))
    compiled = compile_features({k: Feature.model_validate(SPECS[k]) for k in names}, synthetic.schema("steps"))
    steps = synthetic.steps(columns=["episode_id", "seq", "kind", "name"])
    episodes = synthetic.episodes(columns=["episode_id"])
    rng = np.random.default_rng(0)
    batches = [_encoded(b, rng, repeat=False) for b in steps.to_batches(max_chunksize=64)]
    table = attach_features(episodes, compute_features(batches, compiled, episodes=episodes), compiled)
    for row in table.to_pylist():
        for name in names:
            assert row[name] == reference[row["episode_id"]][name]
    assert numbered and bool(built) == (len(names) > 1)  # the batches were numbered


def test_a_count_over_numbered_batches_is_added_up_per_episode_row(synthetic, reference):
    # While Positions numbers the batches, a count keeps no partials (they were ~1M rows to
    # concatenate, merge and align at the end of a 20M-step scan): it is added up per episode
    # row, null where no step was selected, and equals the plain Python count.
    from rollout_cards.rules.features import FeatureStream

    compiled = compile_features({"n_search": Feature.model_validate(SPECS["n_search"])}, synthetic.schema("steps"))
    steps = synthetic.steps(columns=["episode_id", "seq", "kind", "name"])
    episodes = synthetic.episodes(columns=["episode_id"])
    rng = np.random.default_rng(1)
    stream = FeatureStream(compiled, episodes)
    for batch in steps.to_batches(max_chunksize=50):
        stream.add(stream.partials(_encoded(batch, rng, repeat=False)))
    assert stream.positions is not None and stream.parts == [[]]
    (result,) = stream.result().values()
    assert result.column("episode_id").equals(episodes.column("episode_id"))
    want = [reference[e]["n_search"] or None for e in episodes.column("episode_id").to_pylist()]
    assert result.column("n_search").to_pylist() == want
