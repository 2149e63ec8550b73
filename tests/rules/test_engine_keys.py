"""The local engine reads the text columns a rule only groups, counts or pairs on (group_by,
strata, unit, reduce.by, pair_on, kept columns) dictionary-encoded and groups on the codes
(rules.engine._episodes). The results must be those of the values: checked here against plain
Python over the rows, on a card whose episodes span several row groups (each with its own
dictionary, listing the values in another order), with nulls in a group column; the
observations keep the card's column types. And a rescore whose episodes read fails leaves no
scan thread behind (the steps table started decoding at once)."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict

import pyarrow as pa
import pytest
from scipy import stats

import rollout_cards as rc
from rollout_cards.errors import CardFormatError
from rollout_cards.io import finalize, writer
from rollout_cards.rules.engine import apply_rule
from rollout_cards.rules.loader import parse_rule

N = 1200
STATUSES = ("completed", "completed", "completed", "error", "timeout")


def _rows() -> list[dict]:
    rows = []
    for i in range(N):
        # values come in another order in each row group (row groups of 100 rows below)
        agent = None if i % 17 == 0 else f"agent-{(i * 7 + i // 100) % 5}"
        rows.append({
            "episode_id": f"e{i:05d}", "task_id": f"t{(i * 13) % 40:02d}", "status": STATUSES[i % 5],
            "agent": agent, "run_id": f"r{i % 3}", "trial": i // 400, "score.ok": (i * 31) % 7 < 3,
        })
    return rows


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "card"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(writer, "ROW_GROUP_ROWS", 100)
        m.setattr(finalize, "ROW_GROUP_ROWS", 100)
        with rc.CardWriter(path, id="keys", title="keys", timestamps=False) as w:
            rows = _rows()
            for start in range(0, N, 300):
                w.write_episodes(pa.Table.from_pylist(rows[start:start + 300]))
            w.write_steps(pa.table({"episode_id": [r["episode_id"] for r in rows for _ in range(3)],
                                    "seq": [s for _ in rows for s in range(3)],
                                    "kind": [("message", "tool_call", "tool_call")[s] for _ in rows for s in range(3)],
                                    "name": [(None, "lookup", ("lookup", "book")[i % 2])[s]
                                             for i in range(N) for s in range(3)]}))
    return rc.open(path)


def _reference(rows: list[dict], score, group: str, unit: str) -> dict:
    """Per group: mean and n over included episodes (error -> 0, timeout excluded), and the CR1
    cluster-robust standard error over `unit` (plain Python)."""
    cells: dict = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["status"] == "timeout":
            continue
        y = float(score(r)) if r["status"] == "completed" else 0.0
        cells[r[group]][r[unit]].append(y)
    out = {}
    for g, units in cells.items():
        ys = [y for v in units.values() for y in v]
        n, mean = len(ys), sum(ys) / len(ys)
        k = len(units)
        scores = [sum(v) - len(v) * mean for v in units.values()]
        se = math.sqrt(k / (k - 1) * sum(s * s for s in scores)) / n
        out[g] = (mean, n, se)
    return out


RULE = """rule: keys.ok
score: "score.ok{extra}"
{features}on_status: {{error: 0, timeout: exclude, limit: 0}}
aggregate:
  group_by: [{group}]
  unit: {unit}
  interval: {{method: cluster_t}}
