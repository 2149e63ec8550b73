"""Redaction leaks: generated secrets written into a card in every place a value can be
copied (content, payload JSON, tool arguments, names, statistics), redacted with
`copies: redact`; every byte of the output — data pages decoded, footers, statistics,
card.json, everything — is searched for every secret. The redaction must also validate."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import pytest

import rollout_cards as rc
from rollout_cards.errors import RedactionSpecError
from rollout_cards.release.redact import redact_card
from rollout_cards.validate import validate
from tests.fuzzing import cases, seed
from tests.release.leaks import find_leaks

# Secrets that look redacted (the prefix test passed them), need JSON escaping, or are not ASCII.
PREFIXES = ["", "hmac-sha256:", "[redacted]", "hmac-sha256:" + "0" * 63, "[REDACTED]", " "]
ALPHABET = "abcXYZ0189 _-\"\\/\n\t\u00e9\u2603\U0001F600<>{}[]:,'"


def _secret(rng: random.Random, i: int) -> str:
    body = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(4, 24)))
    return f"{rng.choice(PREFIXES)}S{i:03d}{body}"


def _card(out: Path, rng: random.Random, secrets: list[str]) -> bool:
    """Write the card; whether any secret was also copied into a payload."""
    copied = False
    with rc.CardWriter(out, id="fuzz", title="fuzz", scope={"license": "CC-BY-4.0"},
                       created=datetime.fromisoformat("2026-01-01T00:00:00+00:00")) as card:
        for e in range(2):
            with card.episode(task_id=f"t{e}", agent="a", trial=0) as ep:
                for s in secrets[e::2]:
                    where = rng.choice(["plain", "payload", "payload-nested", "args"])
                    copied |= where != "plain"
                    if where == "plain":
                        ep.message("user", s)
                    elif where == "payload":
                        ep.message("user", s, payload={"event": "model", "content": s})
                    elif where == "payload-nested":
                        ep.message("user", s, payload={"input": [{"role": "user", "content": s}], "n": 1})
                    else:
                        ep.message("user", s, payload={"raw": f"said: {s} (copy)"})
                    ep.message("assistant", "ok")
                ep.score("reward", 1.0)
    return copied


@pytest.mark.fuzz
def test_no_redacted_value_survives_anywhere(tmp_path: Path) -> None:
    rng = random.Random(seed())
    for case in range(cases(6)):
        secrets = [_secret(rng, i) for i in range(rng.randint(2, 8))]
        src = tmp_path / f"src{case}"
        copied = _card(src, rng, secrets)
        assert find_leaks(src, secrets)  # the search finds them before redaction
        entry = {"target": "steps.content", "where": "role == 'user'", "reason": "user text"}
        out = tmp_path / f"out{case}"
        if copied and rng.random() < 0.3:
            with pytest.raises(RedactionSpecError, match="steps.payload holds a copy"):
                redact_card(src, {"redact": [entry]}, out)
            assert not out.exists()
            continue
        redact_card(src, {"redact": [{**entry, "copies": "redact"}]}, out)
        assert find_leaks(out, secrets) == [], f"case {case}: secrets {secrets!r}"
        report = validate(out)
        assert report.valid, [str(f) for f in report.findings][:5]
