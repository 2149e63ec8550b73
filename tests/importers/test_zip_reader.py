from __future__ import annotations

import io
import random
import struct
import zipfile

import pytest

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.zip_reader import SafeZip, ZipLimits
from tests.importers.conftest import zstd_zip


def _zip(path, members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> None:
    with zipfile.ZipFile(path, "w", method) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, (2025, 1, 1, 0, 0, 0))
            info.compress_type = method
            zf.writestr(info, data)


def test_reads_members_in_memory(tmp_path):
    path = tmp_path / "a.zip"
    _zip(path, {"header.json": b"{}", "samples/1_epoch_1.json": b"[1]"})
    with SafeZip(path, "a.zip") as archive:
        assert archive.names() == ["header.json", "samples/1_epoch_1.json"]
        assert archive.read("samples/1_epoch_1.json") == b"[1]"
        assert "header.json" in archive and "nope" not in archive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip"]  # nothing extracted


def test_not_a_zip(tmp_path):
    path = tmp_path / "x.eval"
    path.write_bytes(b"not a zip at all")
    with pytest.raises(SourceFormatError, match="not a readable zip"):
        SafeZip(path, "x.eval")


@pytest.mark.parametrize("name", ["../escape.json", "/abs.json", "a/../../b", "back\\slash", "c:drive"])
def test_unsafe_member_names_are_refused(tmp_path, name):
    path = tmp_path / "a.zip"
    _zip(path, {name: b"{}"})
    with pytest.raises(SourceFormatError, match="not a safe relative path"):
        SafeZip(path, "a.zip")


def test_member_count_cap(tmp_path):
    path = tmp_path / "a.zip"
    _zip(path, {f"m{i}": b"x" for i in range(5)})
    with pytest.raises(SourceFormatError, match="5 members"):
        SafeZip(path, "a.zip", ZipLimits(max_members=4))


def test_member_and_total_size_caps(tmp_path):
    path = tmp_path / "a.zip"
    _zip(path, {"a": b"x" * 100, "b": b"y" * 100})
    with pytest.raises(SourceFormatError, match="declares 100 bytes"):
        SafeZip(path, "a.zip", ZipLimits(max_member_bytes=99))
    with pytest.raises(SourceFormatError, match="in total"):
        SafeZip(path, "a.zip", ZipLimits(max_total_bytes=150))


def test_compression_ratio_cap_is_checked_before_reading(tmp_path):
    path = tmp_path / "bomb.zip"
    _zip(path, {"zeros": b"\0" * (4 << 20)})
    with pytest.raises(SourceFormatError, match="ratio above"):
        SafeZip(path, "bomb.zip", ZipLimits(max_ratio=100))
    SafeZip(path, "bomb.zip", ZipLimits(max_ratio=100_000)).close()


def test_duplicate_member_names_are_refused(tmp_path):
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf, pytest.warns(UserWarning):
        zf.writestr("same", b"1")
        zf.writestr("same", b"2")
    with pytest.raises(SourceFormatError, match="twice"):
        SafeZip(path, "a.zip")


def test_encrypted_members_are_refused(tmp_path):
    buf = io.BytesIO()
    _zip(buf, {"secret": b"data"}, method=zipfile.ZIP_STORED)
    raw = bytearray(buf.getvalue())
    cd = raw.index(b"PK\x01\x02")
    raw[cd + 8] |= 0x1  # general purpose flag, bit 0: encrypted
    path = tmp_path / "enc.zip"
    path.write_bytes(bytes(raw))
    with pytest.raises(SourceFormatError, match="encrypted"):
        SafeZip(path, "enc.zip")


def test_a_member_larger_than_its_header_says_is_refused(tmp_path):
    buf = io.BytesIO()
    _zip(buf, {"m": b"z" * 1000})
    raw = bytearray(buf.getvalue())
    cd = raw.index(b"PK\x01\x02")
    struct.pack_into("<I", raw, cd + 24, 10)  # central directory: uncompressed size 10
    path = tmp_path / "lie.zip"
    path.write_bytes(bytes(raw))
    with SafeZip(path, "lie.zip") as archive, pytest.raises(SourceFormatError, match="lie.zip, record m"):
        archive.read("m")


