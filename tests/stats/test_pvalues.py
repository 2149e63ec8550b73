"""p-values and multiplicity, against statsmodels and scipy.

Pinned values were computed with statsmodels 0.15 (`mcnemar(table, exact=True)`,
`multipletests(p, method="holm" | "fdr_bh")`); statsmodels is not a test dependency,
so the live comparison runs only where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import StatisticsError
from rollout_cards.stats.pvalues import adjust, bootstrap_p_value, mcnemar_exact, t_p_value

MCNEMAR = {(10, 3): 0.09228515625, (1, 0): 1.0, (7, 7): 1.0, (25, 12): 0.04703102743951604, (0, 5): 0.0625}
P = [0.01, 0.04, 0.03, 0.005, 0.2, 0.04]
HOLM = [0.05, 0.12, 0.12, 0.03, 0.2, 0.12]
BH = [0.03, 0.048, 0.048, 0.03, 0.2, 0.048]


@pytest.mark.parametrize(("bc", "expected"), MCNEMAR.items())
def test_mcnemar_matches_statsmodels_and_scipy(bc, expected):
    b, c = bc
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)
    assert mcnemar_exact(b, c) == pytest.approx(scipy.stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)


def test_mcnemar_without_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0) == 1.0
    with pytest.raises(StatisticsError):
        mcnemar_exact(-1, 3)


def test_holm_and_bh_match_statsmodels():
    assert adjust(P, "holm") == pytest.approx(HOLM)
    assert adjust(P, "bh") == pytest.approx(BH)
    assert adjust(P, "none") == pytest.approx(P)
    # Undefined p-values stay out of the family (m = 6, not 7).
    out = adjust([None, *P], "holm")
    assert out[0] is None and out[1:] == pytest.approx(HOLM)
    with pytest.raises(StatisticsError, match="unknown adjustment"):
        adjust(P, "bonferroni")


@settings(deadline=None, max_examples=50)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_adjustments_agree_with_statsmodels_live(p):
    multitest = pytest.importorskip("statsmodels.stats.multitest", reason="statsmodels not installed")
    for ours, theirs in (("holm", "holm"), ("bh", "fdr_bh")):
        assert adjust(p, ours) == pytest.approx(list(multitest.multipletests(p, method=theirs)[1]), abs=1e-12)


def test_mcnemar_live_statsmodels():
    tables = pytest.importorskip("statsmodels.stats.contingency_tables", reason="statsmodels not installed")
    for b in range(0, 15):
        for c in range(0, 15):
            assert mcnemar_exact(b, c) == pytest.approx(tables.mcnemar([[3, b], [c, 4]], exact=True).pvalue, rel=1e-12)


def test_t_p_value_is_scipys_two_sided_t():
    assert t_p_value(0.25, 0.163663, 7) == pytest.approx(2 * scipy.stats.t.sf(0.25 / 0.163663, 7))
    d = np.array([0, 1, 0, 0, 0, 0, 1, 0.0])  # A − B of stats-vectors.md, paired
    ref = scipy.stats.ttest_1samp(d, 0.0).pvalue
    assert t_p_value(d.mean(), d.std(ddof=1) / np.sqrt(8), 7) == pytest.approx(ref)
    assert t_p_value(0.1, 0.0, 5) is None


def test_bootstrap_p_value_inverts_the_percentile_interval():
    assert bootstrap_p_value(0.01, 0.99) == pytest.approx(0.02)
    assert bootstrap_p_value(0.7, 0.4) == pytest.approx(0.8)
    assert bootstrap_p_value(1.0, 1.0) == 1.0
