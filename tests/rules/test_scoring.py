"""Scoring in partitions: a card's episodes split into partitions that each hold whole units,
scored and summed per partition and merged, give the run over the whole table, field for
field (what the Ray engine does on its workers; no Ray needed here)."""

from __future__ import annotations

import random
import tempfile
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollout_cards as rc
from rollout_cards.errors import RolloutCardError
from rollout_cards.rules.engine import apply_rule, merge_partitions, observation_unit, plan_rule
from rollout_cards.rules.features import attach_features, compute_features
from rollout_cards.rules.loader import load_rule
from rollout_cards.rules.scoring import run_partition
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases, seed
from tests.rules.conftest import build_card
from tests.scale.conftest import EDGE_RULES, FEATURE_RULES, random_rows

RULES = REPO / "fixtures" / "rules"

def _rules() -> list[tuple[str, object]]:
    texts = {**FEATURE_RULES, **EDGE_RULES}
    out = []
    for name, text in texts.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            out.append((name, load_rule(path)))
    for path in sorted(RULES.glob("*.yaml")):
        out.append((path.stem, load_rule(path)))
    return out


def _table(card: rc.Card, plan) -> pa.Table:  # noqa: ANN001
    table = card.episodes(columns=plan.episode_columns)
    if plan.features:
        table = attach_features(table, compute_features(features=plan.features, card=card, episodes=table),
                                plan.features)
    return table


def _partitioned(card: rc.Card, rule, parts: int, salt: int):  # noqa: ANN001
    """`rule` over `card` split by a hash of each episode's unit into `parts` partitions."""
    plan = plan_rule(card, rule)
    table = _table(card, plan)
    unit = observation_unit(rule)
    keys = ["\x1f".join(map(str, row.values())) for row in table.select(unit).to_pylist()]
    which = pa.array([zlib.crc32(f"{salt}:{k}".encode()) % parts for k in keys])
    pieces = [table.filter(pa.compute.equal(which, p)) for p in range(parts)]
    return merge_partitions(plan, [run_partition(plan, piece, pair_units=unit) for piece in pieces])


def _same(a, b) -> None:  # noqa: ANN001
    assert repr(a.results) == repr(b.results)
    assert repr(a.comparisons) == repr(b.comparisons)
    assert (a.warnings, a.n_episodes_total, a.n_selected_out) == (b.warnings, b.n_episodes_total, b.n_selected_out)
    for g in range(len(b.observations.groups.labels)):
        unit = list(b.observations.unit)
        from rollout_cards.rules.engine import unit_stats_on

        x, y = unit_stats_on(a.observations, g, unit), unit_stats_on(b.observations, g, unit)
        assert x.units.tolist() == y.units.tolist() and x.sums.tolist() == y.sums.tolist()
        assert x.counts.tolist() == y.counts.tolist() and x.sumsq.tolist() == y.sumsq.tolist()


def _applies(card: rc.Card, rule) -> object | None:  # noqa: ANN001
    try:
        return apply_rule(card, rule)
    except RolloutCardError:
        return None


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_partitions_of_the_synthetic_card_merge_to_the_whole_run(parts):
    card = rc.open(FIXTURE_CARDS / "synthetic")
    checked = 0
    for name, rule in _rules():
        whole = _applies(card, rule)
        if whole is None:
            continue
        _same(_partitioned(card, rule, parts, salt=parts), whole)
        checked += 1
    assert checked >= 8


@pytest.mark.fuzz
@settings(max_examples=cases(10), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=st.integers(min_value=0, max_value=2**32))
def test_random_cards_in_random_partitions_merge_to_the_whole_run(case):
    rng = random.Random(seed() * 104729 + case)
    with tempfile.TemporaryDirectory() as tmp:
        episodes, steps = random_rows(rng)
        card = build_card(Path(tmp) / "card", episodes, steps)
        for name, rule in _rules():
            if name.startswith("synthetic") or "episode_column" in name:
                continue  # read columns these cards do not have
            whole = _applies(card, rule)
            parts = rng.randint(1, 9)
            if whole is None:  # a partition holding the failing rows raises the same class
                with pytest.raises(RolloutCardError):
                    _partitioned(card, rule, parts, salt=case)
                continue
            _same(_partitioned(card, rule, parts, salt=case), whole)


