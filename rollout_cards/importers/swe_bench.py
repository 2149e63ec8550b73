"""SWE-bench harness reports (`schema_version` 2) to a rollout card.

One episode per instance named in the report (`submitted_ids`, `incomplete_ids` and
every outcome list), `task_id` = instance id, `episode_id` = `<agent>/<instance>`:

| report lists the id in            | status    | score.resolved | score.empty_patch |
|-----------------------------------|-----------|----------------|-------------------|
| `error_ids`                       | error     | in resolved_ids | in empty_patch_ids |
| `incomplete_ids` (not submitted)  | skipped   | null           | null              |
| `resolved_ids`                    | completed | true           | in empty_patch_ids |
| `unresolved_ids`/`empty_patch_ids`| completed | false          | in empty_patch_ids |
| only `submitted_ids`              | skipped   | null           | null              |

`meta.report_lists` names every list the id appears in (5.x also `infra_failure` /
`ambiguous_failure`, a subset of unresolved / error: why it failed, the reason in
`meta.failure_reason`; the status is as above, the harness keeps them in its denominator).
A 2.0.0-2.0.2 report (no `schema_version`, no submitted / empty-patch / incomplete lists) takes
its submitted instances as completed + error; a 2.0.3-2.0.9 report (no `schema_version`, the
lists of schema_version 2) is read as schema_version 2 (noted). An id in two lists the
harness keeps exclusive (real reports list an instance as both unresolved and
empty-patch) is imported as the report says and flagged as a `source_malformed`
drop with its count — never silently resolved. With `--predictions`, each
non-empty `model_patch` is stored as an artifact referenced by `meta.patch_artifact`.

Declared rules: `swe_bench.resolved_rate` (resolved / submitted, empty patches and
errors count as failures) and `swe_bench.resolved_rate_nonempty` (empty patches
left out of the denominator), each with the rate from the report's own counts where the
imported instances give it back (`_reported`); a count that is no count (negative, not a whole
number, above total_instances) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ImporterError, SourceFormatError
from ..model.card import Software
from .base import ImportRequest
from .json_stream import JsonStream, iter_records
from .rule_files import TOLERANCE, rule_document
from .session import ImportSession
from .steps import StepBuffer
from .swe_bench_experiments import (
    details_report,
    experiments_report,
    is_experiments_details,
    is_experiments_results,
    metadata_agent,
)
from .swe_bench_tests import TestColumns as _TestColumns
from .swe_bench_tests import expand_sources as _expand
from .swe_bench_tests import report_from_instances
from .swe_bench_trajs import Trajectories

__all__ = ["SweBenchImporter"]

_LISTS = ("submitted_ids", "completed_ids", "incomplete_ids", "resolved_ids", "unresolved_ids",
          "empty_patch_ids", "error_ids", "infra_failure_ids", "ambiguous_failure_ids")
# reporting.py (SWE-bench 5.x) classifies why unresolved / error instances failed: a subset of those,
# the denominator unchanged; failure_reasons maps such an id to the reason found in its logs
#: Lists the harness fills with an if/elif chain: an instance belongs to at most one.
_EXCLUSIVE = ("resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids", "incomplete_ids")
_OUTCOMES = ("resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids")
_COUNTS = {"submitted_instances": "submitted_ids", "completed_instances": "completed_ids",
           "resolved_instances": "resolved_ids", "unresolved_instances": "unresolved_ids",
           "empty_patch_instances": "empty_patch_ids", "error_instances": "error_ids"}
#: SWE-bench 5.x's counts of the failure classes (subsets of unresolved / error).
_CLASS_COUNTS = ("infra_failure_instances", "ambiguous_failure_instances")
_MAX_REPORT_CHARS = 256 * 1024 * 1024
#: The lists a 2.0.3-2.0.9 report (no schema_version) has, as schema_version 2 has them.
_UNVERSIONED = ("submitted_ids", "completed_ids", "incomplete_ids", "resolved_ids", "unresolved_ids",
                "empty_patch_ids", "error_ids")
_SELECTOR_IDS = 50


class SweBenchImporter:
    """SWE-bench harness reports, optionally with the predictions they evaluated."""

    name = "swe-bench"
    summary = ("SWE-bench harness reports (schema_version 2) with the per-instance report.json files and the "
               "predictions; or a directory holding them; or an experiments-style submission directory "
               "(all_preds.jsonl, results/results.json or per_instance_details.json, logs/<instance>/report.json)")
    options = {"predictions": "predictions file (JSON list, JSON object by instance id, or JSONL) whose patches become artifacts"}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every report; each report is one agent."""
        request.check_options(self.name, self.options)
        session.set_software("harness", Software(name="SWE-bench", url="https://github.com/SWE-bench/SWE-bench"))
        sources, prediction_files, instance_reports, unread = _expand(request)
        if unread:
            session.note(f"not read: {', '.join(str(p) for p in unread[:10])}{' ...' if len(unread) > 10 else ''} "
                         "(JSON beside the run that names no run report key: not a SWE-bench report)")
        patches, models = _predictions(request, session, prediction_files)
        grid: dict[str, list[str]] = {}
        reported: dict[str, list[dict[str, Any]]] = {}
        tests = _TestColumns(instance_reports)
        plain = 0  # episodes of run reports (not experiments submissions)
        rebuilt = None
        if not sources:  # instance reports only: logs/run_evaluation/<run>/<model>/<instance>/report.json
            rebuilt = report_from_instances(instance_reports, patches)
            models_dirs = {p.parent.parent for p in instance_reports.values()}
            if len(models_dirs) > 1:  # logs/run_evaluation/<run>/<model>/: one agent per model directory
                shown = ", ".join(str(d) for d in sorted(models_dirs)[:3])
                raise SourceFormatError(f"holds instance report.json files of {len(models_dirs)} model directories "
                                        f"({shown}) and no run report: import each model directory separately",
                                        file=str(request.sources[0]))
            sources = [(min(models_dirs), None)]
        for path, url in sources:
            details = rebuilt is None and is_experiments_details(path)
            experiments = rebuilt is None and (details or is_experiments_results(path))
            if rebuilt is not None:
                report = rebuilt
                session.note(f"no run report among the sources: its lists are rebuilt from {len(instance_reports)} "
                             "instance report.json files (and the predictions) as make_run_report builds them; the "
                             "harness's own counts are not in the sources, so the rules carry no reported value")
            else:
                report = (details_report(path, session) if details else experiments_report(path, patches, session)
                          if experiments else _report(path))
                session.add_source(path, "swe-bench-experiments-details" if details else
                                   "swe-bench-experiments-results" if experiments else self.name, url)
            submission = path.parent if details else path.parent.parent
            stem = submission.name if experiments else path.name if rebuilt else path.stem  # <date>_<model>
            agent = request.agent or (models[0] if len(models) == 1 and len(sources) == 1 else stem)
            if agent in grid:
                raise ImporterError(f"two reports map to agent {agent!r}; name them apart or import them separately")
            trajs = Trajectories(submission, session) if experiments else None
            session.add_agent(metadata_agent(submission, agent, session) if experiments else {"name": agent})
            outcomes: list[tuple[str, bool, bool]] = []
            grid[agent] = _import_report(session, report, path, agent, patches, tests, report.pop("_rows", None),
                                         trajs, outcomes)
            if trajs is not None:
                trajs.declare(session, agent, len(grid[agent]))
            else:
                plain += len(grid[agent])
            for rule_id, value in ({} if rebuilt else _reported(report, agent, outcomes, session, path)).items():
                reported.setdefault(rule_id, []).append(value)
        _declare_rules(session, reported)
        tasks = sorted({i for ids in grid.values() for i in ids})
        if all(len(ids) == len(tasks) for ids in grid.values()):
            session.set_plan({"tasks": tasks, "agents": sorted(grid), "trials": 1,
                              "description": "every instance the report names, once per report"})
        else:
            session.set_plan({"expected_episodes": sum(len(ids) for ids in grid.values()),
                              "description": "every instance each report names"})
        n = session.episodes_written
        tests.declare(session)
        if plain:  # an experiments submission declares its own (swe_bench_trajs)
            session.add_drop(target="steps", action="unobserved", declaration="source_missing",
                             loss_class="unavailable_source_field", count=plain,
                             reason="a SWE-bench report holds outcomes only; the agents' trajectories are not in it")
        for column in ("started_at", "ended_at", "input_tokens", "output_tokens", "total_tokens", "cost_usd"):
            if column in ("started_at", "ended_at") or plain:
                session.declare_missing(f"episodes.{column}", f"a SWE-bench report records no {column}",
                                        count=n if column in ("started_at", "ended_at") else plain)


