"""Scoring on the workers: a rule run whose episodes are scored and summed per unit by Ray
tasks, so that only per-unit statistics reach the driver.

    episodes blocks ──► route each episode by its unit ──► P partitions (whole units)
    steps blocks ──► partials per batch ──► routed by the episode's partition ─┘
    partition p: merge its partials in (block, batch) order ─► features ─► episodes ⋈
        features ─► score ─► reduce ─► per-unit sums (`rules.scoring.run_partition`)
    driver: `engine.merge_partitions` ─► intervals, bootstraps, comparisons, as locally

A partition holds every episode of each unit it has, so every per-unit sum is added on one
worker, over that unit's observations in the episodes table's order: the sums, and the JSON
of the report, are the local engine's. The episode's partition is a CRC-32 of its unit's
label. The steps of an episode go to its partition: when the unit is the episode, a worker
computes that from the episode id; otherwise a table (episode id -> partition) that one task
builds from the episodes table is shared through the object store.

Not every rule splits so: with a reduce and a unit, "the unit is constant within a reduce
key" needs every row of a key, which a unit partition may not hold; a comparison on other
columns than the unit needs sums on those. Those rules, and rescores that pair rules on
units other than each rule's own, run on the driver (`RayEngine.features`): `split_unit`
says which. A partition that raises (a rule error on some rows) makes the driver run the
rule there, which raises the local engine's error, message for message.
"""

from __future__ import annotations

import os
import pickle
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import RolloutCardError
from ..io.decode import DecodeBudget
from ..io.reader import BlockScan
from ..model.rule import Rule
from ..rules.engine import merge_partitions, observation_unit, plan_rule
from ..rules.features import FeatureStream, attach_features, step_columns
from ..rules.grouping import factorize
from ..rules.results import RuleRun
from ..rules.scoring import run_partition
from .remote_errors import error_row

__all__ = ["PARTITIONS_PER_CPU", "PartitionedRule", "block_partials", "split_unit"]

#: Partitions of the episodes per CPU of the cluster (each a task that scores its units).
PARTITIONS_PER_CPU = 2


def split_unit(rule: Rule) -> list[str] | None:
    """The columns whose values route an episode to its partition (None: not split)."""
    unit = observation_unit(rule)
    if rule.reduce is not None and rule.aggregate.unit_columns():
        return None  # unit constant per reduce key is a check over every row of the key
    if rule.compare is not None and rule.compare.pair_on and list(rule.compare.pair_on) != unit:
        return None
    return unit


def _routes(table: pa.Table, columns: list[str], parts: int) -> np.ndarray:
    """Each row's partition: a CRC-32 of its label over `columns`, the same in every process."""
    factor = factorize(table, columns)
    per_label = np.fromiter((zlib.crc32(repr(label).encode()) % parts for label in factor.labels),
                            dtype=np.int64, count=len(factor.labels))
    return per_label[factor.codes] if len(per_label) else np.zeros(table.num_rows, dtype=np.int64)


def _split(table: pa.Table, routes: np.ndarray, parts: int) -> list[pa.Table]:
    """`table`'s rows per partition, each in the table's order."""
    order = np.argsort(routes, kind="stable")
    bounds = np.searchsorted(routes[order], np.arange(parts + 1))
    return [table.take(pa.array(order[bounds[p]:bounds[p + 1]])) for p in range(parts)]


class _Schemas:
    """What `plan_rule` reads of a card (its schemas and drops), on a worker."""

    def __init__(self, schemas: dict[str, pa.Schema], manifest: Any):
        self.schemas, self.manifest = schemas, manifest

    def schema(self, table: str) -> pa.Schema:
        return self.schemas[table]


@dataclass(frozen=True)
class _RuleJob:
    """What the tasks of one rule need; pickled into their arguments."""

    rule: Rule
    file: str | None
    seed: int | None
    keep: tuple[str, ...]
    schemas: dict[str, pa.Schema]
    manifest: Any
    unit: list[str]
    parts: int
    episodes: BlockScan
    steps: BlockScan | None
    routed: bool  # steps are routed through the (episode id -> partition) table
    key: str
    batch_rows: int

    def plan(self) -> Any:
        return plan_rule(_Schemas(self.schemas, self.manifest), self.rule, file=self.file, seed=self.seed,
                         keep_columns=self.keep)


#: Per worker process: the plan and the steps router of the last job, by its key.
_CACHE: dict[str, Any] = {}


