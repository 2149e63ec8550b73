"""Packed cards: reproducible pack, reading in place, safe unpack, the hostile corpus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollout_cards as rc
from rollout_cards.errors import CardFormatError, PathError, RolloutCardError, UnsafeArchiveError
from rollout_cards.io.archive import ArchiveLimits, ArchiveSource, pack_card, unpack_card
from rollout_cards.io.ustar import file_header, scan_members

REPO = Path(__file__).resolve().parents[2]
CARDS = REPO / "fixtures" / "cards"
CORPUS = REPO / "fixtures" / "bad_archives"
EXPECTED = json.loads((CORPUS / "EXPECTED.json").read_text())


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def everything_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packed") / "synthetic.rcard"
    pack_card(CARDS / "synthetic", out)
    return out


# -- packing ------------------------------------------------------------------------------------


def test_pack_then_unpack_gives_the_same_files(packed: Path, tmp_path: Path) -> None:
    manifest = unpack_card(packed, tmp_path / "out")
    assert tree(tmp_path / "out") == tree(CARDS / "synthetic")
    assert manifest.id == "synthetic-airline"
    assert os.stat(tmp_path / "out").st_mode & 0o777 == 0o755


def test_card_json_first_then_inventory_order_with_fixed_metadata(packed: Path) -> None:
    with tarfile.open(packed) as tar:
        infos = tar.getmembers()
    names = [i.name for i in infos]
    manifest = json.loads((CARDS / "synthetic" / "card.json").read_text())
    assert names == ["card.json"] + [f["path"] for f in manifest["inventory"]["files"]]
    created = rc.open(CARDS / "synthetic").manifest.created.timestamp()
    assert {(i.uid, i.gid, i.uname, i.gname, i.mode, i.mtime, i.type) for i in infos} == {
        (0, 0, "", "", 0o644, int(created), tarfile.REGTYPE)
    }
    assert packed.stat().st_size % (20 * 512) == 0


def test_gnu_tar_reads_the_packed_card(packed: Path, tmp_path: Path) -> None:
    if shutil.which("tar") is None:
        pytest.skip("no tar program on PATH")
    subprocess.run(["tar", "-xf", str(packed), "-C", str(tmp_path)], check=True)
    assert tree(tmp_path) == tree(CARDS / "synthetic")


def _copy_card(src: Path, dest: Path, order: list[int], mtimes: list[int], mode: int) -> None:
    """Copy a card creating files in the given order, with other mtimes, modes and owner."""
    files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    for i in order:
        rel = files[i % len(files)]
        target = dest / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)
    for rel in files:
        if not (dest / rel).exists():
            shutil.copyfile(src / rel, dest / rel)
    for rel, t in zip(files, mtimes + [0] * len(files), strict=False):
        os.utime(dest / rel, (t, t))
        os.chmod(dest / rel, mode)
        if os.geteuid() == 0:
            os.chown(dest / rel, 1234, 5678)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order=st.permutations(range(4)),
    mtimes=st.lists(st.integers(0, 2**32), min_size=4, max_size=4),
    mode=st.sampled_from([0o600, 0o644, 0o664, 0o755]),
)
def test_packing_is_reproducible(tmp_path_factory: pytest.TempPathFactory, packed: Path, order: list[int],
                                 mtimes: list[int], mode: int) -> None:
    work = tmp_path_factory.mktemp("repro")
    _copy_card(CARDS / "synthetic", work / "card", order, mtimes, mode)
    result = pack_card(work / "card", work / "again.rcard")
    assert (work / "again.rcard").read_bytes() == packed.read_bytes()
    assert result.bytes == packed.stat().st_size


def test_long_rule_names_use_the_ustar_prefix_and_pack_reproducibly(tmp_path: Path) -> None:
    card = tmp_path / "card"
    shutil.copytree(CARDS / "minimal", card)
    rule_id = "r." + "x" * 120
    (card / "rules").mkdir()
    (card / "rules" / f"{rule_id}.yaml").write_text(f"rule: {rule_id}\nscore: 'true'\n")
    rc_refresh(card)
    pack_card(card, tmp_path / "a.rcard")
    with tarfile.open(tmp_path / "a.rcard") as tar:
        assert f"rules/{rule_id}.yaml" in tar.getnames()
    assert rc.open(tmp_path / "a.rcard").rule_files()[rule_id].startswith("rule:")


def rc_refresh(card: Path) -> None:
    from rollout_cards.io.finalize import refresh_manifest

    refresh_manifest(card)


@given(name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=300).filter(
    lambda s: not s.startswith("/") and not s.endswith("/")))  # tarfile strips a final '/'; we refuse it
@settings(max_examples=60, deadline=None)
def test_header_names_round_trip_through_our_scanner_and_tarfile(name: str) -> None:
    import io

    data = b"hello"
    blob = file_header(name, len(data), 1_700_000_000) + data + bytes(512 - len(data)) + bytes(10240)
    blob = blob[: len(blob) - len(blob) % 10240] if len(blob) % 10240 else blob
    fd = os.memfd_create("t")
    try:
        os.write(fd, blob)
        members = scan_members(fd, len(blob), "t", ArchiveLimits(max_name_bytes=4096))
    finally:
        os.close(fd)
    assert [(m.name, m.size) for m in members] == [(name, 5)]
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        assert tar.getnames() == [name]


def test_pack_refuses_a_file_missing_from_the_inventory(synthetic_copy: Path, tmp_path: Path) -> None:
    (synthetic_copy / "notes.txt").write_text("not listed")
    with pytest.raises(CardFormatError, match="notes.txt is not listed"):
        pack_card(synthetic_copy, tmp_path / "x.rcard")
    assert not any(p.name.startswith(".x.rcard") or p.name == "x.rcard" for p in tmp_path.iterdir())


def test_pack_refuses_a_symlink_in_the_card(synthetic_copy: Path, tmp_path: Path) -> None:
    (synthetic_copy / "evil").symlink_to("/etc/passwd")
    with pytest.raises(CardFormatError, match="symlink"):
        pack_card(synthetic_copy, tmp_path / "x.rcard")


@pytest.mark.parametrize("name", ["card.json", "episodes.parquet"])
def test_pack_refuses_a_hard_linked_file_as_validate_does(synthetic_copy: Path, tmp_path: Path, name: str) -> None:
    os.link(synthetic_copy / name, tmp_path / "other-name")
    out = tmp_path / "x.rcard"
    with pytest.raises(CardFormatError, match=f"{name} has 2 hard links; store an independent copy"):
        pack_card(synthetic_copy, out)
    assert not out.exists()
    finding = next(f for f in rc.validate(synthetic_copy).findings if f.code == "path-hardlink")
    assert "store an independent copy" in finding.message


def test_pack_refuses_a_changed_file_and_leaves_nothing(synthetic_copy: Path, tmp_path: Path) -> None:
    path = synthetic_copy / "steps.parquet"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(CardFormatError, match="sha256"):
        pack_card(synthetic_copy, out / "x.rcard")
    assert list(out.iterdir()) == []


def test_pack_without_verification_gives_the_same_bytes_and_still_checks_sizes(
        packed: Path, synthetic_copy: Path, tmp_path: Path) -> None:
    pack_card(synthetic_copy, tmp_path / "fast.rcard", verify=False)
    assert (tmp_path / "fast.rcard").read_bytes() == packed.read_bytes()
    with open(synthetic_copy / "steps.parquet", "ab") as fh:
        fh.write(b"x")
    with pytest.raises(CardFormatError, match="bytes but the inventory lists"):
        pack_card(synthetic_copy, tmp_path / "fast2.rcard", verify=False)


def test_pack_refuses_output_inside_the_card_and_existing_output(synthetic_copy: Path, tmp_path: Path) -> None:
    with pytest.raises(RolloutCardError, match="inside the card"):
        pack_card(synthetic_copy, synthetic_copy / "x.rcard")
    (tmp_path / "x.rcard").write_text("keep me")
    with pytest.raises(RolloutCardError, match="exists"):
        pack_card(synthetic_copy, tmp_path / "x.rcard")
    assert (tmp_path / "x.rcard").read_text() == "keep me"


# -- reading in place -----------------------------------------------------------------------------


def test_open_reads_tables_from_the_packed_file(packed: Path) -> None:
    directory = rc.open(CARDS / "synthetic")
    card = rc.open(packed)
    assert card.manifest == directory.manifest
    assert card.episodes().equals(directory.episodes())
    assert card.steps(columns=["episode_id", "seq", "kind"]).equals(
        directory.steps(columns=["episode_id", "seq", "kind"]))
    assert card.steps(filter="kind == 'tool_call'").num_rows == directory.steps(filter="kind == 'tool_call'").num_rows
    assert sum(b.num_rows for b in card.iter_steps(batch_size=100)) == directory.manifest.tables.steps.rows
    assert card.rule_files() == directory.rule_files()


def test_archive_source_serves_members_as_byte_ranges(packed: Path) -> None:
    from rollout_cards.io.hashing import sha256_stream

    with ArchiveSource(packed) as source:
        manifest = source.manifest
        for f in manifest.inventory.files:
            with source.open_binary(f.path) as fh:
                assert sha256_stream(fh) == (f.sha256, f.bytes)
        assert source.exists("steps.parquet") and not source.exists("nope") and not source.exists("../card.json")
        with pytest.raises(CardFormatError, match="larger than the limit"):
            source.read_bytes("steps.parquet", limit=10)
        fs, base = source.filesystem()
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
        assert sorted(i.path for i in infos) == sorted(f"{base}/{e.path}" for e in source.entries())
        assert fs.get_file_info(f"{base}/nope").type == pafs.FileType.NotFound
        with pytest.raises(OSError, match="read-only"):
            fs.delete_file(f"{base}/card.json")
        with fs.open_input_file(f"{base}/card.json") as fh:
            assert fh.read() == (CARDS / "synthetic" / "card.json").read_bytes()


def test_lenient_source_lists_hostile_members_but_does_not_serve_them() -> None:
    source = ArchiveSource(CORPUS / "listed-symlink.rcard", strict=False)
    kinds = {e.path: (e.kind, e.target) for e in source.entries()}
    assert kinds["rules/x.yaml"] == ("symlink", "../../../etc/passwd")
    assert [p.rule for p in source.problems] == ["symlink"]
    assert source.read_bytes("card.json", limit=1 << 20).startswith(b"{")
    with pytest.raises(UnsafeArchiveError, match="not served"):
        source.read_bytes("rules/x.yaml", limit=100)
    source.close()


def test_lenient_source_reports_duplicates_and_extra_members() -> None:
    with ArchiveSource(CORPUS / "duplicate-name.rcard", strict=False) as source:
        assert [e.path for e in source.entries()].count("steps.parquet") == 2
        assert not source.exists("steps.parquet")
        assert "duplicate-name" in [p.rule for p in source.problems]
    with ArchiveSource(CORPUS / "extra-member.rcard", strict=False) as source:
        assert [p.rule for p in source.problems] == ["extra-member"]


def test_member_cap_is_checked(packed: Path) -> None:
    with pytest.raises(UnsafeArchiveError) as info:
        ArchiveSource(packed, limits=ArchiveLimits(max_members=2))
    assert info.value.rule == "too-many-members"


def test_total_size_cap_is_checked_before_writing(packed: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchiveError) as info:
        unpack_card(packed, tmp_path / "out", limits=ArchiveLimits(max_total_bytes=1000))
    assert info.value.rule == "total-size"
    assert everything_under(tmp_path) == []


def test_a_directory_or_device_is_not_an_archive(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchiveError) as info:
        ArchiveSource("/dev/null")
    assert info.value.rule == "not-a-regular-file"


# -- unpacking -----------------------------------------------------------------------------------


def test_unpack_refuses_a_non_empty_target(packed: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    with pytest.raises(PathError, match="not an empty directory"):
        unpack_card(packed, tmp_path / "out")
    assert everything_under(tmp_path) == ["out", "out/keep"]


def test_unpack_into_an_existing_empty_directory(packed: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    unpack_card(packed, tmp_path / "out")
    assert tree(tmp_path / "out") == tree(CARDS / "synthetic")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_archive_is_refused_and_nothing_is_written(name: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    archive = root / name
    shutil.copyfile(CORPUS / name, archive)
    before = everything_under(tmp_path.parent)
    with pytest.raises(UnsafeArchiveError) as info:
        unpack_card(archive, root / "target" / "card")
    expected = EXPECTED[name]
    assert info.value.rule == expected["rule"], str(info.value)
    assert info.value.member in (expected["member"], str(archive)), str(info.value)
    # Nothing is left but the archive and, for archives refused only while writing, the
    # (empty) parent of the target; nothing appeared anywhere else.
    assert set(everything_under(root)) - {name} <= {"target"}
    assert not (root / "target").exists() or list((root / "target").iterdir()) == []
    assert set(everything_under(tmp_path.parent)) - set(before) <= {f"{tmp_path.name}/root/target"}
    for leaked in ("/tmp/rcard-owned", str(root.parent / "rcard-owned"), str(root / "rcard-owned")):
        assert not os.path.lexists(leaked)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n]["rule"] != "digest-mismatch"))
def test_hostile_archive_cannot_be_opened(name: str) -> None:
    with pytest.raises(UnsafeArchiveError) as info:
        rc.open(CORPUS / name)
    assert info.value.rule == EXPECTED[name]["rule"]


def test_corpus_is_generated_deterministically() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_archives", REPO / "fixtures" / "bad_archives.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.check(CORPUS) == []


# -- the validator over packed cards (once rollout_cards.validate is there) ----------------------


def _validate():
    module = pytest.importorskip("rollout_cards.validate")
    fn = getattr(module, "validate", None)
    if fn is None:
        pytest.skip("rollout_cards.validate has no validate() yet")
    return fn


@pytest.mark.parametrize("name", sorted(p.name for p in CARDS.iterdir()))
def test_packed_fixtures_validate_like_their_directories(name: str, tmp_path: Path) -> None:
    validate = _validate()
    pack_card(CARDS / name, tmp_path / f"{name}.rcard")
    packed, directory = validate(tmp_path / f"{name}.rcard"), validate(CARDS / name)
    assert packed.valid == directory.valid
    codes = lambda report: sorted(f.code for f in report.findings)  # noqa: E731
    assert codes(packed) == codes(directory)


@pytest.mark.parametrize("name", ["symlink.rcard", "duplicate-name.rcard", "extra-member.rcard",
                                  "tampered-member.rcard", "nfc-nfd-collision.rcard", "trailing-garbage.rcard"])
def test_the_validator_flags_hostile_archives(name: str) -> None:
    validate = _validate()
    report = validate(CORPUS / name)
    assert not report.valid


def test_unpacked_and_redacted_fixtures_validate(tmp_path: Path) -> None:
    validate = _validate()
    from rollout_cards.release.redact import redact_card

    pack_card(CARDS / "synthetic", tmp_path / "s.rcard")
    unpack_card(tmp_path / "s.rcard", tmp_path / "unpacked")
    assert validate(tmp_path / "unpacked").valid
    redact_card(tmp_path / "s.rcard", {"redact": [{"target": "steps.content", "reason": "all text"}]},
                tmp_path / "redacted")
    pack_card(tmp_path / "redacted", tmp_path / "r.rcard")
    assert validate(tmp_path / "redacted").valid and validate(tmp_path / "r.rcard").valid


def test_created_after_2242_packs_a_pax_mtime_that_gnu_tar_reads(synthetic_copy: Path, tmp_path: Path) -> None:
    # The 11-digit octal mtime field ends at 2242-03-16; the header used to overflow and
    # `pack` wrote a corrupt archive with exit 0.
    doc = json.loads((synthetic_copy / "card.json").read_text())
    doc["created"] = "9999-12-31T00:00:00Z"
    (synthetic_copy / "card.json").write_text(json.dumps(doc))
    out = tmp_path / "far.rcard"
    pack_card(synthetic_copy, out)
    expected = int(rc.open(synthetic_copy).manifest.created.timestamp())
    with tarfile.open(out) as tar:
        assert {i.mtime for i in tar.getmembers()} == {expected}
    with ArchiveSource(out) as source:
        assert source.manifest is not None
    unpack_card(out, tmp_path / "back")
    assert tree(tmp_path / "back") == tree(synthetic_copy)
    if shutil.which("tar") is not None:
        listing = subprocess.run(["tar", "--full-time", "-tvf", str(out)], check=True, capture_output=True, text=True)
        assert "9999-12-31" in listing.stdout


@pytest.mark.parametrize(("field", "offset"), [("mode", 100), ("uid", 108), ("mtime", 136), ("devmajor", 329)])
def test_unused_numeric_fields_must_be_octal_too(packed: Path, tmp_path: Path, field: str, offset: int) -> None:
    # Found by the archive fuzzer: a non-numeric mode made Python's tarfile stop at that
    # header while our scanner served every member.
    data = bytearray(packed.read_bytes())
    size = int(data[124:136].split(b"\x00")[0], 8)
    at = 512 + size + (-size % 512)  # the second member's header
    data[at + offset:at + offset + 8] = b"a/./b\x00\x00\x00"
    data[at + 148:at + 156] = b" " * 8
    data[at + 148:at + 156] = f"{sum(data[at:at + 512]):06o}".encode() + b"\x00 "
    bad = tmp_path / "bad.rcard"
    bad.write_bytes(bytes(data))
    with pytest.raises(UnsafeArchiveError, match=field) as info:
        ArchiveSource(bad)
    assert info.value.rule == "bad-number"


def test_bytes_hidden_in_a_members_padding_are_refused(packed: Path, tmp_path: Path) -> None:
    # The zeros completing a member's last block are covered by no digest: before, a packed card
    # carrying bytes there (here after card.json's data) was read, validated and unpacked (exit 0).
    data = bytearray(packed.read_bytes())
    fd = os.open(packed, os.O_RDONLY)
    try:
        first = scan_members(fd, len(data), packed.name, ArchiveLimits())[0]
    finally:
        os.close(fd)
    end = first.offset + first.size
    assert first.name == "card.json" and end % 512, "card.json's data must end inside a block"
    data[end] = ord("!")
    hidden = tmp_path / "hidden.rcard"
    hidden.write_bytes(bytes(data))
    with pytest.raises(UnsafeArchiveError) as exc:
        rc.open(hidden)
    assert exc.value.rule == "padding-not-zero" and exc.value.member == "card.json"
    with pytest.raises(UnsafeArchiveError, match="padding bytes after its data are not all zero"):
        unpack_card(hidden, tmp_path / "out")
    assert not (tmp_path / "out").exists()
