"""Crash safety: a writer killed with SIGKILL keeps its ended episodes; `rcard recover` finishes the card."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import CardFormatError
from rollout_cards.io.finalize import INTERRUPTED_ERROR_TYPE
from tests.fuzzing import cases, seed

PHASES = ("init", "rules", "episodes", "bulk", "artifacts", "drops", "close")

WRITER = textwrap.dedent(
    """
    import sys, time
    import rollout_cards as rc
    card = rc.CardWriter(sys.argv[1], id="crashy", title="Killed mid-run", timestamps=True, flush_rows=4)
    for i in range(5):
        with card.episode(task_id=f"t{i}", agent="a", trial=0, episode_id=f"done-{i}") as ep:
            ep.message("user", "hi")
            ep.tool_call("search", {"q": i}, call_id="c")
            ep.tool_result("c", "ok")
            ep.score("reward", float(i % 2))
    open_ep = card.episode(task_id="t9", agent="a", trial=0, episode_id="open-0", cond={"wind": "gusty"})
    for j in range(6):              # 6 > flush_rows: some steps reach disk, the rest stay buffered
        open_ep.message("assistant", f"thinking {j}")
    card.episode(task_id="t10", agent="b", episode_id="open-1")
    print("READY", flush=True)
    time.sleep(120)
    """
)


def _run_and_kill(path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "READY"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_then_recover(tmp_path):
    path = tmp_path / "card"
    _run_and_kill(path)
    assert not (path / "card.json").exists()
    with pytest.raises(CardFormatError):
        rc.open(path)

    result = CliRunner().invoke(app, ["recover", str(path)])
    assert result.exit_code == 0, result.output
    assert "7 episodes (2 recorded as cancelled)" in result.output

    card = rc.open(path)
    rows = {r["episode_id"]: r for r in card.episodes().to_pylist()}
    assert {f"done-{i}" for i in range(5)} <= set(rows)
    for i in range(5):
        assert rows[f"done-{i}"]["status"] == "completed"
        assert rows[f"done-{i}"]["n_steps"] == 3
        assert rows[f"done-{i}"]["score.reward"] == float(i % 2)
    for eid in ("open-0", "open-1"):
        assert rows[eid]["status"] == "cancelled"
        assert rows[eid]["error_type"] == INTERRUPTED_ERROR_TYPE
    assert rows["open-0"]["cond.wind"] == "gusty"
    kept = card.episode_steps("open-0")
    assert kept.num_rows == rows["open-0"]["n_steps"]
    assert kept.column("seq").to_pylist() == list(range(kept.num_rows))  # a contiguous prefix
    assert kept.num_rows < 6

    drops = {(d.target, d.loss_class): d for d in card.manifest.drops}
    ep_drop = drops[("episodes", "interrupted_run")]
    assert ep_drop.count == 2 and ep_drop.selector == f"error_type == '{INTERRUPTED_ERROR_TYPE}'"
    assert ("steps", "interrupted_run") in drops
    assert drops[("steps", "interrupted_run")].selector is None  # the steps table has no error_type
    assert not (path / ".rcard-staging").exists()
    valid = CliRunner().invoke(app, ["validate", str(path)])
    assert valid.exit_code == 0, valid.output

    again = CliRunner().invoke(app, ["recover", str(path)])
    assert again.exit_code == 1 and "already a finished card" in again.output


def test_recover_refuses_a_live_writer(tmp_path):
    path = tmp_path / "card"
    card = rc.CardWriter(path, id="live", title="Live")
    with pytest.raises(CardFormatError, match=f"process {os.getpid()}"):
        rc.recover_card(path)
    card.close()


def test_close_with_open_episode_records_it_cancelled(tmp_path):
    card = rc.CardWriter(tmp_path / "c", id="x", title="X", timestamps=False)
    card.episode(task_id="t", agent="a", episode_id="left-open").message("user", "hi")
    manifest = card.close()
    row = rc.open(tmp_path / "c").episodes().to_pylist()[0]
    assert row["status"] == "cancelled" and row["n_steps"] == 1
    assert manifest.drops[0].count == 1 and manifest.drops[0].target == "episodes"
    assert not any(d.target == "steps" for d in manifest.drops)  # close flushed every step


def test_opening_an_unfinished_card_points_to_recover(tmp_path):
    card = rc.CardWriter(tmp_path / "c", id="u", title="U")
    card.abort()
    with pytest.raises(CardFormatError, match="rcard recover"):
        rc.open(tmp_path / "c")
    with pytest.raises(CardFormatError, match="does not exist"):
        rc.recover_card(tmp_path / "nowhere")


# -- the crash fuzzer ------------------------------------------------------------------------
# A writer subprocess (tests/io/crash_writer.py) is SIGKILLed at chosen points; each card is
# then recovered and validated, and must hold everything the writer had finished.

_CARD_FILE = re.compile(
    r"^(episodes\.parquet|steps\.parquet|steps/part-\d{5}\.parquet|rules/[a-z_.]+\.yaml|artifacts/[0-9a-f]{64})$"
)


class _Driver:
    """The fork server: one interpreter start, then one fork per case."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("crash_writer.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def run(self, **command) -> dict:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the crash driver died"
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def driver():
    d = _Driver()
    yield d
    d.close()


