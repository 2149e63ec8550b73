"""SWE-bench experiments-style submission directories (the swe-bench/experiments repository).

A submission is `evaluation/<split>/<date>_<model>/` holding `all_preds.jsonl` (the
predictions), `metadata.yaml`, `README.md`, `results/results.json`, `logs/<instance>/`
(`report.json`, `patch.diff`, `test_output.txt`, ...) and `trajs/` (the agent's
trajectories: swe_bench_trajs). The mini-SWE-agent family's submissions (verified/, bash-only/,
multilingual/) have `per_instance_details.json` instead of results.json (`details_report`). `results/results.json` maps a category to the instance ids
in it; this reads it into the harness report shape `swe_bench` imports, keeping each category:

| results.json list | harness list (status) | why |
|---|---|---|
| `resolved` | resolved_ids (completed, score.resolved true) | |
| `no_generation` | empty_patch_ids (completed, resolved false, score.empty_patch true) | no patch was generated |
| `no_apply`, `install_fail`, `reset_failed`, `test_errored`, `no_logs` | error_ids (error) | the harness could not evaluate the patch (v2 harness: a patch that does not apply is an error) |
| `test_timeout` | error_ids, status `timeout` | the tests ran out of time |
| `generated`, `with_logs`, `applied` | (progress lists: kept in `meta.experiments_lists`) | |
| an instance predicted or listed, in none of the above | unresolved_ids (completed, resolved false) | evaluated, not resolved |

Every instance's categories are kept in `meta.experiments_lists`; an unknown category is
kept the same way and named in a note. `submitted_ids` = every instance of
`all_preds.jsonl` and of the lists. The reported resolved rate is `len(resolved)` over
those instances (the leaderboard divides by the split's size instead: see the note).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .json_stream import JsonStream
from .session import ImportSession
from .source_dir import read_yaml
from .steps import json_text

__all__ = ["DETAILS", "details_report", "experiments_report", "is_experiments_details", "is_experiments_results",
           "metadata_agent"]

_TO_HARNESS = {"resolved": "resolved_ids", "no_generation": "empty_patch_ids", "no_apply": "error_ids",
               "install_fail": "error_ids", "reset_failed": "error_ids", "test_errored": "error_ids",
               "no_logs": "error_ids", "test_timeout": "error_ids"}
_PROGRESS = ("generated", "with_logs", "applied")
_WHY = {"no_apply": "the patch did not apply", "install_fail": "the environment failed to install",
        "reset_failed": "the repository could not be reset", "test_errored": "the tests errored",
        "no_logs": "the evaluation left no log", "test_timeout": "the tests timed out"}
_MAX_CHARS = 256 * 1024 * 1024
_MAX_YAML_BYTES = 1024 * 1024


def is_experiments_results(path: Path) -> bool:
    """Whether `path` is the `results/results.json` of an experiments-style submission."""
    return path.name == "results.json" and path.parent.name == "results"


def experiments_report(path: Path, patches: dict[str, Any], session: ImportSession) -> dict[str, Any]:
    """A harness-shaped report (schema_version 2 lists) of an experiments results.json, with
    `_rows`: the row fields each instance gets beyond the harness lists."""
    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path), max_value_chars=_MAX_CHARS)
        doc = stream.read_value()
        stream.end()
    if not isinstance(doc, dict) or not doc:
        raise SourceFormatError("is not an experiments results.json (an object of instance-id lists)", file=str(path))
    lists: dict[str, list[str]] = {}
    for name, ids in doc.items():
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise SourceFormatError(f"{name} is not a list of instance ids", file=str(path), record=name)
        lists[name] = ids
    unknown = sorted(set(lists) - set(_TO_HARNESS) - set(_PROGRESS))
    if unknown:
        session.note(f"{path}: list(s) {', '.join(unknown)} are not known categories of experiments results; kept "
                     "in meta.experiments_lists, no outcome taken from them")
    instances = sorted(set(patches) | {i for ids in lists.values() for i in ids})
    report: dict[str, Any] = {"schema_version": 2, "submitted_ids": instances}
    for name, target in _TO_HARNESS.items():
        report.setdefault(target, [])
        report[target] += [i for i in lists.get(name, []) if i not in report[target]]
    decided = {i for key in ("resolved_ids", "empty_patch_ids", "error_ids") for i in report[key]}
    report["unresolved_ids"] = [i for i in instances if i not in decided]
    of: dict[str, list[str]] = {}
    for name, ids in lists.items():
        for i in ids:
            of.setdefault(i, []).append(name)
    rows: dict[str, dict[str, Any]] = {}
    for iid in instances:
        names = of.get(iid, [])
        row: dict[str, Any] = {"meta.experiments_lists": ",".join(names)}
        failures = [n for n in names if n in _WHY]
        if failures and "resolved" not in names:
            row["error_message"] = f"results.json lists it under {', '.join(failures)}: " + "; ".join(
                _WHY[n] for n in failures)
            if failures == ["test_timeout"]:
                row["status"] = "timeout"
        rows[iid] = row
    report["_rows"] = rows
    session.note(f"{path}: an experiments-style submission; swe_bench.resolved_rate is resolved over the "
                 f"{len(instances)} instance(s) predicted or listed (the leaderboard divides by the split's size)")
    return report


DETAILS = "per_instance_details.json"


def is_experiments_details(path: Path) -> bool:
    """Whether `path` is a submission's `per_instance_details.json` (the mini-SWE-agent family's
    submissions, in place of results/results.json: `{<instance>: {resolved, cost, api_calls}}`)."""
    return path.name == DETAILS


def details_report(path: Path, session: ImportSession) -> dict[str, Any]:
    """A harness-shaped report of a `per_instance_details.json`: every key submitted, `resolved`
    true -> resolved_ids, false -> unresolved_ids; `_rows`: `cost` -> cost_usd, `api_calls` ->
    meta.api_calls, other fields meta.details_other."""
    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path), max_value_chars=_MAX_CHARS)
        doc = stream.read_value()
        stream.end()
    if not isinstance(doc, dict) or not doc:
        raise SourceFormatError("is not a per_instance_details.json (an object of instance id -> details)",
                                file=str(path))
    resolved, unresolved, rows = [], [], {}
    for iid, item in doc.items():
        if not iid or not isinstance(item, dict):
            raise SourceFormatError("is not an object of details", file=str(path), record=iid[:200] or "''")
        flag = item.get("resolved")
        if type(flag) is not bool:
            raise SourceFormatError(f"resolved is {flag!r}, not true or false", file=str(path), record=iid)
        (resolved if flag else unresolved).append(iid)
        row: dict[str, Any] = {}
        cost = item.get("cost")
        if cost is not None:
            if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost) or cost < 0:
                raise SourceFormatError(f"cost is {cost!r}, not a non-negative number", file=str(path), record=iid)
            row["cost_usd"] = float(cost)
        calls = item.get("api_calls")
        if calls is not None:
            if type(calls) is not int or not 0 <= calls < 1 << 63:
                raise SourceFormatError(f"api_calls is {calls!r}, not a count", file=str(path), record=iid)
            row["meta.api_calls"] = calls
        other = {k: v for k, v in item.items() if k not in ("resolved", "cost", "api_calls")}
        if other:
            row["meta.details_other"] = json_text(_jsonable(other))
        rows[iid] = row
    session.note(f"{path}: per-instance details of a submission; swe_bench.resolved_rate is resolved over its "
                 f"{len(doc)} instance(s)")
    return {"schema_version": 2, "submitted_ids": sorted(doc), "resolved_ids": resolved,
            "unresolved_ids": unresolved, "_rows": rows}


def metadata_agent(submission: Path, agent: str, session: ImportSession) -> dict[str, Any]:
    """The provenance agent of a submission from its `metadata.yaml`, in either form the
    experiments repository has used: flat (`name`, `oss`, `site`, `verified`) or `info`
    (`name`, `site`, `report`, `authors`) + `tags` (`model` list, `org`, `os_model`,
    `os_system`, `checked`, `system.attempts`). `model` = the tags' model(s); the rest are
    `parameters` (`leaderboard_name`, ...); the whole file is in card meta `swe_bench_experiments`."""
    path = submission / "metadata.yaml"
    if not path.exists() and not path.is_symlink():
        path = submission / "metadata.yml"  # the spelling some submissions use
    if path.is_symlink() or not path.is_file():
        return {"name": agent}
    doc, lines = read_yaml(path, max_bytes=_MAX_YAML_BYTES)
    if not isinstance(doc, dict):
        raise SourceFormatError("is not a mapping (a submission's metadata)", file=str(path))
    session.add_source(path, "swe-bench-experiments-metadata", None)
    plain = json.loads(json_text(_jsonable(doc)))
    info = plain.get("info") if isinstance(plain.get("info"), dict) else {}
    tags = plain.get("tags") if isinstance(plain.get("tags"), dict) else {}
    system = tags.get("system") if isinstance(tags.get("system"), dict) else {}
    models = tags.get("model")
    if isinstance(models, list) and all(isinstance(m, str) for m in models) and models:
        model: str | None = ", ".join(models)
    else:
        model = models if isinstance(models, str) and models else None
        if models is not None and model is None:
            line = lines.get(("tags", "model"))
            raise SourceFormatError("tags.model is not a model name or a list of them", file=str(path),
                                    record=f"line {line}" if line else "tags.model")
    parameters = {
        "leaderboard_name": info.get("name", plain.get("name")), "site": info.get("site", plain.get("site")),
        "report": info.get("report"), "authors": info.get("authors"), "org": tags.get("org"),
        "oss": plain.get("oss"), "os_model": tags.get("os_model"), "os_system": tags.get("os_system"),
        "verified": plain.get("verified"), "checked": tags.get("checked"), "attempts": system.get("attempts"),
    }
    session.set_meta("swe_bench_experiments", {"metadata": plain})
    return {"name": agent, "model": model, "parameters": {k: v for k, v in parameters.items() if v is not None}}


def _jsonable(value: Any) -> Any:
    """YAML values as JSON ones (a date or time becomes its ISO text)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # .nan, .inf: JSON has no such number
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)
