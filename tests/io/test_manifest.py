from __future__ import annotations

import json

import pytest

from rollout_cards.errors import ManifestError, UnsupportedFormatError
from rollout_cards.io.manifest import dump_manifest, load_json_document, parse_manifest
from tests.conftest import FIXTURE_CARDS

GOOD = (FIXTURE_CARDS / "synthetic" / "card.json").read_bytes()


def test_fixture_round_trips_byte_for_byte():
    assert dump_manifest(parse_manifest(GOOD)) == GOOD


def test_duplicate_keys_rejected():
    with pytest.raises(ManifestError, match="duplicate key 'id'"):
        load_json_document(b'{"id": "a", "id": "b"}', "card.json")


def test_size_cap_checked_before_parsing():
    with pytest.raises(ManifestError, match="more than the limit of 10"):
        load_json_document(b'{"id": "abcdefghijk"}', "card.json", max_bytes=10)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": "\xff"}', "not valid UTF-8"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": 1,}', "line 1 column"),
    ],
)
def test_malformed_json_is_located(data, message):
    with pytest.raises(ManifestError, match=message):
        load_json_document(data, "card.json")


def test_other_major_version_refused_with_both_versions_named():
    doc = json.loads(GOOD)
    doc["format"] = "rollout-card/1.0"
    with pytest.raises(UnsupportedFormatError) as info:
        parse_manifest(json.dumps(doc).encode(), "x/card.json")
    assert "rollout-card/1.0 found" in str(info.value)
    assert "reads rollout-card/0.2" in str(info.value)


def test_all_problems_collected_with_pointers():
    doc = json.loads(GOOD)
    doc["id"] = "bad id"
    doc["scope"]["license"] = "Nope-1.0"
    doc["tables"]["steps"]["rows"] = -5
    with pytest.raises(ManifestError) as info:
        parse_manifest(json.dumps(doc).encode(), "card.json")
    locations = {p.location for p in info.value.problems}
    assert {"/id", "/scope/license", "/tables/steps/rows"} <= locations
    assert len(info.value.problems) >= 3


@pytest.mark.parametrize(
    ("value", "message"),
    [("1e999", "outside the range of a 64-bit float"), ("1e400", "outside the range of a 64-bit float"),
     ("9223372036854775808", "outside the 64-bit range"), ("1" * 5000, "5,000 digits"),
     ('"\\ud800"', "lone surrogate")],
)
def test_values_a_card_cannot_hold_are_refused_at_parse_time(value, message):
    # 1e400 used to become Infinity on rewrite; "\ud800" became U+FFFD, so a signature over
    # one card verified another; 5,000 digits was an internal error.
    document = json.loads(GOOD)
    document["meta"] = {"x": [0, "ok"]}
    data = json.dumps(document).replace('"ok"', value).encode()
    with pytest.raises(ManifestError, match=message) as info:
        parse_manifest(data, "card.json")
    if "surrogate" in message:
        assert info.value.problems[0].location == "/meta/x/1"


def test_surrogate_in_a_key_is_located():
    with pytest.raises(ManifestError, match="lone surrogate") as info:
        load_json_document(b'{"a": {"\\udc00x": 1}}', "card.json")
    assert info.value.problems[0].location.startswith("/a/")
    assert str(info.value).encode("utf-8")  # the message itself is printable UTF-8