def test_zstd_members_are_decoded(tmp_path):
    path = tmp_path / "z.eval"
    body = b'{"k": "' + b"v" * 100_000 + b'"}'
    zstd_zip(path, {"header.json": b"{}", "samples/1_epoch_1.json": body})
    with SafeZip(path, "z.eval") as archive:
        assert archive.method("samples/1_epoch_1.json") == "zstd"
        assert archive.read("samples/1_epoch_1.json") == body
        with archive.open("samples/1_epoch_1.json") as stream:
            assert len(stream.read(10)) == 10  # bounded reads


def test_zstd_members_read_interleaved_or_after_a_failure_are_their_own_bytes(tmp_path):
    # the archive reuses one decompressor for members read one after another
    rng = random.Random(7)
    bodies = {f"samples/{i}_epoch_1.json": rng.randbytes(150_000) + b"x" * rng.randrange(200_000) for i in range(4)}
    path = zstd_zip(tmp_path / "z.eval", {**bodies, "bad": b"y" * 300_000})
    raw = bytearray(path.read_bytes())
    at = raw.index(b"bad") + 3  # the bad member's compressed data starts after its local header's name
    raw[at + 8 : at + 24] = bytes(16)
    path.write_bytes(bytes(raw))
    names = list(bodies)
    with SafeZip(path, "z.eval") as archive:
        assert archive.read(names[3]) == bodies[names[3]]  # its decompressor is kept for the next member
        with archive.open(names[0]) as first:
            head = first.read(1000)
            assert archive.read(names[1]) == bodies[names[1]]  # opened while the first stream is open
            with archive.open(names[2]) as third:
                parts = [third.read(7000), first.read(5000), third.read(-1), first.read(-1)]
        assert head + parts[1] + parts[3] == bodies[names[0]] and parts[0] + parts[2] == bodies[names[2]]
        with pytest.raises(SourceFormatError, match="record bad"):
            archive.read("bad")
        assert archive.read(names[3]) == bodies[names[3]]
        assert [archive.read(n) for n in names] == list(bodies.values())


def test_unreadable_method_is_named(tmp_path):
    buf = io.BytesIO()
    _zip(buf, {"header.json": b"{}"}, method=zipfile.ZIP_STORED)
    raw = bytearray(buf.getvalue())
    for sig, at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # method field of local and central headers
        struct.pack_into("<H", raw, raw.index(sig) + at, 14)
    path = tmp_path / "lzma.eval"
    path.write_bytes(bytes(raw))
    with SafeZip(path, "lzma.eval") as archive, pytest.raises(SourceFormatError) as err:
        archive.read("header.json")
    assert "record header.json" in str(err.value) and "compression method 14 (lzma)" in str(err.value)


def test_budget_stops_a_member_that_inflates_within_the_ratio_cap(tmp_path):
    path = tmp_path / "bomb.eval"
    _zip(path, {"header.json": b" " * (8 << 20)})  # deflate: ~8 KB that inflates to 8 MB (ratio ~1000)
    with SafeZip(path, "bomb.eval", ZipLimits(max_ratio=2000)) as archive:
        with pytest.raises(SourceFormatError, match="budget for an Inspect header"):
            archive.read("header.json", budget=1 << 20, what="an Inspect header")
        assert len(archive.read("header.json", budget=16 << 20)) == 8 << 20


def test_budget_applies_to_what_is_decoded_not_only_to_what_is_declared(tmp_path):
    buf = io.BytesIO()
    _zip(buf, {"m": b"z" * (4 << 20)})
    raw = bytearray(buf.getvalue())
    struct.pack_into("<I", raw, raw.index(b"PK\x01\x02") + 24, 1000)  # directory claims 1000 bytes
    path = tmp_path / "lie.zip"
    path.write_bytes(bytes(raw))
    with SafeZip(path, "lie.zip") as archive, pytest.raises(SourceFormatError, match="beyond its declared 1000"):
        archive.read("m", budget=1 << 20)


