"""The Ray engine gives the local engine's numbers, field for field, on a local Ray with 2
worker CPUs (one session for the module: Ray starts slowly); its errors are the local ones."""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import IntegrityError, RuleError
from rollout_cards.rules.engine import apply_rule
from rollout_cards.rules.loader import load_rule
from rollout_cards.rules.render import render
from rollout_cards.rules.rescore import rescore
from tests.conftest import FIXTURE_CARDS, REPO
from tests.fuzzing import cases, seed
from tests.rules.conftest import build_card
from tests.scale.conftest import (
    EDGE_RULES,
    NAMES,
    random_rows,
    reblocked,
    row_groups,
    run_killing,
    write_rules,
)

pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from rollout_cards.scale.ray_engine import RayEngine  # noqa: E402 - after the skip

RULES = REPO / "fixtures" / "rules"


def _both(card, rules):
    """The JSON rescore of `card` under `rules` by each engine."""
    local = render(rescore(card, rules), "json")
    ray = render(rescore(card, rules, engine="ray"), "json")
    return local, ray


@pytest.fixture(scope="module")
def feature_rules(tmp_path_factory):
    return write_rules(tmp_path_factory.mktemp("rules"))


#: Rules the Ray engine scores on the driver (their checks or pairings need every observation).
DRIVER_RULES = {
    "reduce_with_unit": """\
rule: driver.reduce_with_unit
score: "n"
features:
  n: {from: steps, where: "kind == 'tool_call'", agg: count}
reduce: {by: [task_id, agent], with: mean}
aggregate: {group_by: [agent], unit: task_id}
compare: {baseline: {agent: alpha}}
""",
    "pair_on_other": """\
rule: driver.pair_on_other
score: "score.success"
aggregate: {group_by: [agent], unit: task_id}
compare: {baseline: {agent: alpha}, pair_on: [trial]}
""",
}


@pytest.fixture(scope="module")
def driver_rules(tmp_path_factory):
    return write_rules(tmp_path_factory.mktemp("driver_rules"), DRIVER_RULES)


@pytest.fixture(scope="module")
def edge_rules(tmp_path_factory):
    return write_rules(tmp_path_factory.mktemp("edge_rules"), EDGE_RULES)


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


def test_units_over_several_episodes_blocks_give_identical_numbers(ray_session, synthetic_in_blocks, tmp_path,
                                                                 feature_rules, edge_rules):
    """The episodes table cut into row groups of 37 rows too (a task's episodes then lie in
    several episodes blocks, routed to one partition from each)."""
    import shutil
    import sys

    import pyarrow.parquet as pq

    sys.path.insert(0, str(REPO / "fixtures"))
    import bad_cards

    card = tmp_path / "card"
    shutil.copytree(synthetic_in_blocks.path, card)
    (part,) = rc.open(card).manifest.tables.episodes.paths
    pq.write_table(pq.read_table(card / part), card / part, row_group_size=37)
    bad_cards.rehash(card)
    assert pq.ParquetFile(card / part).num_row_groups == 6
    rules = [*feature_rules, *edge_rules, RULES / "best_of_3.yaml", RULES / "pass_at_2.yaml",
             RULES / "errors_excluded.yaml"]
    pairs, stats = _engine_runs(rc.open(card), rules)
    for ray, local in pairs:
        _same_run(ray, local)
    assert stats["split_rules"] == len(pairs) >= len(rules) - 1


def test_cli_engine_ray_prints_the_local_json(ray_session, synthetic_in_blocks, feature_rules):
    args = ["rescore", str(synthetic_in_blocks.path), "-f", "json", "--seed", "3"]
    for rule in feature_rules:
        args += ["-r", str(rule)]
    local = CliRunner().invoke(app, args)
    ray = CliRunner().invoke(app, [*args, "--engine", "ray"])
    assert local.exit_code == 0, local.output
    assert ray.exit_code == 0, ray.output
    assert ray.stdout == local.stdout


