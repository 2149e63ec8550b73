"""The evaluation reports OpenHands writes beside `output.jsonl`, and run directories.

The V1 benchmarks' `eval_infer` scripts (OpenHands/benchmarks `benchmarks/<name>/eval_infer.py`)
write `<stem>.report.json` beside `<stem>.jsonl`: for SWE-bench-like benchmarks the SWE-bench
harness report of the converted predictions (every `output.jsonl` line is submitted), for the
others (GAIA, commit0, Harbor, ...) a report of the same shape built from `test_result`, whose
submitted instances are `output.jsonl`'s lines plus `output_errors.jsonl`'s (incomplete). V0
(evaluation/benchmarks/swe_bench/scripts/eval/update_output_with_eval.py) reads the harness's
`report.json` from the output directory. Either report gives each line `score.resolved`
(`resolved_ids`), `meta.report_lists` and `meta.report_submitted`, and its counts are the reported
value of the rule `openhands.resolved_rate` (resolved / submitted), declared when the lines the
report names as submitted are exactly its submitted instances, once each.

A run directory (`<eval_output_dir>/`) is read as the harness leaves it: `output.jsonl` and, when
present, `output_errors.jsonl` (the V1 harness writes lines with an `error` there).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .json_stream import JsonStream
from .rule_files import rule_document
from .session import ImportSession
from .source_dir import children, regular_file

__all__ = ["RUN_FILES", "Reports", "run_files"]

RUN_FILES = ("output.jsonl", "output_errors.jsonl")
_LISTS = ("submitted_ids", "completed_ids", "incomplete_ids", "resolved_ids", "unresolved_ids", "empty_patch_ids",
          "error_ids")
_MAX_REPORT_CHARS = 256 * 1024 * 1024
RULE = "openhands.resolved_rate"


def run_files(directory: Path) -> list[Path]:
    """output.jsonl (required) and output_errors.jsonl of an OpenHands evaluation output directory."""
    found = {name: p for name, p, is_dir in children(directory) if not is_dir and name in RUN_FILES}
    if "output.jsonl" not in found:
        raise SourceFormatError("holds no output.jsonl (an OpenHands evaluation output directory has output.jsonl, "
                                "and output_errors.jsonl when instances failed)", file=str(directory))
    return [found[n] for n in RUN_FILES if n in found]


@dataclass
class _Report:
    path: Path
    lists: dict[str, set[str]]
    counts: dict[str, Any]
    named: list[str] = field(default_factory=list)  # instance ids of imported lines the report submitted
    unnamed: int = 0  # imported lines the report does not list as submitted
    agents: set[str] = field(default_factory=set)


class Reports:
    """The report of each output file (looked for once per directory and stem)."""

    def __init__(self, session: ImportSession):
        self._session = session
        self._by_path: dict[Path, _Report | None] = {}

    def for_file(self, file: Path) -> _Report | None:
        """The report beside `file`: `<stem>.report.json` (`<stem>_errors.jsonl` shares `<stem>`'s), else a
        SWE-bench harness `report.json` in the same directory (V0)."""
        stem = file.name.removesuffix(".jsonl").removesuffix("_errors")
        for candidate in (file.with_name(f"{stem}.report.json"), file.with_name("report.json")):
            if candidate in self._by_path:
                return self._by_path[candidate]
            if os.path.lexists(candidate):
                report = _read(candidate)
                self._by_path[candidate] = report
                if report is not None:
                    self._session.add_source(candidate, "openhands-report")
                    return report
        return None

    def mark(self, report: _Report | None, row: dict[str, Any]) -> None:
        """Put what `report` says of the row's instance into the row."""
        if report is None:
            return
        instance = row["task_id"]
        named = [n for n in _LISTS if instance in report.lists[n]]
        submitted = instance in report.lists["submitted_ids"]
        row["meta.report_submitted"] = submitted
        if named:
            row["meta.report_lists"] = ",".join(n.removesuffix("_ids") for n in named)
        if submitted:
            row["score.resolved"] = instance in report.lists["resolved_ids"]
            report.named.append(instance)
            report.agents.add(row["agent"])
        else:
            report.unnamed += 1

    def declare(self) -> None:
        """The rule over the reports' resolved instances, with each report's value where it replays."""
        reports = [r for r in self._by_path.values() if r is not None and (r.named or r.unnamed)]
        if not reports:
            return
        reported: list[dict[str, Any]] = []
        claimed: dict[str, int] = {}
        for r in reports:
            for agent in r.agents:
                claimed[agent] = claimed.get(agent, 0) + 1
        for r in reports:
            why = _mismatch(r, claimed)
            submitted = _count(r, "submitted_instances", "submitted_ids")
            if why is None and submitted:
                reported.append({"group": {"agent": next(iter(r.agents))},
                                 "value": _count(r, "resolved_instances", "resolved_ids") / submitted})
            elif why is not None:
                self._session.note(f"{r.path.name}: its resolved rate is not declared as {RULE}'s reported value: "
                                   f"{why}")
            if r.unnamed:
                self._session.note(f"{r.path.name}: {r.unnamed} imported line(s) of its directory are not among "
                                   "its submitted instances (meta.report_submitted false): left out of "
                                   f"{RULE}")
            missing = r.lists["submitted_ids"] - set(r.named)
            if missing:
                shown = ", ".join(sorted(missing)[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                self._session.add_drop(
                    target="episodes", action="omitted", declaration="source_missing",
                    loss_class="unavailable_source_field", count=len(missing), affects=[RULE],
                    reason=f"{r.path.name} counts {len(missing)} submitted instance(s) that no imported line "
                    f"holds ({shown}): the V1 harness writes failed instances to output_errors.jsonl — import "
                    "the output directory, or that file too")
        on_status = {"completed": "score", "error": 0, "timeout": 0, "limit": 0, "cancelled": "exclude",
                     "skipped": "exclude"}
        self._session.add_rule(rule_document(
            rule=RULE, kind="original",
            description="Resolved rate as the OpenHands evaluation report counts it: resolved / submitted "
            "instances of the report beside output.jsonl (output.report.json, or the SWE-bench harness's "
            "report.json). Lines the report does not submit are left out; an error line counts as a failure.",
            select="coalesce(meta.report_submitted, false)", score="score.resolved", on_status=on_status,
            on_missing=0, aggregate={"statistic": "mean", "group_by": ["agent"], "unit": "task_id",
                                     "interval": {"method": "auto", "level": 0.95}},
            reported=reported))


def _mismatch(r: _Report, claimed: dict[str, int]) -> str | None:
    if len(r.agents) != 1:
        return f"its lines have {len(r.agents)} agents"
    if claimed[next(iter(r.agents))] > 1:
        return "another report's lines have the same agent"
    if len(r.named) != len(set(r.named)):
        return "an instance has more than one imported line (attempt files?)"
    if set(r.named) != r.lists["submitted_ids"]:
        return "its submitted instances are not all imported"
    return None


def _count(r: _Report, field_: str, name: str) -> int:
    value = r.counts.get(field_)
    return value if type(value) is int else len(r.lists[name])


def _read(path: Path) -> _Report | None:
    """A report of the SWE-bench shape, or None for another `report.json` (V0 only: a
    `<stem>.report.json` must be one)."""
    with open(regular_file(path, what="report"), "rb") as fh:  # a FIFO or link named like a report is refused
        stream = JsonStream(fh, str(path), max_value_chars=_MAX_REPORT_CHARS)
        report = stream.read_value()
        stream.end()
    plain = path.name == "report.json"
    if not isinstance(report, dict) or "resolved_ids" not in report:
        if plain:
            return None
        raise SourceFormatError("is not an OpenHands evaluation report (an object with resolved_ids and "
                                "submitted_ids, as eval_infer writes it)", file=str(path))
    lists: dict[str, set[str]] = {}
    for name in _LISTS:
        value = report.get(name, [])
        if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
            raise SourceFormatError(f"{name} is not a list of instance ids", file=str(path), record=name)
        lists[name] = set(value)
    if "submitted_ids" not in report:  # SWE-bench 2.0.x: the evaluated instances are completed + error
        lists["submitted_ids"] = lists["completed_ids"] | lists["error_ids"]
    return _Report(path, lists, {k: v for k, v in report.items() if k.endswith("_instances")})
