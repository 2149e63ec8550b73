"""The Ray engine: step features computed by Ray Data workers, block by block, with the kernels
of the local engine; everything after the features runs on the driver as locally.

    with ray_session(address) as session:
        engine = RayEngine(card)          # starts hashing the steps parts on the workers
        apply_rule(card, rule, step_features=engine.features)
        engine.finish()                   # digests recorded; IntegrityError on a mismatch

A block is one Parquet row group of the steps table. The driver lists the blocks (footers
only) and hands Ray Data a dataset of block descriptors, cut into a few tasks per CPU (runs of
consecutive row groups); `map_batches` reads each block on a
worker through the card's pyarrow filesystem (projection pushed into the scan; the filter on
decoded batches, under the local reader's decode budget and checks, `io.reader.BlockScan`),
reduces each batch to per-episode partials (`FeatureStream.partials`) and returns them as
Arrow IPC. The driver merges them in table order (`FeatureStream.add`, `.result`), so float sums are
added in the order the local engine adds them: the local scan cuts batches at the same row
groups, and the JSON of a rescore is identical field for field. What reaches the driver is
one partial row per (episode, block) an episode touches, never the steps.

A rule error raised on a worker comes back as data (its class, message and place) and is
raised on the driver as that error; a task whose worker dies is re-run by Ray, and
a job that still fails is one EngineError — never a partial result.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import DecodeLimitError, EngineError, RolloutCardError
from ..io.decode import DECODE_FLOOR, DECODE_RATIO, DecodeBudget
from ..io.hashing import sha256_stream
from ..io.reader import BlockScan, Card
from ..model.rule import Rule
from ..rules.engine import apply_rule
from ..rules.features import CompiledFeature, FeatureStream, compile_features, step_columns
from ..rules.results import RuleRun
from .packed import worker_filesystem
from .ray_partitions import PartitionedRule, block_partials, split_unit
from .remote_errors import error_row, raise_remote

__all__ = ["EXTRA", "RayChecks", "RayEngine", "import_ray", "ray_session"]

#: What to install for this engine (named in the error when Ray is missing).
EXTRA = "pip install 'rollout-cards[ray]'"
#: Times Ray re-runs a hashing task whose worker died before the job fails (Ray Data's map
#: tasks are re-run on worker failure by Ray Data's own policy).
MAX_RETRIES = 3
#: Ray Data tasks per CPU of the cluster (each reads a run of consecutive row groups).
TASKS_PER_CPU = 4
#: Rows of a batch of steps, as in the local engine (`features.compute_features`).
BATCH_ROWS = 262_144


def import_ray() -> Any:
    """The `ray` module with Ray Data, or EngineError naming the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise EngineError(
            f"--engine ray needs Ray Data, which is not installed ({exc.name or exc}): {EXTRA}"
        ) from None
    return ray


@contextlib.contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """A Ray session: the one already initialized in this process (left running), the cluster at
    `address`, or a local one with this machine's cores (shut down on exit); quiet logs."""
    ray = import_ray()
    if ray.is_initialized():
        with driver_output_to_stderr():
            yield ray
        return
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                               "logging_level": logging.ERROR}
    try:
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise EngineError(f"cannot start {where}: {str(exc).splitlines()[0][:200]}") from None
    with driver_output_to_stderr():  # around shutdown too: it prints what was held back
        try:
            quiet_data_context(ray)
            yield ray
        finally:
            ray.shutdown()


@contextlib.contextmanager
def driver_output_to_stderr() -> Iterator[None]:
    """Every line Ray's driver prints on its own goes to stderr while this runs.

    Ray's driver prints the error messages the cluster pushes to it (`(raylet) Task ... failed.
    There are N retries remaining`, a worker's death) on sys.stdout from a thread of its own,
    whatever `log_to_driver` says, and so interleaves them with a command's output (a rescore's
    JSON). All of them go through `ray._private.worker.print_worker_logs(data, file)`, which is
    private: when a Ray release moves it, nothing is changed here and tests/scale catches it.
    """
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        yield
        return
    printer = getattr(ray_worker, "print_worker_logs", None)
    if printer is None or getattr(printer, "_to_stderr", False):  # absent, or already routed
        yield
        return

    def to_stderr(data: Any, print_file: Any = None, *args: Any, **kwargs: Any) -> Any:
        return printer(data, sys.stderr, *args, **kwargs)

    to_stderr._to_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_worker_logs = to_stderr
    try:
        yield
    finally:
        ray_worker.print_worker_logs = printer


