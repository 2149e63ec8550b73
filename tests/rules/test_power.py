"""`rcard power` on the synthetic card, against a hand computation over its episodes."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict

import pytest
import scipy.stats

from rollout_cards.cli import main
from rollout_cards.errors import RuleError
from rollout_cards.rules.power import power_analysis
from tests.conftest import FIXTURE_CARDS, REPO

CARD = FIXTURE_CARDS / "synthetic"
BEST = REPO / "fixtures" / "rules" / "best_of_3.yaml"


def _best_of_3(rows):
    tasks = defaultdict(list)
    for x in rows:
        if x["status"] not in ("cancelled", "skipped"):
            ok = 1.0 if x["status"] == "completed" and x["score.success"] else 0.0
            tasks[(x["agent"], x["task_id"])].append(ok)
    return {k: max(v) for k, v in tasks.items()}


def test_power_of_a_paired_comparison_matches_the_hand_computation(synthetic_rows):
    best = _best_of_3(synthetic_rows)
    tasks = sorted({t for _, t in best})
    d = [best[("alpha", t)] - best[("beta", t)] for t in tasks]
    se = statistics.stdev(d) / math.sqrt(len(d))
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    (r,) = power_analysis(CARD, BEST, delta=0.1).results
    assert r.design == "paired" and r.n_units == 36 and r.unit == "task_id"
    assert r.se == pytest.approx(se) and r.mde == pytest.approx(z * se)
    assert r.n_units_needed == math.ceil(36 * (z * se / 0.1) ** 2)
    assert r.group == {"agent": "alpha"} and r.baseline == {"agent": "beta"}
    observed = power_analysis(CARD, BEST).results[0]
    assert observed.delta_source == "observed difference" and observed.delta == pytest.approx(statistics.fmean(d))


def test_power_cli_json_shape(capsys):
    code = main(["power", str(CARD), "--rule", "synthetic.success_rate", "--delta", "0.05", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    keys = {"rule", "group", "baseline", "design", "alpha", "power", "se", "mde", "delta", "n_units", "n_units_needed", "method"}
    assert keys <= set(out["results"][0])
    v = out["variance"][0]
    assert v["unit"] == "task_id" and v["within"] is not None and set(v["se_by_k"]) == {"1", "2", "4", "8", "16"}


def test_power_refuses_a_median():
    with pytest.raises(RuleError, match="closed forms for a mean"):
        power_analysis(CARD, REPO / "fixtures" / "rules" / "profit_median.yaml")


def test_a_delta_too_small_to_detect_gives_no_count_and_says_why(capsys):
    """(mde/delta)^2 overflows a float for delta=1e-300: before, OverflowError (an internal error)."""
    r = power_analysis(CARD, BEST, delta=1e-300).results[0]
    assert r.mde is not None and r.mde > 0
    assert r.n_units_needed is None and "more than 2^53" in r.note
    assert power_analysis(CARD, BEST, delta=0.1).results[0].note is None
    code = main(["power", str(CARD), "--rule", BEST, "--delta", "1e-300"])
    out = capsys.readouterr().out
    assert code == 0 and "more than 2^53 task_id would be needed" in out
