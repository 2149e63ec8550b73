"""`pack_card`: a card directory into one reproducible `.rcard` file (see docs/format.md), and
`copy_hashed`, the copy-while-hashing used by packing and by `archive.unpack_card`."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import progress
from ..errors import CardFormatError, RolloutCardError
from ..model.card import CardManifest
from .hashing import CHUNK, MAX_LFS_POINTER, lfs_pointer_note, root_digest
from .manifest import MAX_MANIFEST_BYTES, parse_manifest
from .reader import DirectorySource
from .targets import make_parent, refuse_link, refuse_special
from .ustar import end_of_archive, file_header, padding

__all__ = ["MANIFEST", "PackResult", "copy_hashed", "pack_card"]

MANIFEST = "card.json"


@dataclass(frozen=True)
class PackResult:
    """What `pack_card` wrote: the file, its size and its member count."""

    path: Path
    bytes: int
    members: int


def _card_listing(root: Path, manifest: CardManifest) -> None:
    """Refuse a card directory whose files are not exactly card.json plus the inventory."""
    listed = {f.path for f in manifest.inventory.files}
    seen = set()
    for entry in DirectorySource(root).entries():
        if entry.kind == "dir":
            continue
        if entry.kind != "file":
            raise CardFormatError(f"{root}/{entry.path} is a {entry.kind}; a card holds only regular files")
        if entry.links > 1:
            # As validate's path-hardlink: another name can change the file behind the card's back.
            raise CardFormatError(f"{root}/{entry.path} has {entry.links} hard links; store an independent copy "
                                  "of the file before packing")
        if entry.path != MANIFEST and entry.path not in listed:
            raise CardFormatError(
                f"{root}/{entry.path} is not listed in card.json's inventory; remove it, or add it "
                "and refresh the manifest, before packing"
            )
        seen.add(entry.path)
    missing = sorted(listed - seen)
    if missing:
        raise CardFormatError(f"{root}/{missing[0]} is listed in the inventory but missing")
    if root_digest(manifest.inventory.files) != manifest.inventory.root_digest:
        raise CardFormatError(f"{root}/card.json: the inventory's root digest does not match its files")


def _output_temp(out: Path, overwrite: bool, suffix: str) -> Path:
    refuse_link(out)
    refuse_special(out)
    if out.exists() and not overwrite:
        raise RolloutCardError(f"{out} exists; choose another name or pass --overwrite")
    make_parent(out)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=suffix)
    os.close(fd)
    return Path(tmp)


def pack_card(card: str | os.PathLike[str], out: str | os.PathLike[str], *, overwrite: bool = False,
              verify: bool = True) -> PackResult:
    """Pack a card directory into one `.rcard` file (uncompressed POSIX tar).

    Reproducible: the bytes depend only on the card's files (names, contents) and
    its `created` time (every member's mtime), never on file times, owners, modes
    or directory order. Every file is hashed while it is copied and must match the
    inventory (`verify=False` checks sizes only, about 3x faster on large cards; the
    reader of the archive still checks every digest); the output appears
    (atomically) only when all of them did.
    """
    root = Path(card)
    out = Path(out)
    if not root.is_dir():
        raise CardFormatError(f"{root} is not a card directory")
    if out.resolve().is_relative_to(root.resolve()):
        raise RolloutCardError(f"{out} is inside the card; write the packed file outside {root}")
    source = DirectorySource(root)
    manifest_bytes = source.read_bytes(MANIFEST, limit=MAX_MANIFEST_BYTES)
    manifest = parse_manifest(manifest_bytes, f"{root}/{MANIFEST}")
    _card_listing(root, manifest)
    mtime = max(0, int(manifest.created.timestamp()))
    tmp = _output_temp(out, overwrite, ".packing")
    written = 0
    try:
        # No O_TRUNC: the file is new and empty, and on ext4 a truncate-then-write makes
        # close() flush every page (auto_da_alloc), which cost a third of the pack time.
        fd = os.open(tmp, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            def emit(data: bytes) -> None:
                nonlocal written
                _write_all(fd, data)
                written += len(data)

            emit(file_header(MANIFEST, len(manifest_bytes), mtime) + manifest_bytes
                 + bytes(padding(len(manifest_bytes))))
            total = sum(e.bytes for e in manifest.inventory.files)
            with progress.task(f"pack {root.name}", total=total, unit="B") as packing:
                for entry in manifest.inventory.files:
                    emit(file_header(entry.path, entry.bytes, mtime))
                    what = f"{root}/{entry.path}"
                    with source.open_binary(entry.path) as src:
                        src_fd = src.fileno()
                        if (size := os.fstat(src_fd).st_size) != entry.bytes:
                            note = lfs_pointer_note(os.pread(src_fd, MAX_LFS_POINTER + 1, 0), entry.sha256) \
                                if size <= MAX_LFS_POINTER else None
                            raise CardFormatError(f"{what} is {size:,} bytes but the inventory lists {entry.bytes:,}; "
                                                  + (note or "the file changed after the card was written"))
                        if verify:
                            sha = copy_hashed(src_fd, 0, entry.bytes, fd, what)
                        else:
                            _copy_range(src_fd, 0, entry.bytes, fd, what)
                            sha = entry.sha256
                    written += entry.bytes
                    if sha != entry.sha256:
                        raise CardFormatError(
                            f"{what}: sha256 is {sha} but the inventory lists {entry.sha256}; "
                            "the file changed after the card was written"
                        )
                    emit(bytes(padding(entry.bytes)))
                    packing.advance(entry.bytes)
            # No fsync: it would double the time of a large pack, and an archive torn by a
            # crash is refused by every reader (truncated or failing its digests).
            emit(end_of_archive(written))
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return PackResult(out, written, 1 + len(manifest.inventory.files))


_COPY_CHUNK = 4 * CHUNK


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _hash_range(fd: int, offset: int, size: int, what: str, stop: threading.Event) -> str:
    digest = hashlib.sha256()
    end = offset + size
    while offset < end and not stop.is_set():
        chunk = os.pread(fd, min(_COPY_CHUNK, end - offset), offset)
        if not chunk:
            raise CardFormatError(f"{what} is shorter than the {size:,} bytes listed")
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def _copy_range(src_fd: int, offset: int, size: int, dst_fd: int, what: str) -> None:
    end = offset + size
    if hasattr(os, "copy_file_range"):
        try:
            while offset < end:
                n = os.copy_file_range(src_fd, dst_fd, min(end - offset, 1 << 30), offset)
                if n == 0:
                    raise CardFormatError(f"{what} is shorter than the {size:,} bytes listed")
                offset += n
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                raise
    while offset < end:  # no (or no more) kernel copy: through user space
        chunk = os.pread(src_fd, min(_COPY_CHUNK, end - offset), offset)
        if not chunk:
            raise CardFormatError(f"{what} is shorter than the {size:,} bytes listed")
        _write_all(dst_fd, chunk)
        offset += len(chunk)


def copy_hashed(src_fd: int, offset: int, size: int, dst_fd: int, what: str) -> str:
    """Append bytes [offset, offset+size) of `src_fd` to `dst_fd`; returns their sha256.

    The kernel copies (copy_file_range, no user-space copy) while a second thread hashes
    the same range (sha256 and pread release the GIL), so the copy costs about the
    time of the hash alone instead of read + hash + write.
    """
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        digest = pool.submit(_hash_range, src_fd, offset, size, what, stop)
        try:
            _copy_range(src_fd, offset, size, dst_fd, what)
        except BaseException:
            stop.set()
            raise
        return digest.result()