def _read_log(path: Path) -> dict:
    out: dict = {"bulk": {}, "bulk_steps": Counter(), "ended": {}, "rules": set(), "artifacts": set(), "drops": set(), "phases": {}, "closed": False}
    for line in path.read_text().splitlines() if path.exists() else []:
        word, *rest = line.split(" ")
        if word == "ended":
            out["ended"][rest[0]] = (int(rest[1]), rest[2])
        elif word == "rule":
            out["rules"].add(rest[0])
        elif word == "bulk-episode":
            out["bulk"][rest[0]] = (int(rest[1]), rest[2])
        elif word == "bulk-step":
            out["bulk_steps"][rest[0]] += 1
        elif word == "artifact":
            out["artifacts"].add(rest[0])
        elif word == "drop":
            out["drops"].add(" ".join(rest))
        elif word == "phase":
            out["phases"][rest[0]] = int(rest[1])
        elif word == "lines":
            out["lines"] = int(rest[0])
        elif word == "closed":
            out["closed"] = True
    return out


def _check_recovered(path: Path, log: dict, what: str) -> str:
    """Recover and validate the card a killed writer left; returns the outcome's name."""
    runner = CliRunner()
    had_card_json = (path / "card.json").is_file()
    had_stage = (path / ".rcard-staging").is_dir()
    had_header = (path / ".rcard-staging" / "header.json").is_file()
    rec = runner.invoke(app, ["recover", str(path)])
    assert "Traceback" not in rec.output, f"{what}: {rec.output}"
    if not path.exists():
        assert rec.exit_code == 1 and "does not exist" in rec.output, f"{what}: {rec.output}"
        assert not log["ended"] and not log["rules"], what
        return "no card directory"
    if had_card_json and not had_stage:
        assert rec.exit_code == 1 and "already a finished card" in rec.output, f"{what}: {rec.output}"
        outcome = "finished"
    elif not had_card_json and had_stage and not had_header:
        assert rec.exit_code == 1 and "before it wrote the card's header" in rec.output, f"{what}: {rec.output}"
        assert not log["ended"] and not log["rules"], what
        return "killed before the header"
    elif not had_stage:
        assert rec.exit_code == 1, f"{what}: {rec.output}"
        assert not log["ended"], what
        return "killed before the staging area"
    else:
        assert rec.exit_code == 0, f"{what}: {rec.output}"
        outcome = "recovered"
    val = runner.invoke(app, ["validate", str(path)])
    assert val.exit_code == 0, f"{what}: recovered card does not validate:\n{val.output}"
    card = rc.open(path)
    rows = {r["episode_id"]: r for r in card.episodes(columns=["episode_id", "status", "n_steps"]).to_pylist()}
    for eid, (n_steps, status) in log["ended"].items():
        assert eid in rows, f"{what}: ended episode {eid} is missing"
        assert (rows[eid]["n_steps"], rows[eid]["status"]) == (n_steps, status), f"{what}: {eid}"
    for eid, (n_steps, status) in log["bulk"].items():
        assert eid in rows, f"{what}: bulk episode {eid} is missing"
        got = (rows[eid]["n_steps"], rows[eid]["status"])
        if log["bulk_steps"][eid] == n_steps:  # write_steps returned every step of it: untouched
            assert got == (n_steps, status), f"{what}: {eid}"
        else:  # untouched if its steps reached the card all the same, else cancelled keeping them
            assert got == (n_steps, status) or (got[1] == "cancelled" and log["bulk_steps"][eid] <= got[0] < n_steps), (
                f"{what}: {eid} {got}")
    if log["bulk"] and log["bulk_steps"]:
        stored = Counter(card.steps(columns=["episode_id"]).column(0).to_pylist())
        for eid, n in log["bulk_steps"].items():
            assert stored[eid] >= n, f"{what}: steps of {eid} written by write_steps are missing"
    assert log["rules"] <= {r.id for r in card.manifest.rules}, what
    inventory = {f.path for f in card.manifest.inventory.files}
    assert {f"artifacts/{sha}" for sha in log["artifacts"]} <= inventory, what
    assert log["drops"] <= {d.reason for d in card.manifest.drops}, what
    stray = [p for p in inventory if not _CARD_FILE.match(p)]
    assert not stray, f"{what}: the inventory publishes {stray}"
    on_disk = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}
    assert on_disk == inventory | {"card.json"}, f"{what}: files beside the inventory: {on_disk - inventory}"
    return outcome