def test_corrupt_data_fails_the_crc(tmp_path):
    buf = io.BytesIO()
    _zip(buf, {"m": b"hello world"}, method=zipfile.ZIP_STORED)
    raw = bytearray(buf.getvalue())
    raw[raw.index(b"hello")] = ord("j")
    path = tmp_path / "crc.zip"
    path.write_bytes(bytes(raw))
    with SafeZip(path, "crc.zip") as archive, pytest.raises(SourceFormatError, match="CRC-32"):
        archive.read("m")


def _with_copies_of(raw: bytes, name: bytes, copies: list[bytes]) -> bytes:
    """`raw` (a zip) with extra central-directory entries, one per name in `copies`, each a copy
    of `name`'s entry: pointing at the same local header and data."""
    eocd = raw.rindex(b"PK\x05\x06")
    count, size, offset = struct.unpack_from("<HII", raw, eocd + 10)
    cd = raw[offset:offset + size]
    entries, pos = [], 0
    while pos < len(cd):
        nlen, elen, clen = struct.unpack_from("<HHH", cd, pos + 28)
        entries.append(cd[pos:pos + 46 + nlen + elen + clen])
        pos += 46 + nlen + elen + clen
    (source,) = [e for e in entries if e[46:46 + len(name)] == name and len(e) == 46 + len(name)]
    extra = [bytes(bytearray(source[:28]) + struct.pack("<H", len(n)) + source[30:46] + n) for n in copies]
    new_cd = b"".join(entries + extra)
    tail = bytearray(raw[eocd:])
    struct.pack_into("<HHII", tail, 8, count + len(copies), count + len(copies), len(new_cd), offset)
    return raw[:offset] + new_cd + bytes(tail)


def test_directory_entries_overlapping_one_anothers_data_are_refused(tmp_path):
    """A 'quoted-overlap' bomb: 2,000 directory entries pointing at one stored sample made it
    decode 2,000 times (with --keep-going the import succeeded, each copy a dropped duplicate)."""
    buf = io.BytesIO()
    _zip(buf, {"header.json": b"{}", "samples/1_epoch_1.json": b"[" + b"1," * 5000 + b"1]"})
    raw = _with_copies_of(buf.getvalue(), b"samples/1_epoch_1.json",
                          [f"samples/{i}_epoch_1.json".encode() for i in range(2, 2002)])
    path = tmp_path / "overlap.eval"
    path.write_bytes(raw)
    with zipfile.ZipFile(path) as plain:  # zipfile itself lists them as 2,002 members
        assert len(plain.infolist()) == 2002
    with pytest.raises(SourceFormatError, match=r"overlap\.eval, record samples/2_epoch_1\.json: .*member overlaps "
                                                r"the data of member 'samples/1_epoch_1\.json'"):
        SafeZip(path, "overlap.eval")


def test_a_local_header_naming_another_member_than_the_directory_is_refused(tmp_path):
    buf = io.BytesIO()
    _zip(buf, {"header.json": b"{}", "samples/1_epoch_1.json": b"[1]"})
    raw = bytearray(buf.getvalue())
    cd = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)  # the second directory entry
    raw[cd + 46:cd + 46 + len(b"samples/1_epoch_1.json")] = b"samples/9_epoch_1.json"
    path = tmp_path / "renamed.eval"
    path.write_bytes(bytes(raw))
    with SafeZip(path, "renamed.eval") as archive:
        assert archive.names() == ["header.json", "samples/9_epoch_1.json"]
        with pytest.raises(SourceFormatError, match="local header names it b'samples/1_epoch_1.json', its "
                                                    "directory entry 'samples/9_epoch_1.json'"):
            archive.read("samples/9_epoch_1.json")