def _engine_runs(card, paths):
    """(RuleRun by the Ray engine, by apply_rule) of each rule that applies to `card` (the others
    raise the local error on Ray too), and the engine's counters."""
    engine = RayEngine(card)
    pairs = []
    for path in paths:
        rule = load_rule(path)
        try:
            local = apply_rule(card, rule, file=str(path))
        except RuleError as exc:
            with pytest.raises(RuleError) as ray:
                engine.run_rule(rule, file=str(path))
            assert str(ray.value) == str(exc)
            continue
        pairs.append((engine.run_rule(rule, file=str(path)), local))
    engine.finish()
    return pairs, engine.stats


def _same_run(ray, local):
    assert repr(ray.results) == repr(local.results)
    assert repr(ray.comparisons) == repr(local.comparisons)
    assert (ray.warnings, ray.n_episodes_total, ray.n_selected_out) == (
        local.warnings, local.n_episodes_total, local.n_selected_out)


def test_rules_are_scored_on_the_workers_and_only_unit_sums_reach_the_driver(
        ray_session, synthetic_in_blocks, feature_rules, edge_rules):
    card = synthetic_in_blocks
    paths = [*feature_rules, *edge_rules, *sorted(RULES.glob("*.yaml"))]
    pairs, stats = _engine_runs(card, paths)
    for ray, local in pairs:
        _same_run(ray, local)
    assert stats["split_rules"] == len(pairs) >= len(paths) - 1 and "driver_rules" not in stats
    assert stats["partial_rows"] == 0  # no step partial travelled to the driver


def test_what_reaches_the_driver_grows_with_the_units_not_the_episodes(ray_session, tmp_path, feature_rules):
    sent = []
    for n in (400, 3200):  # 8 times the episodes and steps, the same 20 tasks
        episodes = [{"episode_id": f"e{i:05d}", "task_id": f"t{i % 20}", "agent": ["alpha", "beta"][i % 2],
                     "status": "completed"} for i in range(n)]
        steps = [{"episode_id": e["episode_id"], "seq": s, "kind": "tool_call", "name": NAMES[s % 3]}
                 for e in episodes for s in range(5)]
        card = build_card(tmp_path / f"c{n}", episodes, steps)
        pairs, stats = _engine_runs(card, [feature_rules[0]])  # feat.count: unit task_id
        _same_run(*pairs[0])
        sent.append(stats["bytes_to_driver"])
    assert sent[1] < 1.1 * sent[0], sent


def test_rules_that_need_every_observation_are_scored_on_the_driver(ray_session, synthetic_in_blocks, driver_rules):
    pairs, stats = _engine_runs(synthetic_in_blocks, driver_rules)
    for ray, local in pairs:
        _same_run(ray, local)
    assert stats["driver_rules"] == len(driver_rules) and "split_rules" not in stats


def test_rule_versus_rule_pairing_on_other_units_is_identical(ray_session, synthetic_in_blocks, feature_rules):
    # feat.count's unit is task_id, feat.minmax's the episode: their difference pairs on the
    # coarser one, found from every observation (so both are scored on the driver)
    local, ray = _both(synthetic_in_blocks, [feature_rules[0], feature_rules[2]])
    assert ray == local


def test_a_rule_error_in_one_partition_is_the_local_error(ray_session, synthetic_in_blocks, tmp_path):
    path = tmp_path / "infinite.yaml"
    path.write_text("""\
rule: bad.infinite
score: "if(agent == 'alpha' and trial == 2, 1e308 * 10, 1)"
aggregate: {group_by: [agent], unit: task_id}
""")
    with pytest.raises(RuleError) as local:
        rescore(synthetic_in_blocks, [path])
    with pytest.raises(RuleError) as ray:
        rescore(synthetic_in_blocks, [path], engine="ray")
    assert str(ray.value) == str(local.value) and "infinite for" in str(local.value)
    assert (ray.value.file, ray.value.key) == (local.value.file, local.value.key)


def _random_card(path: Path, rng: random.Random) -> rc.Card:
    episodes, steps = random_rows(rng)
    with pytest.MonkeyPatch.context() as mp:
        card = build_card(path / "src", episodes, steps)
        return reblocked(card, path / "card", rng.randint(1, 50), mp)


