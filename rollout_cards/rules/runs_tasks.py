"""`runs_tasks_view(card, rule)`: rliable's statistics of a rule's scores, per group.

Each group (method) becomes a runs × tasks matrix of the rule's per-(run, task) mean
score. Then, with stratified-bootstrap intervals (`rollout_cards.stats.runs_tasks`):
mean, median of task means, IQM and optimality gap per group; the performance profile
over `taus` with bands; and the probability of improvement of every ordered pair of
groups. The tasks are drawn jointly for every group, so comparisons keep their pairing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ..errors import RuleError
from ..io.reader import Card, open_card
from ..model.rule import Rule
from ..stats._common import jsonable
from ..stats.runs_tasks import (
    iqm_of,
    mean_of,
    median_of,
    optimality_gap,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap,
)
from .engine import apply_rule
from .grouping import factorize
from .power import _declared_or_loaded

__all__ = ["RunsTasksReport", "runs_tasks_view"]


@dataclass(frozen=True)
class RunsTasksReport:
    """Per-group aggregates and profiles, and pairwise probabilities of improvement."""

    card: str
    rule: str
    runs: str
    tasks: str
    groups: tuple[dict[str, Any], ...]
    improvement: tuple[dict[str, Any], ...]
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return jsonable(self.__dict__)


def _matrices(
    run: Any, runs: str, tasks: str, file: str | None
) -> tuple[list[np.ndarray], list[tuple[int, ...]], list[tuple]]:
    obs = run.observations
    for column in (runs, tasks):
        if column not in obs.identity.column_names:
            raise RuleError(
                f"{column} is not kept with the rule's observations (after a reduce only group, "
                "strata, reduce and unit columns are)",
                file=file,
                key="runs" if column == runs else "tasks",
            )
    r = factorize(obs.identity, [runs])
    t = factorize(obs.identity, [tasks])
    out, task_sets = [], []
    for g in range(obs.groups.size):
        mask = obs.codes == g
        cell = r.codes[mask] * t.size + t.codes[mask]
        counts = np.bincount(cell, minlength=r.size * t.size).reshape(r.size, t.size)
        sums = np.bincount(cell, weights=obs.values[mask], minlength=r.size * t.size).reshape(r.size, t.size)
        # A group's matrix covers the runs and tasks it observed at all.
        rows, cols = counts.any(axis=1), counts.any(axis=0)
        counts, sums = counts[rows][:, cols], sums[rows][:, cols]
        if not counts.all():
            missing = int((counts == 0).sum())
            raise RuleError(
                f"group {obs.groups.labels[g]} lacks {missing} (run, task) cells of {runs} x {tasks}: "
                "rliable's statistics need every run to have every task",
                file=file,
                key="tasks",
            )
        out.append(sums / counts)
        task_sets.append(tuple(np.flatnonzero(cols).tolist()))
    return out, task_sets, obs.groups.labels


#: Groups rliable's views are computed for at most (each pair of groups is a bootstrap).
MAX_RLIABLE_GROUPS = 50


def runs_tasks_view(
    card: Card | str | os.PathLike[str],
    rule: Rule | str | os.PathLike[str],
    *,
    runs: str = "run_id",
    tasks: str = "task_id",
    taus: tuple[float, ...] = (0.25, 0.5, 0.75),
    gamma: float = 1.0,
    task_bootstrap: bool = False,
    resamples: int = 2_000,
    seed: int = 0,
    level: float = 0.95,
) -> RunsTasksReport:
    """rliable's statistics of `rule` on `card`, groups as methods, with intervals."""
    if not isinstance(card, Card):
        card = open_card(card)
    spec, file = _declared_or_loaded(card, rule)
    run = apply_rule(card, spec, file=file, keep_columns=[runs, tasks])
    if run.observations is not None and run.observations.groups.size > MAX_RLIABLE_GROUPS:
        raise RuleError(
            f"rliable's views compare {run.observations.groups.size:,} groups, more than the {MAX_RLIABLE_GROUPS} they "
            "are computed for (a bootstrap per group and per pair of groups: 10,000 groups ran for hours); select "
            "the groups to compare (`select:` in the rule) or group more coarsely",
            file=file, key="aggregate.group_by")
    mats, task_sets, labels = _matrices(run, runs, tasks, file)
    names = [dict(zip(spec.aggregate.group_by, label, strict=True)) for label in labels]
    opts = {"level": level, "n_resamples": resamples, "seed": seed, "task_bootstrap": task_bootstrap}

    def aggregates(x: np.ndarray) -> np.ndarray:
        parts = [mean_of(x), median_of(x), iqm_of(x), optimality_gap(x, gamma)]
        return np.concatenate([np.stack(parts, axis=-1), performance_profile(x, taus)], axis=-1)

    groups = []
    boot_details: dict[str, Any] = {}
    for name, m in zip(names, mats, strict=True):
        r = stratified_bootstrap([m], aggregates, **opts)
        boot_details = r.details
        keys = ["mean", "median", "iqm", f"optimality_gap (gamma={gamma:g})"]
        stats = {k: {"value": r.estimate[i], "low": r.low[i], "high": r.high[i]} for i, k in enumerate(keys)}
        profile = [
            {"tau": tau, "fraction_above": r.estimate[4 + i], "low": r.low[4 + i], "high": r.high[4 + i]}
            for i, tau in enumerate(taus)
        ]
        groups.append({"group": name, "runs": m.shape[0], "tasks": m.shape[1], "statistics": stats, "profile": profile})
    improvement = []
    # P(Y improves on X) is 1 − P(X improves on Y): one direction per pair suffices.
    for i, j in combinations(range(len(mats)), 2):
        if task_sets[i] != task_sets[j]:
            improvement.append(
                {"group": names[i], "over": names[j], "probability": None, "low": None, "high": None,
                 "reason": "undefined (the groups did not run the same tasks)"}
            )
            continue
        r = stratified_bootstrap([mats[i], mats[j]], probability_of_improvement, **opts)
        improvement.append(
            {"group": names[i], "over": names[j], "probability": r.estimate, "low": r.low, "high": r.high}
        )
    details = {
        **boot_details,
        "level": level,
        "cells": f"mean score of each ({runs}, {tasks})",
        "profile": "fraction of run x task scores above tau",
        "probability_of_improvement": "P(X > Y) + P(X = Y)/2 over run pairs, per task, averaged over tasks",
    }
    return RunsTasksReport(card.id, run.rule, runs, tasks, tuple(groups), tuple(improvement), details)
