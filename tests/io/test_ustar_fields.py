"""io.ustar's shared header-field parser against Python's tarfile (an independent reader).

`header_number` reads what tarfile writes in numeric fields (octal, and GNU base-256 where
allowed); `pax_records` gives the records tarfile itself reads back from a pax header it wrote.
"""

from __future__ import annotations

import io
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.io.ustar import BLOCK, PaxError, checksum_matches, header_number, pax_records


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**63))
def test_header_number_reads_tarfile_numbers(value):
    octal_fits = value < 8**11
    field = tarfile.itn(value, 12, tarfile.USTAR_FORMAT if octal_fits else tarfile.GNU_FORMAT)
    assert header_number(field, base256=True) == tarfile.nti(field) == value
    assert header_number(field) == (value if octal_fits else None)  # base-256 only where allowed


@pytest.mark.parametrize("field", [b"12a\x00", b"-1\x00", b"\xff" * 12, b"0o17\x00", b"+17\x00"])
def test_header_number_refuses_what_is_not_a_tar_number(field):
    assert header_number(field, base256=True) is None


def _pax_archive(names: list[str], size_digits: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = size_digits
            info.pax_headers = {"comment": "é=" * size_digits}
            tar.addfile(info, io.BytesIO(b"x" * size_digits))
    return buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
                        max_size=120), min_size=1, max_size=3, unique=True), st.integers(0, 40))
def test_pax_records_are_what_tarfile_reads_back(names, n):
    data = _pax_archive(names, n)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        expected = [m.pax_headers for m in tar.getmembers()]
    got, pos = [], 0
    while data[pos : pos + BLOCK].strip(b"\x00"):
        header = data[pos : pos + BLOCK]
        assert checksum_matches(header)
        size = header_number(header[124:136])
        body = data[pos + BLOCK : pos + BLOCK + size]
        if header[156:157] == b"x":
            got.append({key: value for key, value, _ in pax_records(body)})
        pos += BLOCK + size + -size % BLOCK
    assert got == expected


@pytest.mark.parametrize(("data", "message"), [
    (b"x 5 a=b\n", "no valid length"), (b"9 a=b\n", "length does not match"), (b"5 ab\n", "has no '='"),
    (b"6 a=\xff\n", "is not UTF-8"),
])
def test_a_malformed_pax_record_says_what_is_wrong(data, message):
    with pytest.raises(PaxError, match=message):
        list(pax_records(data))


def test_checksum_matches_signed_sums_only_when_asked():
    block = bytearray(tarfile.TarInfo("é").tobuf(tarfile.USTAR_FORMAT, "utf-8")[:BLOCK])
    signed = sum(block[:148]) + 256 + sum(block[156:]) - 2 * sum(b for b in block[:148] + block[156:] if b > 127)
    block[148:156] = f"{signed:06o}\x00 ".encode()
    assert checksum_matches(bytes(block), signed=True) and not checksum_matches(bytes(block))
