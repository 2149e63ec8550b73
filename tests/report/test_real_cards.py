"""`rcard report` on every fixture card and on cards imported from real logs of other tools
(../shared/data/external): the page builds, shows the card and every rule, and its headline
numbers are the ones `rcard rescore` prints."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

import rollout_cards as rc
from rollout_cards.importers import import_source
from rollout_cards.report import SampleLimits, build_report
from tests.conftest import FIXTURE_CARDS, external

# One real source (file or output directory) per importer, as a user would pass it.
REAL = {
    "inspect": ["inspect/inspect-0.3.285/2026-12-01T08-28-14-00-00_arith_VdKqNirU4VLYR5rpgCL6Mg.eval"],
    "inspect-json": ["inspect/inspect-0.3.285/2026-12-01T08-30-51-00-00_mcq_7AZHZLVce5zatHdaC2RYF8.json"],
    "tau-bench": ["tau-bench/gpt-4o-airline.json"],
    "tau2-bench": ["tau2-bench/gpt-4.1-2025-04-14_telecom_no-user_gpt-4.1-2025-04-14_4trials_5tasks.json"],
    "swe-bench": ["swe-bench/harness_deepseek_chat_dev/deepseek__deepseek-chat.deepseek_chat_dev.json"],
    "swe-agent": ["swe-agent/v1/6e44b9__sweagenttestrepo-1c2844.traj"],
    "mini-swe-agent": ["mini-swe-agent/deepseek_reasoner_dev"],
    "openhands": ["openhands/v0_multi_swe_bench/output.jsonl"],
    "lm-eval": ["lm-eval/negotiationtom_Qwen3-8B"],
    "agentbench": ["agentbench/medagentbench-std_gemini-2.0/runs.jsonl"],
    "agentlab": ["agentlab/result_df_trial_1_of_3.csv"],
    "atif": ["harbor/hello-world-timeout.trajectory.json"],
}


def _check(card_path: Path) -> None:
    card = rc.open(card_path)
    report = rc.rescore(card)
    text = build_report(card_path, [], limits=SampleLimits(episodes=20))
    assert card.manifest.id in text
    for result in report.results:
        assert result.rule in text
        assert result.display in text, (result.rule, result.label)  # the number rescore prints
    # The episode browser embeds a sample of real episodes with their stored steps.
    block = re.search(r"<script type='application/json' id='episodes-data'>(.*?)</script>", text, re.S)
    browser = json.loads(block.group(1))
    ids = set(card.episodes(columns=["episode_id"]).column("episode_id").to_pylist())
    embedded = [e["episode_id"] for e in browser["episodes"]]
    assert len(embedded) == min(20, len(ids)) and set(embedded) <= ids
    first = embedded[0]
    stored = card.episode_steps(first, columns=["seq"]).column("seq").to_pylist()
    seqs = [step["seq"] for step in browser["steps"].get(first, [])]
    assert seqs == stored[: len(seqs)] and (len(seqs) == len(stored) or browser["truncated"])


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURE_CARDS.iterdir() if (p / "card.json").is_file()))
def test_every_fixture_card(name: str) -> None:
    _check(FIXTURE_CARDS / name)


@pytest.mark.parametrize("name", sorted(REAL))
def test_cards_imported_from_real_logs(name: str, tmp_path: Path) -> None:
    sources = [external(rel) for rel in REAL[name]]
    fmt = "inspect" if name.startswith("inspect") else name
    import_source(fmt, sources, tmp_path / "card", created=datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
    _check(tmp_path / "card")