@pytest.mark.fuzz
def test_sigkill_fuzzer_every_recovered_card_validates(tmp_path, driver):
    """Kill points are aimed at every phase of the writer (CardWriter(), add_rule, the episode
    loop, artifacts, drops, close/finalize) by counting the lines of rollout_cards/io/ it runs;
    every sixth case kills at a random time instead, inside pyarrow's C++ code too."""
    base = seed()
    rng = random.Random(base)
    dry = driver.run(dir=str(tmp_path / "dry"), log=str(tmp_path / "dry.log"), seed=base)
    dry_log = _read_log(tmp_path / "dry.log")
    assert dry == {"killed": False, "exit": 0} and dry_log["closed"], "the writer fails without a kill"
    starts = [dry_log["phases"][p] for p in PHASES] + [dry_log["lines"]]
    span = {p: max(1, starts[k + 1] - starts[k]) for k, p in enumerate(PHASES)}
    outcomes: Counter[str] = Counter()
    n = cases(30)
    for i in range(n):
        case_seed = base * 1_000_003 + i
        path, log_path = tmp_path / f"case{i}" / "card", tmp_path / f"case{i}.log"
        path.parent.mkdir()
        if i % 6 == 5:
            command = {"delay": rng.uniform(0.0, 0.12)}
            what = f"seed {case_seed}, killed after {command['delay']:.4f} s"
        else:
            phase = PHASES[i % len(PHASES)]
            command = {"phase": phase, "after": rng.randint(1, span[phase])}
            what = f"seed {case_seed}, killed at line {command['after']} of rollout_cards/io from phase {phase}"
        reply = driver.run(dir=str(path), log=str(log_path), seed=case_seed, **command)
        assert reply["exit"] != 3, f"{what}: the writer raised instead of dying"
        outcomes[_check_recovered(path, _read_log(log_path), what)] += 1
    print(f"crash fuzzer: {n} kills (seed {base}), outcomes {dict(outcomes)}")
    assert sum(outcomes.values()) == n
    assert outcomes["recovered"] >= n // 2, outcomes  # most kills land while the card is being written


# -- regressions of the crash fuzzer and of the kill points the review found -----------------


def test_recover_after_a_kill_before_the_header_is_a_clear_error(tmp_path):
    """Killed inside CardWriter() after the staging area was made, before the header: recover
    said FileNotFoundError (an internal error); now it says what happened (exit 1)."""
    stage = tmp_path / "c" / ".rcard-staging"
    stage.mkdir(parents=True)
    (stage / "writer.pid").write_text("")  # torn by the kill: no live owner
    result = CliRunner().invoke(app, ["recover", str(tmp_path / "c")])
    assert result.exit_code == 1, result.output
    assert "before it wrote the card's header" in result.output and "nothing to recover" in result.output
    card = rc.CardWriter(tmp_path / "c", id="again", title="Again", overwrite=True)
    card.close()
    assert CliRunner().invoke(app, ["validate", str(tmp_path / "c")]).exit_code == 0