def test_a_score_beyond_the_bound_is_a_located_rule_error_not_an_overflow(tmp_path):
    """1e308 is a finite float but its square is not: the statistics raised StatisticsError
    ("UnitStats sums contains NaN or infinite values", exit 2) after a raw numpy warning."""
    from rollout_cards.errors import RuleError
    from rollout_cards.rules.loader import parse_rule
    from tests.rules.conftest import episode

    card = build_card(tmp_path / "c", [episode(i, **{"score.x": v}) for i, v in enumerate([1.0, 1e308, 2.0, -1e200])])
    rule = parse_rule("rule: r\nscore: score.x\n", file="r.yaml")
    with pytest.raises(RuleError, match=r"^r\.yaml: score: 2 episode\(s\) score beyond ±1e\+100 \(first: 'ep-00001', "
                                        r"1e\+308\).*rescale the score"):
        apply_rule(card, rule, file="r.yaml")


def test_scores_just_below_the_bound_give_the_t_interval_scipy_gives(tmp_path):
    import math

    import scipy.stats

    from rollout_cards.rules.loader import parse_rule
    from tests.rules.conftest import episode

    rng = random.Random(7)
    scaled = [rng.uniform(-1, 1) for _ in range(40)]
    rows = [episode(i, task_id=f"t{i}", **{"score.x": v * 1e99}) for i, v in enumerate(scaled)]
    card = build_card(tmp_path / "c", rows)
    rule = parse_rule("rule: r\nscore: score.x\naggregate:\n  unit: task_id\n  interval: {method: cluster_t}\n")
    (head,) = apply_rule(card, rule).headlines().values()
    n, mean = len(scaled), sum(scaled) / len(scaled)
    sd = math.sqrt(sum((v - mean) ** 2 for v in scaled) / (n - 1))
    low, high = scipy.stats.t.interval(0.95, n - 1, loc=mean, scale=sd / math.sqrt(n))
    assert head.value == pytest.approx(mean * 1e99, rel=1e-9)
    assert head.interval.low == pytest.approx(low * 1e99, rel=1e-9)
    assert head.interval.high == pytest.approx(high * 1e99, rel=1e-9)


def test_a_status_outside_the_enum_names_the_card_the_table_and_the_row(tmp_path):
    """A library caller (no CLI to put the card in front) got 'episodes.status holds ...' with
    neither the card nor the episode; the error now names both."""
    import shutil
    import sys

    from rollout_cards.errors import CardFormatError

    sys.path.insert(0, str(REPO / "fixtures"))
    import bad_cards

    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    bad_cards.edit_table(card, "episodes.parquet", lambda t: bad_cards.set_cell(t, "status", 3, "aaa\n\x1b[2J"))
    import pyarrow.parquet as pq

    episode = pq.read_table(card / "episodes.parquet", columns=["episode_id"]).column(0)[3].as_py()
    with pytest.raises(CardFormatError) as info:
        rc.rescore(card)  # the card's own rules; no validation first
    message = str(info.value)
    assert message.startswith(f"{card}: episodes.status holds 'aaa\\n\\x1b[2J', which is not a terminal state")
    assert f"in 1 row(s) (first: the row of episode_id {episode!r})" in message
    assert "\n" not in message and "\x1b" not in message


@pytest.mark.parametrize("values", [[1.0, 0.0, 1.0, 1.0, 0.0, -0.0], [1.0, 0.0, 0.5, 1.0, 0.0, 3.0]])
def test_cell_sums_equal_plain_python_per_unit(tmp_path, values):
    """Per (group, unit): count, sum, sum of squares and whether every value is 0 or 1, as a
    plain loop over the rows computes them: with 0/1 values only (the squares' sums are then
    the sums, skipped) and with other values in some cells."""
    from rollout_cards.rules.loader import parse_rule
    from tests.rules.conftest import episode

    rows = [episode(i, agent=f"a{i % 2}", task_id=f"t{i % 3}", **{"score.x": values[i % len(values)]})
            for i in range(36)]
    card = build_card(tmp_path / "c", rows)
    rule = parse_rule("rule: r\nscore: score.x\naggregate:\n  group_by: [agent]\n  unit: task_id\n")
    part = run_partition(plan_rule(card, rule), card.episodes())
    want: dict[tuple[str, str], list] = {}
    for r in rows:
        w = want.setdefault((r["agent"], r["task_id"]), [0, 0.0, 0.0, True])
        v = r["score.x"]
        w[0] += 1
        w[1] += v
        w[2] += v * v
        w[3] = w[3] and v in (0.0, 1.0)
    got = {}
    for (g, _), (units, counts, sums, squares, binary) in part.cells.items():
        for u, c, s, q in zip(units.tolist(), counts.tolist(), sums.tolist(), squares.tolist(), strict=True):
            got[(part.groups[g][0], part.units[u][0])] = [c, s, q, binary]
    binary_cells = {k: w[3] for k, w in want.items()}
    for key, (c, s, q, _) in want.items():
        assert got[key][:3] == [c, pytest.approx(s), pytest.approx(q)]
    # the flag is per (group, stratum) cell: every unit of the group binary
    for (agent, task), w in got.items():
        assert w[3] == all(b for (a, _), b in binary_cells.items() if a == agent)


