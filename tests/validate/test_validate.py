"""validate(): fixture cards, mutations, isolation from everything outside the package, internal errors."""

from __future__ import annotations

import builtins
import importlib
import io
import os
import shutil
from pathlib import Path

import bad_cards
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollout_cards as rc
from rollout_cards.io.reader import DirectorySource
from rollout_cards.validate import Severity, validate
from tests.conftest import FIXTURE_CARDS, REPO


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURE_CARDS.iterdir()))
def test_every_fixture_card_is_valid(name):
    report = validate(FIXTURE_CARDS / name)
    assert report.valid and report.outcome == "valid", [f for f in report.findings if f.severity != "info"]
    assert report.counts[Severity.ERROR] == 0
    assert all(c.status != "crashed" for c in report.checks)
    assert report.card_id == rc.open(FIXTURE_CARDS / name).id


def test_minimal_card_warns_about_its_license_and_fails_only_when_strict():
    assert validate(FIXTURE_CARDS / "minimal").codes() == {"scope-license-missing"}
    strict = validate(FIXTURE_CARDS / "minimal", strict=True)
    assert not strict.valid and strict.outcome == "invalid"


def test_public_api():
    assert rc.validate is validate and "validate" in rc.__all__ and "Report" in rc.__all__
    assert isinstance(rc.validate(FIXTURE_CARDS / "synthetic"), rc.Report)


# -- mutations ------------------------------------------------------------------------------------

def _flip(card: Path, rel: str, offset: int, mask: int) -> None:
    data = bytearray((card / rel).read_bytes())
    data[offset % len(data)] ^= mask
    (card / rel).write_bytes(bytes(data))


def _drop_row(card: Path, rel: str, row: int, rehash: bool) -> None:
    table = pq.read_table(card / rel)
    row %= table.num_rows
    pq.write_table(pa.concat_tables([table.slice(0, row), table.slice(row + 1)]), card / rel)
    if rehash:
        bad_cards.rehash(card)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.sampled_from(["minimal", "synthetic"]),
    mutation=st.sampled_from(["flip", "drop-row", "drop-row-rehash", "rename"]),
    pick=st.integers(0, 10**6),
    offset=st.integers(0, 10**7),
    mask=st.integers(1, 255),
)
def test_any_mutation_of_a_valid_card_is_an_error(tmp_path_factory, base, mutation, pick, offset, mask):
    card = tmp_path_factory.mktemp("mutant") / base
    shutil.copytree(FIXTURE_CARDS / base, card)
    files = sorted(f["path"] for f in bad_cards.manifest(card)["inventory"]["files"])
    tables = [f for f in files if f.endswith(".parquet")]
    if mutation == "flip":
        _flip(card, files[pick % len(files)], offset, mask)
    elif mutation.startswith("drop-row"):
        _drop_row(card, tables[pick % len(tables)], pick, rehash=mutation.endswith("rehash"))
    else:
        rel = files[pick % len(files)]
        (card / rel).rename(card / (rel + ".moved"))
    report = validate(card)
    assert report.outcome == "invalid", [f.message for f in report.findings if f.code == "internal-error"]
    assert report.counts[Severity.ERROR] >= 1


# -- nothing outside the package is read or written -------------------------------------------------

class _RecordingFileSystem(pafs.FileSystemHandler):
    """A local filesystem that logs every path pyarrow asks for."""

    def __init__(self, log: list[str]):
        self.fs = pafs.LocalFileSystem()
        self.log = log

    def get_type_name(self):
        return "recording"

    def normalize_path(self, path):
        return path

    def equals(self, other):
        return self is other

    def get_file_info(self, paths):
        self.log.extend(paths)
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        self.log.append(selector.base_dir)
        return self.fs.get_file_info(selector)

    def open_input_file(self, path):
        self.log.append(path)
        return self.fs.open_input_file(path)

    def open_input_stream(self, path):
        self.log.append(path)
        return self.fs.open_input_stream(path)

    def _refuse(self, *args):
        raise AssertionError(f"the validator tried to write: {args}")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _refuse
    move = copy_file = open_output_stream = open_append_stream = _refuse


class _RecordingSource(DirectorySource):
    def __init__(self, root: Path, log: list[str]):
        super().__init__(root)
        self.log = log

    def filesystem(self):
        return pafs.PyFileSystem(_RecordingFileSystem(self.log)), str(self.root.resolve())


def _snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st_ = os.lstat(Path(dirpath) / name)
            out[os.path.join(dirpath, name)] = (st_.st_mode, st_.st_size, st_.st_mtime_ns, st_.st_ino)
    return out


