"""The POSIX ustar/pax container of packed cards: header encoding and a strict header scanner.

Writing emits only what a packed card needs: regular-file members with fixed mode,
owner 0, no user names and a given mtime, and a pax `x` header only when a name or
size does not fit ustar. Reading never uses `tarfile`: `scan_members` walks the
headers of an untrusted file with `os.pread`, checks every header's checksum and
numeric fields, caps the member count and pax header sizes and checks every
declared size against the bytes that are really there before reading anything,
and refuses the constructs packed cards never contain (GNU long names, sparse
files, global pax headers, unknown pax keys, data after the end-of-archive
marker). Per-member safety (names, links, duplicates) is `member_problems`'s job,
so a lenient reader can list hostile members without serving them.

The header fields are read by one parser for every tar the project reads (packed cards
here, source archives in `importers.tar_reader`): `header_number` (octal, or GNU
base-256 where a reader allows it), `checksum_matches`, `header_text` and `pax_records`
(the record framing of a pax extended header); each reader applies its own rules on top.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import UnsafeArchiveError
from ..model.card import MAX_COMPONENT_BYTES
from ..numbers import parse_decimal
from .hashing import lfs_pointer

__all__ = [
    "BLOCK",
    "KINDS",
    "RECORD",
    "ArchiveLimits",
    "Member",
    "PaxError",
    "checksum_matches",
    "end_of_archive",
    "file_header",
    "header_number",
    "header_text",
    "member_problems",
    "name_problem",
    "padding",
    "pax_records",
    "scan_members",
]

BLOCK = 512
#: Archives are padded to a multiple of this (tar's default record of 20 blocks).
RECORD = 20 * BLOCK
_ZERO = bytes(BLOCK)
_USTAR_MAGIC = b"ustar\x00"
_GNU_MAGIC = b"ustar  \x00"
_MAX_OCTAL_SIZE = 8**11 - 1
_OTHER_NUMBERS = (("mode", 100, 108), ("uid", 108, 116), ("gid", 116, 124), ("mtime", 136, 148),
                  ("devmajor", 329, 337), ("devminor", 337, 345))
# Pax keys we accept: the two we write and metadata that changes nothing we read.
_PAX_KEYS = frozenset({"path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"})
#: What each POSIX typeflag is (anything else: "other").
KINDS = {
    b"0": "file", b"\x00": "file", b"5": "dir", b"1": "hardlink", b"2": "symlink",
    b"3": "device", b"4": "device", b"6": "fifo",
}
_COMPRESSED = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
    (b"PK\x03\x04", "zip"),
)


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps checked before anything is allocated or written."""

    max_members: int = 100_000
    max_name_bytes: int = 1024
    max_pax_bytes: int = 64 * 1024
    max_total_bytes: int = 1 << 40


@dataclass(frozen=True)
class Member:
    """One member as stored: decoded name (undecodable bytes kept as surrogates), kind,
    data size and offset, link target for links, and the offset of its first header."""

    name: str
    kind: str
    size: int
    offset: int
    header_offset: int
    linkname: str | None = None
    typeflag: str = "0"


def padding(size: int, unit: int = BLOCK) -> int:
    """Bytes of zeros that bring `size` up to a multiple of `unit`."""
    return -size % unit


# -- writing ---------------------------------------------------------------------------------


def _octal(value: int, width: int) -> bytes:
    return f"{value:0{width - 1}o}".encode("ascii") + b"\x00"


def _ustar_block(name: bytes, prefix: bytes, size: int, mtime: int, mode: int, typeflag: bytes) -> bytes:
    header = b"".join(
        (
            name.ljust(100, b"\x00"),
            _octal(mode, 8),
            _octal(0, 8),  # uid
            _octal(0, 8),  # gid
            _octal(size, 12),
            _octal(mtime, 12),
            b" " * 8,  # checksum, filled below
            typeflag,
            bytes(100),  # linkname
            _USTAR_MAGIC,
            b"00",
            bytes(32),  # uname
            bytes(32),  # gname
            _octal(0, 8),
            _octal(0, 8),
            prefix.ljust(155, b"\x00"),
            bytes(12),
        )
    )
    checksum = f"{sum(header):06o}".encode("ascii") + b"\x00 "
    return header[:148] + checksum + header[156:]