def _report(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path), max_value_chars=_MAX_REPORT_CHARS)
        report = stream.read_value()
        stream.end()
    if isinstance(report, dict) and "schema_version" not in report and isinstance(report.get("completed_ids"), list) \
            and "submitted_ids" not in report and isinstance(report.get("error_ids"), list):
        # SWE-bench 2.0.x (run_evaluation.py @v2.0.0) wrote no schema_version and no submitted / empty_patch /
        # incomplete lists: the instances it evaluated are the completed and the errored ones
        report = {**report, "submitted_ids": sorted(set(report["completed_ids"]) | set(report["error_ids"])),
                  "_schema_1": True}
    elif isinstance(report, dict) and "schema_version" not in report and all(
            isinstance(report.get(n), list) for n in _UNVERSIONED):
        # SWE-bench 2.0.3-2.0.9 (run_evaluation.py @v2.0.9) wrote schema_version 2's lists, with the same
        # meaning (make_run_report is unchanged at v2.0.10, which added the key), but no schema_version
        report = {**report, "_unversioned": True}
    elif not isinstance(report, dict) or report.get("schema_version") != 2:
        raise SourceFormatError("is not a SWE-bench harness report with schema_version 2 (or a 2.0.x report "
                                "with completed_ids and error_ids; 2.0.3-2.0.9: and submitted, incomplete, "
                                "empty-patch, resolved and unresolved lists)", file=str(path))
    reasons = report.get("failure_reasons", {})
    if not isinstance(reasons, dict) or not all(isinstance(v, str) for v in reasons.values()):
        raise SourceFormatError("failure_reasons is not an object of instance id -> text", file=str(path),
                                record="failure_reasons")
    for name in _LISTS:
        value = report.get(name, [])
        if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
            raise SourceFormatError(f"{name} is not a list of instance ids", file=str(path), record=name)
    if "submitted_ids" not in report:
        raise SourceFormatError("has no submitted_ids", file=str(path))
    _check_counts(report, path)
    return report


