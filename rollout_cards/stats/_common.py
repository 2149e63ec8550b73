"""Input checks and JSON conversion shared by the statistics modules (private)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError


def check_level(level: float) -> float:
    """Return `level` as a float if it is a confidence level strictly between 0 and 1."""
    if isinstance(level, bool) or not isinstance(level, numbers.Real):
        raise StatisticsError(f"level must be a number strictly between 0 and 1, got {level!r}")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise StatisticsError(f"level must be strictly between 0 and 1, got {level}")
    return level


def check_count(value: Any, name: str, *, minimum: int = 0) -> int:
    """Return `value` as an int if it is an integer (numpy ints too) ≥ `minimum`."""
    # bool is an int subclass, but True as a count is almost always a bug upstream.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise StatisticsError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise StatisticsError(f"{name} must be ≥ {minimum}, got {value}")
    return value


def finite_array(values: ArrayLike, name: str = "values", *, ndim: int | None = 1) -> np.ndarray:
    """Return `values` as a float64 array, refusing NaN/inf and (optionally) other ranks.

    NaN and null scores must be handled by a declared rule before they reach a
    statistic; silently propagating or dropping them is what this library exists to stop.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatisticsError(f"{name} must be numbers: {exc}") from None
    if ndim is not None and arr.ndim != ndim:
        raise StatisticsError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise StatisticsError(
            f"{name} contains {bad} NaN or infinite value(s); "
            "declare how they are scored before computing a statistic"
        )
    return arr


def t_quantile(level: float, df: int) -> float:
    """Two-sided critical value of Student's t with `df` degrees of freedom."""
    from scipy.special import stdtrit  # imported on first use: scipy is slow to import

    return float(stdtrit(df, 0.5 + level / 2.0))


def z_quantile(level: float) -> float:
    """Two-sided critical value of the standard normal."""
    from scipy.special import ndtri

    return float(ndtri(0.5 + level / 2.0))


def trim_mean_quarter(x: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Mean after cutting floor(0.25 N) values from each end along `axis`
    (`scipy.stats.trim_mean(x, 0.25)`, rliable's IQM), without importing scipy.stats."""
    x = np.sort(np.asarray(x, dtype=float), axis=axis)
    n = x.shape[axis]
    cut = int(0.25 * n)
    kept = np.take(x, np.arange(cut, n - cut), axis=axis)
    return kept.mean(axis=axis)


def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and mappings into plain JSON types.

    Non-finite floats become None so `json.dumps(..., allow_nan=False)` never fails.
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
