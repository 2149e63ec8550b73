from __future__ import annotations

import random

from rollout_cards.importers.chunks import ChunkedTables
from rollout_cards.importers.steps import StepBuffer


class _Tables:
    """A writer stand-in that keeps what `ChunkedTables` writes."""

    def __init__(self):
        self.steps = []
        self.episodes = []

    def write_steps(self, table):
        self.steps.append(table)

    def write_episodes(self, table):
        self.episodes.append(table)


def test_a_chunk_is_written_once_its_step_text_reaches_the_budget():
    rng = random.Random(3)
    writer = _Tables()
    tables = ChunkedTables(writer, chunk_episodes=10_000, chunk_steps=10_000, chunk_chars=5_000)
    texts = []  # per episode: (content, args, payload) of each step
    for i in range(60):
        steps = StepBuffer(f"ep-{i}", file="src.json", record=str(i))
        mine = []
        for j in range(rng.randint(1, 6)):
            content = "é" * rng.randint(0, 400) if rng.random() < 0.8 else None
            args = '{"x": "' + "a" * rng.randint(0, 200) + '"}' if j % 2 else None
            payload = {"k": "b" * rng.randint(0, 100)} if rng.random() < 0.3 else None
            steps.add("message", role="user", content=content, args=args, payload=payload)
            mine.append((content, args, steps.rows[-1][14]))
        tables.add({"episode_id": f"ep-{i}", "task_id": "t", "agent": "a", "status": "completed"}, steps)
        texts.append(mine)
    tables.finish()
    # The reference: plain Python over the texts — a chunk ends after the episode that brings it to 5,000 characters.
    expected, steps_in_chunk, chars = [], 0, 0
    for mine in texts:
        steps_in_chunk += len(mine)
        chars += sum(len(v) for step in mine for v in step if v is not None)
        if chars >= 5_000:
            expected.append(steps_in_chunk)
            steps_in_chunk = chars = 0
    if steps_in_chunk:
        expected.append(steps_in_chunk)
    assert len(expected) > 3
    assert [t.num_rows for t in writer.steps] == expected
    assert [v for t in writer.steps for v in t.column("content").to_pylist()] == [s[0] for m in texts for s in m]
    assert sum(t.num_rows for t in writer.episodes) == 60