def _check_counts(report: dict[str, Any], path: Path) -> None:
    """The harness writes each count as the length of a list of instances of the dataset
    (make_run_report @7a21e05): a count that is not a whole number >= 0, or one above
    total_instances, is no count of it, and the rates taken from it would mean nothing."""
    fields = (*_COUNTS, *_CLASS_COUNTS, "total_instances")
    for field in fields:
        if field in report and (type(report[field]) is not int or report[field] < 0):
            fix = (f"set it to the number of ids in {_COUNTS[field]}" if field in _COUNTS
                   else "correct it or remove the field")
            raise SourceFormatError(
                f"{field} is {_shown(report[field])}, not a count (a whole number >= 0: the harness writes the "
                f"length of a list of instances); {fix}", file=str(path), record=field)
    total = report.get("total_instances")
    if total is None:
        return
    named = len(set().union(*(report.get(n, []) for n in _LISTS)))
    for field, count in [(f, report[f]) for f in fields if f in report] + [("", named)]:
        if count > total:
            what = f"{field} is {count}" if field else f"the report's lists name {count} instances"
            raise SourceFormatError(
                f"{what}, more than total_instances ({total}), the size of the dataset every list is drawn from: "
                "correct total_instances or the count", file=str(path), record=field or "total_instances")


def _shown(value: Any) -> str:
    """A source value in a message: JSON, a string cut short, a list or object by its kind."""
    if isinstance(value, (list, dict)):
        return f"a JSON {'array' if isinstance(value, list) else 'object'}"
    return json.dumps(value[:40] + ("..." if len(value) > 40 else "") if isinstance(value, str) else value)