def test_a_kill_during_the_rule_and_artifact_writes_leaves_no_half_file(tmp_path, monkeypatch):
    """The rule file was written in place (a kill left it empty, and recover refused the card,
    stranding every ended episode) and the artifact through `artifacts/.<sha>.tmp` (published by
    recover). Both now go through a temporary file in the staging area: a kill before the
    rename leaves the card without the file, never with half of it."""
    path = tmp_path / "c"
    card = rc.CardWriter(path, id="k", title="K", timestamps=False)
    with card.episode(task_id="t", agent="a", episode_id="ended") as ep:
        ep.message("user", "hi")
    real_replace = os.replace

    class Killed(BaseException):
        pass

    def killed(src, dst):
        raise Killed

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(Killed):
        card.add_rule("r.yaml", text="rule: k.r\nscore: \"score.r\"\n")
    with pytest.raises(Killed):
        card.add_artifact(b"blob")
    monkeypatch.setattr(os, "replace", real_replace)
    card.abort()  # what a kill leaves: the writer never closes
    (path / ".rcard-staging" / "writer.pid").write_text("")
    manifest = rc.recover_card(path)
    assert [f.path for f in manifest.inventory.files] == ["episodes.parquet", "steps.parquet"]
    assert rc.open(path).episodes().column("episode_id").to_pylist() == ["ended"]
    assert CliRunner().invoke(app, ["validate", str(path)]).exit_code == 0


def test_the_writer_writes_only_inside_its_staging_area(tmp_path, monkeypatch):
    """The invariant behind every kill point: each file the writer opens for writing is in
    `.rcard-staging/`; files reach the card only by a rename or link of a complete file."""
    import builtins

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c"
    opened: list[str] = []
    real_open, real_osfile, real_pqwriter = builtins.open, pa.OSFile, pq.ParquetWriter

    def note(target, mode):
        if any(m in mode for m in "wax+") and str(target).startswith(str(path)):
            opened.append(Path(target).relative_to(path).as_posix())

    def spy_open(file, mode="r", *a, **k):
        note(file, mode)
        return real_open(file, mode, *a, **k)

    def spy_osfile(target, mode="r", *a, **k):
        note(target, mode)
        return real_osfile(target, mode, *a, **k)

    class SpyWriter(real_pqwriter):
        def __init__(self, where, *a, **k):
            note(where, "w")
            super().__init__(where, *a, **k)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(pa, "OSFile", spy_osfile)
    monkeypatch.setattr(pq, "ParquetWriter", SpyWriter)
    with rc.CardWriter(path, id="w", title="W", flush_rows=2) as card:
        card.add_rule("r.yaml", text="rule: w.r\nscore: \"score.r\"\n")
        for i in range(3):
            with card.episode(task_id="t", agent="a", trial=i) as ep:
                ep.message("user", "hi")
                ep.tool_call("f", {}, call_id="c")
                ep.tool_result("c", "ok")
                ep.score("r", 1.0)
        card.add_artifact(b"blob")
        card.add_drop({"target": "steps.t", "action": "unobserved", "declaration": "source_missing",
                       "loss_class": "unavailable_source_field", "reason": "r"})
    assert opened and all(p.startswith(".rcard-staging/") for p in opened), opened


def test_ctrl_c_inside_the_writer_records_the_interrupted_run(tmp_path):
    path = tmp_path / "c"
    with pytest.raises(KeyboardInterrupt), rc.CardWriter(path, id="i", title="I", timestamps=False) as card:
        with card.episode(task_id="t0", agent="a", episode_id="done") as ep:
            ep.score("r", 1.0)
        with card.episode(task_id="t1", agent="a", episode_id="running") as ep:
            ep.message("user", "hi")
            raise KeyboardInterrupt
    c = rc.open(path)
    rows = {r["episode_id"]: r for r in c.episodes().to_pylist()}
    assert rows["done"]["status"] == "completed" and rows["running"]["status"] == "cancelled"
    (drop,) = [d for d in c.manifest.drops if d.loss_class == "interrupted_run"]
    assert drop.target == "episodes" and drop.count == 1 and "KeyboardInterrupt" in drop.reason
    assert drop.selector == "error_type == 'KeyboardInterrupt'"
    assert CliRunner().invoke(app, ["validate", str(path)]).exit_code == 0


