"""The Ray engine gives the local engine's numbers, field for field, on a local Ray with 2
worker CPUs (one session for the module: Ray starts slowly); its errors are the local ones."""

from __future__ import annotations

import os
import random
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import IntegrityError, RuleError
from rollout_cards.rules.render import render
from rollout_cards.rules.rescore import rescore
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases, seed
from tests.rules.conftest import build_card
from tests.scale.conftest import reblocked, row_groups, write_rules

pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

RULES = REPO / "fixtures" / "rules"


def _both(card, rules):
    """The JSON rescore of `card` under `rules` by each engine."""
    local = render(rescore(card, rules), "json")
    ray = render(rescore(card, rules, engine="ray"), "json")
    return local, ray


@pytest.fixture(scope="module")
def feature_rules(tmp_path_factory):
    return write_rules(tmp_path_factory.mktemp("rules"))


@pytest.fixture(scope="module")
def synthetic_in_blocks(tmp_path_factory):
    """The synthetic card with steps in row groups of 37 rows: 41 blocks, most episodes span two."""
    with pytest.MonkeyPatch.context() as mp:
        return reblocked(rc.open(FIXTURE_CARDS / "synthetic"), tmp_path_factory.mktemp("c") / "card", 37, mp)


def test_the_session_has_two_worker_cpus(ray_session):
    assert ray_session.cluster_resources()["CPU"] == 2


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURE_CARDS.iterdir()))
def test_every_fixture_card_is_identical_on_ray(ray_session, name, feature_rules):
    card = rc.open(FIXTURE_CARDS / name)
    rules = feature_rules if "steps" in card.manifest.tables.model_fields_set or card.manifest.tables.steps.rows else []
    try:
        local = render(rescore(card, rules), "json")
    except RuleError:  # the feature rules read columns this card lacks: its own rules only
        rules = []
        local = render(rescore(card, rules), "json")
    assert render(rescore(card, rules, engine="ray"), "json") == local


def test_episodes_spanning_blocks_give_identical_numbers(ray_session, synthetic_in_blocks, feature_rules):
    card = synthetic_in_blocks
    assert row_groups(card) > 30
    local, ray = _both(card, [*feature_rules, RULES / "best_of_3.yaml", RULES / "errors_excluded.yaml"])
    assert ray == local
    # and the blocked card scores as the one-block original does (exact features merge across blocks)
    def values(report):
        return [(r.group, r.stratum, r.value, r.n) for run in report.runs if run.rule.startswith("feat.")
                for r in run.results]

    exact = feature_rules[2:4]  # integer and ordered features: no float sum whose order could show
    original = rc.open(FIXTURE_CARDS / "synthetic")
    assert values(rescore(card, exact, engine="ray")) == values(rescore(original, exact))


def test_cli_engine_ray_prints_the_local_json(ray_session, synthetic_in_blocks, feature_rules):
    args = ["rescore", str(synthetic_in_blocks.path), "-f", "json", "--seed", "3"]
    for rule in feature_rules:
        args += ["-r", str(rule)]
    local = CliRunner().invoke(app, args)
    ray = CliRunner().invoke(app, [*args, "--engine", "ray"])
    assert local.exit_code == 0, local.output
    assert ray.exit_code == 0, ray.output
    assert ray.stdout == local.stdout


KINDS = ["message", "tool_call", "tool_result"]
NAMES = ["search_flights", "book", "cancel", None]


def _random_card(path: Path, rng: random.Random) -> rc.Card:
    episodes, steps = [], []
    for i in range(rng.randint(1, 40)):
        eid = f"ep-{i:03d}"
        episodes.append({"episode_id": eid, "task_id": f"t{rng.randint(0, 6)}", "agent": rng.choice(["alpha", "beta"]),
                         "status": rng.choice(["completed"] * 4 + ["error", "timeout"]),
                         "task.category": rng.choice(["a", "b"]), "score.success": rng.random() < 0.5})
        for s in range(rng.randint(0, 30)):
            kind = rng.choice(KINDS)
            steps.append({"episode_id": eid, "seq": s, "kind": kind,
                          "name": rng.choice(NAMES) if kind != "message" else None,
                          "content": f"about t{rng.randint(0, 6)}" if kind == "message" else None,
                          "is_error": rng.random() < 0.3 if kind == "tool_result" else None,
                          "output_tokens": rng.choice([None, rng.randint(0, 10**6)]),
                          "cost_usd": rng.choice([None, rng.random() * 10 ** rng.randint(-8, 8)])})
    with pytest.MonkeyPatch.context() as mp:
        card = build_card(path / "src", episodes, steps)
        return reblocked(card, path / "card", rng.randint(1, 50), mp)


@pytest.mark.fuzz
@settings(max_examples=cases(3), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=st.integers(min_value=0, max_value=2**32))
def test_random_cards_are_identical_on_ray(ray_session, feature_rules, case):
    rng = random.Random(seed() * 7919 + case)
    with tempfile.TemporaryDirectory() as tmp:
        card = _random_card(Path(tmp), rng)
        rules = [r for r in feature_rules if "episode_column" not in r.name]
        try:
            local = render(rescore(card, rules), "json")
        except RuleError as exc:  # e.g. every episode excluded: the same error on Ray
            with pytest.raises(type(exc), match="."):
                rescore(card, rules, engine="ray")
            return
        assert render(rescore(card, rules, engine="ray"), "json") == local