@pytest.mark.fuzz
@settings(max_examples=cases(3), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=st.integers(min_value=0, max_value=2**32))
def test_random_cards_are_identical_on_ray(ray_session, feature_rules, edge_rules, case):
    rng = random.Random(seed() * 7919 + case)
    with tempfile.TemporaryDirectory() as tmp:
        card = _random_card(Path(tmp), rng)
        rules = [r for r in [*feature_rules, *edge_rules] if "episode_column" not in r.name]
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


def test_the_driver_does_not_hash_the_table_parts(ray_session, synthetic_in_blocks, feature_rules, driver_rules,
                                                 monkeypatch):
    from rollout_cards.io.integrity import FileVerifier

    hashed: list[str] = []
    original = FileVerifier._hash_file

    def spy(self, rel):  # noqa: ANN001 - the driver's own hashing (workers are other processes)
        hashed.append(rel)
        return original(self, rel)

    monkeypatch.setattr(FileVerifier, "_hash_file", spy)
    card = rc.open(synthetic_in_blocks.path)
    local = render(rescore(rc.open(synthetic_in_blocks.path), [feature_rules[0], driver_rules[0]]), "json")
    tables = {*card.manifest.tables.episodes.paths, *card.manifest.tables.steps.paths}
    assert tables <= set(hashed)  # the local engine hashes them
    hashed.clear()
    ray = render(rescore(card, [feature_rules[0], driver_rules[0]], engine="ray"), "json")
    assert ray == local and not tables & set(hashed), hashed


@pytest.mark.slow
@pytest.mark.parametrize("task", ["_step_blocks", "_score_partition", "Map"])
def test_a_killed_worker_is_retried_and_the_numbers_stay(ray_session, tmp_path, feature_rules, driver_rules, task):
    """A worker killed while it reads steps blocks, while it scores a partition (the rules that
    split by unit), or in the Ray Data map of a rule scored on the driver."""
    rng = random.Random(5)
    episodes = [{"episode_id": f"e{i:05d}", "task_id": f"t{i % 50}", "agent": ["alpha", "beta"][i % 2],
                 "status": "completed"} for i in range(2000)]
    steps = [{"episode_id": e["episode_id"], "seq": s, "kind": "tool_call", "name": rng.choice(NAMES[:3]),
              "cost_usd": rng.random()} for e in episodes for s in range(20)]
    with pytest.MonkeyPatch.context() as mp:
        card = reblocked(build_card(tmp_path / "src", episodes, steps), tmp_path / "card", 200, mp)
    rules = [feature_rules[0], feature_rules[3]] if task != "Map" else [driver_rules[0]]
    local = render(rescore(card, rules), "json")
    ray = run_killing(task, lambda: render(rescore(card, rules, engine="ray"), "json"))
    if ray is not None:
        assert ray == local


@pytest.mark.slow
def test_rays_retry_messages_go_to_stderr_and_stdout_is_only_the_json(ray_session, tmp_path, feature_rules):
    """`rcard rescore --engine ray -f json` in its own process (its own Ray) while a worker is
    killed: Ray's driver prints `(raylet) Task ... failed. There are N retries remaining` on
    stdout whatever log_to_driver says; stdout must hold the JSON alone, and Ray's lines stderr."""
    episodes = [{"episode_id": f"e{i:05d}", "task_id": f"t{i % 50}", "agent": ["alpha", "beta"][i % 2],
                 "status": "completed"} for i in range(2000)]
    steps = [{"episode_id": e["episode_id"], "seq": s, "kind": "tool_call", "name": NAMES[s % 3]}
             for e in episodes for s in range(20)]
    with pytest.MonkeyPatch.context() as mp:
        card = reblocked(build_card(tmp_path / "src", episodes, steps), tmp_path / "card", 200, mp)
    args = [sys.executable, "-m", "rollout_cards", "rescore", str(card.path), "-r", str(feature_rules[0]),
            "-f", "json"]
    local = subprocess.run(args, capture_output=True, text=True, check=True)
    ray = run_killing("_step_blocks", lambda: subprocess.run([*args, "--engine", "ray"], capture_output=True,
                                                             text=True, timeout=300))
    assert ray.returncode == 0, ray.stderr[-2000:]
    assert ray.stdout == local.stdout, ray.stdout[:2000]
    if "retries remaining" not in ray.stderr:
        # Under load the kill can land after the task ended: no retry, nothing to route (the
        # routing itself is tested without timing by the test below).
        pytest.skip("the killed worker had no task left to retry; Ray printed no retry line")


