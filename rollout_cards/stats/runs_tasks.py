"""rliable's toolkit for runs × tasks score matrices, seeded and with pairing kept.

A method's scores are a matrix `x[run, task]` (rliable's layout). Statistics:

- `optimality_gap(x, gamma)`: γ − mean(min(x, γ));
- `probability_of_improvement(x, y)`: per task, P(X > Y) + ½·P(X = Y) over all run
  pairs — the Mann–Whitney U of the task divided by n_x·n_y — averaged over tasks;
- `performance_profile(x, taus)`: the fraction of all run × task scores above each τ
  (rliable's score distribution), or with `average=True` the fraction of tasks whose
  mean over runs is above τ;
- the aggregates of `rollout_cards.stats.aggregates` (mean, median of task means, IQM).

`stratified_bootstrap` resamples runs with replacement within each task (tasks are
the strata), and optionally the tasks themselves. Unlike rliable it draws from its own
seeded ``numpy.random.default_rng(seed)`` (rliable's bootstrap ignores its
`random_state` and uses numpy's global state), and when several methods enter one
statistic (a difference, a probability of improvement) the task draw is shared by all
of them — and the run draw too when `paired_runs` says run r of every method is the
same seed — where rliable's independent bootstrap draws every method separately and
loses the pairing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rollout_cards.errors import StatisticsError
from rollout_cards.stats._common import (
    check_count,
    check_level,
    finite_array,
    jsonable,
    trim_mean_quarter,
)

__all__ = [
    "MatrixInterval",
    "iqm_of",
    "mean_of",
    "median_of",
    "optimality_gap",
    "performance_profile",
    "probability_of_improvement",
    "stratified_bootstrap",
]

_GENERATOR = "numpy.random.default_rng (PCG64)"


def _matrix(x: ArrayLike, name: str = "scores") -> np.ndarray:
    arr = finite_array(x, name, ndim=2)
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise StatisticsError(f"{name} needs at least one run and one task, got shape {arr.shape}")
    return arr


# Statistics of a stack of matrices (..., runs, tasks): the last two axes are one matrix.


def mean_of(x: np.ndarray) -> np.ndarray:
    """Mean over every run × task cell (rliable's aggregate_mean)."""
    return np.asarray(x).mean(axis=(-2, -1))


def median_of(x: np.ndarray) -> np.ndarray:
    """Median over tasks of the per-task means over runs (rliable's aggregate_median)."""
    return np.median(np.asarray(x).mean(axis=-2), axis=-1)


def iqm_of(x: np.ndarray) -> np.ndarray:
    """Interquartile mean of all run × task cells (rliable's aggregate_iqm)."""
    x = np.asarray(x)
    return trim_mean_quarter(x.reshape(*x.shape[:-2], -1), axis=-1)


def optimality_gap(x: ArrayLike, gamma: float = 1.0) -> np.ndarray | float:
    """γ − mean(min(x, γ)): how far the scores fall short of the target γ."""
    x = np.asarray(x, dtype=np.float64)
    return gamma - np.minimum(x, gamma).mean(axis=(-2, -1))


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> np.ndarray | float:
    """P(X > Y) + ½P(X = Y) per task over all run pairs, averaged over tasks.

    `x` is runs_x × tasks and `y` runs_y × tasks (stacks allowed: leading axes are
    resamples). Equals scipy's `mannwhitneyu(x[:, t], y[:, t]).statistic / (n_x·n_y)`
    averaged over tasks t.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape[-1] != y.shape[-1]:
        raise StatisticsError(f"x and y must have the same tasks ({x.shape[-1]} vs {y.shape[-1]})")
    gt = (x[..., :, None, :] > y[..., None, :, :]).mean(axis=(-3, -2))
    eq = (x[..., :, None, :] == y[..., None, :, :]).mean(axis=(-3, -2))
    return (gt + 0.5 * eq).mean(axis=-1)


def performance_profile(x: ArrayLike, taus: Sequence[float], *, average: bool = False) -> np.ndarray:
    """Fraction of run × task scores above each τ (or of task means, with `average`)."""
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(taus, dtype=np.float64)
    values = x.mean(axis=-2) if average else x.reshape(*x.shape[:-2], -1)
    return (values[..., None, :] > t[:, None]).mean(axis=-1)


@dataclass(frozen=True, eq=False)
class MatrixInterval:
    """Point estimate(s) of a statistic and their stratified-bootstrap percentile bounds."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return jsonable(
            {"estimate": self.estimate, "low": self.low, "high": self.high, "level": self.level, "details": self.details}
        )


def stratified_bootstrap(
    scores: Sequence[ArrayLike],
    statistic: Callable[..., ArrayLike],
    *,
    level: float = 0.95,
    n_resamples: int = 2_000,
    seed: int = 0,
    task_bootstrap: bool = False,
    paired_runs: bool = False,
    block: int = 100,
) -> MatrixInterval:
    """Percentile interval of `statistic(*matrices)` under the stratified bootstrap.

    `scores` are one or more runs × tasks matrices with the same tasks (columns in the
    same order). `statistic` receives the resampled matrices stacked along a leading
    resample axis — shape (resamples, runs, tasks) each — and returns one value (or a
    vector, e.g. a profile over τ) per resample. Per resample, each task's runs are
    drawn with replacement (independently per task); with `task_bootstrap` the tasks
    are drawn too, once for all matrices; with `paired_runs` (every matrix has the
    same runs, run r of each being the same seed) the run draw is shared as well.
    """
    level = check_level(level)
    n_resamples = check_count(n_resamples, "n_resamples", minimum=2)
    seed = check_count(seed, "seed")
    mats = [_matrix(s, f"scores[{i}]") for i, s in enumerate(scores)]
    if not mats:
        raise StatisticsError("stratified_bootstrap needs at least one score matrix")
    tasks = mats[0].shape[1]
    if any(m.shape[1] != tasks for m in mats):
        raise StatisticsError("every score matrix must have the same tasks (columns)")
    if paired_runs and any(m.shape[0] != mats[0].shape[0] for m in mats):
        raise StatisticsError("paired_runs needs the same number of runs in every matrix")
    rng = np.random.default_rng(seed)
    estimate = np.asarray(statistic(*[m[None] for m in mats]), dtype=np.float64)[0]
    out = []
    for start in range(0, n_resamples, block):
        b = min(block, n_resamples - start)
        cols = (
            rng.integers(0, tasks, size=(b, 1, tasks)) if task_bootstrap else np.arange(tasks)[None, None, :]
        )
        shared = rng.integers(0, mats[0].shape[0], size=(b, mats[0].shape[0], tasks)) if paired_runs else None
        drawn = []
        for m in mats:
            rows = shared if shared is not None else rng.integers(0, m.shape[0], size=(b, m.shape[0], tasks))
            drawn.append(m[rows, cols])
        out.append(np.asarray(statistic(*drawn), dtype=np.float64))
    boot = np.concatenate(out, axis=0)
    alpha = 1.0 - level
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=0)
    return MatrixInterval(
        estimate=estimate,
        low=low,
        high=high,
        level=level,
        details={
            "resamples": n_resamples,
            "seed": seed,
            "generator": _GENERATOR,
            "resampled": "runs within each task" + (", and tasks (shared by every method)" if task_bootstrap else ""),
            "runs": "shared draw (paired seeds)" if paired_runs else "drawn per method",
            "quantile_method": "linear",
        },
    )
