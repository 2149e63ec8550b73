"""Crash safety: a writer killed with SIGKILL keeps its ended episodes; `rcard recover` finishes the card."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

import rollout_cards as rc
from rollout_cards.cli import app
from rollout_cards.errors import CardFormatError
from rollout_cards.io.finalize import INTERRUPTED_ERROR_TYPE

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
    assert not (path / ".rcard-staging").exists()

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
