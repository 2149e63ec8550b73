"""numpy's quantile rules on a sorted sample given as (value, multiplicity) pairs (private).

The exact bootstrap has Cᶜ equally likely resamples (10¹⁰ for ten units) but only
C(2C−1, C) distinct multisets. This module computes `np.quantile(np.repeat(values,
counts), q, method=m)` without building the repeated array, following numpy's
definitions step by step so both bootstraps use the same, named quantile rule.
"""

from __future__ import annotations

import math

import numpy as np

from rollout_cards.errors import StatisticsError

__all__ = ["QUANTILE_METHODS", "check_quantile_method", "repeated_quantile"]

# Hyndman & Fan continuous rules as numpy parametrises them: (alpha, beta).
_CONTINUOUS = {
    "interpolated_inverted_cdf": (0.0, 1.0),
    "hazen": (0.5, 0.5),
    "weibull": (0.0, 0.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
QUANTILE_METHODS = (
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "midpoint",
    "nearest",
)


def check_quantile_method(method: str) -> str:
    """Return `method` if it is one of numpy's quantile `method=` names."""
    if method not in QUANTILE_METHODS:
        raise StatisticsError(
            f"unknown quantile method {method!r}; use one of {', '.join(QUANTILE_METHODS)}"
        )
    return method


def _lerp(a: float, b: float, t: float) -> float:
    # Same two-branch form as numpy's _lerp, so results match to the last bit.
    diff = b - a
    return b - diff * (1.0 - t) if t >= 0.5 else a + diff * t


def _discrete_position(n: int, q: np.float64, method: str) -> int:
    if method == "lower":
        return int(np.floor((n - 1) * q))
    if method == "higher":
        return int(np.ceil((n - 1) * q))
    if method == "nearest":
        return int(np.around((n - 1) * q))
    index = n * q - 1 if method == "inverted_cdf" else n * q - 1 - 0.5
    previous = math.floor(index)
    gamma = index - previous
    take_previous = gamma == 0
    if method == "closest_observation":
        take_previous = take_previous and previous % 2 == 1
    return max(0, previous if take_previous else previous + 1)


def _virtual_index(n: int, q: np.float64, method: str) -> np.float64:
    if method == "linear":
        return (n - 1) * q
    if method == "averaged_inverted_cdf":
        return n * q - 1
    if method == "midpoint":
        return 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))
    alpha, beta = _CONTINUOUS[method]
    return n * q + (alpha + q * (1 - alpha - beta)) - 1


def repeated_quantile(values: np.ndarray, counts: np.ndarray, q: float, method: str) -> float:
    """Quantile `q` of the sorted `values`, each repeated `counts[i]` times, numpy's rule `method`."""
    check_quantile_method(method)
    cum = np.cumsum(counts)
    n = int(cum[-1])

    def at(position: int) -> float:
        # The value at a 0-based position of the (virtual) repeated, sorted array.
        return float(values[np.searchsorted(cum, position, side="right")])

    qq = np.float64(q)
    if method in ("inverted_cdf", "closest_observation", "lower", "higher", "nearest"):
        return at(min(_discrete_position(n, qq, method), n - 1))
    virtual = _virtual_index(n, qq, method)
    if virtual >= n - 1:
        return at(n - 1)
    if virtual < 0:
        return at(0)
    previous = int(np.floor(virtual))
    gamma = float(virtual - previous)
    if method == "averaged_inverted_cdf":
        gamma = 0.5 if gamma == 0 else 1.0
    elif method == "midpoint":
        gamma = 0.0 if virtual % 1 == 0 else 0.5
    return _lerp(at(previous), at(previous + 1), gamma)
