"""The bounded tar.gz reader: what Python's tarfile and GNU tar read, and every hostile archive refused, located."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.tar_reader import TarLimits, read_tar_gz
from tests.fuzzing import cases


def _tar(entries, fmt=tarfile.GNU_FORMAT, *, compress=True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for entry in entries:
            info, data = entry if isinstance(entry, tuple) else (entry, None)
            tar.addfile(info, None if data is None else io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0) if compress else raw.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def _read(tmp_path: Path, data: bytes, limits: TarLimits = TarLimits(), want=lambda n: True):
    path = tmp_path / "a.tar.gz"
    path.write_bytes(data)
    return read_tar_gz(path, "a.tar.gz", want=want, limits=limits)


def _reference(data: bytes) -> dict[str, bytes]:
    """What Python's tarfile reads from the same archive (regular files only)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


_NAME = st.text(alphabet="abcdefghij_-.0123456789é", min_size=1, max_size=40).filter(
    lambda s: s not in (".", "..") and not s.startswith("."))


@given(files=st.dictionaries(st.lists(_NAME, min_size=1, max_size=6).map("/".join), st.binary(max_size=3000),
                             max_size=8),
       fmt=st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
@settings(max_examples=cases(60), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@pytest.mark.fuzz
def test_members_are_what_tarfile_reads(tmp_path_factory, files, fmt):
    paths = sorted(files)
    # a name that is also a directory of another cannot be a file too
    files = {p: files[p] for p in paths if not any(q.startswith(p + "/") for q in paths)}
    try:
        data = _tar([_file(n, b) for n, b in files.items()], fmt)
    except ValueError:  # USTAR cannot hold this name; the other formats are tried on other examples
        return
    got = _read(tmp_path_factory.mktemp("t"), data)
    assert got.members == _reference(data) == files
    assert {k for k, v in got.kinds.items() if v == "file"} == set(files)


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar is not installed")
@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_an_archive_made_by_gnu_tar(tmp_path, fmt):
    """`tar -czf - workspace/conversations` as the OpenHands harness runs it: long names, directories."""
    root = tmp_path / "src"
    deep = root / "workspace" / "conversations" / ("a" * 32) / "subagents" / ("b" * 32) / "events"
    deep.mkdir(parents=True)
    (deep / ("event-00000-" + "c" * 36 + ".json")).write_bytes(b'{"kind":"MessageEvent"}')
    (deep / ".eventlog.lock").write_bytes(b"")
    (deep.parent / "base_state.json").write_bytes("{\"é\": 1}".encode())
    out = tmp_path / "c.tar.gz"
    subprocess.run(["tar", f"--format={fmt}", "-czf", str(out), "workspace/conversations"], cwd=root, check=True)
    got = read_tar_gz(out, "c.tar.gz", want=lambda n: True)
    assert got.members == _reference(out.read_bytes())
    assert len(got.members) == 3 and all(len(n) > 100 for n in got.members if n.endswith(".json"))


def test_wanted_members_only_are_kept(tmp_path):
    data = _tar([_file("a/keep.json", b"1"), _file("a/skip.bin", b"2" * 5000), _file("b/keep.json", b"3")])
    got = _read(tmp_path, data, want=lambda n: n.endswith(".json"))
    assert got.members == {"a/keep.json": b"1", "b/keep.json": b"3"}
    assert got.kinds == {"a/keep.json": "file", "a/skip.bin": "file", "b/keep.json": "file"}


def test_leading_dot_slash_and_concatenated_gzip_members(tmp_path):
    one = _tar([_file("./x/a", b"A")], compress=False)
    # a tar whose bytes are split over two gzip members (gzip files concatenate)
    data = gzip.compress(one[:700], mtime=0) + gzip.compress(one[700:], mtime=0) + b"\x00" * 100
    assert _read(tmp_path, data).members == {"x/a": b"A"}


HOSTILE = {
    "symlink": ([_special("x/link", tarfile.SYMTYPE, "/etc/passwd")], "symbolic link", "x/link"),
    "hardlink": ([_file("x/a"), _special("x/b", tarfile.LNKTYPE, "x/a")], "hard link", "x/b"),
    "device": ([_special("x/dev", tarfile.CHRTYPE)], "device file", "x/dev"),
    "fifo": ([_special("x/fifo", tarfile.FIFOTYPE)], "FIFO", "x/fifo"),
    "absolute": ([_file("/etc/cron.d/x")], "absolute", "/etc/cron.d/x"),
    "parent": ([_file("x/../../evil")], "'..'", "x/../../evil"),
    "long parent": ([_file("w/" + "d" * 120 + "/../../../evil")], "'..'", "../evil"),
    "backslash": ([_file("x\\..\\evil")], "backslash", "x\\..\\evil"),
    "control": ([_file("x/a\nb")], "control", "x/a\nb"),
    "duplicate": ([_file("x/a", b"1"), _file("x/a", b"2")], "appears twice", "x/a"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_members_are_refused_naming_the_member(tmp_path, case):
    entries, message, member = HOSTILE[case]
    with pytest.raises(SourceFormatError, match=message) as info:
        _read(tmp_path, _tar(entries))
    assert info.value.file == "a.tar.gz" and repr(member)[1:-1] in info.value.record


def test_pax_path_and_sparse_are_refused(tmp_path):
    info, data = _file("x/ok")
    info.pax_headers = {"path": "../outside"}
    with pytest.raises(SourceFormatError, match=r"'\.\.'") as got:
        _read(tmp_path, _tar([(info, data)], tarfile.PAX_FORMAT))
    assert "../outside" in got.value.record
    info, data = _file("x/sparse")
    info.pax_headers = {"GNU.sparse.size": "10"}
    with pytest.raises(SourceFormatError, match="sparse"):
        _read(tmp_path, _tar([(info, data)], tarfile.PAX_FORMAT))


def test_limits_are_checked_before_reading(tmp_path):
    many = _tar([_file(f"m/{i}") for i in range(20)])
    with pytest.raises(SourceFormatError, match="more than 10 members"):
        _read(tmp_path, many, TarLimits(max_members=10))
    big = _tar([_file("m/big", b"z" * 10_000)])
    with pytest.raises(SourceFormatError, match="10,000 bytes, more than the 1,000") as info:
        _read(tmp_path, big, TarLimits(max_member_bytes=1000))
    assert "m/big" in info.value.record
    # not wanted: skipped, not refused
    assert _read(tmp_path, big, TarLimits(max_member_bytes=1000), want=lambda n: False).members == {}
    with pytest.raises(SourceFormatError, match="members read to more than 15,000"):
        _read(tmp_path, _tar([_file("m/a", b"z" * 10_000), _file("m/b", b"z" * 10_000)]),
              TarLimits(max_kept_bytes=15_000))
    with pytest.raises(SourceFormatError, match="more than the 100 an archive may be"):
        _read(tmp_path, big, TarLimits(max_file_bytes=100))


def test_a_gzip_bomb_stops_at_the_decompressed_limit(tmp_path):
    """64 MiB of zeros compress to ~64 KiB; the cap is hit after 1 MiB is produced, not 64."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("bomb")
        info.size = 64 << 20
        tar.addfile(info, io.BytesIO(bytes(64 << 20)))
    data = gzip.compress(raw.getvalue(), mtime=0)
    assert len(data) < 1 << 20
    with pytest.raises(SourceFormatError, match="decompresses to more than 1,048,576 bytes") as info:
        _read(tmp_path, data, TarLimits(max_total_bytes=1 << 20), want=lambda n: False)
    assert info.value.file == "a.tar.gz"


def test_corrupt_and_truncated_archives(tmp_path):
    good = _tar([_file("x/a", b"A" * 3000)], compress=False)
    with pytest.raises(SourceFormatError, match="truncated gzip"):
        _read(tmp_path, gzip.compress(good, mtime=0)[:-30])
    with pytest.raises(SourceFormatError, match="not a gzip file"):
        _read(tmp_path, good)
    with pytest.raises(SourceFormatError, match="not another gzip member"):
        _read(tmp_path, gzip.compress(good, mtime=0) + b"garbage")
    bad_sum = bytearray(good)
    bad_sum[10] ^= 1  # a name byte: the checksum no longer matches
    with pytest.raises(SourceFormatError, match="wrong checksum") as info:
        _read(tmp_path, gzip.compress(bytes(bad_sum), mtime=0))
    assert info.value.record == "byte 0 of the tar stream"
    with pytest.raises(SourceFormatError, match="archive ends after") as info:
        _read(tmp_path, gzip.compress(good[:512 + 1000], mtime=0))
    assert "x/a" in info.value.record
    with pytest.raises(SourceFormatError, match="without its end-of-archive marker"):
        _read(tmp_path, gzip.compress(good[:512 + 3072], mtime=0))
    crc = bytearray(gzip.compress(good, mtime=0))
    crc[-8] ^= 0xFF  # the gzip trailer's CRC-32
    with pytest.raises(SourceFormatError, match="not a readable gzip stream"):
        _read(tmp_path, bytes(crc))


def test_a_linked_archive_is_not_followed(tmp_path):
    target = tmp_path / "real.tar.gz"
    target.write_bytes(_tar([_file("x/a")]))
    link = tmp_path / "a.tar.gz"
    os.symlink(target, link)
    with pytest.raises(SourceFormatError, match="symbolic link"):
        read_tar_gz(link, "a.tar.gz", want=lambda n: True)


@pytest.mark.fuzz
def test_mutated_archives_are_refused_or_read_as_tarfile_reads_them(tmp_path):
    """Bytes of a real-layout tar (fixtures/openhands_conversations.py) overwritten or cut: the reader
    refuses with a SourceFormatError, or returns exactly the files Python's tarfile reads."""
    import importlib.util
    import random

    from tests.conftest import REPO
    from tests.fuzzing import seed

    spec = importlib.util.spec_from_file_location("ohc", REPO / "fixtures" / "openhands_conversations.py")
    oh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oh)
    raw = gzip.decompress(oh.files()["conversations/nest-1.tar.gz"])
    rng = random.Random(f"{seed()}:tar")
    accepted = 0
    for _ in range(cases(150)):
        data = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256) if rng.random() < 0.7 else 0
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        try:
            ours = _read(tmp_path, gzip.compress(bytes(data), mtime=0)).members
        except SourceFormatError as exc:
            assert exc.file == "a.tar.gz"
            continue
        with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r:") as tar:
            ref = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        assert ours == ref
        accepted += 1
    assert accepted  # some mutations leave the archive readable (bytes inside a member's data)


def test_a_git_lfs_pointer_in_place_of_the_archive_is_named(tmp_path):
    # a conversations/<instance>.tar.gz checked out without `git lfs` is a pointer; before: "is not a gzip file"
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 2048\n"
    with pytest.raises(SourceFormatError, match="is a Git LFS pointer .* not the file of 2,048 bytes"):
        _read(tmp_path, pointer)