def _import_report(
    session: ImportSession, report: dict[str, Any], path: Path, agent: str, patches: dict[str, tuple[str | None, str]],
    tests: _TestColumns, extra: dict[str, dict[str, Any]] | None = None, trajs: Trajectories | None = None,
    outcomes: list[tuple[str, bool, bool]] | None = None,
) -> list[str]:
    """The episodes of one run report; `extra` holds further row fields per instance id. Each
    episode the card takes adds its (status, resolved, empty patch) to `outcomes`."""
    sets = {name: set(report.get(name, [])) for name in _LISTS}
    for name in _LISTS:
        if len(sets[name]) != len(report.get(name, [])):
            session.note(f"{path.name}: {name} lists an instance id more than once")
    ids = sorted(set().union(*sets.values()))
    conflicts: dict[tuple[str, ...], list[str]] = {}
    orphans: list[str] = []
    for iid in ids:
        lists = tuple(n for n in _LISTS if iid in sets[n])
        exclusive = tuple(n for n in lists if n in _EXCLUSIVE)
        if len(exclusive) > 1:
            conflicts.setdefault(exclusive, []).append(iid)
        if "submitted_ids" in lists and not any(n in lists for n in (*_OUTCOMES, "incomplete_ids")):
            orphans.append(iid)
        elif "submitted_ids" not in lists and any(n in lists for n in _OUTCOMES):
            conflicts.setdefault(("not in submitted_ids",), []).append(iid)
        with session.record():
            row, steps = _episode(iid, lists, agent, path, patches, session)
            if iid in report.get("failure_reasons", {}):
                row["meta.failure_reason"] = report["failure_reasons"][iid]
            row.update((extra or {}).get(iid, {}))
            if trajs is not None:
                steps = trajs.fill(iid, steps, row)
            tests.add(session, row, steps, "resolved_ids" in lists)
            session.add_episode(row, steps)
            if outcomes is not None:
                outcomes.append((row["status"], row.get("score.resolved") is True, row.get("score.empty_patch") is True))
    for lists, bad in sorted(conflicts.items()):
        what = (f"in both {' and '.join(lists)}, which the harness keeps exclusive" if len(lists) > 1
                else "in an outcome list but not in submitted_ids")
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        session.add_drop(
            target="episodes", action="unobserved", declaration="source_malformed",
            loss_class="conflicting_source_labels",
            reason=f"{path.name} lists {len(bad)} instance(s) {what} ({shown}); imported as the report says "
            "(see meta.report_lists), so the instance's true outcome is not known",
            selector=_selector(agent, bad), count=len(bad),
            affects=["swe_bench.resolved_rate", "swe_bench.resolved_rate_nonempty"],
        )
    if orphans:
        session.add_drop(
            target="episodes", action="unobserved", declaration="source_malformed",
            loss_class="missing_outcome",
            reason=f"{path.name} lists {len(orphans)} submitted instance(s) in no outcome list; recorded as skipped",
            selector=_selector(agent, orphans), count=len(orphans),
            affects=["swe_bench.resolved_rate", "swe_bench.resolved_rate_nonempty"],
        )
    if report.get("_schema_1"):
        session.note(f"{path.name}: a SWE-bench 2.0.x report (no schema_version): no submitted, empty-patch or "
                     "incomplete lists, so the submitted instances are taken as completed + error")
    if report.get("_unversioned"):
        session.note(f"{path.name}: a SWE-bench 2.0.3-2.0.9 report (no schema_version; the lists of "
                     "schema_version 2, read as such)")
    known = {*_LISTS, *_COUNTS, "schema_version", "failure_reasons", "total_instances", "_schema_1", "_unversioned",
             "_rows", "_rebuilt", *_CLASS_COUNTS}
    other = {k: v for k, v in report.items() if k not in known}
    if other:  # e.g. 2.0.x unstopped_containers / unremoved_images: kept, not mapped
        session.set_meta(f"swe_bench_report.{path.stem}", other)
        session.note(f"{path.name}: report fields {', '.join(sorted(other))} kept in "
                     f"meta.swe_bench_report.{path.stem}")
    for field, name in _COUNTS.items():
        count = report.get(field)
        if count is not None and count != len(sets[name]):
            session.note(f"{path.name}: {field} is {count} but {name} lists {len(sets[name])} ids")
    return ids