def _split_ustar(raw: bytes) -> tuple[bytes, bytes] | None:
    """(prefix, name) fitting the ustar fields, or None when the name needs a pax record."""
    if not raw.isascii():
        return None
    if len(raw) <= 100:
        return b"", raw
    # Split at a slash so that prefix <= 155 and name <= 100 bytes.
    for i in range(min(len(raw) - 1, 155), 0, -1):
        if raw[i : i + 1] == b"/" and len(raw) - i - 1 <= 100:
            return raw[:i], raw[i + 1 :]
    return None


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length = len(str(length)) + len(body)
    return str(length).encode("ascii") + body


def file_header(name: str, size: int, mtime: int, *, mode: int = 0o644) -> bytes:
    """The header block(s) of a regular-file member: a pax `x` header first when the
    name is not ASCII or too long for ustar, or the size or mtime needs more than 11 octal
    digits (an mtime after 2242-03-16; the ustar field then holds the largest it can)."""
    if mtime < 0:
        raise ValueError(f"mtime {mtime} is before 1970; packed cards store non-negative times")
    raw = name.encode("utf-8")
    records: list[bytes] = []
    split = _split_ustar(raw)
    if split is None:
        records.append(_pax_record("path", name))
        # A deterministic ASCII stand-in for readers that ignore pax headers.
        split = (b"", b"rcard-pax-name/" + hashlib.sha256(raw).hexdigest()[:40].encode("ascii"))
    field_size = size
    if size > _MAX_OCTAL_SIZE:
        records.append(_pax_record("size", str(size)))
        field_size = 0
    if mtime > _MAX_OCTAL_SIZE:
        records.append(_pax_record("mtime", str(mtime)))
        mtime = _MAX_OCTAL_SIZE
    out = b""
    if records:
        payload = b"".join(records)
        out = _ustar_block(b"rcard-pax-header", b"", len(payload), mtime, 0o644, b"x")
        out += payload + bytes(padding(len(payload)))
    return out + _ustar_block(split[1], split[0], field_size, mtime, mode, b"0")


def end_of_archive(written: int) -> bytes:
    """Two zero blocks, then zeros up to a whole record, for an archive of `written` bytes."""
    total = written + 2 * BLOCK
    return bytes(2 * BLOCK + padding(total, RECORD))


# -- reading: the header fields (every tar reader of the project) ------------------------------


def header_number(field: bytes, *, base256: bool = False) -> int | None:
    """The number in a header's numeric field: octal digits, NUL- or space-padded (an empty
    field is 0); with `base256`, also GNU's big-endian base-256 (first byte 0x80). None when
    the field is neither (a negative base-256 number, any other text)."""
    if base256 and field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\x00", 1)[0].strip(b" ")
    if not text:
        return 0
    return int(text, 8) if re.fullmatch(rb"[0-7]+", text) else None


def checksum_matches(block: bytes, *, signed: bool = False, base256: bool = False) -> bool:
    """Whether a header block's stored checksum is the sum of its bytes, the checksum field
    counted as spaces; `signed`: the sum of its bytes as signed chars (old tars) also counts."""
    stored = header_number(block[148:156], base256=base256)
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    if stored == unsigned:
        return True
    return signed and stored == unsigned - 2 * sum(b for b in block[:148] + block[156:] if b > 127)


def header_text(field: bytes) -> str:
    """A NUL-terminated name field, undecodable bytes kept as surrogates."""
    return field.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")


class PaxError(ValueError):
    """A pax extended header whose records are not `<length> <key>=<value>\\n` in UTF-8."""


def pax_records(data: bytes) -> Iterator[tuple[str, str, bytes]]:
    """(key, value, value's bytes) of each record of a pax extended header, in order; PaxError,
    saying what is wrong, at the first malformed record (after yielding the ones before it)."""
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 21)
        length = parse_decimal(data[pos:space]) if space >= 0 else None
        if length is None:
            raise PaxError("pax header record has no valid length")
        end = pos + length
        if length <= space - pos + 1 or end > len(data) or data[end - 1 : end] != b"\n":
            raise PaxError("pax header record length does not match its content")
        key_raw, sep, value_raw = data[space + 1 : end - 1].partition(b"=")
        if not sep:
            raise PaxError("pax header record has no '='")
        try:
            key, value = key_raw.decode("utf-8"), value_raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PaxError("pax header record is not UTF-8") from None
        yield key, value, value_raw
        pos = end


# -- reading packed cards ----------------------------------------------------------------------


