"""Power and sample size: the worked example of issue 13 and the seeds table.

References: closed forms computed here, statsmodels' NormalIndPower / TTestIndPower
(values pinned from statsmodels 0.15; the live comparison runs where it is installed),
scipy's noncentral t.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from rollout_cards.errors import StatisticsError
from rollout_cards.stats import UnitStats
from rollout_cards.stats.power import (
    half_width,
    minimum_detectable_effect,
    n_for_half_width,
    n_per_arm,
    power_of,
    seeds_needed,
    variance_components,
)

PA, PB = 0.641, 0.727  # success rates of the worked example: 8.6 points apart
GAP = PB - PA
VA, VB = PA * (1 - PA), PB * (1 - PB)


def test_worked_example_half_widths():
    z = scipy.stats.norm.ppf(0.975)
    expected_a = {32: 0.1662, 64: 0.1175, 128: 0.0831, 256: 0.0588}
    for n, hw in expected_a.items():
        assert half_width(PA, n) == pytest.approx(z * math.sqrt(VA / n))
        assert round(half_width(PA, n), 4) == hw
    assert round(half_width(PB, 128), 4) == 0.0772
    # The half-width of the noisier arm falls below the 8.6-point gap at about 120 per arm.
    assert n_for_half_width(VA, GAP) == 120
    assert half_width(PA, 119) >= GAP > half_width(PA, 120)


def test_worked_example_n_for_80_percent_power_matches_statsmodels():
    n = n_per_arm(GAP, VA, VB)
    assert n == 455
    # statsmodels NormalIndPower with the pooled effect size δ/√((σa²+σb²)/2) gives 454.8328
    # (pinned; it also counts the far rejection tail, hence the last digits).
    assert (scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)) ** 2 * (VA + VB) / GAP**2 == pytest.approx(454.8327644256074, rel=1e-5)
    power = pytest.importorskip("statsmodels.stats.power", reason="statsmodels not installed")
    d = GAP / math.sqrt((VA + VB) / 2)
    assert math.ceil(power.NormalIndPower().solve_power(effect_size=d, alpha=0.05, power=0.8)) == n


@pytest.mark.parametrize(("rho", "expected"), [(0.0, 455), (0.3, 319), (0.5, 229), (0.7, 138)])
def test_pairing_on_shared_tasks_shrinks_the_sample(rho, expected):
    cov = rho * math.sqrt(VA * VB)
    n = n_per_arm(GAP, VA, VB, covariance=cov)
    assert n == expected
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    assert n == math.ceil(z**2 * (VA + VB - 2 * cov) / GAP**2)


def test_mde_and_power_are_inverse():
    se = math.sqrt((VA + VB) / 455)
    mde = minimum_detectable_effect(se)
    assert power_of(mde, se) == pytest.approx(0.8, abs=1e-3)  # the far tail adds ~1e-6
    assert mde == pytest.approx(GAP, rel=2e-3)
    with pytest.raises(StatisticsError):
        n_per_arm(0.0, VA, VB)


# statsmodels 0.15 TTestIndPower().solve_power(effect_size=gap/sd, alpha=0.05, power=0.8), rounded up.
SEEDS = {  # (gap, sd) -> seeds per method
    (0.01, 0.01): 17, (0.02, 0.01): 6, (0.05, 0.01): 3,
    (0.01, 0.02): 64, (0.02, 0.02): 17, (0.05, 0.02): 4,
    (0.01, 0.05): 394, (0.02, 0.05): 100, (0.05, 0.05): 17,
}


@pytest.mark.parametrize(("case", "expected"), SEEDS.items())
def test_seeds_needed_table_matches_statsmodels(case, expected):
    gap, sd = case
    assert seeds_needed(gap, sd) == expected


def test_seeds_needed_live_statsmodels():
    power = pytest.importorskip("statsmodels.stats.power", reason="statsmodels not installed")
    for gap, sd in [(0.03, 0.02), (0.1, 0.3), (0.5, 0.2)]:
        assert seeds_needed(gap, sd) == math.ceil(power.TTestIndPower().solve_power(effect_size=gap / sd, alpha=0.05, power=0.8))


def test_variance_split_within_and_between_units():
    # 3 tasks x 4 attempts: within-task variance and between-task variance by hand.
    scores = {"t1": [1, 1, 0, 1], "t2": [0, 0, 0, 1], "t3": [1, 1, 1, 1]}
    values = [float(v) for vs in scores.values() for v in vs]
    units = [t for t, vs in scores.items() for _ in vs]
    vc = variance_components(UnitStats.from_values(values, units))
    within = np.mean([np.var(v, ddof=1) for v in scores.values()])
    means = [np.mean(v) for v in scores.values()]
    between = np.var(means, ddof=1) - within / 4
    assert vc.within == pytest.approx(within) and vc.between == pytest.approx(between)
    assert vc.se == pytest.approx(np.std(means, ddof=1) / math.sqrt(3))
    assert vc.se_by_k[4] == pytest.approx(vc.se)  # K = the current 4 attempts
    assert vc.se_by_k[16] < vc.se_by_k[4] < vc.se_by_k[1]
    single = variance_components(UnitStats.from_values([0.0, 1.0, 1.0]))
    assert single.within is None and single.se_by_k == {}