@pytest.mark.parametrize("on_missing", ["exclude", "0.5"])
def test_status_policies_and_missing_scores_equal_plain_python(tmp_path, on_missing):
    """Per agent: the mean, n and the counts by cause for a mix of statuses, numeric, exclude and
    score policies, null scores and a select, as a plain loop over the rows computes them."""
    from rollout_cards.rules.loader import parse_rule
    from tests.rules.conftest import episode

    statuses = ["completed", "error", "timeout", "limit", "completed", "cancelled", "completed", "skipped"]
    scores = [1.0, None, 0.0, 2.5, None, 1.0, 0.25, 3.0]
    rows = [episode(i, agent=f"a{i % 3}", status=statuses[i % 8], trial=i % 5, **{"score.x": scores[(i * 3) % 8]})
            for i in range(120)]
    card = build_card(tmp_path / "c", rows)
    rule = parse_rule(
        "rule: r\nscore: score.x\nselect: \"trial != 4\"\n"
        "on_status: {error: 0.25, timeout: exclude, limit: 1, cancelled: exclude, skipped: score}\n"
        f"on_missing: {on_missing}\naggregate:\n  group_by: [agent]\n", file="r.yaml")
    policy = {"error": 0.25, "timeout": "exclude", "limit": 1.0, "cancelled": "exclude", "skipped": "score",
              "completed": "score"}
    want: dict[str, dict] = {}
    for r in rows:
        w = want.setdefault(r["agent"], {"values": [], "excluded": {}, "missing": 0, "missing_excluded": 0})
        if r["trial"] == 4:
            continue
        p = policy[r["status"]]
        if p == "exclude":
            w["excluded"][r["status"]] = w["excluded"].get(r["status"], 0) + 1
            continue
        v = r["score.x"] if p == "score" else p
        if v is None:
            w["missing"] += 1
            if on_missing == "exclude":
                w["missing_excluded"] += 1
                continue
            v = float(on_missing)
        w["values"].append(v)
    results = {r.group["agent"]: r for r in apply_rule(card, rule, file="r.yaml").results}
    assert results.keys() == want.keys()
    for agent, w in want.items():
        got = results[agent]
        assert got.n == len(w["values"])
        assert got.value == pytest.approx(sum(w["values"]) / len(w["values"]))
        assert got.excluded_by_status == w["excluded"]
        assert (got.n_missing, got.n_missing_excluded) == (w["missing"], w["missing_excluded"])


def test_factors_made_ahead_give_the_same_run():
    """apply_rule makes status / group / strata / unit factors from the episodes while the step
    scan runs (partition_factors, on a thread); run_partition given them, or given factors of
    other rows (ignored), gives the run it gives alone."""
    from rollout_cards._threads import Background
    from rollout_cards.rules.scoring import partition_factors

    card = rc.open(FIXTURE_CARDS / "synthetic")
    checked = 0
    for _, rule in _rules():
        try:
            plan = plan_rule(card, rule)
            episodes = card.episodes(columns=plan.episode_columns)
            table = _table(card, plan)
            alone = merge_partitions(plan, [run_partition(plan, table, keep=True)])
        except RolloutCardError:
            continue
        ahead = Background(partition_factors, plan, episodes).result()
        assert ("status",) in ahead
        other = partition_factors(plan, episodes.slice(1))
        for factors in (ahead, other):
            fresh = plan_rule(card, rule)  # (merging adds the plan's warnings to it)
            _same(merge_partitions(fresh, [run_partition(fresh, table, keep=True, factors=factors)]), alone)
        checked += 1
    assert checked >= 8


def test_an_error_made_ahead_is_raised_by_result():
    from rollout_cards._threads import Background

    def fails() -> None:
        raise RuleError("no", file="r.yaml", key="score")

    from rollout_cards.errors import RuleError

    with pytest.raises(RuleError, match="no"):
        Background(fails).result()