def _cached(job: _RuleJob, what: str, make: Any) -> Any:
    key = f"{job.key}:{what}"
    if key not in _CACHE:
        if not any(k.startswith(job.key) for k in _CACHE):
            _CACHE.clear()
        _CACHE[key] = make()
    return _CACHE[key]


def _episode_block(job: _RuleJob, part: int, row_group: int) -> tuple[Any, ...]:
    """Task: one row group of the episodes -> its rows per partition, the routing table
    (episode id, partition, the columns features read), and (decoded bytes, error)."""
    budget = DecodeBudget(f"{job.episodes.name}: the episodes table", job.episodes.stored)
    try:
        batches = list(job.episodes.read_block(part, row_group, budget, 65_536))
        schema = batches[0].schema if batches else pa.schema([job.episodes.schema.field(c)
                                                             for c in job.episodes.selected or []])
        table = pa.Table.from_batches(batches, schema)
        routes = _routes(table, job.unit, job.parts)
        pieces = _split(table, routes, job.parts)
        routing = None
        if job.routed:
            plan = _cached(job, "plan", job.plan)
            visible = sorted({c for f in plan.features for c in f.episode_columns.values()})
            routing = table.select(["episode_id", *visible]).append_column("_partition", pa.array(routes))
        return (*pieces, routing, (budget.used, None))
    except RolloutCardError as exc:
        return (*([None] * job.parts), None, (budget.used, error_row(exc)))


def block_partials(scan: BlockScan, stream: FeatureStream, part: int, row_group: int, budget: DecodeBudget,
                   batch_rows: int) -> Iterator[tuple[int, int, pa.Table]]:
    """(batch, feature, partial) of one steps row group, batches numbered as the local scan's."""
    n = 0
    for batch in scan.read_block(part, row_group, budget, batch_rows):
        if batch.num_rows == 0:
            continue
        for i, partial in enumerate(stream.partials(batch)):
            if partial is not None:
                yield n, i, partial
        n += 1


def _step_blocks(job: _RuleJob, blocks: list[tuple[int, int, int]], *routing: pa.Table) -> tuple[Any, ...]:
    """Task: a run of steps row groups -> per partition, the (block, batch, feature, partial)
    of its episodes; and per block (block, decoded bytes, error)."""
    plan = _cached(job, "plan", job.plan)
    table = lookup = None
    if routing:
        table = _cached(job, "routing", lambda: pa.concat_tables(routing))
        lookup = _cached(job, "lookup", lambda: dict(zip(table.column("episode_id").to_pylist(),
                                                          table.column("_partition").to_pylist(), strict=True)))
    stream = FeatureStream(plan.features, table, numbered=False)  # only its kernel is used here
    out: list[list[tuple[int, int, int, pa.Table]]] = [[] for _ in range(job.parts)]
    done: list[tuple[int, int, Any]] = []
    assert job.steps is not None
    for block, part, row_group in blocks:
        budget = DecodeBudget(f"{job.steps.name}: the steps table", job.steps.stored)
        try:
            for n, i, partial in block_partials(job.steps, stream, part, row_group, budget, job.batch_rows):
                for p, piece in _route_partial(job, partial, lookup):
                    out[p].append((block, n, i, piece))
            done.append((block, budget.used, None))
        except RolloutCardError as exc:
            done.append((block, budget.used, error_row(exc)))
            break
    return (*out, done)


def _route_partial(job: _RuleJob, partial: pa.Table, routing: dict[str, int] | None) -> list[tuple[int, pa.Table]]:
    if routing is None:
        routes = _routes(partial, ["episode_id"], job.parts)
    else:
        ids = partial.column("episode_id").to_pylist()
        routes = np.fromiter((routing.get(e, -1) for e in ids), dtype=np.int64, count=len(ids))
        if (routes < 0).any():  # steps of no episode: no partition holds them
            partial, routes = partial.filter(pa.array(routes >= 0)), routes[routes >= 0]
    return [(p, piece) for p, piece in enumerate(_split(partial, routes, job.parts)) if piece.num_rows]


