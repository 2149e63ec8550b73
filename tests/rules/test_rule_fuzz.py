"""Rule files and expressions under mutation: a RuleError (or ExpressionError) naming the
place, or a valid Rule; never another exception, never more than linear time."""

from __future__ import annotations

import contextlib
import random
import time

import pytest

from rollout_cards.errors import ExpressionError, RuleError
from rollout_cards.expr import parse_expression
from rollout_cards.model.rule import Rule
from rollout_cards.rules.loader import parse_rule
from tests.conftest import REPO
from tests.fuzzing import cases, seed

SEEDS = sorted((REPO / "fixtures" / "rules").glob("*.yaml"))
# Pieces a hostile rule file is made of: YAML syntax, tags, anchors, base-60 and huge
# numbers, non-finite floats, escapes of lone surrogates, control characters, deep nesting.
PIECES = ["{", "}", "[", "]", ":", "- ", "\n", "  ", "'", '"', "&a ", "*a", "!!python/object:os.system ",
          "!!int ", "1:2:3:4", "9" * 30, "1.0e+999", ".inf", ".nan", '"\\ud800"', "\x1b", "\x00", "\t",
          "[" * 200, "?", "|", ">", "#", "%YAML 1.1\n", "---\n", "...\n", "\u202e", "score", "rule", "aggregate",
          "on_status", "tolerance: .inf", "reported:", "interval", "1" * 70000]
TOKENS = ["score", ".", "reward", "==", "1", "and", "or", "not", "(", ")", "[", "]", ",", "'x'", '"y"', "in",
          "+", "-", "*", "/", "1e999", "9" * 400, "null", "true", ">=", "\\", "'\\ud800'", "len(", "\x00", "é"]


def _mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(text) + 1)
        choice = rng.random()
        if choice < 0.5:
            text = text[:i] + rng.choice(PIECES) + text[i:]
        elif choice < 0.8:
            text = text[:i] + text[i + rng.randint(1, 20):]
        else:
            text = text[:i]
    return text


@pytest.mark.fuzz
def test_mutated_rule_files_are_rule_errors_or_rules():
    rng = random.Random(seed())
    texts = [p.read_text() for p in SEEDS]
    for _ in range(cases(300)):
        text = _mutate(rng.choice(texts), rng)
        started = time.perf_counter()
        try:
            rule = parse_rule(text, file="fuzz.yaml")
        except RuleError as exc:
            assert str(exc).startswith("fuzz.yaml"), (text[:200], str(exc))
        else:
            assert isinstance(rule, Rule)
            Rule.model_validate(rule.model_dump(by_alias=True))  # what was accepted stays valid
        assert time.perf_counter() - started < 5, text[:200]


@pytest.mark.fuzz
def test_random_expressions_are_expression_errors_or_expressions():
    rng = random.Random(seed() + 1)
    for _ in range(cases(1000)):
        text = " ".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 12)))
        started = time.perf_counter()
        with contextlib.suppress(ExpressionError):
            parse_expression(text, key="score")
        assert time.perf_counter() - started < 2, text[:200]


@pytest.mark.parametrize(("text", "match"), [
    # Counterexamples of the adversarial review, one per root cause.
    ("rule: r\nscore: score.x == 1\nreported:\n  - value: 0.5\n    tolerance: .inf\n", "not a finite number"),
    ("rule: r\nscore: score.x == 1\nversion: " + "1:" * 20000 + "1\n", "base-60|longer than|version"),
    ("rule: r\nscore: \"score.x == '\\ud800'\"\n", "lone surrogate"),
    ("rule: r\nscore: score.x\x1b == 1\n", "control character"),
])
def test_review_counterexamples(text, match):
    with pytest.raises(RuleError, match=match):
        parse_rule(text, file="r.yaml")