def test_a_changed_steps_part_is_an_integrity_error_on_ray(ray_session, synthetic_in_blocks, tmp_path, feature_rules):
    import shutil

    copy = tmp_path / "card"
    shutil.copytree(synthetic_in_blocks.path, copy)
    (part,) = rc.open(copy).manifest.tables.steps.paths
    data = bytearray((copy / part).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / part).write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=part):
        rescore(rc.open(copy), feature_rules[:1], engine="ray")
    result = CliRunner().invoke(app, ["rescore", str(copy), "-r", str(feature_rules[0]), "--engine", "ray"])
    assert result.exit_code == 1 and "inventory" in result.output and result.stdout == ""


def _ray_task_workers() -> list[int]:
    """Ray worker processes of this test's session that are running a task (not idle)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ray::") and "IDLE" not in cmdline and "Map" in cmdline:
            out.append(int(pid))
    return out


@pytest.mark.slow
def test_a_killed_worker_is_retried_and_the_numbers_stay(ray_session, tmp_path, feature_rules):
    rng = random.Random(5)
    episodes = [{"episode_id": f"e{i:05d}", "task_id": f"t{i % 50}", "agent": ["alpha", "beta"][i % 2],
                 "status": "completed"} for i in range(2000)]
    steps = [{"episode_id": e["episode_id"], "seq": s, "kind": "tool_call", "name": rng.choice(NAMES[:3]),
              "cost_usd": rng.random()} for e in episodes for s in range(20)]
    with pytest.MonkeyPatch.context() as mp:
        card = reblocked(build_card(tmp_path / "src", episodes, steps), tmp_path / "card", 200, mp)
    rules = [feature_rules[0], feature_rules[3]]
    local = render(rescore(card, rules), "json")
    killed: list[int] = []
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set() and not killed:
            for pid in _ray_task_workers():
                os.kill(pid, signal.SIGKILL)  # a worker process this session started, by its id
                killed.append(pid)
                break
            time.sleep(0.005)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        try:
            ray = render(rescore(card, rules, engine="ray"), "json")
        except rc.errors.EngineError as exc:  # retries exhausted: one clear error, no result
            assert "no result was computed" in str(exc)
            ray = None
    finally:
        stop.set()
        thread.join()
    assert killed, "no Ray worker was seen running a block task"
    print(f"killed worker {killed[0]}; the job {'finished with the local numbers' if ray else 'failed with one EngineError'}")
    if ray is not None:
        assert ray == local


# ------------------------------------------------------------------------------ validate on Ray

#: Packages of the hostile corpus whose codes come from what Ray computes (digests, replay) or
#: from the table scans, plus a clean one.
VALIDATE_PACKAGES = ["file-digest-mismatch", "file-size-mismatch", "reported-mismatch",
                     "step-seq-not-contiguous", "parquet-unreadable"]


def _findings(report):
    return [f.model_dump(mode="json") for f in report.findings]


def test_validate_on_ray_gives_the_local_findings(ray_session, tmp_path_factory):
    import sys

    from rollout_cards.validate import validate

    sys.path.insert(0, str(REPO / "fixtures"))
    import bad_cards

    root = tmp_path_factory.mktemp("corpus") / "bad"
    expected = bad_cards.build(root, runtime=True)["packages"]
    for name in VALIDATE_PACKAGES:
        local = validate(root / name)
        ray = validate(root / name, engine="ray")
        assert sorted(ray.codes()) == sorted(local.codes()) and ray.codes(), name
        assert _findings(ray) == _findings(local), name
        assert not ray.valid and expected[name]["codes"]
    clean = validate(FIXTURE_CARDS / "synthetic", engine="ray")
    assert clean.valid and _findings(clean) == _findings(validate(FIXTURE_CARDS / "synthetic"))
    result = CliRunner().invoke(app, ["validate", str(root / "file-digest-mismatch"), "--engine", "ray", "-f", "json"])
    assert result.exit_code == 1 and "file-digest-mismatch" in result.stdout


# ------------------------------------------------------------------------------ cards by URI


def test_cards_by_uri_and_on_other_filesystems_score_the_same_on_ray(ray_session, synthetic_in_blocks, feature_rules):
    import pyarrow.fs as pafs

    from rollout_cards.io.fs_source import FileSystemSource

    path = Path(synthetic_in_blocks.path)
    local = render(rescore(synthetic_in_blocks, feature_rules), "json")
    by_uri = rc.open(path.as_uri())
    subtree = FileSystemSource(pafs.SubTreeFileSystem(str(path.parent), pafs.LocalFileSystem()), path.name,
                               name=str(path))
    assert render(rescore(by_uri, feature_rules, engine="ray"), "json") == local
    assert render(rescore(rc.open(subtree), feature_rules, engine="ray"), "json") == local
