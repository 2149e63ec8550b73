"""Logs whose samples disagree with their header's results: the fresh card validates, Inspect's
number is declared `reported` only where the samples give it, and the import says why not."""

from __future__ import annotations

import copy
import json
import math
import random
import statistics

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.importers.inspect_replay import ImportedScores, replay
from rollout_cards.importers.zip_reader import SafeZip
from rollout_cards.rules.loader import declared_rules
from tests.conftest import external
from tests.fuzzing import cases, seed
from tests.importers.conftest import SOURCES, assert_valid, run_import, zstd_zip
from tests.importers.test_inspect_ai import ALL_LOGS

MISMATCH = SOURCES / "inspect" / "mismatch"
_MAP = {"C": 1.0, "P": 0.5, "I": 0.0}


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _import_and_validate(path, out, *, warnings: int) -> None:
    """`rcard import` exits 0 printing `warnings` warnings, and `rcard validate` of the card exits 0."""
    result = _cli("import", "inspect", str(path), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.count("warning: ") == warnings, result.output
    assert _cli("validate", str(out)).exit_code == 0


def _headlines(card) -> dict[str, tuple[float | None, int]]:
    return {run.rule: (r.value, r.n) for run in rc.rescore(card).runs for r in run.results if r.stratum is None}


def _means_per_sample(samples) -> list[float]:
    """Plain Python over the source samples: value of the `match` score per sample-epoch (errored
    ones carry none), the mean over each sample's epochs (the log's mean reducer)."""
    per: dict[int, list[float]] = {}
    for s in samples:
        if "match" in (s.get("scores") or {}):
            per.setdefault(s["id"], []).append(_MAP[s["scores"]["match"]["value"]])
    return [statistics.mean(v) for _, v in sorted(per.items())]


def _check_mismatch_card(out, path, samples, header_value: float, header_n: int) -> None:
    card = rc.open(out)
    rules = {r.rule: r for r, _ in declared_rules(card)}
    assert set(rules) == {"inspect.arith.match.accuracy", "inspect.arith.match.stderr"}
    assert all(not r.reported for r in rules.values())  # the header's numbers do not replay: none declared
    warnings = card.manifest.meta["import"]["warnings"]
    values = _means_per_sample(samples)
    accuracy = statistics.mean(values)
    stderr = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    headlines = _headlines(card)
    assert headlines["inspect.arith.match.accuracy"] == (pytest.approx(accuracy), len(values))
    if stderr is None:
        assert headlines["inspect.arith.match.stderr"][0] is None
    else:
        assert headlines["inspect.arith.match.stderr"][0] == pytest.approx(stderr)
    (accuracy_warning,) = [w for w in warnings if "match/accuracy" in w]
    assert f"reports accuracy {header_value!r} over {header_n} scored sample(s)" in accuracy_warning
    assert f"give {accuracy:.10g} over {len(values)} scored sample(s)" in accuracy_warning
    assert "Not replayed" in rules["inspect.arith.match.accuracy"].description
    # Inspect's own numbers are kept where they were
    header = card.manifest.meta["inspect"]["logs"][0]["results"]["scores"][0]["metrics"]
    assert header["accuracy"]["value"] == header_value and header["stderr"]["value"] == header_value


def test_a_rescored_log_whose_header_was_not_updated_validates(tmp_path):
    path, out = MISMATCH / "rescored-header.json", tmp_path / "card"
    _import_and_validate(path, out, warnings=3)
    samples = json.loads(path.read_text())["samples"]
    _check_mismatch_card(out, path, samples, 0.375, 2)
    # the header's scorer that no sample carries: no rule (it could not be applied), and said so
    (judge,) = [w for w in rc.open(out).manifest.meta["import"]["warnings"] if "judge/accuracy" in w]
    assert "no rule was declared" in judge and "score.judge" in judge


def test_an_eval_log_missing_a_sample_its_header_counts_validates(tmp_path):
    path, out = MISMATCH / "missing-sample.eval", tmp_path / "card"
    _import_and_validate(path, out, warnings=2)
    with SafeZip(path, str(path)) as zf:
        samples = [json.loads(zf.read(n)) for n in zf.names() if n.startswith("samples/")]
    assert len(samples) == 3
    _check_mismatch_card(out, path, samples, 0.375, 2)
    (drop,) = [d for d in rc.open(out).manifest.drops if d.target == "episodes"]
    assert drop.count == 1 and "never written" in drop.reason


def test_a_consistent_log_keeps_its_reported_numbers(tmp_path):
    result, _ = run_import("inspect", [SOURCES / "inspect" / "synthetic.json"], tmp_path / "card")
    assert result.warnings == [] and all(r["reported"] for r in result.rules)


def test_replay_compares_as_validate_does():
    scores = ImportedScores()
    for i, value in enumerate([1.0, 0.0, None, 1.0]):
        scores.add({"episode_id": f"e{i}", "task_id": f"t{i}", "status": "completed", "agent": "m", "trial": 0,
                    "meta.inspect_log": "L", **({} if value is None else {"score.s": value})})
    doc = {"rule": "r", "score": "score.s", "on_missing": "exclude", "select": "meta.inspect_log == 'L'",
           "aggregate": {"group_by": ["agent"], "unit": "task_id"},
           "reported": [{"group": {"agent": "m"}, "value": 2 / 3, "n": 3, "tolerance": 1e-9}]}
    good = replay(scores, doc)
    assert good.ok and good.value == pytest.approx(2 / 3) and good.n == 3
    wrong_n = copy.deepcopy(doc)
    wrong_n["reported"][0]["n"] = 4
    assert not replay(scores, wrong_n).ok
    assert replay(scores, {**doc, "score": "score.nothing"}).problem is not None


# -- Inspect's real logs ---------------------------------------------------------------------------------
def _replayable(header, samples) -> dict[tuple[str, str], tuple[float, int | None]]:
    """(score name, metric key) -> (value, scored samples) of every header metric a rule replays
    (older logs do not record scored_samples: then the samples carrying the score are counted)."""
    out = {}
    for entry in (header.get("results") or {}).get("scores") or []:
        carrying = {s["id"] for s in samples if (entry.get("scorer") or entry["name"]) in (s.get("scores") or {})}
        for key, metric in entry["metrics"].items():
            name = metric.get("name", key).split("/")[-1]
            value, n = metric.get("value"), entry.get("scored_samples")
            counted = len(carrying) if n is None else n
            if metric.get("params") or not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            if name in ("accuracy", "mean") or (name in ("std", "var", "stderr") and counted >= 2):
                out[(entry["name"], key)] = (value, n)
    return out


def _read(path):
    """(header, samples, members) of a real log: plain json; a .eval's members through SafeZip (the
    0.3.285 logs are zstd, which Python's zipfile cannot read); members None for a .json log."""
    if path.suffix == ".eval":
        with SafeZip(path, str(path)) as zf:
            members = {n: zf.read(n) for n in zf.names()}
        header = json.loads(members["header.json"]) if "header.json" in members else {}
        return header, [json.loads(b) for n, b in members.items() if n.startswith("samples/")], members
    log = json.loads(path.read_text())
    return log, log["samples"], None


@pytest.mark.parametrize("rel", ALL_LOGS)
def test_every_real_log_declares_inspects_numbers_as_reported(tmp_path, rel):
    path = external(rel)
    header, samples, _ = _read(path)
    result, card = run_import("inspect", [path], tmp_path / "card")
    assert_valid(result.path)
    assert result.warnings == []  # Inspect's own logs agree with their samples
    expected = _replayable(header, samples)
    reported = {r["rule"]: r["reported"][0] for r in result.rules}
    assert len(reported) == len(expected) and all(reported.values())
    for (name, key), (value, n) in expected.items():
        matching = [r for rule, r in reported.items() if f".{name}.{key}".replace("-", "_") in rule]
        assert any(r["value"] == value and r.get("n") == n for r in matching), (name, key, value, reported)


def _flip(value):
    if isinstance(value, dict):
        return {k: _flip(v) for k, v in value.items()}
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return "I" if value == "C" else "C"


def _disagree(sample_list: list[dict], header: dict, kind: str, rng: random.Random) -> None:
    """Make the samples disagree with the header: drop a scored sample, re-score one, or move a
    header metric."""
    scored = [i for i, s in enumerate(sample_list) if s.get("scores")]
    if kind == "header" or not scored:
        entry = rng.choice(header["results"]["scores"])
        metric = rng.choice(list(entry["metrics"].values()))
        metric["value"] = (metric["value"] if isinstance(metric["value"], (int, float)) else 0) + 0.25
    elif kind == "drop" and len(sample_list) > 1:  # a log of no sample is no card (exit 1, as it should)
        del sample_list[rng.choice(scored)]
    else:
        sample = sample_list[rng.choice(scored)]
        name = rng.choice(sorted(sample["scores"]))
        sample["scores"][name]["value"] = _flip(sample["scores"][name]["value"])


@pytest.mark.fuzz
@pytest.mark.parametrize("rel", ALL_LOGS)
def test_real_logs_made_to_disagree_with_their_header_import_and_validate(tmp_path, rel):
    path = external(rel)
    rng = random.Random(f"{seed()}:{rel}")
    for case in range(cases(1)):
        kind = rng.choice(["header", "drop", "rescore"])
        header, samples, members = _read(path)
        if not (header.get("results") or {}).get("scores"):
            pytest.skip(f"{rel} reports no scores: nothing for its samples to disagree with")
        out_log = tmp_path / f"{case}{path.suffix}"
        if members is None:
            _disagree(header["samples"], header, kind, rng)
            out_log.write_text(json.dumps(header))
        else:
            sample_list = samples
            before = len(sample_list)
            _disagree(sample_list, header, kind, rng)
            kept = {f"samples/{s['id']}_epoch_{s['epoch']}.json": s for s in sample_list}
            assert len(kept) == len(sample_list) and len(kept) >= before - 1
            rest = {n: b for n, b in members.items() if not n.startswith("samples/") and n != "header.json"}
            zstd_zip(out_log, {"header.json": json.dumps(header).encode(), **rest,
                               **{n: json.dumps(s).encode() for n, s in kept.items()}})
        out = tmp_path / f"card{case}"
        result = _cli("import", "inspect", str(out_log), "-o", str(out))
        assert result.exit_code == 0, (kind, result.output)
        check = _cli("validate", str(out))
        assert check.exit_code == 0, (kind, check.output)
        card = rc.open(out)
        unreported = [r.rule for r, _ in declared_rules(card) if not r.reported]
        assert len(card.manifest.meta["import"].get("warnings", [])) >= len(unreported), (kind, unreported)
