"""A handful of scripts/import_sweep.py cases in CI: real files of other tools, mutated, through
`rcard import` with and without --keep-going, each imported card through `rcard validate`.
The cases are those the sweep found bad (each fixed since) and one of each other format."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import EXTERNAL, REPO

#: (sweep SEED, CASES_PER_SOURCE, case number): what `import_sweep.py N SEED --case K` reruns.
CASES = [
    (2, 60, 540),  # swe-bench empty_patch_instances = -1: a reported rate that could not replay
    (1, 3, 28),  # swe-bench --keep-going: an unresolved id left out, the report's rate still declared
    (2, 60, 852),  # lm-eval samples file cut: plan without a drop
    (2, 60, 854),  # lm-eval filter "": the plan doubled
    (2, 60, 865),  # lm-eval --keep-going: a left-out sample's value kept in the reported mean
    # and one case of seed 3 (30 per source) for each other format: inspect .eval, tau2, mini-swe-agent,
    # openhands, agentlab, atif
    (3, 30, 5), (3, 30, 245), (3, 30, 365), (3, 30, 395), (3, 30, 485), (3, 30, 545),
]


@pytest.fixture(scope="module")
def sweep():
    if not EXTERNAL.is_dir():
        pytest.skip("../shared/data/external is absent beside the repo: the sweep reads its real files")
    sys.path.insert(0, str(REPO / "scripts"))  # import_sweep imports json_mutations beside it
    try:
        spec = importlib.util.spec_from_file_location("import_sweep", REPO / "scripts" / "import_sweep.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return module


@pytest.mark.parametrize(("seed", "per_source", "k"), CASES, ids=[f"seed{s}-n{n}-case{k}" for s, n, k in CASES])
def test_a_sweep_case_is_not_bad(sweep, tmp_path, seed, per_source, k):
    (case,) = [c for c in sweep.numbered(per_source) if c[0] == k]
    _, fmt, rels, options = case
    assert sweep.one_case(k, fmt, rels, options, sweep.case_rng(seed, k), tmp_path, False) == []