def test_an_exception_leaving_the_writer_records_it_and_a_clean_exit_does_not(tmp_path):
    with pytest.raises(RuntimeError), rc.CardWriter(tmp_path / "e", id="e", title="E") as card:
        with card.episode(task_id="t0", agent="a") as ep:
            ep.score("r", 1.0)
        raise RuntimeError("harness lost its connection")
    (drop,) = rc.open(tmp_path / "e").manifest.drops
    assert drop.loss_class == "interrupted_run" and "RuntimeError: harness lost its connection" in drop.reason
    assert drop.selector is None and drop.count is None
    with rc.CardWriter(tmp_path / "ok", id="ok", title="OK") as card:
        card.episode(task_id="t0", agent="a").end()
    assert rc.open(tmp_path / "ok").manifest.drops == []


def test_a_kill_while_overwriting_restores_or_removes_the_old_card(tmp_path):
    """overwrite=True removed the old card in place (a kill left half of it); now it is
    renamed aside with an owner marker, and the next writer in the directory restores it
    (killed before the new card existed) or removes it (killed after)."""
    from rollout_cards.io import staging

    path = tmp_path / "c"
    rc.CardWriter(path, id="old", title="Old").close()
    aside = staging.claim_sibling(tmp_path, "c", "replaced", "0" * 12)
    os.rename(path, aside)  # the state a kill between the rename and the new staging area leaves
    (aside.with_name(aside.name + ".owner")).write_text('{"rcard": "replaced", "pid": 999999999}')
    assert staging.sweep_stale(tmp_path) == [aside]
    assert rc.open(path).manifest.id == "old" and sorted(os.listdir(tmp_path)) == ["c"]

    aside = staging.claim_sibling(tmp_path, "c", "replaced", "1" * 12)
    aside.mkdir()
    (aside / "card.json").write_text("{}")
    (aside.with_name(aside.name + ".owner")).write_text("")  # torn marker: no live owner
    rc.CardWriter(tmp_path / "other", id="n", title="N").close()  # a writer beside it sweeps
    assert sorted(os.listdir(tmp_path)) == ["c", "other"]


def test_sweep_removes_only_our_dead_directories(tmp_path):
    from rollout_cards.io import staging

    live = staging.claim_sibling(tmp_path, "a", "import", "a" * 12)  # owned by this process
    live.mkdir()
    dead = tmp_path / f".b.rcard-import-{'b' * 12}"
    dead.mkdir()
    (dead / "x").write_text("partial")
    (tmp_path / f"{dead.name}.owner").write_text('{"rcard": "import", "pid": 999999999}')
    unmarked = tmp_path / f".c.rcard-import-{'c' * 12}"  # a name like ours, no marker: not ours
    unmarked.mkdir()
    foreign = tmp_path / f".d.rcard-import-{'d' * 12}"
    foreign.mkdir()
    (tmp_path / f"{foreign.name}.owner").write_text('{"something": "else", "pid": 999999999}')
    assert staging.sweep_stale(tmp_path) == [dead]
    assert live.is_dir() and unmarked.is_dir() and foreign.is_dir() and not dead.exists()
    assert not (tmp_path / f"{dead.name}.owner").exists()


def _stop_like_a_kill(card, path):
    """What a SIGKILL leaves: the staging area as it is, with an owner that is gone."""
    card.abort()
    (path / ".rcard-staging" / "writer.pid").write_text("")


