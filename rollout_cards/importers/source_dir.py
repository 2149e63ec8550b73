"""Files inside a source directory, read without following links out of it.

Output directories of agent harnesses (mini-swe-agent's run dir, tau2-bench's
results.json + simulations/, lm-eval's results + samples) are walked here: only
regular files are returned, a symbolic link anywhere below the source (a file or a
directory) is refused by name rather than followed, and the number of entries
looked at is capped so a hostile tree cannot make the walk unbounded.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceFormatError
from ..yamldoc import StrictYamlError, YamlPath, load_strict_yaml
from .compression import HEAD_BYTES, compressed_error, lfs_pointer_error

__all__ = ["MAX_ENTRIES", "UNRECORDED", "children", "directory_name", "exit_statuses", "read_yaml", "regular_file"]

#: Entries of one directory looked at, at most.
MAX_ENTRIES = 1_000_000
#: error_type of an episode whose exit status the source does not record (a pre-1.0 mini-swe-agent
#: trajectory no exit statuses file lists; a SWE-agent demonstration): never a status guessed.
UNRECORDED = "unrecorded_exit_status"


def regular_file(path: Path, *, what: str = "file") -> Path:
    """`path` when it is a regular file (not a link, FIFO or device), else a SourceFormatError."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise SourceFormatError(f"the {what} it names does not exist", file=str(path)) from None
    except OSError as exc:
        raise SourceFormatError(f"cannot be read: {exc.strerror or exc}", file=str(path)) from None
    if stat.S_ISLNK(mode):
        raise SourceFormatError("is a symbolic link; links are not followed out of a source", file=str(path))
    if not stat.S_ISREG(mode):
        raise SourceFormatError("is not a regular file", file=str(path))
    return path


def read_yaml(path: Path, *, max_bytes: int) -> tuple[object, dict[YamlPath, int]]:
    """A source's YAML file (at most `max_bytes`, strict UTF-8, the strict loader) and the line of
    each key path; every problem a SourceFormatError naming the file."""
    if path.stat().st_size > max_bytes:
        raise SourceFormatError(f"is larger than {max_bytes} bytes", file=str(path))
    data = path.read_bytes()
    if (pointer := lfs_pointer_error(str(path), data[:HEAD_BYTES])) is not None:
        raise pointer  # a Git LFS pointer is valid YAML (one plain string): named before a format's own error
    try:
        return load_strict_yaml(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        error = SourceFormatError(f"is not UTF-8: {exc.reason}", file=str(path))
    except StrictYamlError as exc:
        error = SourceFormatError(f"is not valid YAML: {exc}", file=str(path))
    raise compressed_error(str(path), data[:HEAD_BYTES]) or error


def directory_name(path: Path) -> str:
    """The name of the directory `path` names, taken from its absolute form: a relative `.`, `..`
    or `run/..` has no name of its own (`Path('.').name` is ''), the directory it stands for has.
    '' only for the file system's root. An importer that names an agent or a run after its
    source directory takes the name from here, so a relative source path never gives an empty one."""
    return os.path.basename(os.path.abspath(path))


def exit_statuses(path: Path, *, max_bytes: int) -> dict[str, str]:
    """instance id -> exit status of an `instances_by_exit_status` YAML report (mini-swe-agent's
    `exit_statuses_<time>.yaml`, SWE-agent's `run_batch_exit_statuses.yaml`); an id listed under two
    statuses, or a status whose value is not a list of ids, is a SourceFormatError naming the line."""
    doc, lines = read_yaml(path, max_bytes=max_bytes)
    by_status = doc.get("instances_by_exit_status") if isinstance(doc, dict) else None
    if not isinstance(by_status, dict):
        raise SourceFormatError("has no instances_by_exit_status mapping", file=str(path))
    out: dict[str, str] = {}
    for status, ids in by_status.items():
        if ids is None:
            continue
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            line = lines.get(("instances_by_exit_status", status))
            raise SourceFormatError(f"instances_by_exit_status.{status} is not a list of instance ids",
                                    file=str(path), record=f"line {line}" if line else str(status))
        for iid in ids:
            if iid in out and out[iid] != status:
                raise SourceFormatError(f"lists instance {iid} under both {out[iid]} and {status}",
                                        file=str(path), record=iid)
            out[iid] = str(status)
    return out


def children(directory: Path) -> Iterator[tuple[str, Path, bool]]:
    """(name, path, is_dir) of each entry of `directory`, sorted by name; links are refused."""
    try:
        with os.scandir(directory) as it:
            entries = []
            for n, entry in enumerate(it):
                if n >= MAX_ENTRIES:
                    raise SourceFormatError(f"has more than {MAX_ENTRIES:,} entries", file=str(directory))
                entries.append(entry)
    except NotADirectoryError:
        raise SourceFormatError("is not a directory", file=str(directory)) from None
    except OSError as exc:
        raise SourceFormatError(f"cannot be listed: {exc.strerror or exc}", file=str(directory)) from None
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.is_symlink():
            raise SourceFormatError("is a symbolic link; links are not followed out of a source",
                                    file=str(Path(directory) / entry.name))
        is_dir = entry.is_dir(follow_symlinks=False)
        if not is_dir and not entry.is_file(follow_symlinks=False):
            continue  # FIFOs, sockets, devices: never opened
        yield entry.name, Path(directory) / entry.name, is_dir