def test_validation_reads_and_writes_nothing_outside_the_package(bad_corpus, monkeypatch):
    root, expected = bad_corpus
    secret = (root / bad_cards.OUTSIDE / bad_cards.SECRET).resolve()
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def recording_open(file, *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    def recording_os_open(path, *args, **kwargs):
        opened.append(os.fsdecode(path))
        return real_os_open(path, *args, **kwargs)

    before = _snapshot(root.parent)
    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(io, "open", recording_open)
    monkeypatch.setattr(os, "open", recording_os_open)
    for name in sorted(expected["packages"]):
        package = (root / name).resolve()
        opened.clear()
        arrow: list[str] = []
        validate(_RecordingSource(root / name, arrow))
        validate(root / name)
        for path in opened + arrow:
            resolved = Path(path).resolve() if os.path.isabs(path) else (Path.cwd() / path).resolve()
            if resolved.is_relative_to(REPO / "rollout_cards") or "site-packages" in resolved.parts:
                continue  # imports of code, not reads of the package
            assert resolved != secret, f"{name}: the validator opened the file outside ({path})"
            assert resolved.is_relative_to(package), f"{name}: the validator opened {path}, outside the package"
    monkeypatch.undo()
    assert _snapshot(root.parent) == before


# -- the validator's own failures ---------------------------------------------------------------------

def test_a_crashing_check_is_an_internal_error_not_a_verdict(monkeypatch):
    validate_module = importlib.import_module("rollout_cards.validate")  # the attribute is the function
    def broken(ctx):
        raise ZeroDivisionError("bug")

    checks = tuple((n, broken if n == "semantics.steps" else fn, bg) for n, fn, bg in validate_module.CHECKS)
    monkeypatch.setattr(validate_module, "CHECKS", checks)
    monkeypatch.delenv("RCARD_DEBUG", raising=False)
    report = validate(FIXTURE_CARDS / "synthetic")
    assert report.outcome == "internal-error" and not report.valid
    assert report.codes(Severity.ERROR) == {"internal-error"}
    runs = {c.name: c.status for c in report.checks}
    assert runs["semantics.steps"] == "crashed"
    assert runs["coverage.plan"] == "passed" and runs["inventory.digests"] == "passed"


def test_integrity_is_checked_even_when_the_rest_of_the_manifest_is_invalid(synthetic_copy):
    bad_cards.edit_manifest(synthetic_copy, lambda d: d["scope"].update(access="everyone"))
    (synthetic_copy / bad_cards.RULE).write_bytes((synthetic_copy / bad_cards.RULE).read_bytes() + b"# x\n")
    report = validate(synthetic_copy)
    assert {"manifest-schema", "file-size-mismatch", "file-digest-mismatch"} <= report.codes()
    assert {c.name: c.status for c in report.checks}["semantics.steps"] == "passed"


def test_max_findings_caps_listing_but_counts_everything(minimal_copy):
    for i in range(5):
        (minimal_copy / f"extra-{i}.txt").write_text("x")
    (minimal_copy / "episodes.parquet").write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
    report = validate(minimal_copy, max_findings=2)
    listed = [f for f in report.findings if f.code == "file-unlisted"]
    assert len(listed) == 2 and report.omitted == {"file-unlisted": 3}
    assert report.counts[Severity.ERROR] == 5 + 3  # unlisted, size, digest, unreadable
    assert {"file-size-mismatch", "file-digest-mismatch"} <= report.codes()


def test_a_path_that_does_not_exist_raises():
    with pytest.raises(rc.CardFormatError):
        validate("/nonexistent/card")
    with pytest.raises(ValueError):
        validate(FIXTURE_CARDS / "minimal", max_findings=0)


# -- packed cards ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["minimal", "synthetic"])
def test_a_packed_card_gets_the_same_verdict(tmp_path, name):
    packed = tmp_path / f"{name}.rcard"
    rc.pack_card(FIXTURE_CARDS / name, packed)
    direct, from_pack = validate(FIXTURE_CARDS / name), validate(packed)
    assert from_pack.outcome == "valid"
    assert [(f.code, f.message) for f in from_pack.findings] == [(f.code, f.message) for f in direct.findings]


BAD_ARCHIVES = sorted((REPO / "fixtures" / "bad_archives").glob("*.rcard"))


@pytest.mark.parametrize("archive", BAD_ARCHIVES, ids=[p.name for p in BAD_ARCHIVES])
def test_hostile_archives_are_invalid_never_an_internal_error(archive):
    report = validate(archive)
    assert report.outcome == "invalid", [f.message for f in report.findings if f.code == "internal-error"]
