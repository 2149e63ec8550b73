"""Rendering a rescore report: every format carries the same numbers."""

from __future__ import annotations

import csv
import io
import json

import pytest

from rollout_cards.rules import render, rescore
from tests.conftest import FIXTURE_CARDS, REPO


@pytest.fixture(scope="module")
def report():
    rules = REPO / "fixtures" / "rules"
    return rescore(FIXTURE_CARDS / "synthetic", [rules / "best_of_3.yaml", rules / "profit_median.yaml"], seed=0)


def test_json_follows_the_documented_shape(report):
    doc = json.loads(render(report, "json"))
    assert doc["card"] == "synthetic-airline" and doc["seed"] == 0
    assert {"results", "comparisons", "rank_changes", "rules"} <= doc.keys()
    first = doc["results"][0]
    for key in ("rule", "version", "group", "statistic", "value", "ci_low", "ci_high", "interval", "n",
                "n_excluded", "excluded_by_status", "n_selected_out", "warnings", "display"):
        assert key in first
    assert set(first["interval"]) >= {"method", "level", "unit", "n_units"}
    types = {c["type"] for c in doc["comparisons"]}
    assert types == {"rule", "group"}
    assert {c["group"]["agent"] for c in doc["rank_changes"]} == {"alpha", "beta"}


def test_csv_has_one_row_per_result_comparison_and_rank_change(report):
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    kinds = [r["record"] for r in rows]
    assert kinds.count("result") == len(report.results)
    assert kinds.count("rank_change") == len(report.rank_changes)
    best_alpha = next(r for r in rows if r["record"] == "result" and r["rule"] == "synthetic.best_of_3" and r["group"] == "agent=alpha")
    assert float(best_alpha["value"]) == pytest.approx(31 / 36)


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_text_formats_show_values_differences_and_rank_changes(report, fmt):
    text = render(report, fmt)
    assert "0.8611 [0.7134, 0.9392]" in text
    assert "rank changes" in text and "best-of-k" in text
    assert "undefined (no interval for a pooled median" in text
    if fmt == "markdown":
        assert "| group | rule |" in text


def test_unknown_format(report):
    with pytest.raises(ValueError, match="unknown format"):
        render(report, "xml")


def test_every_format_carries_p_values_noise_and_ranks(report):
    doc = json.loads(render(report, "json"))
    assert doc["adjust"]["method"] == "holm" and "comparisons with a defined p-value" in doc["adjust"]["family"]
    rule_diff = next(c for c in doc["comparisons"] if c["type"] == "rule" and c["p_value"] is not None)
    assert rule_diff["p_adjusted"] >= rule_diff["p_value"] and rule_diff["pairing"]
    assert {r["noise"] for r in doc["rank_changes"]} <= {"inside the noise", "beyond the noise"}
    assert {r["rule"] for r in doc["rankings"]} >= {"synthetic.success_rate", "synthetic.best_of_3"}
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    diffs = [r for r in rows if r["record"] == "rule_difference" and r["p_value"]]
    assert diffs and all(float(r["p_adjusted"]) >= float(r["p_value"]) for r in diffs)
    md = render(report, "markdown")
    assert "| p adjusted |" in md and "## ranks" in md and "inside the noise" in md