def quiet_data_context(ray: Any) -> None:
    """Ray Data without progress bars; outputs in input order (merges go in table order)."""
    for name in ("ray", "ray.data", "ray.data._internal"):
        logging.getLogger(name).setLevel(logging.ERROR)
    ctx = ray.data.DataContext.get_current()
    for name, value in (("enable_progress_bars", False), ("print_on_execution_start", False),
                        ("enable_operator_progress_bars", False)):
        if hasattr(ctx, name):
            setattr(ctx, name, value)
    ctx.execution_options.preserve_order = True


# ----------------------------------------------------------------------------- worker side

#: Per worker process: the feature streams of the last job (their episode-column joiner is
#: O(episodes) to build), by the job's key.
_STREAMS: dict[str, Any] = {}


@dataclass(frozen=True)
class _Job:
    """What every block task of one rule needs; pickled once into the task arguments."""

    scan: BlockScan
    features: dict[str, Any]  # the rule's Feature models, compiled on the worker
    steps_schema: pa.Schema
    episodes_schema: pa.Schema
    file: str | None
    rule: str
    key: str  # one per job: which cached stream is this job's
    episodes: Any = None  # ObjectRef of the episode columns features read, or None
    batch_rows: int = BATCH_ROWS


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


_OUT = pa.schema([("block", pa.int64()), ("batch", pa.int64()), ("feature", pa.int64()),
                  ("partial", pa.large_binary()), ("decoded", pa.int64()), ("kind", pa.string()),
                  ("message", pa.string()), ("attrs", pa.string())])


def _block_partials(descriptors: pa.Table, job: _Job) -> pa.Table:
    """Ray Data map_batches function: block descriptors -> partial rows (or one error row)."""
    import ray

    if job.key not in _STREAMS:
        features = compile_features(job.features, job.steps_schema, file=job.file,
                                    episodes_schema=job.episodes_schema, rule=job.rule)
        episodes = ray.get(job.episodes) if job.episodes is not None else None
        _STREAMS.clear()
        _STREAMS[job.key] = FeatureStream(features, episodes, numbered=False)
    stream = _STREAMS[job.key]  # only its kernel is used here: `partials` keeps no state unnumbered
    rows: dict[str, list[Any]] = {name: [] for name in _OUT.names}

    def add(block: int, batch: int, feature: int, partial: bytes | None, decoded: int,
            error: dict[str, Any] | None = None) -> None:
        values = {"block": block, "batch": batch, "feature": feature, "partial": partial,
                  "decoded": decoded, **(error or {"kind": None, "message": None, "attrs": None})}
        for name, value in values.items():
            rows[name].append(value)

    for block, part, row_group in zip(*(descriptors.column(c).to_pylist()
                                        for c in ("block", "part", "row_group")), strict=True):
        budget = DecodeBudget(f"{job.scan.name}: the steps table", job.scan.stored)
        try:
            for n, i, partial in block_partials(job.scan, stream, part, row_group, budget, job.batch_rows):
                add(block, n, i, _ipc(partial), 0)
            add(block, -1, -1, None, budget.used)  # the block's end and its decoded bytes
        except RolloutCardError as exc:
            add(block, -1, -1, None, 0, error_row(exc))
    return pa.table(rows, schema=_OUT)


def _hash_part(filesystem: pafs.FileSystem, path: str, limit: int | None) -> tuple[str, int]:
    with filesystem.open_input_stream(path) as fh:
        return sha256_stream(fh, limit=limit)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- driver side


def _worker_filesystem(source: Any, rels: list[str]) -> tuple[pafs.FileSystem, str]:
    """A filesystem workers can open for the files `rels` of `source`, and its base path: the
    source's own, or for a packed card the archive's members read in place (`packed.py`)."""
    fs, base = source.filesystem()
    if not isinstance(fs, pafs.PyFileSystem):
        return fs, base
    from ..io.archive import ArchiveSource

    if not isinstance(source, ArchiveSource):
        raise EngineError(f"{source.name}: the ray engine reads card directories, packed cards and URIs "
                          "its workers can open, not this source; unpack or copy it first")
    fs, root = worker_filesystem(source, rels)
    assert root == base, (root, base)  # scans keep the driver's paths
    return fs, base


def _tables(card: Card) -> list[str]:
    return [*card.manifest.tables.episodes.paths, *card.manifest.tables.steps.paths]


def _failed(name: str, exc: BaseException) -> EngineError:
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return EngineError(f"{name}: the Ray job failed, after retries ({first[:200]}); "
                       "no result was computed — rerun, or use --engine local")


