"""Large Inspect `.eval` logs for the benchmarks, written fast, in Inspect's own layout.

Running Inspect's eval() for 3,000 samples takes many minutes on a loaded machine, and a
1 GB log is out of reach that way. Instead a real log that Inspect 0.3.285 wrote
(`../shared/data/external/inspect/inspect-0.3.285/…arith….eval`: tool calls, scores of
four scorers incl. a dict-valued one, 3 epochs reduced with `mean`) is the template, and
its sample members are replicated under new sample ids, with the archive written as
Inspect writes it: `zipfile` with zstd members (method 93, the `zipfile_zstd` patch that
Inspect itself imports), members in Inspect's order (`_journal/start.json`, samples,
`_journal/summaries/1.json`, `summaries.json`, `reductions.json`, `header.json`).

`header.json`'s results are recomputed from the replicated samples as Inspect computes
them (value_to_float, the mean reducer over epochs, then accuracy/mean and
stderr = stdev/√n over the samples), so `read_eval_log` reads the log and
`rcard validate` of its import replays every number.

`pad_kb` grows each sample with extra tool calls whose results are random words
(about `pad_kb` KB of JSON per sample; zstd compresses it about 3×, as it does real
tool output), to reach a given file size with realistic samples.
"""

from __future__ import annotations

import copy
import json
import math
import random
import statistics
import zipfile
from pathlib import Path
from typing import Any

TEMPLATE = (Path(__file__).resolve().parents[2] / "shared" / "data" / "external" / "inspect" / "inspect-0.3.285"
            / "2026-12-01T08-28-14-00-00_arith_VdKqNirU4VLYR5rpgCL6Mg.eval")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _zip_zstd() -> int:
    import zipfile_zstd  # noqa: F401 - Inspect's own patch: zipfile learns method 93 (zstd)

    return zipfile.ZIP_ZSTANDARD  # type: ignore[attr-defined]


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choices(_ALPHABET, k=rng.randint(2, 9))) for _ in range(n)]


def _paragraphs(rng: random.Random, n: int = 4000) -> list[str]:
    """Random-word paragraphs of ~4 KB: a member draws a few dozen of 4,000, so within one
    member (zstd compresses each on its own) they rarely repeat."""
    vocabulary = _words(rng, 5000)
    return [" ".join(rng.choices(vocabulary, k=600)) for _ in range(n)]