def _number(field: bytes, what: str, member: str) -> int:
    if field[:1] and field[0] & 0x80:
        raise UnsafeArchiveError(
            f"{what} uses GNU base-256 encoding, which packed cards never use", member=member, rule="bad-number"
        )
    value = header_number(field)
    if value is None:
        raise UnsafeArchiveError(f"{what} field is not an octal number", member=member, rule="bad-number")
    return value


def _parse_pax(data: bytes, member: str, limits: ArchiveLimits) -> dict[str, str]:
    records: dict[str, str] = {}
    parsed = pax_records(data)
    while True:
        try:
            key, value, value_raw = next(parsed)
        except StopIteration:
            return records
        except PaxError as exc:
            raise UnsafeArchiveError(str(exc), member=member, rule="pax-malformed") from None
        if key.startswith("GNU.sparse"):
            raise UnsafeArchiveError("GNU sparse files are not supported", member=member, rule="sparse")
        if key not in _PAX_KEYS:
            raise UnsafeArchiveError(f"pax key {key[:60]!r} is not supported", member=member, rule="pax-key")
        if key in records:
            raise UnsafeArchiveError(f"pax key {key!r} appears twice", member=member, rule="pax-malformed")
        if key == "path" and len(value_raw) > limits.max_name_bytes:
            raise UnsafeArchiveError(
                f"name is {len(value_raw)} bytes, more than the limit of {limits.max_name_bytes}",
                member=value_raw[:80].decode("utf-8", "surrogateescape") + "...", rule="name-too-long",
            )
        records[key] = value