@dataclass
class RayEngine:
    """The steps of `card` scanned on the Ray session of this process (see `ray_session`).

    `stats` counts what its jobs moved: blocks read, bytes and rows of partials sent to the
    driver, and the driver's seconds spent decoding and merging them (benchmarks/bench_scale.py).
    """

    card: Card
    #: Rows of a batch of steps, Ray retries of a task whose worker died, tasks per CPU.
    batch_rows = BATCH_ROWS
    max_retries = MAX_RETRIES
    tasks_per_cpu = TASKS_PER_CPU
    stats: dict[str, float] = field(default_factory=lambda: {"blocks": 0, "bytes_to_driver": 0,
                                                             "partial_rows": 0, "merge_seconds": 0.0})

    def __post_init__(self) -> None:
        self.ray = import_ray()
        self.filesystem, base = _worker_filesystem(self.card.source, _tables(self.card))
        self._hashes: dict[str, Any] = {}
        if self.card.verify:
            remote = self.ray.remote(max_retries=MAX_RETRIES)(_hash_part)
            listed = {f.path: f.bytes for f in self.card.manifest.inventory.files}
            for rel in _tables(self.card):
                if rel in listed:  # one byte more than listed: a longer file must not pass as its prefix
                    ref = remote.remote(self.filesystem, f"{base}/{rel}", listed[rel] + 1)
                    self._hashes[rel] = ref
                    # the card's check of this part is the worker's digest: the driver does not
                    # read the part to hash it (unless its check began before this engine)
                    self.card.delegate_digest(rel, functools.partial(self.get, ref))

    def finish(self) -> None:
        """Check the table parts with the workers' digests; IntegrityError on a mismatch."""
        hashes, self._hashes = self._hashes, {}
        for rel in hashes:
            self.card.verify_file(rel)

    def block_scan(self, card: Card, table: str, columns: list[str], *, encoded: bool = False) -> BlockScan:
        """`card.block_scan(...)` through the filesystem the workers open."""
        scan = card.block_scan(table, columns, encoded=encoded)
        if card is not self.card:
            return replace(scan, filesystem=_worker_filesystem(card.source, _tables(card))[0])
        return replace(scan, filesystem=self.filesystem)

    def get(self, refs: Any) -> Any:
        """`ray.get(refs)`; a job that failed after Ray's retries is one EngineError."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as exc:
            raise self._failed(exc) from None

    def raise_remote(self, row: dict[str, Any]) -> None:
        """Raise the error a worker returned; a changed file is named as such, not as undecodable."""
        self.finish()
        raise_remote(row)

    @staticmethod
    def charge(budget: DecodeBudget, used: int) -> None:
        """Add a block's decoded bytes to its table's budget (DecodeLimitError past the limit)."""
        budget.used += used
        if budget.used > budget.limit:
            raise DecodeLimitError(
                f"{budget.name} decodes to more than {budget.limit:,} bytes of text "
                f"({DECODE_RATIO:,} times its stored bytes, plus {DECODE_FLOOR:,}) summed "
                "over its blocks: a decompression bomb; regenerate the file")

    def run_rule(self, rule: Rule, *, file: str | None = None, seed: int | None = None,
                 keep_columns: tuple[str, ...] = (), split: bool = True) -> RuleRun:
        """`apply_rule(card, rule, ...)`: scored and summed per unit on the workers when the
        rule splits by unit (`ray_partitions.split_unit`) and `split`; else, or when a
        partition raised (to raise the local error), step features on the workers and
        scoring on the driver."""
        unit = split_unit(rule) if split else None
        if unit is not None:
            run = PartitionedRule(self, rule, file=file, seed=seed, keep=tuple(keep_columns), unit=unit).run()
            if run is not None:
                self.stats["split_rules"] = self.stats.get("split_rules", 0) + 1
                return run
        self.stats["driver_rules"] = self.stats.get("driver_rules", 0) + 1
        return apply_rule(self.card, rule, file=file, seed=seed, keep_columns=keep_columns,
                          step_features=self.features)

    def _failed(self, exc: BaseException) -> EngineError:
        return _failed(self.card.path, exc)

    def features(self, card: Card, rule: Rule, features: list[CompiledFeature],
                 episodes: pa.Table) -> dict[str, pa.Table]:
        """`features.compute_features(features, card=card, episodes=episodes)`, on Ray."""
        ray = self.ray
        blocks = self.block_scan(card, "steps", step_columns(features), encoded=True)
        descriptors = blocks.blocks()
        visible = {c for f in features for c in f.episode_columns.values()}
        ref = ray.put(episodes.select(["episode_id", *sorted(visible)])) if visible else None
        job = _Job(blocks, dict(rule.features or {}), card.schema("steps"), card.schema("episodes"),
                   features[0].file, rule.rule, os.urandom(8).hex(), ref)
        items = pa.table({"block": list(range(len(descriptors))),
                          "part": [p for p, _ in descriptors], "row_group": [g for _, g in descriptors]})
        merge = FeatureStream(features, episodes, numbered=False)
        budget = DecodeBudget(f"{card.path}: the steps table", blocks.stored)
        self.stats["blocks"] += len(descriptors)
        self._expected = len(descriptors)
        if descriptors:
            # A few tasks per CPU, each over consecutive row groups: one task per row group pays
            # Ray's per-task overhead hundreds of times (4x slower at 20M steps on 2 cores).
            tasks = min(len(descriptors), TASKS_PER_CPU * max(1, int(ray.cluster_resources().get("CPU", 1))))
            dataset = ray.data.from_arrow(items).repartition(tasks).map_batches(
                _block_partials, fn_kwargs={"job": job}, batch_format="pyarrow", batch_size=None)
            try:
                self._merge(dataset, merge, budget)
            except ray.exceptions.RayError as exc:
                raise self._failed(exc) from None
        return merge.result()

    def _merge(self, dataset: Any, merge: FeatureStream, budget: DecodeBudget) -> None:
        """Feed partials to `merge` in (block, batch) order, whatever order blocks arrive in."""
        rows: dict[int, list[dict[str, Any]]] = {}
        done: set[int] = set()
        at = 0  # the next block to merge
        for out in dataset.iter_batches(batch_format="pyarrow", batch_size=None):
            for row in out.to_pylist():
                if row["kind"] is not None:
                    self.raise_remote(row)
                if row["feature"] == -1:  # the end of a block, with its decoded bytes
                    done.add(row["block"])
                    self.charge(budget, row["decoded"])
                else:
                    rows.setdefault(row["block"], []).append(row)
            while at in done:
                self._merge_block(rows.pop(at, []), merge)
                at += 1
        if rows or at != self._expected:
            raise EngineError("the Ray job returned fewer blocks than it was given; no result was computed")

    def _merge_block(self, rows: list[dict[str, Any]], merge: FeatureStream) -> None:
        started = time.perf_counter()
        batches: dict[int, list[pa.Table | None]] = {}
        for row in rows:
            self.stats["bytes_to_driver"] += len(row["partial"])
            partial = pa.ipc.open_stream(row["partial"]).read_all()
            self.stats["partial_rows"] += partial.num_rows
            batches.setdefault(row["batch"], [None] * len(merge.features))[row["feature"]] = partial
        for n in sorted(batches):
            merge.add(batches[n])
        self.stats["merge_seconds"] += time.perf_counter() - started


class RayChecks:
    """The validator's hooks on Ray (`validate.context.CheckContext.engine`): every listed file
    hashed by a task on a worker, replay's step features by `RayEngine`, and the tasks, files
    and failures of the table scans (`validate.ray_tables`)."""

    def __init__(self, source: Any):
        self.ray = import_ray()
        self.source = source
        _worker_filesystem(source, [])  # refused now if the workers cannot open it

    def hash_files(self, rels: list[str]) -> dict[str, tuple[str, int]]:
        """{rel: (sha256, bytes)} of whole files (the validator's digests are not size-capped)."""
        remote = self.remote(_hash_part)
        fs, base = self.files(rels)
        refs = [remote.remote(fs, f"{base}/{rel}", None) for rel in rels]
        return dict(zip(rels, self.get(refs), strict=True))

    def files(self, rels: list[str]) -> tuple[pafs.FileSystem, str]:
        """The filesystem the workers open the files `rels` of the card with, and its base path."""
        return _worker_filesystem(self.source, rels)

    def cpus(self) -> int:
        """The CPUs of the cluster."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def remote(self, function: Any, **options: Any) -> Any:
        """`function` as a Ray task, re-run up to MAX_RETRIES times when its worker dies."""
        return self.ray.remote(max_retries=MAX_RETRIES, **options)(function)

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def get(self, refs: Any) -> Any:
        """`ray.get(refs)`; a job that failed after Ray's retries is one EngineError."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as exc:
            raise _failed(self.source.name, exc) from None

    def step_features(self, card: Card) -> Any:
        return RayEngine(card).features