def test_rays_driver_printer_writes_to_stderr_inside_a_session(capsys):
    """Ray calls print_worker_logs(data, sys.stdout) for the messages the cluster pushes; inside
    driver_output_to_stderr they reach stderr, and the printer is restored after."""
    from ray._private import worker as ray_worker

    from rollout_cards.scale.ray_engine import driver_output_to_stderr

    data = {"pid": "raylet", "ip": "127.0.0.1", "is_err": False, "task_name": None, "actor_name": None,
            "lines": ["Task _step_blocks failed. There are 3 retries remaining."]}
    before = ray_worker.print_worker_logs
    with driver_output_to_stderr(), driver_output_to_stderr():  # nested sessions route once
        ray_worker.print_worker_logs(data, sys.stdout)
    got = capsys.readouterr()
    assert "retries remaining" in got.err and got.out == ""
    assert ray_worker.print_worker_logs is before


def test_a_packed_card_is_read_in_place_by_the_workers(ray_session, synthetic_in_blocks, tmp_path, feature_rules):
    from rollout_cards.io.archive import pack_card
    from rollout_cards.validate import validate

    packed = tmp_path / "card.rcard"
    pack_card(synthetic_in_blocks.path, packed)
    local = render(rescore(rc.open(packed), feature_rules), "json")
    assert render(rescore(rc.open(packed), feature_rules, engine="ray"), "json") == local
    assert _findings(validate(packed, engine="ray")) == _findings(validate(packed))
    # a member changed after the driver checked the archive: the workers' digests catch it
    data = bytearray(packed.read_bytes())
    (member,) = [m for m in rc.open(packed).source.members if m.name == "steps.parquet"]
    at = member.offset + member.size // 2
    tampered = tmp_path / "tampered.rcard"
    data[at] ^= 0xFF
    tampered.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="steps"):
        rescore(rc.open(tampered), feature_rules[:1], engine="ray")


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


def test_validate_on_ray_finds_what_spans_blocks_as_locally(ray_session, tmp_path):
    """Hostile tables cut into row groups of 37 rows: an episode id repeated in another block,
    a seq gap exactly at a block boundary, a step of no episode in the last block."""
    import shutil
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollout_cards.validate import validate

    sys.path.insert(0, str(REPO / "fixtures"))
    import bad_cards

    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "synthetic", card)
    episodes = pq.read_table(card / "episodes.parquet")
    ids = episodes.column("episode_id").to_pylist()
    ids[150] = ids[3]  # blocks 0 and 4
    episodes = episodes.set_column(episodes.schema.get_field_index("episode_id"), "episode_id", pa.array(ids))
    steps = pq.read_table(card / "steps.parquet")
    owners, seq = steps.column("episode_id").to_pylist(), steps.column("seq").to_pylist()
    boundary = next(i for i in range(37, len(seq), 37) if owners[i] == owners[i - 1])
    seq[boundary] += 1  # the gap is between the last row of one block and the first of the next
    owners[-1] = "ep-of-no-episode"
    steps = steps.set_column(steps.schema.get_field_index("seq"), "seq", pa.array(seq, steps.schema.field("seq").type))
    steps = steps.set_column(steps.schema.get_field_index("episode_id"), "episode_id", pa.array(owners))
    pq.write_table(episodes, card / "episodes.parquet", row_group_size=37)
    pq.write_table(steps, card / "steps.parquet", row_group_size=37)
    bad_cards.rehash(card)
    local, ray = validate(card), validate(card, engine="ray")
    codes = set(local.codes())
    assert {"episode-id-duplicate", "step-seq-not-contiguous", "step-episode-missing"} <= codes, codes
    assert _findings(ray) == _findings(local)


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
