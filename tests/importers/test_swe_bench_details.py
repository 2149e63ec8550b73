"""SWE-bench experiments submissions of the mini-SWE-agent family: per_instance_details.json.

Their folders (evaluation/verified|bash-only|multilingual/<date>_mini-...) hold
`per_instance_details.json` = {<instance>: {"resolved": bool, "cost": float, "api_calls": int}} in
place of results/results.json, and metadata.yaml or metadata.yml; written here in that shape.
"""

from __future__ import annotations

import json

import pytest

from rollout_cards.errors import SourceFormatError
from tests.importers.conftest import assert_valid, run_import

DETAILS = {"astropy__astropy-12907": {"cost": 0.72, "api_calls": 32, "resolved": True},
           "django__django-11099": {"cost": 0.15, "api_calls": 9, "resolved": False},
           "sympy__sympy-20590": {"cost": 1.25, "api_calls": 60, "resolved": True},
           "pytest-dev__pytest-5103": {"cost": 0.0, "api_calls": 0, "resolved": False}}


def _submission(root, details=DETAILS, metadata_name="metadata.yml"):
    d = root / "evaluation" / "bash-only" / "20260217_mini-v2.0.0_model-x"
    d.mkdir(parents=True)
    (d / "per_instance_details.json").write_text(json.dumps(details, indent=2))
    (d / metadata_name).write_text("info:\n  name: mini-SWE-agent + model-x\ntags:\n  model: [model-x]\n"
                                   "  org: [SWE-agent]\n  checked: false\n")
    return d


def test_per_instance_details_are_the_submissions_outcomes(tmp_path):
    d = _submission(tmp_path)
    result, card = run_import("swe-bench", [d], tmp_path / "c")
    eps = {e["task_id"]: e for e in card.episodes().to_pylist()}
    assert set(eps) == set(DETAILS)
    for iid, item in DETAILS.items():
        assert eps[iid]["score.resolved"] is item["resolved"] and eps[iid]["status"] == "completed"
        assert eps[iid]["cost_usd"] == item["cost"] and eps[iid]["meta.api_calls"] == item["api_calls"]
    rules = {r["rule"]: r for r in result.rules}
    (reported,) = rules["swe_bench.resolved_rate"]["reported"]
    assert reported["value"] == sum(i["resolved"] for i in DETAILS.values()) / len(DETAILS)
    assert card.manifest.provenance.agents[0].model == "model-x"  # from metadata.yml
    assert_valid(tmp_path / "c")


def test_details_win_over_a_results_json_beside_them(tmp_path):
    d = _submission(tmp_path, metadata_name="metadata.yaml")
    (d / "results").mkdir()
    (d / "results" / "results.json").write_text(json.dumps({"resolved": ["astropy__astropy-12907"]}))
    _result, card = run_import("swe-bench", [d], tmp_path / "c")
    assert card.episodes().num_rows == len(DETAILS)
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize(("item", "message"), [({"resolved": "yes"}, "resolved is 'yes'"),
                                               ({"resolved": True, "cost": -1}, "cost is -1"),
                                               ({"resolved": True, "api_calls": 1.5}, "api_calls is 1.5")])
def test_bad_details_name_the_instance_and_field(tmp_path, item, message):
    d = _submission(tmp_path, details={"a__a-1": item})
    with pytest.raises(SourceFormatError) as err:
        run_import("swe-bench", [d], tmp_path / "c")
    assert message in str(err.value) and "a__a-1" in str(err.value) and "per_instance_details.json" in str(err.value)
