"""The report tells the truth about every check (issue 9 item 15) and is always produced,
even for a package that cannot be opened or whose card.json is over the size limit; a
packed card's directory members that readers refuse are refused by the validator too (item 7)."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.errors import UnsafeArchiveError
from rollout_cards.io.archive import ArchiveSource
from rollout_cards.io.manifest import MAX_MANIFEST_BYTES
from tests.conftest import FIXTURE_CARDS, REPO

sys.path.insert(0, str(REPO / "fixtures"))
import bad_archives  # noqa: E402


def _json(*args):
    result = CliRunner().invoke(app, ["validate", *map(str, args), "--format", "json"])
    return result.exit_code, json.loads(result.output)


def _statuses(data):
    return {c["name"]: c["status"] for c in data["checks"]}


def test_a_broken_manifest_fails_manifest_parse_and_replays_nothing(minimal_copy):
    raw = (minimal_copy / "card.json").read_bytes()
    (minimal_copy / "card.json").write_bytes(raw[: len(raw) // 2])
    code, data = _json(minimal_copy)
    assert code == 1
    status = _statuses(data)
    assert status["manifest.parse"] == "failed"
    assert "not valid JSON" in next(c["note"] for c in data["checks"] if c["name"] == "manifest.parse")
    assert status["rules.replay"] == "skipped" and status["rules.files"] == "skipped"
    assert "passed" not in {status[n] for n in ("coverage.plan", "coverage.drops", "parquet.tables")}


def test_replay_is_passed_only_when_it_ran(synthetic_copy):
    code, data = _json(synthetic_copy)
    assert code == 0 and _statuses(data)["rules.replay"] == "passed"


def _pack_raw(tmp_path, card_json: bytes, extra: bytes = b""):
    body = bad_archives.member("card.json", card_json) + b"".join(
        bad_archives.member(n, d) for n, d in sorted(bad_archives.FILES.items())) + extra
    path = tmp_path / "x.rcard"
    path.write_bytes(bad_archives.end(body))
    return path


def test_a_packed_card_json_over_the_limit_still_gets_a_json_report(tmp_path):
    doc = json.loads(bad_archives.manifest_bytes(bad_archives.FILES))
    doc["description"] = "x" * (MAX_MANIFEST_BYTES + 10)
    path = _pack_raw(tmp_path, json.dumps(doc).encode())
    code, data = _json(path)
    assert code == 1 and data["outcome"] == "invalid"
    assert "manifest-too-large" in {f["code"] for f in data["findings"]}
    assert _statuses(data)["manifest.parse"] == "failed"


def test_an_unopenable_package_still_gets_a_json_report(tmp_path):
    path = tmp_path / "junk.rcard"
    path.write_bytes(b"not a tar archive at all" * 100)
    code, data = _json(path)
    assert code == 1 and data["outcome"] == "invalid" and data["findings"][0]["code"] == "archive-unsafe"
    assert set(_statuses(data).values()) <= {"failed", "skipped"}


def test_an_extra_directory_member_is_refused_by_reader_and_validator_alike(tmp_path):
    extra = bad_archives.member("junk/", typeflag=b"5")
    path = _pack_raw(tmp_path, bad_archives.manifest_bytes(bad_archives.FILES), extra)
    with pytest.raises(UnsafeArchiveError) as info:
        ArchiveSource(path)
    assert info.value.rule == "extra-member"
    code, data = _json(path)
    assert code == 1
    unsafe = [f for f in data["findings"] if f["code"] == "archive-unsafe"]
    assert unsafe and "extra-member" in unsafe[0]["message"] and unsafe[0]["location"]["file"] == "junk"


def test_the_fixture_cards_report_no_failed_check():
    for card in FIXTURE_CARDS.iterdir():
        _, data = _json(card)
        assert not {"failed", "crashed"} & set(_statuses(data).values()), card.name
