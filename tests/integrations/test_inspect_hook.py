"""The live Inspect hook: the card written during eval() equals `rcard import` of the finished log."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("inspect_ai", reason="the live hook needs the `inspect` extra (inspect-ai)")

import rollout_cards as rc  # noqa: E402
from rollout_cards.integrations import inspect as hook  # noqa: E402
from tests.importers.conftest import assert_valid, run_import  # noqa: E402
from tests.importers.inspect_runs import run  # noqa: E402

STEP_COLUMNS = ["episode_id", "seq", "kind", "role", "name", "call_id", "content", "is_error", "input_tokens",
                "output_tokens", "cost_usd", "t"]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    cards = tmp_path_factory.mktemp("live")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(hook.ENV, str(cards))
        logs = run(tmp_path_factory.mktemp("logs"), "eval", ["reducers"])
    (card_dir,) = [p for p in cards.iterdir() if p.is_dir()]
    return card_dir, logs["reducers"]


def test_the_hook_is_registered_through_the_entry_point():
    from importlib.metadata import entry_points

    (ep,) = [ep for ep in entry_points(group="inspect_ai") if ep.name == "rollout_cards"]
    assert ep.value == "rollout_cards.integrations.inspect"


def test_live_card_holds_what_import_of_the_finished_log_holds(live, tmp_path):
    card_dir, log = live
    assert_valid(card_dir)
    _, imported = run_import("inspect", [log], tmp_path / "imported")
    live_card = rc.open(card_dir)
    a = sorted(live_card.episodes().to_pylist(), key=lambda r: r["episode_id"])
    b = sorted(imported.episodes().to_pylist(), key=lambda r: r["episode_id"])
    assert [r["episode_id"] for r in a] == [r["episode_id"] for r in b] and len(a) == 18
    compared = [c for c in b[0] if c.startswith("score.") or c in (
        "status", "task_id", "trial", "agent", "error_message", "error_type", "input_tokens", "output_tokens",
        "total_tokens", "n_steps", "started_at", "ended_at")]
    assert any(c.startswith("score.") for c in compared)
    for x, y in zip(a, b, strict=True):
        for column in compared:
            assert _same(x.get(column), y[column]), (x["episode_id"], column, x.get(column), y[column])
    steps_a = sorted(live_card.steps(columns=STEP_COLUMNS).to_pylist(), key=lambda s: (s["episode_id"], s["seq"]))
    steps_b = sorted(imported.steps(columns=STEP_COLUMNS).to_pylist(), key=lambda s: (s["episode_id"], s["seq"]))
    assert steps_a == steps_b and steps_a
    assert live_card.rule_files() == imported.rule_files() and imported.rule_files()


def test_a_hook_failure_is_recorded_in_the_cards_drops(tmp_path, monkeypatch):
    real = hook._episode

    def failing(sample, *args):
        if sample["id"] == 2:
            raise ValueError("mapping broke")
        return real(sample, *args)

    monkeypatch.setattr(hook, "_episode", failing)
    monkeypatch.setenv(hook.ENV, str(tmp_path / "cards"))
    run(tmp_path / "logs", "eval", ["limits"])
    (card_dir,) = list((tmp_path / "cards").iterdir())
    card = rc.open(card_dir)
    assert sorted(card.episodes(columns=["task_id"]).column("task_id").to_pylist()) == [
        f"rc_limits/{i}" for i in (1, 3, 4, 5, 6)]
    (drop,) = [d for d in card.manifest.drops if d.declaration == "source_malformed"]
    assert drop.count == 1 and "sample 2 epoch 1: ValueError: mapping broke" in drop.reason
    assert sorted(drop.affects) == sorted(card.rule_files())
    from rollout_cards.rules.loader import declared_rules
    from rollout_cards.validate import validate

    # Inspect's numbers counted the lost sample, so they do not replay: not declared as reported, and said
    assert validate(card_dir).valid
    rules = [r for r, _ in declared_rules(card)]
    warnings = card.manifest.meta["import"]["warnings"]
    assert rules and all(not r.reported for r in rules) and len(warnings) == len(rules)
    assert all("not declared as reported" in w for w in warnings)


def test_a_card_whose_eval_process_died_is_recoverable(tmp_path, monkeypatch):
    from rollout_cards.io.finalize import recover_card

    async def died(self, data):  # the process is gone before the task ends: nothing finalizes the card
        return None

    monkeypatch.setattr(hook.RolloutCardHook, "on_task_end", died)
    monkeypatch.setenv(hook.ENV, str(tmp_path / "cards"))
    run(tmp_path / "logs", "eval", ["limits"])
    (card_dir,) = list((tmp_path / "cards").iterdir())
    assert not (card_dir / "card.json").exists()
    recover_card(card_dir, force=True)  # force: the writing process (this one) is still alive
    card = rc.open(card_dir)
    assert len(card.episodes(columns=["episode_id"])) == 6
    assert_valid(card_dir)
