"""Event timestamps: the event loop's own conversion gives parse_timestamp's microseconds, and what
parse_timestamp refuses is refused the same way, naming the sample's event.

Reference: `importers.steps.parse_timestamp` (datetime arithmetic over days, seconds, microseconds)
on random instants in any UTC offset and precision, from year 1 to 9999.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.inspect_events import _time
from rollout_cards.importers.steps import StepBuffer, parse_timestamp
from tests.fuzzing import seed

_STEPS = StepBuffer("task/run/1/1", file="log.eval", record="samples/1_epoch_1.json")


def test_event_times_are_parse_timestamps_microseconds():
    rng = random.Random(seed())
    low, high = datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)
    span = (high - low) // timedelta(microseconds=1)
    for _ in range(20000):
        at = low + timedelta(microseconds=rng.randrange(span))
        zone = timezone(timedelta(minutes=rng.randint(-1439, 1439)))
        text = at.astimezone(zone).isoformat(timespec=rng.choice(["auto", "seconds", "milliseconds", "microseconds"]))
        assert _time(_STEPS, text, 3) == parse_timestamp(text, file="f", record=None), text
    assert _time(_STEPS, "1970-01-01T00:00:00+00:00", 0) == 0
    assert _time(_STEPS, "1969-12-31T23:59:59.999999Z", 0) == -1


@pytest.mark.parametrize(("stamp", "expected"), [
    ("2025-03-01T10:00:14", "no UTC offset"),
    ("yesterday", "not ISO 8601"),
    (1740823214, "not a string"),
    (["2025-03-01T10:00:14+00:00"], "not a string"),
])
def test_a_bad_event_time_is_refused_naming_the_event(stamp, expected):
    with pytest.raises(SourceFormatError, match=expected) as exc:
        _time(_STEPS, stamp, 7)
    assert exc.value.record == "samples/1_epoch_1.json, events[7]"
