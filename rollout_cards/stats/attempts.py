"""Several attempts per task: pass@k, pass^k, expected maximum, best-of-k optimism."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_count, finite_array

__all__ = [
    "best_of_k_optimism",
    "expected_max",
    "pass_at_k",
    "pass_at_k_many",
    "pass_hat_k",
    "pass_hat_k_many",
]


def _check_attempts(n: int, c: int, k: int) -> tuple[int, int, int]:
    n = check_count(n, "n (attempts)")
    c = check_count(c, "c (successes)")
    k = check_count(k, "k", minimum=1)
    if c > n:
        raise StatisticsError(f"successes c={c} cannot exceed attempts n={n}")
    if n < k:
        raise StatisticsError(f"k={k} needs at least k attempts per task, got n={n}")
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 − C(n−c, k)/C(n, k).

    The chance that at least one of k attempts drawn without replacement from the
    n made (c of them successful) succeeds. Raises StatisticsError when n < k.
    """
    n, c, k = _check_attempts(n, c, k)
    # Exact integers, then one correctly rounded division: no overflow, no log-gamma error.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k: C(c, k)/C(n, k), the chance that k drawn attempts all succeed.

    Raises StatisticsError when n < k.
    """
    n, c, k = _check_attempts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _many(fn, n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    ns, cs = np.asarray(n), np.asarray(c)
    if ns.shape != cs.shape or ns.ndim != 1:
        raise StatisticsError(
            f"n and c must be 1-D arrays of the same length, got shapes {ns.shape} and {cs.shape}"
        )
    for name, arr in (("n", ns), ("c", cs)):
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise StatisticsError(f"{name} must hold integers, got dtype {arr.dtype}")
    return np.array([fn(int(a), int(b), k) for a, b in zip(ns, cs, strict=True)], dtype=np.float64)


def pass_at_k_many(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """`pass_at_k` for each task: `n[i]` attempts with `c[i]` successes."""
    return _many(pass_at_k, n, c, k)


def pass_hat_k_many(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """`pass_hat_k` for each task: `n[i]` attempts with `c[i]` successes."""
    return _many(pass_hat_k, n, c, k)


def expected_max(values: ArrayLike, n: int) -> float:
    """Expected maximum of n draws with replacement from the empirical distribution.

    Dodge et al. (2019), "Show your work": with v sorted ascending and N values,
    E[max] = Σ_i v_(i) · ((i/N)ⁿ − ((i−1)/N)ⁿ). It says what a best-of-n search
    budget buys, instead of reporting the single best run.
    """
    v = np.sort(finite_array(values, "values"))
    n = check_count(n, "n", minimum=1)
    if v.size == 0:
        raise StatisticsError("expected maximum of an empty sample is undefined")
    cdf = np.arange(v.size + 1, dtype=np.float64) / v.size
    return float(v @ np.diff(cdf**n))


def best_of_k_optimism(k: int) -> float:
    """E[max of k iid N(0, 1)]: the bias, in standard deviations, of reporting the best
    of k runs when there is no true difference (0 for k = 1)."""
    k = check_count(k, "k", minimum=1)
    if k == 1:
        return 0.0
    from scipy.integrate import quad  # imported on first use: scipy is slow to import
    from scipy.special import ndtr

    def integrand(x: float) -> float:
        # Density of the maximum of k standard normals is k·φ(x)·Φ(x)^(k−1).
        return x * k * math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) * ndtr(x) ** (k - 1)

    value, _ = quad(integrand, -np.inf, np.inf, epsabs=1e-12, epsrel=1e-12)
    return float(value)
