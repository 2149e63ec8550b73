"""`validate(card) -> Report`: every check on a card directory or packed file, one report.

Checks run cheap to expensive (design brief, section 7) and never stop at the first
problem: each is a small function over a shared `CheckContext`, and a check that
cannot run says why instead of hiding the others. The integrity verdicts (sizes,
sha256, root digest) need only the layout and the inventory section of card.json;
they run in a background thread while the tables are checked. An unexpected
exception inside a check is a bug in the validator: it becomes an `internal-error`
finding (outcome "internal-error", exit code 2), never a verdict on the card.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import progress
from .._threads import Background
from ..errors import CardFormatError, EngineError, RuleError, UnsafeArchiveError
from ..io.fs_source import card_location, is_uri
from ..io.reader import CardSource, DirectorySource
from . import coverage, inventory, layout, manifest, parquet, rules, semantics, signature
from .context import CheckContext, SkipCheck
from .report import (
    CODES,
    CheckRun,
    Finding,
    Findings,
    Report,
    Severity,
    build_report,
    check_run,
    render_json,
    render_text,
)

__all__ = ["CHECKS", "CODES", "Finding", "Report", "Severity", "render_json", "render_text", "validate"]

Check = Callable[[CheckContext], None]

#: (name, function, runs in the background) in the order the report lists them.
CHECKS: tuple[tuple[str, Check, bool], ...] = (
    ("layout.members", layout.check_members, False),
    ("manifest.parse", manifest.check_manifest, False),
    ("manifest.scope", manifest.check_scope, False),
    ("inventory.references", inventory.check_references, False),
    ("inventory.files", inventory.check_files, False),
    ("inventory.digests", inventory.check_digests, True),
    ("parquet.tables", parquet.check_tables, False),
    ("semantics.episodes", semantics.check_episodes, False),
    ("semantics.steps", semantics.check_steps, False),
    ("coverage.plan", coverage.check_plan, False),
    ("coverage.drops", coverage.check_drops, False),
    ("rules.files", rules.check_rule_files, False),
    ("rules.replay", rules.check_replay, False),
    ("signature", signature.check_signature, False),
)


def _run(check: Check, ctx: CheckContext, findings: Findings, name: str) -> CheckRun:
    """Run one check into `findings`; skips and crashes become its status, never an exception."""
    try:
        with ctx.collecting(findings), progress.task(f"validate: {name}"):
            check(ctx)
    except SkipCheck as skip:
        # A check that found problems before it had to stop failed (or warned); only a
        # check that stopped with nothing found is "skipped". The note says what was not checked.
        status = findings.status()
        return check_run(name, "skipped" if status == "passed" else status, str(skip))
    except UnsafeArchiveError as exc:
        _archive_unsafe(findings, exc)
    except EngineError:
        raise  # the engine could not run (a Ray job failed after retries): no verdict at all
    except Exception as exc:  # noqa: BLE001 - a bug in a check must not pass for a verdict
        if os.environ.get("RCARD_DEBUG"):
            raise
        findings.add("internal-error", f"check {name} failed: {type(exc).__name__}: {str(exc)[:160]} (a bug in "
                     "rollout-cards, not in the card; rerun with RCARD_DEBUG=1 and report it)")
        return check_run(name, "crashed", type(exc).__name__)
    return check_run(name, findings.status())


def _source(card: str | os.PathLike[str] | CardSource) -> tuple[CardSource, bool]:
    """The source to validate and whether we opened it (and must close it)."""
    if not isinstance(card, (str, os.PathLike)):
        return card, False  # any CardSource, e.g. io.fs_source.FileSystemSource
    location = card_location(card)
    if not isinstance(location, Path):
        if not location.is_card() and not any(True for _ in location.entries()):
            raise CardFormatError(f"{location.name} does not exist")
        return location, False
    path = location
    if path.is_dir():
        return DirectorySource(path), False
    if not path.exists():
        raise CardFormatError(f"{path} does not exist")
    try:
        from ..io.archive import ArchiveSource
    except ModuleNotFoundError:
        from ..io import archive_source

        return archive_source(path), True  # raises: this version reads directories only
    return ArchiveSource(path, strict=False), True


def validate(
    card: str | os.PathLike[str] | CardSource,
    *,
    replay: bool = True,
    max_findings: int | None = None,
    strict: bool = False,
    public_key: str | os.PathLike[str] | None = None,
    signature: str | os.PathLike[str] | None = None,
    engine: str = "local",
    address: str | None = None,
) -> Report:
    """Validate a card directory, a packed card file, or any `CardSource`; never raises for a bad card.

    `replay` recomputes rules' reported numbers (when the rule engine is available);
    `max_findings` lists at most that many findings per code (the rest are counted);
    `strict` makes warnings invalidate the card; `public_key` also verifies the detached
    `signature` (default `<card>.sig`). `engine` "ray" hashes the files and replays the rules'
    step features on Ray (the cluster at `address`, else a local Ray), with the same findings.
    Raises CardFormatError only when `card` does not exist or cannot be opened as a card at
    all; EngineError when the engine cannot run.
    """
    if engine not in ("local", "ray"):
        raise RuleError(f"unknown engine {engine!r}; use local or ray", key="engine")
    if max_findings is not None and max_findings < 1:
        raise ValueError("max_findings must be at least 1")
    try:
        source, opened = _source(card)
    except (UnsafeArchiveError, CardFormatError) as exc:
        if isinstance(card, (str, os.PathLike)) and (is_uri(os.fspath(card)) or not Path(card).exists()):
            raise
        # Even a package that cannot be opened at all gets a report (JSON consumers rely on one).
        findings = Findings(max_findings)
        _archive_unsafe(findings, exc)
        run = check_run("layout.members", "failed", "the package could not be opened")
        skipped = [check_run(n, "skipped", "the package could not be opened")
                   for n, _, _ in CHECKS[1:]]
        return build_report(str(card), findings, [run, *skipped], card_id=None, strict=strict,
                            max_findings=max_findings)
    try:
        if engine == "local":
            return _validate(source, replay=replay, max_findings=max_findings, strict=strict,
                             public_key=public_key, signature=signature)
        from ..scale.ray_engine import RayChecks, ray_session  # the optional extra, when asked for

        with ray_session(address):
            return _validate(source, replay=replay, max_findings=max_findings, strict=strict,
                             public_key=public_key, signature=signature, engine=RayChecks(source))
    finally:
        if opened:
            close = getattr(source, "close", None)
            if close is not None:
                close()


def _validate(
    source: CardSource,
    *,
    replay: bool,
    max_findings: int | None,
    strict: bool,
    public_key: str | os.PathLike[str] | None = None,
    signature: str | os.PathLike[str] | None = None,
    engine: Any = None,
) -> Report:
    findings = Findings(max_findings)
    ctx = CheckContext(
        source=source,
        replay=replay,
        engine=engine,
        public_key=None if public_key is None else str(public_key),
        signature=None if signature is None else str(signature),
    )
    _archive_problems(source, findings)
    # A daemon thread, not an executor (whose import and logging cost a small validate ~10 M
    # instructions): an EngineError of a check reaches the caller without waiting for the hashing.
    results: list[tuple[str, Findings, CheckRun | Background]] = []
    for name, check, in_background in CHECKS:
        own = Findings(max_findings)
        if in_background:
            results.append((name, own, Background(_run, check, ctx, own, name, name="rcard-validate")))
        else:
            results.append((name, own, _run(check, ctx, own, name)))
    runs = []
    for _, own, run in results:
        runs.append(run.result() if isinstance(run, Background) else run)
        findings.merge(own)
    card_id = ctx.manifest.id if ctx.manifest is not None else None
    return build_report(source.name, findings, runs, card_id=card_id, strict=strict, max_findings=max_findings)


# Archive rules that the inventory checks report themselves, from the members as stored.
_ARCHIVE_RULES_COVERED = frozenset({"extra-member", "size-mismatch", "missing-member"})


def _archive_unsafe(findings: Findings, exc: UnsafeArchiveError) -> None:
    message, member = str(exc), getattr(exc, "member", None)
    if member and message.startswith(f"{member}: "):
        message = message[len(member) + 2:]
    # a Git LFS pointer in place of the archive (io.ustar) says its own fix, a pull: nothing to repack
    fix = "" if exc.reason.startswith("is a Git LFS pointer") else \
        "; the packed card cannot be read safely: repack it with `rcard pack`"
    findings.add("archive-unsafe", f"{message}{fix}", file=member)


def _archive_problems(source: CardSource, findings: Findings) -> None:
    problems = getattr(source, "problems", ())
    # The inventory checks see regular files only: a directory member that holds no file of
    # the inventory (which every reader refuses as extra-member) is reported here.
    dirs = {e.path for e in source.entries() if e.kind == "dir"} if problems else set()
    for problem in problems:
        rule, member = getattr(problem, "rule", None), getattr(problem, "member", None)
        if rule not in _ARCHIVE_RULES_COVERED or member in dirs:
            _archive_unsafe(findings, problem)
