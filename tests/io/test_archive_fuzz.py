"""Mutated packed cards: headers, names, sizes, links and pax records changed (checksums fixed
up, so the mutation reaches past the checksum test). Opening either works — and then agrees
with Python's tarfile on every member — or raises UnsafeArchiveError / CardFormatError;
unpacking never writes outside its target."""

from __future__ import annotations

import contextlib
import random
import tarfile
from pathlib import Path

import pytest

from rollout_cards.errors import CardFormatError, UnsafeArchiveError
from rollout_cards.io.archive import ArchiveSource, pack_card, unpack_card
from tests.conftest import FIXTURE_CARDS
from tests.fuzzing import cases, seed

BLOCK = 512
# (offset, width) of ustar header fields worth corrupting.
FIELDS = {"name": (0, 100), "mode": (100, 8), "size": (124, 12), "mtime": (136, 12), "typeflag": (156, 1),
          "linkname": (157, 100), "magic": (257, 8), "prefix": (345, 155)}
VALUES = [b"../x", b"/etc/passwd", b"a\\b", b"C:x", b"a/./b", b"\x1b[2J", b"\xff\xfe", b"card.json",
          b"Card.json", b"cafe\xcc\x81", b"7777777777", b"77777777777", b"\x80\x00\x00\x01", b" 12 ", b"1\x000",
          b"\xd9\xa0", b"\xef\xbc\x96", b"\xc2\xb2", b"0", b"1", b"2", b"5", b"6", b"L", b"x", b"g", b"S", b"K", b"7",
          b"ustar  \x00", b"ustar\x0000", b"", b"9" * 12]
PAX = [b"size=\xd9\xa1\xd9\xa0", b"size=\xc2\xb2", b"size=" + b"9" * 5000, b"size=-1", b"size=1e3", b"path=../x",
       b"path=a\x00b", b"linkpath=/etc", b"GNU.sparse.map=0,1", b"mtime=1e999", b"path=", b"size= 5",
       b"path=" + b"a" * 256, b"path=rules/" + "\u00e9".encode() * 128, b"path=" + b"/".join([b"d" * 250] * 4)]


def _checksum(block: bytearray) -> None:
    block[148:156] = b" " * 8
    block[148:156] = f"{sum(block):06o}".encode() + b"\x00 "


def _headers(data: bytes) -> list[int]:
    """Offsets of the header blocks of a well-formed archive (as packed by us)."""
    out, pos = [], 0
    while pos + BLOCK <= len(data) and data[pos:pos + BLOCK] != bytes(BLOCK):
        out.append(pos)
        size = int(data[pos + 124:pos + 136].split(b"\x00")[0].strip() or b"0", 8)
        pos += BLOCK + size + (-size % BLOCK)
    return out


def _pax(record: bytes) -> bytes:
    body = b" " + record + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n = len(str(n)) + len(body)
    return str(n).encode() + body


def _mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    heads = _headers(data)
    kind = rng.choice(["field", "field", "bytes", "truncate", "pax", "append"])
    if kind == "truncate":
        return bytes(buf[: rng.randrange(len(buf))])
    if kind == "append":
        return bytes(buf) + rng.choice([b"\x00" * BLOCK, b"junk", bytes(buf[:BLOCK])])
    at = rng.choice(heads)
    block = bytearray(buf[at:at + BLOCK])
    if kind == "field":
        offset, width = FIELDS[rng.choice(list(FIELDS))]
        value = rng.choice(VALUES)[:width]
        block[offset:offset + width] = value.ljust(width, b"\x00")
    elif kind == "bytes":
        for _ in range(rng.randint(1, 4)):
            block[rng.randrange(BLOCK)] = rng.randrange(256)
    else:  # a pax header in front of this member
        payload = _pax(rng.choice(PAX))
        pax = bytearray(BLOCK)
        pax[0:16] = b"rcard-pax-header"
        pax[100:108] = b"0000644\x00"
        pax[124:136] = f"{len(payload):011o}".encode() + b"\x00"
        pax[136:148] = b"00000000000\x00"
        pax[156:157] = b"x"
        pax[257:265] = b"ustar\x0000"
        _checksum(pax)
        insert = bytes(pax) + payload + bytes(-len(payload) % BLOCK)
        return bytes(buf[:at]) + insert + bytes(buf[at:])
    if rng.random() < 0.9:
        _checksum(block)
    buf[at:at + BLOCK] = block
    return bytes(buf)


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("fuzz") / "minimal.rcard"
    pack_card(FIXTURE_CARDS / "minimal", out)
    return out.read_bytes()


@pytest.mark.fuzz
def test_mutated_archives_are_refused_or_agree_with_tarfile(packed: bytes, tmp_path: Path) -> None:
    rng = random.Random(seed())
    accepted = 0
    for i in range(cases(250)):
        path = tmp_path / f"{i}.rcard"
        path.write_bytes(_mutate(packed, rng))
        try:
            with ArchiveSource(path) as source:
                ours = [(m.name, m.size) for m in source.members if m.kind == "file"]
        except (UnsafeArchiveError, CardFormatError) as exc:
            assert str(exc)
            path.unlink()
            continue
        accepted += 1
        # Independent reference: what Python's tar reader (pax-aware) sees must be what we serve.
        with tarfile.open(path) as tar:
            theirs = [(m.name, m.size) for m in tar.getmembers() if m.isfile()]
        assert ours == theirs, f"case {i}: our scanner and tarfile disagree"
        target = tmp_path / f"out{i}"
        with contextlib.suppress(UnsafeArchiveError, CardFormatError):
            unpack_card(path, target)
        # Nothing but the archives and the targets: no write elsewhere, no staging left behind.
        assert all(p.name.endswith(".rcard") or p.name.startswith("out") for p in tmp_path.iterdir())
        path.unlink()
    assert accepted < cases(250)  # the mutations do reach the refusals
