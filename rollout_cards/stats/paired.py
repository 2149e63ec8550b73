"""Paired differences on shared units (same tasks, same seeds) — never two overlapping bars.

Both systems ran on the same units, so their scores are correlated; the standard
error of the difference comes from the per-unit differences, and is usually much
smaller than the unpaired one (which is reported next to it for comparison).
Units present on only one side are dropped and counted, never silently.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import check_level, finite_array, jsonable
from rollout_cards.stats.intervals import (
    REASON_NO_DATA,
    REASON_ONE_UNIT,
    Interval,
    negligible,
    t_interval,
    undefined_interval,
)
from rollout_cards.stats.units import UnitStats, align_units

__all__ = [
    "PairedDifference",
    "paired_cluster_difference",
    "paired_difference",
    "paired_difference_by_unit",
]


@dataclass(frozen=True)
class PairedDifference:
    """mean(a) − mean(b) over the units both sides share, with paired and unpaired SEs.

    `interval` is a t interval on (shared units − 1) degrees of freedom built from
    `se_paired`. `se_unpaired` treats the two sides as independent samples — shown
    only to make the gain from pairing visible. The counts of units found on one
    side only (and so dropped) are `dropped_only_in_a` / `dropped_only_in_b`.
    """

    difference: float | None
    mean_a: float | None
    mean_b: float | None
    n_units: int
    n_a: int
    n_b: int
    dropped_only_in_a: int
    dropped_only_in_b: int
    se_paired: float | None
    se_unpaired: float | None
    interval: Interval

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the interval nested."""
        return jsonable(
            {
                "difference": self.difference,
                "mean_a": self.mean_a,
                "mean_b": self.mean_b,
                "n_units": self.n_units,
                "n_a": self.n_a,
                "n_b": self.n_b,
                "dropped_only_in_a": self.dropped_only_in_a,
                "dropped_only_in_b": self.dropped_only_in_b,
                "se_paired": self.se_paired,
                "se_unpaired": self.se_unpaired,
                "interval": self.interval.to_dict(),
            }
        )


def _cluster_scores(units: UnitStats) -> np.ndarray:
    # Each unit's contribution to the linearised (ratio) mean: (Σy_c − n_c·ȳ) / N.
    return (units.sums - units.counts * units.mean) / units.n


def _compare(
    a: UnitStats, b: UnitStats, only_a: int, only_b: int, level: float
) -> PairedDifference:
    m = a.n_units
    one_per_unit = bool(np.all(a.counts == 1) and np.all(b.counts == 1))
    method = "paired_t" if one_per_unit else "paired_cluster_t"
    details = {"difference": "a - b", "dropped_only_in_a": only_a, "dropped_only_in_b": only_b}
    common = {
        "n_units": m,
        "n_a": a.n,
        "n_b": b.n,
        "dropped_only_in_a": only_a,
        "dropped_only_in_b": only_b,
    }
    if m == 0:
        interval = undefined_interval(method, level, 0, 0, REASON_NO_DATA, details=details)
        return PairedDifference(
            None, None, None, se_paired=None, se_unpaired=None, interval=interval, **common
        )
    mean_a, mean_b = a.mean, b.mean
    diff = mean_a - mean_b
    n = a.n + b.n
    if m == 1:
        interval = undefined_interval(
            method, level, n, 1, REASON_ONE_UNIT, estimate=diff, details=details
        )
        return PairedDifference(
            diff, mean_a, mean_b, se_paired=None, se_unpaired=None, interval=interval, **common
        )
    ua, ub = _cluster_scores(a), _cluster_scores(b)
    correction = m / (m - 1)
    se_paired = math.sqrt(correction * float((ua - ub) @ (ua - ub)))
    se_unpaired = math.sqrt(correction * float(ua @ ua + ub @ ub))
    details["se_unpaired"] = se_unpaired
    if not one_per_unit:
        details["correction"] = "C/(C-1)"
    # |ua_c| ≤ 2·max|unit mean|·(largest unit share), so rounding noise is far below this.
    scale = float(
        (np.max(np.abs(a.unit_means)) + np.max(np.abs(b.unit_means)))
        * max(a.counts.max() / a.n, b.counts.max() / b.n)
    )
    flat = negligible(ua - ub, scale)
    if flat:
        se_paired = 0.0  # report the exact zero, not rounding noise
    interval = t_interval(
        diff,
        se_paired,
        m - 1,
        level,
        method=method,
        n=n,
        n_units=m,
        details=details,
        no_variation=flat,
    )
    return PairedDifference(
        diff,
        mean_a,
        mean_b,
        se_paired=se_paired,
        se_unpaired=se_unpaired,
        interval=interval,
        **common,
    )


def paired_difference(a: ArrayLike, b: ArrayLike, *, level: float = 0.95) -> PairedDifference:
    """Paired comparison of two aligned arrays: `a[i]` and `b[i]` are the same unit.

    Difference d = a − b; paired SE = sd(d, ddof=1)/√m; interval mean(d) ± t_{m−1}·SE.
    """
    level = check_level(level)
    va, vb = finite_array(a, "a"), finite_array(b, "b")
    if va.size != vb.size:
        raise StatisticsError(f"paired arrays must be aligned (lengths {va.size} and {vb.size})")
    return _compare(UnitStats.from_values(va), UnitStats.from_values(vb), 0, 0, level)


def paired_difference_by_unit(
    a: Mapping[Hashable, float], b: Mapping[Hashable, float], *, level: float = 0.95
) -> PairedDifference:
    """Paired comparison of unit-keyed values, aligned on the units both sides have."""
    level = check_level(level)
    sa = UnitStats.from_values(list(a.values()), list(a.keys()))
    sb = UnitStats.from_values(list(b.values()), list(b.keys()))
    return paired_cluster_difference(sa, sb, level=level)


def paired_cluster_difference(
    a: UnitStats, b: UnitStats, *, level: float = 0.95
) -> PairedDifference:
    """Paired comparison when each unit holds several episodes on each side.

    Compares the episode-weighted means Σy/N of the shared units. The SE is
    cluster-robust over units with the C/(C−1) correction: each unit contributes
    (Σa_c − n_ac·ā)/N_a − (Σb_c − n_bc·b̄)/N_b, so pairing enters through the
    within-unit correlation of the two sides. With one episode per unit on each side
    it equals `paired_difference` exactly.
    """
    level = check_level(level)
    sa, sb, only_a, only_b = align_units(a, b)
    return _compare(sa, sb, only_a, only_b, level)