def _selector(agent: str, ids: list[str]) -> str | None:
    if len(ids) > _SELECTOR_IDS:
        return None
    quoted = ", ".join("'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'" for i in ids)
    name = agent.replace("\\", "\\\\").replace("'", "\\'")
    return f"agent == '{name}' and task_id in [{quoted}]"


def _episode(
    iid: str, lists: tuple[str, ...], agent: str, path: Path,
    patches: dict[str, tuple[str | None, str]], session: ImportSession,
) -> tuple[dict[str, Any], StepBuffer]:
    episode_id = f"{agent}/{iid}"
    steps = StepBuffer(episode_id, file=str(path), record=iid)
    row: dict[str, Any] = {"episode_id": episode_id, "task_id": iid, "agent": agent, "trial": 0,
                           "meta.report_lists": ",".join(n.removesuffix("_ids") for n in lists)}
    if "error_ids" in lists:
        row.update(status="error", error_message="the harness could not evaluate the instance (error_ids)")
    elif "incomplete_ids" in lists:
        row.update(status="skipped", error_message="no prediction was submitted for the instance (incomplete_ids)")
    elif any(n in lists for n in _OUTCOMES):
        row["status"] = "completed"
    else:
        row.update(status="skipped", error_message="the report gives no outcome for this submitted instance")
    if row["status"] != "skipped":
        row["score.resolved"] = "resolved_ids" in lists
        row["score.empty_patch"] = "empty_patch_ids" in lists
    patch = patches.get(iid)
    if patch is not None and (patch[0] is None or patch[0] == agent) and patch[1]:
        row["meta.patch_artifact"] = session.add_artifact(patch[1].encode("utf-8"))
    return row, steps


def _predictions(
    request: ImportRequest, session: ImportSession, found: list[Path]
) -> tuple[dict[str, tuple[str | None, str]], list[str]]:
    """instance id -> (model_name_or_path, patch text), and the distinct model names."""
    option = request.options.get("predictions")
    paths = list(found)
    if option is not None:
        path = Path(option)
        if not path.is_file():
            raise SourceFormatError("does not exist or is not a regular file", file=str(path))
        paths.append(path)
    out: dict[str, tuple[str | None, str]] = {}
    models: set[str] = set()
    for path in paths:
        session.add_source(path, "swe-bench-predictions")
        _read_predictions(session, path, out, models)
    return out, sorted(models)


def _read_predictions(
    session: ImportSession, path: Path, out: dict[str, tuple[str | None, str]], models: set[str]
) -> None:
    seen: set[str] = set()
    repeated: list[str] = []
    for label, item in _prediction_items(path, session):
        with session.record():
            if not isinstance(item, dict) or not isinstance(item.get("instance_id"), str):
                raise SourceFormatError("is not a prediction with an instance_id", file=str(path), record=label)
            patch = item.get("model_patch")
            if patch is not None and not isinstance(patch, str):
                raise SourceFormatError("model_patch is not text", file=str(path), record=label)
            model = item.get("model_name_or_path") if isinstance(item.get("model_name_or_path"), str) else None
            if model:
                models.add(model)
            if item["instance_id"] in seen:
                repeated.append(item["instance_id"])
            seen.add(item["instance_id"])
            out[item["instance_id"]] = (model, patch or "")
    if repeated:  # e.g. SWE-agent appends a line to all_preds.jsonl each time an instance is run again
        session.note(f"{path.name}: {len(repeated)} later prediction(s) of an instance already predicted (e.g. "
                     f"{repeated[0]}); the last one is kept, as the harness keys predictions by instance_id "
                     "(run_evaluation.py @7a21e05)")


def _prediction_items(path: Path, session: ImportSession) -> Iterator[tuple[str, Any]]:
    for label, item in session.guard(iter_records(path)):
        if isinstance(item, dict) and "instance_id" not in item and item and all(isinstance(v, dict) for v in item.values()):
            # one JSON object keyed by instance id
            for iid, value in item.items():
                yield iid, ({"instance_id": iid, **value} if isinstance(value, dict) else value)
        else:
            yield label, item


