"""SWE-bench per-instance `report.json` files: the test results a rule can regrade from.

The harness writes `logs/run_evaluation/<run_id>/<model>/<instance>/report.json`:
`{<instance>: {patch_is_None, patch_exists, patch_successfully_applied, resolved,
tests_status: {FAIL_TO_PASS|PASS_TO_PASS|FAIL_TO_FAIL|PASS_TO_FAIL: {success: [...],
failure: [...]}}}}`. `TestColumns` adds, to the instance's episode,

| column | what |
|---|---|
| `score.f2p_success`, `score.f2p_failure` | FAIL_TO_PASS tests that passed / failed after the patch (counts) |
| `score.p2p_success`, `score.p2p_failure` | PASS_TO_PASS tests that still pass / now fail |
| `score.f2f_success`, `score.f2f_failure`, `score.p2f_success`, `score.p2f_failure` | FAIL_TO_FAIL and PASS_TO_FAIL, the same |
| `score.report_resolved` | the instance report's own `resolved` |
| `meta.tests.<CATEGORY>.<success or failure>` | the test ids, JSON text (a list) |
| `meta.patch_is_none`, `meta.patch_exists`, `meta.patch_applied` | the report's patch flags |

`expand_sources` finds, in directory sources, the run report(s) (top-level `*.json` naming a run
report key, or
`results/results.json` of an experiments-style submission directory), the predictions
(`preds.json`, `*.jsonl`) and every `report.json` below (links refused).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ImporterError, SourceFormatError
from .base import ImportRequest
from .json_stream import JsonStream
from .session import ImportSession
from .source_dir import children
from .steps import StepBuffer, json_text

__all__ = ["CATEGORIES", "TestColumns", "expand_sources", "report_from_instances"]

#: Harness category -> column stem.
CATEGORIES = {"FAIL_TO_PASS": "f2p", "PASS_TO_PASS": "p2p", "FAIL_TO_FAIL": "f2f", "PASS_TO_FAIL": "p2f"}
_MAX_DEPTH = 6
_MAX_REPORT_CHARS = 256 * 1024 * 1024
_SELECTOR_IDS = 50
#: Instance report flags -> columns. `infra_failure` (grading.py @7a21e05, 5.x): the harness's advisory
#: classification of an unapplied patch's failure as the environment's; `resolved` stays false.
_FLAGS = (("patch_is_None", "meta.patch_is_none"), ("patch_exists", "meta.patch_exists"),
          ("patch_successfully_applied", "meta.patch_applied"), ("resolved", "score.report_resolved"),
          ("infra_failure", "meta.infra_failure"))
_KNOWN = frozenset({key for key, _ in _FLAGS} | {"tests_status", "none", "infra_failure_reason"})


def _is_predictions(name: str) -> bool:
    return name.endswith(".jsonl") or name.startswith(("preds", "all_preds"))


def expand_sources(
    request: ImportRequest,
) -> tuple[list[tuple[Path, str | None]], list[Path], dict[str, Path], list[Path]]:
    """(run reports with their URLs, prediction files, instance id -> report.json, other JSON files
    of directory sources that name no run report key: not read) of the sources."""
    reports: list[tuple[Path, str | None]] = []
    predictions: list[Path] = []
    instance: dict[str, Path] = {}
    other: list[Path] = []
    for index, path in enumerate(request.sources):
        url = request.url(index)
        if not path.is_dir():
            if path.name == "report.json":
                _add_instance(instance, path)
            elif _is_predictions(path.name):
                predictions.append(path)
            else:
                reports.append((path, url))
            continue
        _refuse_a_tree_of_submissions(path)
        for name, p, is_dir in children(path):
            if is_dir and name == "results" and any(n == "results.json" and not d for n, _, d in children(p)):
                reports.append((p / "results.json", url))  # an experiments-style submission directory
            elif is_dir:
                _walk(p, instance, 1)
            elif name == "report.json":
                _add_instance(instance, p)
            elif name == "per_instance_details.json":
                reports.insert(0, (p, url))  # a submission's outcomes (experiments repository)
            elif name.endswith(".json") and not _is_predictions(name):
                if _names_a_report_key(p):
                    reports.append((p, url))
                else:
                    other.append(p)
            elif _is_predictions(name) and name.endswith((".json", ".jsonl")):
                predictions.append(p)
    details = {p.parent for p, _ in reports if p.name == "per_instance_details.json"}
    # a submission with both: per_instance_details.json lists every instance explicitly; results.json
    # leaves the unresolved ones implicit, so the details are the outcomes read
    reports = [(p, u) for p, u in reports if not (p.name == "results.json" and p.parent.parent in details)]
    if not reports and not instance:
        raise _nothing_found(request.sources, predictions, other)
    if instance and len(reports) > 1:
        raise ImporterError("per-instance report.json files were given with several run reports; they are keyed by "
                            "instance only, so import each run with its own logs")
    return reports, predictions, instance, other


#: Keys of a harness run report (every version): one of them precedes any long list in the file.
_REPORT_KEYS = (b'"schema_version"', b'"total_instances"', b'"submitted_instances"', b'"completed_ids"',
                b'"submitted_ids"', b'"resolved_ids"', b'"error_ids"')


def _names_a_report_key(path: Path) -> bool:
    """Whether a JSON file found in a directory names a run report key in its first 64 KiB; other
    JSON beside a run (a tool's config.json, metadata) is not a report and is left unread."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64 << 10)
    except OSError as exc:
        raise SourceFormatError(f"cannot be read: {exc.strerror or exc}", file=str(path)) from None
    return any(key in head for key in _REPORT_KEYS)


def _refuse_a_tree_of_submissions(directory: Path) -> None:
    """A directory above experiments-style submissions (the repository's evaluation/<split>/) is
    refused by name: walked as one run, its submissions' logs would collide instance by instance."""
    names = {n for n, _p, _d in children(directory)}
    if "per_instance_details.json" in names or "results" in names:
        return  # a submission itself
    submissions = _submissions_below(directory, 3)
    if submissions:
        raise SourceFormatError(
            f"is not a submission but holds experiments-style submission directories below it ({len(submissions)}, "
            f"e.g. {submissions[0]}), each with its own outcomes; import one submission directory at a time",
            file=str(directory))


def _nothing_found(sources: tuple[Path, ...], predictions: list[Path], other: list[Path]) -> SourceFormatError:
    """The error for sources without any outcome, saying what to give instead."""
    first = sources[0]
    unread = f" ({', '.join(p.name for p in other[:5])}: JSON that names no run report key)" if other else ""
    what = ("holds predictions only (preds.json / *.jsonl), which carry no outcome" if predictions else
            "holds no SWE-bench run report (<model>.<run_id>.json) and no instance report.json")
    return SourceFormatError(
        f"{what}{unread}; give the harness's run report <model>.<run_id>.json (with --predictions) or its "
        "logs/run_evaluation/<run_id>/ directory, or an experiments submission directory (results/results.json)",
        file=str(first))


def _submissions_below(directory: Path, depth: int) -> list[Path]:
    """Experiments-style submission directories (results/results.json or per_instance_details.json)
    at most `depth` levels below `directory`."""
    found = []
    for _name, p, is_dir in children(directory):
        if not is_dir:
            continue
        names = {n for n, _p, _d in children(p)}
        if "per_instance_details.json" in names or ("results" in names and (p / "results" / "results.json").is_file()):
            found.append(p)
        elif depth > 1:
            found += _submissions_below(p, depth - 1)
    return found


def _walk(directory: Path, found: dict[str, Path], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    for name, p, is_dir in children(directory):
        if is_dir:
            _walk(p, found, depth + 1)
        elif name == "report.json":
            _add_instance(found, p)


def _add_instance(found: dict[str, Path], path: Path) -> None:
    iid = path.parent.name
    if iid in found:
        raise SourceFormatError(f"is a second report.json for instance {iid} (the first: {found[iid]})", file=str(path))
    found[iid] = path


def report_from_instances(reports: dict[str, Path], patches: dict[str, tuple[str | None, str]]) -> dict[str, Any]:
    """A run report rebuilt from the instance reports alone (no `<model>.<run_id>.json` among the
    sources), with make_run_report's lists (reporting.py @7a21e05): of the submitted instances (the
    predictions', else those with a report), an empty patch is empty_patch (without predictions: a
    report whose patch_is_None / `none` is true); one with a report.json is
    completed, resolved or unresolved as it says; one without is error. Marked `_rebuilt`: the
    harness's own numbers are not in the sources, so nothing is reported from it."""
    submitted = sorted(patches) if patches else sorted(reports)
    lists: dict[str, list[str]] = {n: [] for n in ("submitted_ids", "completed_ids", "resolved_ids",
                                                    "unresolved_ids", "empty_patch_ids", "error_ids")}
    for iid in submitted:
        lists["submitted_ids"].append(iid)
        if patches and not patches[iid][1]:
            lists["empty_patch_ids"].append(iid)
            continue
        path = reports.get(iid)
        if path is None:
            lists["error_ids"].append(iid)
            continue
        doc = _read_report(path, iid)
        if not patches and True in (doc[iid].get("patch_is_None"), doc[iid].get("none")):
            # without the predictions, the report's own flag (2.0-2.1: `none`) says the patch was None,
            # which make_run_report counts as empty_patch before it looks for a report
            lists["empty_patch_ids"].append(iid)
            continue
        lists["completed_ids"].append(iid)
        resolved = doc[iid].get("resolved")
        if type(resolved) is not bool:
            raise SourceFormatError(f"resolved is {resolved!r}, not true or false", file=str(path), record=iid)
        lists["resolved_ids" if resolved else "unresolved_ids"].append(iid)
    return {"schema_version": 2, **lists, "_rebuilt": True}


def _read_report(path: Path, iid: str) -> dict[str, Any]:
    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path), max_value_chars=_MAX_REPORT_CHARS)
        stream.record = iid
        doc = stream.read_value()
        stream.end()
    if not isinstance(doc, dict) or not isinstance(doc.get(iid), dict):
        raise SourceFormatError(f"is not a SWE-bench instance report keyed by {iid}", file=str(path), record=iid)
    return doc