def _pad(sample: dict[str, Any], rng: random.Random, paragraphs: list[str], kb: int, key: str,
         tool: dict[str, Any]) -> None:
    """Insert tool events with random-word results (~kb KB) after the sample's last model or tool event."""
    at = max((i for i, e in enumerate(sample["events"]) if e["event"] in ("model", "tool")), default=0) + 1
    extra = []
    for j in range(max(1, kb // 4)):
        ev = copy.deepcopy(tool)
        ev["id"] = f"pad_{key}_{j}"
        ev["uuid"] = f"{key}-{j}"
        ev["result"] = rng.choice(paragraphs)  # ~4 KB
        extra.append(ev)
    sample["events"][at:at] = extra


def _reduced(samples: dict[tuple[str, int], dict[str, Any]], name: str, scorer: str) -> dict[str, float]:
    """Inspect's mean reducer: per sample id, the mean over epochs of value_to_float (NaN left out)."""
    from inspect_ai.scorer import value_to_float

    to_float = value_to_float()
    values: dict[str, list[float]] = {}
    for (sid, _epoch), sample in samples.items():
        score = (sample.get("scores") or {}).get(scorer)
        if score is None:
            continue
        value = score["value"][name] if isinstance(score["value"], dict) else score["value"]
        number = to_float(value)
        if not math.isnan(number):
            values.setdefault(sid, []).append(number)
    return {sid: statistics.fmean(v) for sid, v in values.items()}


def _results(header: dict[str, Any], reduced_of: Any, total: int) -> dict[str, Any]:
    results = copy.deepcopy(header["results"])
    for entry in results["scores"]:
        reduced = list(reduced_of(entry["name"], entry["scorer"]).values())
        entry["scored_samples"], entry["unscored_samples"] = len(reduced), 0
        for metric in entry["metrics"].values():
            if metric["name"] in ("accuracy", "mean"):
                metric["value"] = statistics.fmean(reduced)
            elif metric["name"] == "stderr":
                metric["value"] = statistics.stdev(reduced) / math.sqrt(len(reduced)) if len(reduced) > 1 else 0.0
            else:
                raise SystemExit(f"the template's metric {metric['name']} is not recomputed here")
    results["total_samples"] = total
    return results


def make_eval(path: Path, samples: int, *, pad_kb: int = 0, template: Path = TEMPLATE, seed: int = 7) -> Path:
    """Write a `.eval` of `samples` sample members (sample ids × the template's epochs)."""
    if not template.exists():
        raise SystemExit(f"{template} is absent: the Inspect benchmark replicates that real log (../shared)")
    method = _zip_zstd()
    rng = random.Random(seed)
    paragraphs = _paragraphs(rng) if pad_kb else []
    with zipfile.ZipFile(template) as src:
        start = json.loads(src.read("_journal/start.json"))
        header = json.loads(src.read("header.json"))
        names = [n for n in src.namelist() if n.startswith("samples/")]
        members = [json.loads(src.read(n)) for n in names]
        summaries = {(s["id"], s["epoch"]): s for s in json.loads(src.read("summaries.json"))}
    epochs = max(m["epoch"] for m in members)
    tool = next(e for m in members for e in m["events"] if e["event"] == "tool")
    by_id: dict[str, dict[int, dict[str, Any]]] = {}
    for m in members:
        by_id.setdefault(m["id"], {})[m["epoch"]] = m
    template_ids = sorted(by_id)
    ids = [f"s-{k + 1}" for k in range(math.ceil(samples / epochs))]
    path.parent.mkdir(parents=True, exist_ok=True)
    written: dict[tuple[str, int], dict[str, Any]] = {}  # scores only, for the results
    out_summaries = []
    for block in (start["eval"], header["eval"]):
        block["dataset"] = {**block["dataset"], "samples": len(ids), "sample_ids": ids}
    with zipfile.ZipFile(path, "w", compression=method) as zf:
        zf.writestr("_journal/start.json", json.dumps(start))
        n = 0
        for epoch in range(1, epochs + 1):
            for k, sid in enumerate(ids):
                if n == samples:
                    break
                source = by_id[template_ids[k % len(template_ids)]][epoch]
                sample = copy.deepcopy(source)
                sample["id"], sample["uuid"] = sid, f"u{seed}-{sid}-{epoch}"
                if pad_kb:
                    _pad(sample, rng, paragraphs, pad_kb, f"{sid}_{epoch}", tool)
                zf.writestr(f"samples/{sid}_epoch_{epoch}.json", json.dumps(sample))
                written[(sid, epoch)] = {"scores": sample.get("scores")}
                summary = dict(summaries.get((source["id"], epoch), {}), id=sid, uuid=sample["uuid"])
                out_summaries.append(summary)
                n += 1
        header["results"] = _results(header, lambda name, scorer: _reduced(written, name, scorer), len(ids))
        reductions = []
        for entry in header["results"]["scores"]:
            values = _reduced(written, entry["name"], entry["scorer"])
            reductions.append({"scorer": entry["name"], "reducer": "mean",
                               "samples": [{"value": v, "history": [], "sample_id": s} for s, v in values.items()]})
        zf.writestr("_journal/summaries/1.json", json.dumps(out_summaries))
        zf.writestr("summaries.json", json.dumps(out_summaries))
        zf.writestr("reductions.json", json.dumps(reductions))
        zf.writestr("header.json", json.dumps(header))
    return path


def make_json(eval_path: Path, out: Path) -> Path:
    """The same log in Inspect's .json format, written by Inspect's own recorder."""
    from inspect_ai.log import read_eval_log, write_eval_log

    write_eval_log(read_eval_log(str(eval_path)), str(out), format="json")
    return out