"""


@pytest.mark.parametrize(("group", "unit"), [("agent", "task_id"), ("run_id", "agent"), ("task_id", "run_id")])
def test_grouping_on_encoded_keys_gives_the_values_results(card, group, unit):
    rows = _rows()
    if unit == "agent":  # a null unit is refused; keep the episodes that have one
        rows = [r for r in rows if r["agent"] is not None]
        rule = RULE.format(extra="", features="select: \"agent != ''\"\n", group=group, unit=unit)
    else:
        rule = RULE.format(extra="", features="", group=group, unit=unit)
    run = apply_rule(card, parse_rule(rule, file="k.yaml"))
    want = _reference(rows, lambda r: r["score.ok"], group, unit)
    got = {r.group[group]: r for r in run.results if r.n}
    assert sorted(got, key=lambda v: (v is None, v)) == sorted(want, key=lambda v: (v is None, v))
    for g, (mean, n, se) in want.items():
        r = got[g]
        assert r.n == n
        assert r.value == pytest.approx(mean, rel=1e-12)
        if r.ci_low is None:  # too few units for cluster_t (task_id per run_id: 3)
            continue
        half = (r.ci_high - r.ci_low) / 2
        assert half == pytest.approx(stats.t.ppf(0.975, r.interval.n_units - 1) * se, rel=1e-9)
    # the observations keep the card's types (text, not dictionaries) and the rows' values
    identity = run.observations.identity
    stored = card.schema("episodes")
    for name in identity.column_names:
        if name in stored.names:
            assert identity.schema.field(name).type == stored.field(name).type, name
    by_id = {r["episode_id"]: r for r in rows}
    for obs in identity.slice(0, 50).to_pylist():
        assert obs[group] == by_id[obs["episode_id"]][group]
        assert obs[unit] == by_id[obs["episode_id"]][unit]


def test_a_key_column_also_read_by_an_expression(card):
    """agent both grouped on and compared in the score: decoded for the expression."""
    rule = RULE.format(extra=" and agent == 'agent-1'", features="", group="agent", unit="task_id")
    run = apply_rule(card, parse_rule(rule, file="k.yaml"))
    want = _reference(_rows(), lambda r: r["score.ok"] and r["agent"] == "agent-1", "agent", "task_id")
    got = {r.group["agent"]: (r.value, r.n) for r in run.results if r.n}
    assert got == {g: (pytest.approx(m, rel=1e-12), n) for g, (m, n, _) in want.items()}


def test_step_feature_rule_over_encoded_keys(card):
    features = ("features:\n  n_lookups:\n    from: steps\n"
                "    where: \"kind == 'tool_call' and name == 'lookup'\"\n    agg: count\n")
    rule = RULE.format(extra=" and n_lookups >= 2", features=features, group="agent", unit="task_id")
    run = apply_rule(card, parse_rule(rule, file="k.yaml"))
    # episode i has 2 lookups when i is even (name at seq 2 alternates lookup/book)
    want = _reference(_rows(), lambda r: r["score.ok"] and int(r["episode_id"][1:]) % 2 == 0, "agent", "task_id")
    got = {r.group["agent"]: (r.value, r.n) for r in run.results if r.n}
    assert got == {g: (pytest.approx(m, rel=1e-12), n) for g, (m, n, _) in want.items()}


def test_a_failed_episodes_read_leaves_no_scan_thread(card, monkeypatch):
    features = ("features:\n  n_lookups:\n    from: steps\n"
                "    where: \"kind == 'tool_call'\"\n    agg: count\n")
    rule = parse_rule(RULE.format(extra=" and n_lookups > 0", features=features, group="agent", unit="task_id"),
                      file="k.yaml")
    fresh = rc.open(card.path)

    def broken(*args, **kwargs):
        raise CardFormatError("episodes.parquet cannot be read (test)")

    monkeypatch.setattr(fresh, "iter_episodes", broken)
    monkeypatch.setattr(fresh, "episodes", broken)
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(CardFormatError, match="cannot be read"):
        apply_rule(fresh, rule)
    time.sleep(0.1)
    alive = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("rollout-cards")]
    assert not alive


def test_units_are_those_of_the_included_episodes(card):
    """Units come from the whole table's codes cut to the included rows: a task whose
    episodes are all selected out or excluded by status is not a unit (n_units, the
    interval's degrees of freedom), and the identity holds exactly the included rows."""
    rule = RULE.format(extra="", features="select: \"task_id < 't10' or task_id > 't30'\"\n",
                       group="agent", unit="task_id")
    run = apply_rule(card, parse_rule(rule, file="k.yaml"))
    rows = [r for r in _rows() if (r["task_id"] < "t10" or r["task_id"] > "t30") and r["status"] != "timeout"]
    for result in run.results:
        mine = [r for r in rows if r["agent"] == result.group["agent"]]
        assert result.n == len(mine)
        assert result.interval.n_units == len({r["task_id"] for r in mine})
    identity = run.observations.identity
    assert sorted(identity.column("episode_id").to_pylist()) == sorted(r["episode_id"] for r in rows)
    assert set(identity.column("task_id").to_pylist()) == {r["task_id"] for r in rows}