def _reported(report: dict[str, Any], agent: str, outcomes: list[tuple[str, bool, bool]], session: ImportSession,
              path: Path) -> dict[str, dict[str, Any]]:
    """The report's own rates, from its count fields (list lengths where a count is absent), each
    declared only where the episodes the card holds give it back (`rcard validate` replays it):
    a count that disagrees with its list, a submitted instance in no outcome list or one left out
    (--keep-going) make the harness's rate one the card cannot replay; the note says which."""
    def count(field: str) -> int:
        value = report.get(field)
        return value if type(value) is int else len(set(report.get(_COUNTS[field], [])))

    submitted, resolved, empty = count("submitted_instances"), count("resolved_instances"), count("empty_patch_instances")
    # as the rules count: errors score 0, skipped (incomplete, no outcome) are left out
    scored = [(status == "completed" and won, blank) for status, won, blank in outcomes if status != "skipped"]
    nonempty = [won for won, blank in scored if not blank]
    rates = {"swe_bench.resolved_rate": (resolved, submitted, [won for won, _ in scored]),
             "swe_bench.resolved_rate_nonempty": (resolved, submitted - empty, nonempty)}
    out = {}
    for rule_id, (top, bottom, episodes) in rates.items():
        if bottom <= 0:
            continue
        value = top / bottom
        if episodes and abs(sum(episodes) / len(episodes) - value) <= TOLERANCE:
            out[rule_id] = {"group": {"agent": agent}, "value": value}
            continue
        got = f"{sum(episodes)} / {len(episodes)}" if episodes else "no scored instance"
        session.warn(f"{path.name}: {rule_id} is declared without the report's rate {top} / {bottom} = {value:.6g}: "
                     f"the instances in the card give {got} ({_why_not(report, session)}), so the rate "
                     "would not replay")
    return out


def _why_not(report: dict[str, Any], session: ImportSession) -> str:
    """Why the report's counts and the imported instances disagree."""
    causes = [f"{field} is {report[field]} but {name} lists {len(set(report.get(name, [])))} ids"
              for field, name in _COUNTS.items()
              if type(report.get(field)) is int and report[field] != len(set(report.get(name, [])))]
    given = set().union(*(report.get(n, []) for n in (*_OUTCOMES, "incomplete_ids")))
    orphans = len(set(report.get("submitted_ids", [])) - given)
    if orphans:
        causes.append(f"{orphans} submitted instance(s) in no outcome list, which the harness counts and the rules "
                      "leave out")
    if session.malformed:
        causes.append(f"{len(session.malformed)} record(s) left out by --keep-going")
    return "; ".join(causes) or "the report's lists conflict: see the drops"


def _declare_rules(session: ImportSession, reported: dict[str, list[dict[str, Any]]]) -> None:
    on_status = {"completed": "score", "error": 0, "timeout": 0, "limit": 0, "cancelled": "exclude", "skipped": "exclude"}
    aggregate = {"statistic": "mean", "group_by": ["agent"], "unit": "task_id", "interval": {"method": "auto", "level": 0.95}}
    session.add_rule(rule_document(
        rule="swe_bench.resolved_rate", kind="original",
        description="Resolved rate over submitted instances, as the SWE-bench harness counts it: resolved / "
        "submitted. Empty patches and instances the harness could not evaluate (error) count as failures; "
        "instances without a prediction (incomplete, skipped) are left out and counted.",
        score="score.resolved", on_status=on_status, on_missing=0, aggregate=aggregate,
        reported=reported.get("swe_bench.resolved_rate", []),
    ))
    session.add_rule(rule_document(
        rule="swe_bench.resolved_rate_nonempty", kind="diagnostic",
        description="Resolved rate with empty patches left out of the denominator: resolved / (submitted - "
        "empty patches). Errors still count as failures.",
        select="not coalesce(score.empty_patch, false)",
        score="score.resolved", on_status=on_status, on_missing=0, aggregate=aggregate,
        reported=reported.get("swe_bench.resolved_rate_nonempty", []),
    ))
