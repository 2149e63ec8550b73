from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.numbers import parse_decimal
from rollout_cards.tables import parse_format

# Characters that str.isdigit() or int() accept although they are not ASCII digits.
UNICODE_DIGITS = "\u00b2\u0660\u0661\u06f1\u0966\uff10\uff16\U0001d7ce\u2460"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789 +-_." + UNICODE_DIGITS), max_size=24))
def test_parse_decimal_accepts_exactly_ascii_digits(text):
    expected = int(text) if text and len(text) <= 20 and all(c in "0123456789" for c in text) else None
    assert parse_decimal(text) == expected
    assert parse_decimal(text.encode("utf-8")) == expected


def test_parse_decimal_bounds_the_length():
    assert parse_decimal("9" * 20) == 10**20 - 1
    assert parse_decimal("9" * 21) is None
    assert parse_decimal("1" * 5000) is None  # int() would raise past 4,300 digits
    assert parse_decimal("123", max_digits=2) is None


@pytest.mark.parametrize("text", ["rollout-card/\u0660.\u0661", "rollout-card/0.1\n", "rollout-card/\uff10.1",
                                  "rollout-card/0." + "1" * 5000, "rollout-card/0.\u00b2"])
def test_format_strings_take_only_ascii_digits(text):
    assert parse_format(text) is None


def test_format_string_parses():
    assert parse_format("rollout-card/0.1") == (0, 1)
    assert parse_format("rollout-card/12.345") == (12, 345)