class TestColumns:
    """Adds the instance reports' test results to the episodes (see the module table)."""

    def __init__(self, reports: dict[str, Path]):
        self.reports = reports
        self.used: set[str] = set()
        self.missing: list[tuple[str, str]] = []  # (agent, instance) evaluated but without a report
        self.disagree: list[str] = []
        self.read = 0
        self.none_key = 0

    def add(self, session: ImportSession, row: dict[str, Any], steps: StepBuffer, resolved_in_run: bool) -> None:
        if not self.reports:
            return
        iid = row["task_id"]
        path = self.reports.get(iid)
        if path is None:
            if row["status"] != "skipped":
                self.missing.append((row["agent"], iid))
            return
        session.add_source(path, "swe-bench-instance-report")
        self.used.add(iid)
        report = _read_report(path, iid)[iid]
        where = StepBuffer(steps.episode_id, file=str(path), record=iid)
        for key, column in _FLAGS:
            value = report.get(key)
            if value is not None and type(value) is not bool:
                raise where.error(f"{key} is {value!r}, not true or false")
            if value is not None or key != "infra_failure":  # a 5.x column only where the report has it
                row[column] = value
        if report.get("none") is True:
            # grading.py @v2.0.0-v2.1.x set "none" (not patch_is_None) for a prediction without a patch
            row["meta.patch_is_none"] = True
            self.none_key += 1
        reason = report.get("infra_failure_reason")
        if reason is not None and not isinstance(reason, str):
            raise where.error(f"infra_failure_reason is {reason!r}, not text")
        if reason is not None:
            row["meta.infra_failure_reason"] = reason
        other = {k: v for k, v in report.items() if k not in _KNOWN}
        if other:  # fields of other harness versions or tools writing this shape: kept as written
            row["meta.instance_report_other"] = json_text(other)
        status = report.get("tests_status")
        if status is not None:
            if not isinstance(status, dict):
                raise where.error("tests_status is not an object")
            for category, stem in CATEGORIES.items():
                outcome = status.get(category, {"success": [], "failure": []})
                if not isinstance(outcome, dict):
                    raise where.error(f"tests_status.{category} is not an object")
                for result in ("success", "failure"):
                    ids = outcome.get(result, [])
                    if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
                        raise where.error(f"tests_status.{category}.{result} is not a list of test ids")
                    row[f"score.{stem}_{result}"] = len(ids)
                    row[f"meta.tests.{category}.{result}"] = json_text(ids)
            unknown = sorted(set(status) - set(CATEGORIES))
            if unknown:
                row["meta.tests_status_other"] = json_text({k: status[k] for k in unknown})
        if report.get("resolved") is not None and report["resolved"] != resolved_in_run:
            self.disagree.append(iid)
        self.read += 1

    def declare(self, session: ImportSession) -> None:
        if not self.reports:
            return
        unused = sorted(set(self.reports) - self.used)
        if unused:
            session.note(f"{len(unused)} report.json file(s) are for instances the run report does not name: "
                         + ", ".join(unused[:5]))
        if self.none_key:
            session.note(f"{self.none_key} instance report(s) mark a missing patch with 'none' (SWE-bench 2.0-2.1 "
                         "grading.py) rather than patch_is_None: meta.patch_is_none is true for them")
        if self.disagree:
            session.note(f"{len(self.disagree)} instance report(s) disagree with the run report on resolved "
                         f"({', '.join(self.disagree[:5])}); score.resolved follows the run report, "
                         "score.report_resolved the instance report")
        if self.missing and self.read:
            def q(s: str) -> str:
                return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
            session.add_drop(
                target="episodes.score.f2p_success", action="unobserved", declaration="source_missing",
                loss_class="missing_instance_report",
                reason=f"{len(self.missing)} evaluated instance(s) have no report.json among the sources, so their "
                "per-test results (score.f2p_*, p2p_*, f2f_*, p2f_*, meta.tests.*) are null: "
                + ", ".join(i for _, i in self.missing[:5]),
                selector=" or ".join(f"(agent == {q(a)} and task_id == {q(i)})" for a, i in self.missing)
                if len(self.missing) <= _SELECTOR_IDS else None,
                count=len(self.missing),
            )