def test_an_old_writers_unclosed_bulk_steps_file_is_declared_lost(tmp_path):
    """Writers before the bulk steps were staged as parts left one unclosed Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c"
    card = rc.CardWriter(path, id="b", title="B", timestamps=False)
    _stop_like_a_kill(card, path)
    legacy = path / ".rcard-staging" / "bulk-steps.parquet"
    out = pq.ParquetWriter(legacy, pa.schema([("episode_id", pa.string())]))
    out.write_table(pa.table({"episode_id": ["e"]}))
    legacy.write_bytes(legacy.read_bytes())  # what a kill leaves: no footer yet
    manifest = rc.recover_card(path)
    (drop,) = manifest.drops
    assert drop.target == "steps" and "write_steps" in drop.reason and manifest.tables.steps.rows == 0


def test_a_stop_between_bulk_tables_recovers_a_card_that_validates(tmp_path):
    """A SIGKILL during the bulk path (issue 9): episodes written, some of their steps not
    yet; steps written whose episode was not yet. Before: one unclosed Parquet file, every
    bulk step lost and the recovered card failed validation (episode-step-count-mismatch)."""
    import pyarrow as pa

    path = tmp_path / "c"
    card = rc.CardWriter(path, id="b", title="B", timestamps=False)
    card.write_episodes(pa.table({
        "episode_id": ["e0", "e1", "e2"], "task_id": ["t", "t", "t"], "agent": ["a"] * 3,
        "status": ["completed", "error", "completed"], "error_type": [None, "Boom", None],
        "error_message": [None, "it broke", None], "n_steps": [2, 3, 1], "score.reward": [1.0, 0.0, 1.0],
    }))
    steps = {"seq": [0, 1, 0], "kind": ["message"] * 3, "content": ["a", "b", "c"]}
    assert card.write_steps(pa.table({"episode_id": ["e0", "e0", "e1"], **steps})) == 3
    card.write_steps(pa.table({"episode_id": ["e2", "x9", "x9"], **steps}))  # x9: its row never came
    (path / ".rcard-staging" / "tmp-bulk-steps-00002.arrow").write_bytes(b"ARROW1 torn")  # killed mid-write
    _stop_like_a_kill(card, path)
    manifest = rc.recover_card(path)
    valid = CliRunner().invoke(app, ["validate", str(path)])
    assert valid.exit_code == 0, valid.output
    c = rc.open(path)
    rows = {r["episode_id"]: r for r in c.episodes().to_pylist()}
    assert (rows["e0"]["status"], rows["e0"]["n_steps"]) == ("completed", 2)  # whole: untouched
    assert (rows["e2"]["status"], rows["e2"]["n_steps"]) == ("completed", 1)
    e1 = rows["e1"]
    assert (e1["status"], e1["error_type"], e1["n_steps"], e1["score.reward"]) == (
        "cancelled", INTERRUPTED_ERROR_TYPE, 1, 0.0)
    assert "status 'error', n_steps 3, error Boom: it broke" in e1["error_message"]
    assert c.steps().num_rows == 4 and "x9" not in c.steps(columns=["episode_id"]).column(0).to_pylist()
    drops = {(d.target, d.action): d for d in manifest.drops}
    assert drops[("episodes", "unobserved")].count == 1
    assert "'e1'" in drops[("episodes", "unobserved")].reason
    omitted = drops[("steps", "omitted")]
    assert omitted.count == 2 and "'x9'" in omitted.reason


def test_a_clean_close_leaves_bulk_tables_as_given(tmp_path):
    """Only a stop reconciles: a card closed normally with a wrong n_steps fails validation."""
    import pyarrow as pa

    path = tmp_path / "c"
    with rc.CardWriter(path, id="b", title="B", timestamps=False) as card:
        card.write_episodes(pa.table({"episode_id": ["e0"], "task_id": ["t"], "agent": ["a"],
                                      "status": ["completed"], "n_steps": [2]}))
        card.write_steps(pa.table({"episode_id": ["e0"], "seq": [0], "kind": ["message"]}))
    assert rc.open(path).episodes().column("n_steps").to_pylist() == [2]
    valid = CliRunner().invoke(app, ["validate", str(path)])
    assert valid.exit_code == 1 and "episode-step-count-mismatch" in valid.output


BULK_MEMORY = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    import rollout_cards as rc
    from rollout_cards.io import finalize
    finalize.ROW_GROUP_ROWS = 50  # row groups of 1 MB, so what stays is the parts' memory
    parts, rows, size = 8, 200, 20_000  # 8 bulk steps parts of 200 steps x 20 KB: 32 MB of step text
    card = rc.CardWriter(sys.argv[1], id="m", title="M", timestamps=False)
    card.write_episodes(pa.table({"episode_id": [f"e{p}" for p in range(parts)], "task_id": ["t"] * parts,
                                  "agent": ["a"] * parts, "status": ["completed"] * parts, "n_steps": [rows] * parts}))
    for p in range(parts):
        card.write_steps(pa.table({"episode_id": [f"e{p}"] * rows, "seq": list(range(rows)), "kind": ["message"] * rows,
                                   "content": [chr(97 + (i + p) % 26) * size for i in range(rows)]}))
    before = pa.default_memory_pool().max_memory()
    card.close()
    print(before, pa.default_memory_pool().max_memory())
    """
)


