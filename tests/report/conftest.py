from __future__ import annotations

from pathlib import Path

import pytest

import rollout_cards as rc

#: Payloads that would run script if any reached the page as markup or as a URL.
HOSTILE = (
    "<script>window.__pwned=1</script>",
    "javascript:window.__pwned=1",
    "<img src=x onerror=\"window.__pwned=1\">",
    "\"><svg onload=window.__pwned=1>",
    "</script><script>window.__pwned=1</script>",
    "\u2028<!--",
)


def _evil(i: int) -> str:
    return HOSTILE[i % len(HOSTILE)] + f" #{i}"


@pytest.fixture(scope="session")
def hostile_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A card with a hostile payload in every text field a report shows, and a rule over it."""
    root = tmp_path_factory.mktemp("hostile") / "card"
    rule = tmp_path_factory.mktemp("hostile-rule") / "rule.yaml"
    rule.write_text(
        "rule: evil.success\n"
        f"description: {_evil(0)!r}\n"
        "score: score.ok\n"
        "aggregate: {group_by: [agent]}\n",
        encoding="utf-8",
    )
    with rc.CardWriter(
        root, id="evil-card", title=_evil(1),
        scope={"license": "CC-BY-4.0", "citation": _evil(2), "personal_data": {"contains": "none", "statement": _evil(3)}},
        provenance={"generator": {"name": _evil(4)}, "agents": [{"name": _evil(5)}]},
        drops=[{"target": "steps.cost_usd", "action": "unobserved", "declaration": "source_missing",
                "loss_class": "unavailable_source_field", "reason": _evil(6)}],
    ) as card:
        card.add_rule(rule)
        for i in range(12):
            agent = _evil(7) if i % 2 else _evil(8)
            with card.episode(task_id=_evil(9 + i % 3), agent=agent, trial=i // 6, cond={"c": _evil(10)}) as ep:
                ep.message("user", _evil(11 + i))
                call = ep.tool_call(_evil(12), args={"q": _evil(13), _evil(14): 1}, call_id=f"c{i}")
                ep.tool_result(call, _evil(15), is_error=i % 3 == 0)
                ep.message("assistant", _evil(16))
                ep.score("ok", i % 3 != 0)
                if i == 5:
                    ep.end("error")
    return root