def _check_not_compressed(head: bytes, name: str) -> None:
    if (pointer := lfs_pointer(head)) is not None:
        # a .rcard kept in Git LFS and checked out without it: say so, not "too short to be a tar archive"
        of = f" of {pointer[1]:,} bytes"
        raise UnsafeArchiveError(
            f"is a Git LFS pointer, not the packed card{of} it stands for: it was checked out without its LFS "
            f"content; run `git lfs pull --include {os.path.basename(name)}` in that repository (or download the "
            "file itself), then run the command again", member=name, rule="not-an-archive")
    if head[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        try:
            declared = zstandard.get_frame_parameters(head).content_size
        except zstandard.ZstdError:
            declared = -1
        claim = f" declaring {declared:,} bytes of content" if declared >= 0 else ""
        raise UnsafeArchiveError(
            f"is a zstd frame{claim}; packed cards are uncompressed tar and compressed input is "
            "refused without being decompressed",
            member=name, rule="compressed-container",
        )
    for magic, kind in _COMPRESSED:
        if head.startswith(magic):
            raise UnsafeArchiveError(
                f"is a {kind} file; packed cards are uncompressed POSIX tar (made by `rcard pack`)",
                member=name, rule="compressed-container",
            )


def scan_members(fd: int, file_size: int, name: str, limits: ArchiveLimits) -> list[Member]:
    """Every member of the tar archive open at `fd`, with structural checks (see module doc).

    Raises UnsafeArchiveError naming the member (or the archive) and the rule broken.
    """
    members: list[Member] = []
    pos = 0
    pax: dict[str, str] | None = None
    pax_offset = 0
    last = name
    head = os.pread(fd, BLOCK, 0)
    _check_not_compressed(head, name)
    if file_size < 2 * BLOCK:
        raise UnsafeArchiveError(f"is {file_size} bytes, too short to be a tar archive", member=name,
                                 rule="not-an-archive")
    while True:
        if pos + BLOCK > file_size:
            raise UnsafeArchiveError(
                f"archive is truncated at byte {file_size}: no end-of-archive marker after this member",
                member=last, rule="truncated",
            )
        block = os.pread(fd, BLOCK, pos)
        if block == _ZERO:
            _check_end(fd, pos, file_size, last, pax is not None)
            return members
        where = f"header at byte {pos}"
        _check_header(block, where if pos else name)
        raw_name = block[0:100].split(b"\x00", 1)[0]
        prefix = block[345:500].split(b"\x00", 1)[0]
        member = header_text(prefix + b"/" + raw_name if prefix else raw_name)
        typeflag = block[156:157]
        size = _number(block[124:136], "size", member)
        # The fields we do not use must still be numbers: a reader that rejects such a header
        # (Python's tarfile stops at it) would see fewer members than we do.
        for what, start, end in _OTHER_NUMBERS:
            _number(block[start:end], what, member)
        data_offset = pos + BLOCK
        if pax is not None:
            member = pax.get("path", member)
            if "size" in pax:
                # ASCII digits only: int() reads Arabic-Indic or full-width digits that GNU tar
                # does not, so the two would disagree on where the next member starts.
                pax_size = parse_decimal(pax["size"])
                if pax_size is None:
                    raise UnsafeArchiveError(f"pax size {pax['size'][:30]!r} is not 1 to 20 ASCII digits",
                                             member=member, rule="pax-malformed")
                size = pax_size
        if size > file_size - data_offset:
            raise UnsafeArchiveError(
                f"declares {size:,} bytes but only {max(0, file_size - data_offset):,} bytes of the file "
                "follow its header",
                member=member, rule="size-beyond-file",
            )
        if typeflag == b"x":
            if pax is not None:
                raise UnsafeArchiveError("two pax headers in a row", member=member, rule="pax-malformed")
            if size > limits.max_pax_bytes:
                raise UnsafeArchiveError(
                    f"pax header is {size:,} bytes, more than the limit of {limits.max_pax_bytes:,}",
                    member=member, rule="pax-too-large",
                )
            pax = _parse_pax(os.pread(fd, size, data_offset), member, limits)
            pax_offset = pos
            pos = _after_padding(fd, data_offset + size, member)
            continue
        if typeflag == b"g":
            raise UnsafeArchiveError("global pax headers are not supported", member=member, rule="pax-global")
        if typeflag in (b"L", b"K"):
            raise UnsafeArchiveError("GNU long-name/long-link members are not supported (use pax)",
                                     member=member, rule="gnu-long-name")
        if typeflag == b"S":
            raise UnsafeArchiveError("GNU sparse files are not supported", member=member, rule="sparse")
        kind = KINDS.get(typeflag, "other")
        if kind not in ("file", "other") and size != 0:
            # tar readers disagree on whether such data is skipped; refuse the ambiguity.
            raise UnsafeArchiveError(f"a {kind} member declares {size:,} bytes of data", member=member,
                                     rule="special-member-size")
        if len(members) >= limits.max_members:
            raise UnsafeArchiveError(
                f"archive has more than {limits.max_members:,} members", member=member, rule="too-many-members"
            )
        linkname = header_text(block[157:257]) if kind in ("hardlink", "symlink") else None
        members.append(
            Member(member, kind, size, data_offset, pax_offset if pax is not None else pos, linkname,
                   typeflag.decode("latin-1"))
        )
        last = member
        pax = None
        pos = _after_padding(fd, data_offset + size, member)


def _after_padding(fd: int, end: int, member: str) -> int:
    """Where the next header starts after data ending at `end`. The zeros that complete the
    member's last block are refused when they are not zeros: no digest covers them, so bytes
    hidden there would travel with a card that verifies."""
    pad = padding(end)
    if pad and os.pread(fd, pad, end).strip(b"\x00"):
        raise UnsafeArchiveError(f"the {pad} padding bytes after its data are not all zero (bytes no digest covers)",
                                 member=member, rule="padding-not-zero")
    return end + pad


def _check_header(block: bytes, where: str) -> None:
    """Checksum and magic of one header block; `where` names it in errors."""
    if not checksum_matches(block):
        if not where.startswith("header at byte"):
            raise UnsafeArchiveError("is not a tar archive (no valid header at byte 0)", member=where,
                                     rule="not-an-archive")
        raise UnsafeArchiveError("has a wrong checksum (corrupt or not a tar archive)", member=where,
                                 rule="bad-checksum")
    if block[257:265] == _GNU_MAGIC:
        raise UnsafeArchiveError("is in GNU tar format; packed cards are POSIX ustar/pax", member=where,
                                 rule="not-posix-ustar")
    if block[257:263] != _USTAR_MAGIC or block[263:265] != b"00":
        raise UnsafeArchiveError("is not a POSIX ustar header", member=where, rule="not-posix-ustar")


def _check_end(fd: int, pos: int, file_size: int, last: str, pax_pending: bool) -> None:
    if pax_pending:
        raise UnsafeArchiveError("pax header is not followed by a member", member=last, rule="pax-malformed")
    if pos + 2 * BLOCK > file_size or os.pread(fd, BLOCK, pos + BLOCK) != _ZERO:
        raise UnsafeArchiveError("end-of-archive marker is incomplete (one zero block, not two)",
                                 member=last, rule="truncated")
    tail = file_size - pos - 2 * BLOCK
    # After the marker only the zeros that complete the last record may follow.
    if tail >= RECORD or (tail and os.pread(fd, tail, pos + 2 * BLOCK).strip(b"\x00")):
        raise UnsafeArchiveError(f"{tail:,} bytes of data follow the end-of-archive marker",
                                 member=last, rule="trailing-data")


# -- member rules ------------------------------------------------------------------------------

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def name_problem(name: str, kind: str, limits: ArchiveLimits) -> tuple[str, str] | None:
    """(rule, message) when a member name is not a plain relative path inside the card."""
    raw = name.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "name-not-utf8", "name is not valid UTF-8"
    if len(raw) > limits.max_name_bytes:
        return "name-too-long", f"name is {len(raw)} bytes, more than the limit of {limits.max_name_bytes}"
    if not name:
        return "empty-name", "name is empty"
    if name.startswith("/"):
        return "absolute-path", "absolute paths are not allowed"
    if "\\" in name:
        return "backslash", "backslashes are not allowed in names (Windows path separators)"
    if _DRIVE.match(name):
        return "drive-letter", "names starting with a drive letter are not allowed"
    if _CONTROL.search(name):
        return "control-character", "names may not contain control characters"
    if kind == "dir" and name.endswith("/"):
        name = name[:-1]
    elif name.endswith("/"):
        return "trailing-slash", f"a {kind} member's name ends with '/'"
    parts = name.split("/")
    if ".." in parts:
        return "parent-reference", "'..' would leave the card"
    if any(p in ("", ".") for p in parts):
        return "dot-component", "names may not contain '.' or empty components"
    long = max(len(p.encode("utf-8", "surrogateescape")) for p in parts)
    if long > MAX_COMPONENT_BYTES:
        return "name-too-long", (f"a component of the name is {long} bytes; file systems store at most "
                                 f"{MAX_COMPONENT_BYTES} (NAME_MAX), so it could not be unpacked")
    return None


_REFUSED_KINDS = {
    "symlink": "symbolic links are not allowed",
    "hardlink": "hard links are not allowed",
    "device": "device files are not allowed",
    "fifo": "FIFOs are not allowed",
    "other": "unsupported member type",
}


def _collision_key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def member_problems(members: list[Member], limits: ArchiveLimits) -> Iterator[UnsafeArchiveError]:
    """Every per-member safety violation: bad names, links, devices, duplicates, collisions
    (Unicode normalization or case), and a file that is also used as a directory."""
    seen: dict[str, str] = {}
    keys: dict[str, str] = {}
    files: set[str] = set()
    dirs: set[str] = set()
    for m in members:
        problem = name_problem(m.name, m.kind, limits)
        if problem is not None:
            yield UnsafeArchiveError(problem[1], member=m.name, rule=problem[0])
            continue
        if m.kind in _REFUSED_KINDS:
            detail = f" (type {m.typeflag!r})" if m.kind == "other" else ""
            target = f" (to {m.linkname[:80]!r})" if m.linkname is not None else ""
            yield UnsafeArchiveError(_REFUSED_KINDS[m.kind] + target + detail, member=m.name,
                                     rule=m.kind if m.kind != "other" else "unsupported-type")
            continue
        name = m.name.rstrip("/") if m.kind == "dir" else m.name
        if name in seen:
            if not (m.kind == "dir" and seen[name] == "dir"):
                yield UnsafeArchiveError("appears more than once", member=name, rule="duplicate-name")
            continue
        key = _collision_key(name)
        if key in keys:
            yield UnsafeArchiveError(
                f"collides with {ascii(keys[key])} under Unicode normalization or case folding "
                f"(this name is {ascii(name)})",
                member=name, rule="name-collision",
            )
            continue
        seen[name] = m.kind
        keys[key] = name
        (dirs if m.kind == "dir" else files).add(name)
        parents = name.split("/")[:-1]
        for i in range(1, len(parents) + 1):
            parent = "/".join(parents[:i])
            other = keys.setdefault(_collision_key(parent), parent)
            if other != parent:
                yield UnsafeArchiveError(
                    f"directory {parent!r} collides with {other!r} under Unicode normalization or case folding",
                    member=name, rule="name-collision",
                )
            dirs.add(parent)
    for name in sorted(files & dirs):
        yield UnsafeArchiveError("is both a file and a directory", member=name, rule="file-directory-conflict")