def test_closing_converts_the_bulk_steps_parts_one_at_a_time(tmp_path):
    """close() turns the staged bulk steps parts into steps.parquet reading one part's batches at a
    time; reading every part first held the whole steps table in memory (an Inspect log of 1 GB
    peaked at 3.3 GB of RSS, 0.6 GB after). Measured by Arrow's memory pool peak in a fresh process."""
    out = subprocess.run([sys.executable, "-c", BULK_MEMORY, str(tmp_path / "c")], capture_output=True, text=True,
                         check=True)
    before, peak = map(int, out.stdout.split())
    part = 200 * 20_000
    assert peak - before < 4 * part, (before, peak)  # all 8 parts at once would be >= 8 parts
    assert rc.open(tmp_path / "c").steps(columns=["episode_id"]).num_rows == 8 * 200


def test_bulk_steps_of_large_values_are_written_in_row_groups_of_bounded_bytes(tmp_path, monkeypatch):
    """Row groups hold at most ROW_GROUP_ROWS rows and about ROW_GROUP_BYTES of data: converting holds
    a row group in memory, and 64Ki rows of large steps made one of ~230 MB (mini-swe-agent). Checked
    with Parquet's own footer (each row group's uncompressed size) and against the values written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollout_cards.io import finalize

    monkeypatch.setattr(finalize, "ROW_GROUP_BYTES", 1 << 20)
    big = [f"{i:05d}" + chr(97 + i % 26) * 10_000 for i in range(400)]  # one 4 MB part: split
    small = [f"s{i}" for i in range(1000)]  # three parts of small values: one row group, as before
    path = tmp_path / "c"
    with rc.CardWriter(path, id="b", title="B", timestamps=False) as card:
        card.write_episodes(pa.table({"episode_id": ["big", "small"], "task_id": ["t", "t"], "agent": ["a", "a"],
                                      "status": ["completed"] * 2, "n_steps": [len(big), len(small)]}))
        card.write_steps(pa.table({"episode_id": ["big"] * len(big), "seq": list(range(len(big))),
                                   "kind": ["message"] * len(big), "content": big}))
        for part in range(3):
            rows = range(part * 334, min(len(small), (part + 1) * 334))
            card.write_steps(pa.table({"episode_id": ["small"] * len(rows), "seq": list(rows),
                                       "kind": ["message"] * len(rows), "content": [small[i] for i in rows]}))
    files = sorted(path.glob("steps*.parquet")) + sorted(path.glob("steps/*.parquet"))
    groups = [(f, f_meta.row_group(i)) for f in files for f_meta in [pq.ParquetFile(f).metadata]
              for i in range(f_meta.num_row_groups)]
    sizes = [g.total_byte_size for _, g in groups]
    assert len(groups) >= 4 and max(sizes) <= 1.25 * (1 << 20), sizes
    assert any(g.num_rows == len(small) for _, g in groups)  # the small parts together: one row group
    steps = rc.open(path).steps(columns=["episode_id", "seq", "content"]).to_pylist()
    by_episode = {e: [s["content"] for s in steps if s["episode_id"] == e] for e in ("big", "small")}
    assert by_episode == {"big": big, "small": small}
