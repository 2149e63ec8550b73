"""Power and sample size, from a card's own per-unit variance.

Closed forms of the normal approximation (as in Miller 2024, "Adding Error Bars to
Evals", and statsmodels' `NormalIndPower`), with z_a = z_{1−α/2} and z_b = z_{power}:

- `half_width(p, n)`: z·√(p(1−p)/n), one arm's interval half-width;
- `n_for_half_width(variance, gap)`: the n at which that half-width drops below a gap
  (a common but weak criterion: it ignores the other arm and power);
- `n_per_arm(delta, var_a, var_b, covariance)`: (z_a + z_b)²·(σ_a² + σ_b² − 2·cov)/δ²,
  units per arm for power `power` at level α; cov > 0 is what pairing on shared tasks buys;
- `minimum_detectable_effect(se)`: (z_a + z_b)·se, the smallest true difference
  detected with that power at the current standard error of the difference;
- `seeds_needed(gap, sd)`: runs (seeds) per method for a two-sample t test, from the
  noncentral t (exact for normal run scores, not an approximation);
- `variance_components(units)`: the within/between-unit split of the variance and the
  standard error with K attempts per unit, SE(K)² = (σ²_between + σ²_within/K)/n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count, check_level, jsonable, z_quantile
from rollout_cards.stats.units import UnitStats

__all__ = [
    "VarianceComponents",
    "half_width",
    "minimum_detectable_effect",
    "n_for_half_width",
    "n_per_arm",
    "power_of",
    "seeds_needed",
    "variance_components",
]


def _check_alpha_power(alpha: float, power: float) -> tuple[float, float]:
    alpha = check_level(alpha)  # strictly between 0 and 1, like a level
    power = check_level(power)
    return z_quantile(1.0 - alpha), _z_one_sided(power)


def _z_one_sided(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def half_width(p: float, n: int, level: float = 0.95) -> float:
    """Normal-approximation half-width z·√(p(1−p)/n) of one proportion's interval."""
    n = check_count(n, "n", minimum=1)
    if not 0.0 <= p <= 1.0:
        raise StatisticsError(f"p must be a proportion, got {p}")
    return z_quantile(check_level(level)) * math.sqrt(p * (1.0 - p) / n)


def n_for_half_width(variance: float, gap: float, level: float = 0.95) -> int:
    """Smallest n with z·√(variance/n) < gap."""
    if gap <= 0 or variance < 0:
        raise StatisticsError("gap must be positive and variance non-negative")
    z = z_quantile(check_level(level))
    n = z * z * variance / (gap * gap)
    return max(1, math.floor(n) + 1)


def n_per_arm(
    delta: float,
    var_a: float,
    var_b: float,
    *,
    covariance: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> int:
    """Units per arm to detect a true difference `delta` (two-sided level α, power `power`).

    Independent arms: covariance 0. Paired on shared units: the covariance of the two
    arms' unit scores, Var(a − b) = σ_a² + σ_b² − 2·cov.
    """
    if delta == 0:
        raise StatisticsError("delta must be non-zero: no sample detects a zero difference")
    za, zb = _check_alpha_power(alpha, power)
    var = var_a + var_b - 2.0 * covariance
    if var <= 0:
        raise StatisticsError("the variance of the difference must be positive")
    return math.ceil((za + zb) ** 2 * var / (delta * delta) - 1e-9)


def minimum_detectable_effect(se: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """(z_{1−α/2} + z_{power})·se: the true difference detected with `power`."""
    za, zb = _check_alpha_power(alpha, power)
    return (za + zb) * se


def power_of(delta: float, se: float, *, alpha: float = 0.05) -> float:
    """Two-sided power Φ(|δ|/se − z) + Φ(−|δ|/se − z) of a z test at level α."""
    from scipy.special import ndtr

    if se <= 0:
        raise StatisticsError("se must be positive")
    z = z_quantile(1.0 - alpha)
    t = abs(delta) / se
    return float(ndtr(t - z) + ndtr(-t - z))


def seeds_needed(
    gap: float, sd: float, *, alpha: float = 0.05, power: float = 0.8, max_seeds: int = 100_000
) -> int:
    """Runs per method so a two-sided two-sample t test at level α has `power` for `gap`.

    Run-level scores vary with standard deviation `sd`; the power at n runs per method
    is P(|T| > t_{1−α/2, 2n−2}) with T noncentral t, noncentrality gap/(sd·√(2/n)).
    The answer is the smallest such n ≥ 2 (what statsmodels' `TTestIndPower` solves
    for, rounded up).
    """
    if gap <= 0 or sd <= 0:
        raise StatisticsError("gap and sd must be positive")
    check_level(power)
    from scipy.stats import nct, t

    def achieved(n: int) -> float:
        df = 2 * n - 2
        crit = t.ppf(1 - alpha / 2, df)
        nc = gap / (sd * math.sqrt(2.0 / n))
        return float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))

    lo, hi = 2, 2
    while achieved(hi) < power:
        lo, hi = hi, hi * 2
        if hi > max_seeds:
            raise StatisticsError(f"more than {max_seeds} seeds per method would be needed")
    while lo < hi:
        mid = (lo + hi) // 2
        if achieved(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi


@dataclass(frozen=True)
class VarianceComponents:
    """Within- and between-unit variance of per-observation scores, and what K buys.

    `within` is the mean over units with ≥ 2 observations of their unbiased variance;
    `between` the variance of the true unit means, var(unit means) − mean(within/K_c)
    (clamped at 0). `se_by_k[K]` is √((between + within/K)/n_units): the standard error
    of the mean of unit means with K attempts per unit.
    """

    n_units: int
    k_mean: float
    within: float | None
    between: float | None
    se: float | None
    se_by_k: dict[int, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return jsonable(
            {
                "n_units": self.n_units,
                "k_mean": self.k_mean,
                "within": self.within,
                "between": self.between,
                "se": self.se,
                "se_by_k": {str(k): v for k, v in self.se_by_k.items()},
            }
        )


def variance_components(units: UnitStats, ks: tuple[int, ...] = (1, 2, 4, 8, 16)) -> VarianceComponents:
    """Split the variance of the scores into within-unit and between-unit parts."""
    c = units.n_units
    k_mean = units.n / c if c else 0.0
    if c < 2:
        return VarianceComponents(c, k_mean, None, None, None, {})
    counts = units.counts.astype(np.float64)
    means = units.unit_means
    repeated = counts >= 2
    within = None
    if repeated.any():
        ss = np.maximum(0.0, units.sumsq[repeated] - counts[repeated] * means[repeated] ** 2)
        within = float(np.mean(ss / (counts[repeated] - 1)))
    var_means = float(np.var(means, ddof=1))
    noise = float(np.mean((within or 0.0) / counts))
    between = max(0.0, var_means - noise)
    se = math.sqrt(var_means / c)
    se_by_k = (
        {k: math.sqrt((between + within / k) / c) for k in ks} if within is not None else {}
    )
    return VarianceComponents(c, k_mean, within, between, se, se_by_k)