def _score_partition(job: _RuleJob, p: int, n_episode_blocks: int, *pieces: Any) -> Any:
    """Task: partition p's episodes and partials -> its PartitionRun (or an error row)."""
    plan = _cached(job, "plan", job.plan)
    episodes = [t for t in pieces[:n_episode_blocks] if t is not None]
    try:
        table = pa.concat_tables(episodes) if episodes else pa.schema(
            [job.episodes.schema.field(c) for c in plan.episode_columns]).empty_table()
        if plan.features:
            stream = FeatureStream(plan.features, table, numbered=False)
            partials = sorted((item for chunk in pieces[n_episode_blocks:] for item in chunk),
                              key=lambda item: (item[0], item[1]))
            at = 0
            while at < len(partials):
                block, batch = partials[at][0], partials[at][1]
                row: list[pa.Table | None] = [None] * len(plan.features)
                while at < len(partials) and partials[at][:2] == (block, batch):
                    row[partials[at][2]] = partials[at][3]
                    at += 1
                stream.add(row)
            table = attach_features(table, stream.result(), plan.features)
        return run_partition(plan, table, pair_units=job.unit)
    except RolloutCardError as exc:
        return error_row(exc)


class PartitionedRule:
    """One rule scored on the workers of `engine` (a RayEngine); `run()` -> RuleRun, or None
    when a partition raised (the caller then runs the rule on the driver for its error)."""

    def __init__(self, engine: Any, rule: Rule, *, file: str | None, seed: int | None,
                 keep: tuple[str, ...], unit: list[str]):
        self.engine, self.rule, self.file, self.seed, self.keep, self.unit = engine, rule, file, seed, keep, unit

    def run(self) -> RuleRun | None:
        engine, card, ray = self.engine, self.engine.card, self.engine.ray
        plan = plan_rule(card, self.rule, file=self.file, seed=self.seed, keep_columns=self.keep)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        parts = PARTITIONS_PER_CPU * cpus
        visible = {c for f in plan.features for c in f.episode_columns.values()}
        routed = bool(plan.features) and (self.unit != ["episode_id"] or bool(visible))
        episodes = engine.block_scan(card, "episodes", plan.episode_columns)
        steps = engine.block_scan(card, "steps", step_columns(plan.features), encoded=True) if plan.features else None
        job = _RuleJob(self.rule, self.file, self.seed, self.keep,
                       {"episodes": card.schema("episodes"), "steps": card.schema("steps")},
                       card.manifest, self.unit, parts, episodes, steps, routed, os.urandom(8).hex(),
                       engine.batch_rows)
        options = {"max_retries": engine.max_retries}
        episode_task = ray.remote(num_returns=parts + 2, **options)(_episode_block)
        e_refs = [episode_task.remote(job, part, rg) for part, rg in episodes.blocks()]
        step_refs: list[Any] = []
        if steps is not None:
            descriptors = [(i, part, rg) for i, (part, rg) in enumerate(steps.blocks())]
            engine.stats["blocks"] += len(descriptors)
            tasks = max(1, min(len(descriptors), engine.tasks_per_cpu * cpus))
            runs = [chunk.tolist() for chunk in np.array_split(np.arange(len(descriptors)), tasks) if len(chunk)]
            step_task = ray.remote(num_returns=parts + 1, **options)(_step_blocks)
            routing = [refs[parts] for refs in e_refs] if routed else []
            step_refs = [step_task.remote(job, [descriptors[i] for i in run], *routing) for run in runs]
        score_task = ray.remote(**options)(_score_partition)
        score_refs = [score_task.remote(job, p, len(e_refs), *[refs[p] for refs in e_refs],
                                        *[refs[p] for refs in step_refs]) for p in range(parts)]
        # Block errors and the decode budget first, in table order (episodes, then steps), as locally.
        self._check("episodes", episodes.stored, [(i, *meta) for i, meta in
                                                  enumerate(engine.get([refs[-1] for refs in e_refs]))])
        if step_refs:
            self._check("steps", steps.stored, sorted(item for meta in engine.get([refs[-1] for refs in step_refs])
                                                      for item in meta))
        results = engine.get(score_refs)
        if any(isinstance(r, dict) for r in results):
            return None
        engine.stats["bytes_to_driver"] += sum(len(pickle.dumps(r)) for r in results)
        engine.stats["partitions"] = engine.stats.get("partitions", 0) + parts
        return merge_partitions(plan, results)

    def _check(self, table: str, stored: int, blocks: list[tuple[int, int, Any]]) -> None:
        budget = DecodeBudget(f"{self.engine.card.path}: the {table} table", stored)
        for _, used, error in blocks:
            if error is not None:
                self.engine.raise_remote(error)
            self.engine.charge(budget, used)
