"""The runs of an lm-evaluation-harness output: which files form a run, in the layouts of
its versions (lm_eval/__main__.py, loggers/evaluation_tracker.py, tags v0.4.0 .. HEAD).

>= 0.4.3 writes `<output_path>/<model_name_sanitized>/results_<time>.json` and
`samples_<task>_<time>.jsonl` (`--output_path x.json`: `x_<time>.json`, the samples beside
it); 0.4.0-0.4.2 wrote `results.json` and one `<model_args with / and = as __>_<task>.jsonl`
per task. Files pair by directory and time; a directory's subdirectories are read one
level down (the model directories of an output path). lm-eval 0.3 wrote the results where
`--output_path` said (any name) and, with `--write_out` (master from 2023-05), one
`<task>_write_out_info.json` array per task (`write_out_sample`).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .base import ImportRequest
from .json_stream import JsonStream
from .session import ImportSession
from .source_dir import children, regular_file

__all__ = ["Run", "find_runs", "is_v03", "open_runs", "read_results", "write_out_sample"]

_DATE = r"\d{4}-\d{2}-\d{2}T[\d.:-]+"
_RESULTS = re.compile(rf"^results_(?P<ts>.+)\.json$|^.+_(?P<ts2>{_DATE})\.json$")  # --output_path <dir> | x.json
# .json: lm-eval between 0.4.2 and 0.4.3 (loggers/evaluation_tracker.py @793469e) wrote JSON Lines under it
_SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<ts>{_DATE})\.jsonl?$")
_LEGACY_RESULTS = "results.json"  # lm-eval 0.4.0-0.4.2, beside <model_args>_<task>.jsonl
#: lm-eval 0.3 (master after 2023-05, evaluator.py @80ae5a8b6): --write_out writes one JSON array per task
_WRITE_OUT = re.compile(r"^(?P<task>.+)_write_out_info\.json$")
_MAX_RESULTS = 256 * 1024 * 1024


def find_runs(request: ImportRequest) -> dict[tuple[str, str], dict[str, Any]]:
    """(directory, time) -> {"results": (path, url), "samples": {task: (path, url)}, "legacy": bool,
    "jsonl": the directory's other .jsonl files} of the sources; none is a SourceFormatError."""
    files: list[tuple[Path, str | None]] = []
    for index, path in enumerate(request.sources):
        if path.is_dir():
            for _name, p, is_dir in _listed(path):
                if is_dir:  # <output_path>/<model_name_sanitized>/: one level down
                    files.extend((q, request.url(index)) for _n, q, sub in _listed(p) if not sub)
                else:
                    files.append((p, request.url(index)))
        else:
            files.append((path, request.url(index)))
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    jsonl: dict[str, list[Path]] = defaultdict(list)  # directory -> its .jsonl files (0.4.0-0.4.2 samples)
    given = {p for p in request.sources if not p.is_dir()}
    for path, url in files:
        where = str(path.parent)
        if m := _WRITE_OUT.match(path.name):
            runs.setdefault((where, ""), {"samples": {}})["samples"][m["task"]] = (path, url)
            runs[(where, "")]["write_out"] = True
        elif path.name == _LEGACY_RESULTS or (path in given and path.suffix == ".json"
                                               and not _RESULTS.match(path.name)):
            # a results.json, or a results file named by the user (0.3's --output_path took any name)
            runs.setdefault((where, ""), {"samples": {}})["results"] = (path, url)
            runs[(where, "")]["legacy"] = True
        elif m := _SAMPLES.match(path.name):
            runs.setdefault((where, m["ts"]), {"samples": {}})["samples"][m["task"]] = (path, url)
        elif m := _RESULTS.match(path.name):
            runs.setdefault((where, m["ts"] or m["ts2"]), {"samples": {}})["results"] = (path, url)
        elif path.suffix == ".jsonl":
            jsonl[where].append(path)
    if not runs:
        raise SourceFormatError("holds no lm-eval results_<time>.json or samples_<task>_<time>.jsonl",
                                file=str(request.sources[0]))
    for (where, _ts), run in runs.items():
        run["jsonl"] = jsonl[where]
    return runs


def _listed(directory: Path) -> list[tuple[str, Path, bool]]:
    """children(directory), and an output file's name on a FIFO, device or anything else
    children() skips refused: not read past as if the run had no results file."""
    entries = list(children(directory))
    listed = {name for name, _p, is_dir in entries if not is_dir}
    for name in sorted(set(os.listdir(directory)) - listed):
        if _RESULTS.match(name) or _SAMPLES.match(name) or name == _LEGACY_RESULTS:
            regular_file(directory / name, what="lm-eval output file")
    return entries


def open_runs(session: ImportSession, runs: dict[tuple[str, str], dict[str, Any]],
              agent: str | None) -> list[tuple[Run, dict[str, Any], dict[str, Any]]]:
    """Each run with its results document read and its Run: several runs of one model and
    task are trials (by time), marked `several` so their episodes and rules carry the run."""
    opened = [(key, run, read_results(session, run)) for key, run in sorted(runs.items())]
    for _key, run, results in opened:
        if is_v03(results):
            run["v03"] = True
            results["results"] = _v04_metric_keys(results["results"])
        elif run.get("legacy") and not run.get("write_out"):
            _legacy_samples(run, results, run["jsonl"])
    models = [_model(results, key[1], agent) for key, _run, results in opened]
    pairs = [(m, t) for m, (_k, run, _r) in zip(models, opened, strict=True) for t in run["samples"]]
    repeated = {p for p in pairs if pairs.count(p) > 1}
    trials: dict[tuple[str, str], int] = defaultdict(int)
    out = []
    for model, (key, run, results) in zip(models, opened, strict=True):
        trial = {t: trials[(model, t)] for t in run["samples"]}
        for t in run["samples"]:
            trials[(model, t)] += 1
        label = key[1] or (run["results"][0].name if "results" in run else "write_out")
        out.append((Run(label, model, any((model, t) in repeated for t in run["samples"]),
                        trial, len(set(models)), bool(run.get("write_out"))), run, results))
    return out


@dataclass
class Run:
    """One results file's run: its label (the time in the file names), the model, whether
    another run of the sources has the same model and task (then its episodes carry the
    label and its rules select by it), and the trial of each of its tasks."""

    label: str
    model: str
    several: bool
    trial: dict[str, int]
    models: int = 1  # distinct models among the sources: above 1 the rule ids name the model
    write_out: bool = False  # lm-eval 0.3 --write_out files (write_out_sample maps their entries)


def is_v03(results: dict[str, Any]) -> bool:
    """Whether a results document is lm-eval 0.3's (`results`, `versions`, `config`; metric keys
    without the `,<filter>` 0.4 added, no `configs` / `n-samples`)."""
    tasks = results.get("results")
    if not isinstance(tasks, dict) or "versions" not in results or "configs" in results or "n-samples" in results:
        return False
    keys = [k for metrics in tasks.values() if isinstance(metrics, dict) for k in metrics]
    return not any("," in k for k in keys)


def _v04_metric_keys(tasks: dict[str, Any]) -> dict[str, Any]:
    """0.3 results keyed as 0.4's (`acc` -> `acc,none`, `acc_stderr` -> `acc_stderr,none`): one filter."""
    return {task: {f"{k},none": v for k, v in metrics.items()} if isinstance(metrics, dict) else metrics
            for task, metrics in tasks.items()}


_WRITE_OUT_KEY = re.compile(r"^(?P<kind>prompt|logit)_(?P<i>\d+)$")


def write_out_sample(entry: Any) -> Any:
    """A 0.3 `<task>_write_out_info.json` entry (evaluator.py @80ae5a8b6: `doc_id`, `prompt_<i>`
    = request i's args joined, `logit_<i>` = its response, `truth`, then each metric as
    `str(value)`) in the shape of a 0.4 sample line (`arguments.gen_args_<i>.arg_0`, `resps`,
    `target`, `metrics`); a metric written as "True" / "False" (str of a bool) is 1 / 0."""
    if not isinstance(entry, dict):
        return entry
    prompts: dict[int, Any] = {}
    logits: dict[int, Any] = {}
    metrics: dict[str, Any] = {}
    for key, value in entry.items():
        if m := _WRITE_OUT_KEY.match(key):
            (prompts if m["kind"] == "prompt" else logits)[int(m["i"])] = value
        elif key not in ("doc_id", "truth"):
            metrics[key] = {"True": 1.0, "False": 0.0}.get(value, value) if isinstance(value, str) else value
    order = sorted(set(prompts) | set(logits))
    return {"doc_id": entry.get("doc_id"), "target": entry.get("truth"),
            "arguments": {f"gen_args_{i}": {"arg_0": prompts.get(i)} for i in order},
            "resps": [[logits[i]] if i in logits else None for i in order], "filter": "none",
            "metrics": sorted(metrics), **metrics}


def read_results(session: ImportSession, run: dict[str, Any]) -> dict[str, Any]:
    if "results" not in run:
        return {}
    path, url = run["results"]
    session.add_source(path, "lm-eval-results", url)
    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path), max_value_chars=_MAX_RESULTS, constants=True)
        results = stream.read_value()
        stream.end()
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
        raise SourceFormatError("is not an lm-eval results file (no results object)", file=str(path))
    return results


def _model(results: dict[str, Any], ts: str, agent: str | None) -> str:
    name = results.get("model_name") if isinstance(results.get("model_name"), str) else None
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    args = config.get("model_args")
    if isinstance(args, str):  # 0.4.0-0.4.2: "pretrained=org/name,dtype=..."
        args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
    pretrained = args.get("pretrained") if isinstance(args, dict) else None
    return agent or name or (pretrained if isinstance(pretrained, str) else None) or f"lm-eval-{ts or 'run'}"


def _legacy_samples(run: dict[str, Any], results: dict[str, Any], jsonl: list[Path]) -> None:
    """lm-eval 0.4.0-0.4.2: the samples of task T are `<model_args with / and = as __>_T.jsonl`."""
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    prefix = re.sub("/|=", "__", config["model_args"]) + "_" if isinstance(config.get("model_args"), str) else None
    tasks = results.get("configs") if isinstance(results.get("configs"), dict) else results.get("results", {})
    for task in tasks:
        exact = [p for p in jsonl if prefix is not None and p.name == f"{prefix}{task}.jsonl"]
        found = exact or [p for p in jsonl if p.name.endswith(f"_{task}.jsonl")]
        if len(found) == 1:
            run["samples"][task] = (found[0], run["results"][1])


