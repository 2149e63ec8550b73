"""p-values of paired comparisons, and their adjustment for multiplicity.

- `mcnemar_exact(b, c)`: exact McNemar test for paired 0/1 outcomes — a two-sided
  binomial test of the b discordant pairs "a succeeded, b failed" against the c pairs
  "b succeeded, a failed", under H0: each discordant pair goes either way with ½.
- `t_p_value(estimate, se, df)`: two-sided p of the paired (cluster) t statistic.
- `bootstrap_p_value(p_le_zero, p_ge_zero)`: two-sided p by inverting the percentile
  interval: the smallest α whose (1 − α) percentile interval excludes zero.
- `adjust(p, method)`: Holm (family-wise error) or Benjamini–Hochberg (false discovery
  rate) over a family of p-values; the caller names the family in its output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count

__all__ = ["ADJUSTMENTS", "adjust", "bootstrap_p_value", "mcnemar_exact", "t_p_value"]

ADJUSTMENTS = ("holm", "bh", "none")


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: min(1, 2·P(X ≤ min(b, c))), X ~ Bin(b + c, ½).

    This is what `statsmodels.stats.contingency_tables.mcnemar(table, exact=True)`
    computes. With no discordant pairs the p-value is 1 (nothing contradicts H0).
    """
    b = check_count(b, "b")
    c = check_count(c, "c")
    n = b + c
    if n == 0:
        return 1.0
    from scipy.special import bdtr  # imported on first use: scipy is slow to import

    return float(min(1.0, 2.0 * bdtr(min(b, c), n, 0.5)))


def t_p_value(estimate: float, se: float, df: int) -> float | None:
    """Two-sided p of estimate/se under Student's t with `df` degrees of freedom.

    None when it is undefined (se = 0 or no degrees of freedom).
    """
    if se is None or not se > 0 or df < 1 or not math.isfinite(estimate):
        return None
    from scipy.special import stdtr

    return float(2.0 * stdtr(df, -abs(estimate) / se))


def bootstrap_p_value(p_le_zero: float, p_ge_zero: float) -> float:
    """Two-sided bootstrap p-value, min(1, 2·min(P(d* ≤ 0), P(d* ≥ 0))).

    Zero lies outside the equal-tailed (1 − α) percentile interval exactly when this
    p is below α (up to the quantile rule), so p and interval never disagree.
    """
    for name, value in (("p_le_zero", p_le_zero), ("p_ge_zero", p_ge_zero)):
        if not 0.0 <= value <= 1.0:
            raise StatisticsError(f"{name} must be a probability, got {value}")
    return float(min(1.0, 2.0 * min(p_le_zero, p_ge_zero)))


def adjust(p_values: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Adjusted p-values over the family `p_values` (None entries are left out of it).

    ``holm``: step-down, p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)), controls the
    family-wise error rate. ``bh``: step-up, p̃_(i) = min_{j ≥ i} min(1, m·p_(j)/j),
    controls the false discovery rate (independent or positively dependent tests).
    ``none`` returns the p-values unchanged. m counts the defined p-values.
    """
    if method not in ADJUSTMENTS:
        raise StatisticsError(f"unknown adjustment {method!r}; use one of {', '.join(ADJUSTMENTS)}")
    defined = [i for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if not defined:
        return out
    p = np.array([p_values[i] for i in defined], dtype=np.float64)
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise StatisticsError("p-values must lie in [0, 1]")
    m = p.size
    if method == "none":
        adjusted = p
    else:
        order = np.argsort(p, kind="stable")
        ranked = p[order]
        if method == "holm":
            steps = np.maximum.accumulate((m - np.arange(m)) * ranked)
        else:
            steps = np.minimum.accumulate((m * ranked / np.arange(1, m + 1))[::-1])[::-1]
        adjusted = np.empty(m)
        adjusted[order] = np.minimum(1.0, steps)
    for i, value in zip(defined, adjusted.tolist(), strict=True):
        out[i] = value
    return out
