"""Cards by URI and on other pyarrow filesystems: the same tables, rescore and validation as a
directory, and the digest check on read holds on every filesystem (no network: file://, a
SubTreeFileSystem and pyarrow's in-memory mock filesystem)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

import rollout_cards as rc
from rollout_cards.errors import CardFormatError, IntegrityError
from rollout_cards.io.fs_source import FileSystemSource, card_location
from rollout_cards.rules.render import render
from rollout_cards.rules.rescore import rescore
from rollout_cards.validate import validate
from tests.conftest import FIXTURE_CARDS

SYNTHETIC = FIXTURE_CARDS / "synthetic"
RULE = FIXTURE_CARDS.parent / "rules" / "best_of_3.yaml"


def _json(card) -> str:
    return render(rescore(card, [RULE]), "json").replace(str(card.path), "CARD")


def _mock_copy(root=SYNTHETIC) -> pafs.FileSystem:
    """The card's files copied into an in-memory filesystem under cards/synthetic."""
    fs = pafs._MockFileSystem()
    fs.create_dir("cards/synthetic")
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            fs.create_dir(f"cards/synthetic/{rel}")
        else:
            with fs.open_output_stream(f"cards/synthetic/{rel}") as out:
                out.write(path.read_bytes())
    return fs


def test_a_file_uri_is_the_directory():
    assert card_location(SYNTHETIC.as_uri()) == SYNTHETIC
    card = rc.open(SYNTHETIC.as_uri())
    assert card.episodes().equals(rc.open(SYNTHETIC).episodes())
    assert _json(card) == _json(rc.open(SYNTHETIC))
    with pytest.raises(CardFormatError, match="names a path on this machine"):
        card_location("file://elsewhere/card")


def test_an_unknown_scheme_is_a_clear_error():
    with pytest.raises(CardFormatError, match="cannot open this URI"):
        rc.open("nosuch://bucket/card")


@pytest.mark.parametrize("where", ["subtree", "mock"])
def test_a_card_on_another_filesystem_rescores_and_validates_as_the_directory(where):
    if where == "subtree":
        fs, base = pafs.SubTreeFileSystem(str(SYNTHETIC.parent), pafs.LocalFileSystem()), "synthetic"
    else:
        fs, base = _mock_copy(), "cards/synthetic"
    source = FileSystemSource(fs, base, name="mem://synthetic")
    card = rc.open(source)
    assert card.steps().equals(rc.open(SYNTHETIC).steps())
    assert _json(card) == _json(rc.open(SYNTHETIC))
    report, local = validate(source), validate(SYNTHETIC)
    assert report.valid
    assert [c.model_dump() for c in report.checks] == [c.model_dump() for c in local.checks]


def test_the_digest_check_on_read_holds_on_a_mock_filesystem():
    fs = _mock_copy()
    (part,) = rc.open(SYNTHETIC).manifest.tables.steps.paths
    path = f"cards/synthetic/{part}"
    with fs.open_input_stream(path) as fh:
        data = bytearray(fh.read())
    data[-20] ^= 0x01  # inside the footer's metadata: still readable, but not what was listed
    with fs.open_output_stream(path) as out:
        out.write(bytes(data))
    source = FileSystemSource(fs, "cards/synthetic", name="mem://synthetic")
    with pytest.raises(IntegrityError, match=part):
        rc.open(source).steps()
    with pytest.raises(IntegrityError, match=part):
        rc.open(source).verify_all()  # what rcard rescore / info do before printing
    report = validate(source)
    assert "file-digest-mismatch" in report.codes()
    assert not report.valid


def test_a_missing_card_on_a_filesystem_is_named():
    source = FileSystemSource(pafs._MockFileSystem(), "nothing/here", name="mem://nothing")
    with pytest.raises(CardFormatError, match="no card.json"):
        rc.open(source)
