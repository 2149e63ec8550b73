"""Read Inspect AI logs: the `.eval` zip archive and the `.json` form, one sample at a time.

`open_log(path, session)` returns an `InspectLog` with the header (`eval`, `plan`,
`results`, `stats`, `status`) and `samples`, an iterator of (record label, loader):
the loader parses the sample when called, so a bad sample is one malformed record, and
returns it with the source JSON text of each of its events (a `.eval` member's own
bytes, kept as the steps' payloads instead of re-serialised; None for `.json` logs),
whether it is known to hold no NaN or Infinity float (its source has no such literal),
and whether its floats that msgspec writes unlike repr are marked (`jsondoc.ReprFloat`:
a `.json` log's samples, whose events are encoded again, so no text is searched for them).

A `.eval` archive goes through `SafeZip` (member count, sizes and compression ratio
capped before anything is decompressed; nothing is extracted; stored, deflate and zstd
members are decoded as bounded streams): the header may decode to at most
MAX_HEADER_BYTES and one sample to MAX_SAMPLE_BYTES, so a member that inflates to
600 MB is refused after its budget, not allocated. An archive whose run did not finish
has only `_journal/start.json`, which is read instead of the header.

JSON is decoded strictly (`jsondoc`: integers within int64, finite numerals, lone
surrogates refused with their JSON pointer), except that Inspect's `NaN` and
`Infinity` literals (Python's json writes them; NaN marks an unscored sample) are
read as floats.
A `.json` log is size-capped and streamed: the header first, then the samples in the
same pass when `eval` comes before `samples` (as Inspect writes them), otherwise in a
second pass.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from ..jsondoc import MISS, fast_items, fast_text
from .compression import HEAD_BYTES, compressed_error
from .json_stream import JsonStream, parse_json, parse_json_items
from .session import ImportSession
from .steps import json_text
from .zip_reader import SafeZip

__all__ = ["MAX_HEADER_BYTES", "MAX_JSON_LOG_BYTES", "MAX_SAMPLE_BYTES", "MAX_SAMPLE_CHARS", "InspectLog",
           "open_log", "plain", "text"]

#: A .json log larger than this is refused before it is read; one sample may hold at most
#: MAX_SAMPLE_CHARS characters (the stream buffers one sample at a time).
MAX_JSON_LOG_BYTES = 64 * 1024**3
MAX_SAMPLE_CHARS = 1024**3
#: Decoded-size budgets of `.eval` members: the header (or journal start) and one sample.
MAX_HEADER_BYTES = 64 * 1024**2
MAX_SAMPLE_BYTES = 512 * 1024**2
# At most 18 ASCII digits: int() of a longer run is a ValueError (Python's 4,300-digit limit)
# or a sort key beyond int64; such a member is not a sample and is declared like any other.
_SAMPLE_NAME = re.compile(r"^samples/(.+)_epoch_([0-9]{1,18})\.json$")
_KNOWN_MEMBERS = re.compile(r"^(header\.json|summaries\.json|reductions\.json|_journal/.*|samples/.*)$")

Samples = Iterator[tuple[str, Callable[[], tuple[Any, list[str] | None, bool, bool]]]]
_CONSTANT_TEXT = {math.inf: "Infinity", -math.inf: "-Infinity"}


def plain(value: Any) -> Any:
    """`value` with non-finite floats as the strings "NaN", "Infinity", "-Infinity" (JSON has no
    such numbers; Inspect writes NaN for unscored samples), so it can be kept as JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else _CONSTANT_TEXT[value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def text(value: Any) -> str:
    """Deterministic JSON text of an Inspect value (`json_text`; non-finite floats as in `plain`).
    Values here are decoded log JSON, so msgspec's encoder gives the same text (`jsondoc.fast_text`)."""
    fast = fast_text(value)
    if fast is not None:
        return fast
    try:
        return json_text(value)
    except ValueError:
        return json_text(plain(value))


class InspectLog:
    """One Inspect log: its header and a way to stream its samples."""

    def __init__(self, path: Path, format: str, header: dict[str, Any], samples: Samples):
        self.path = path
        self.format = format
        self.header = header
        self.samples = samples
        spec = header.get("eval")
        if not isinstance(spec, dict) or not all(isinstance(spec.get(k), str) and spec[k] for k in ("task", "model")):
            raise SourceFormatError("is not an Inspect log: its header has no eval.task and eval.model (non-empty "
                                    "strings)", file=str(path))
        self.spec: dict[str, Any] = spec
        self.task: str = spec["task"]
        self.task_run: str = str(spec.get("task_id") or spec.get("eval_id") or spec.get("run_id") or "")
        #: what tells this log's episodes apart in a card: the task_id, or for a later log of the same
        #: eval (`inspect score` keeps task_id) task_id.<digest of its scoring> (see `scoring_digest`)
        self.key: str = self.task_run
        # The header fields the import computes with are checked here, once: a wrong type or an
        # epoch count below 1 reached the plan and the rules as an internal error (exit 2).
        for where, value, kind in (("eval.dataset", spec.get("dataset"), dict),
                                   ("results", header.get("results"), dict)):
            if value is not None and not isinstance(value, kind):
                raise _header_field(path, where, value, "an object (or null)")
        scores = (header.get("results") or {}).get("scores")
        if scores is not None and not isinstance(scores, list):
            raise _header_field(path, "results.scores", scores, "a list of scores (or null)")
        config = spec.get("config") if isinstance(spec.get("config"), dict) else {}
        epochs = config.get("epochs")
        if epochs is not None and (type(epochs) is not int or epochs < 1):
            raise _header_field(path, "eval.config.epochs", epochs, "an integer of at least 1 (or null)")
        self.epochs: int = epochs or 1
        self.reducers = config.get("epochs_reducer") or ["mean"]
        self.found = 0
        #: score column -> task ids with a (non-null) value: how many samples a metric is over when
        #: the log does not say (older logs have no scored_samples)
        self.scored: dict[str, set[str]] = {}
        #: sample members of a .eval archive (None for a .json log, whose count is unknown until read)
        self.members: int | None = None
        #: a .eval log's reductions.json, as stored (bytes): a .json log has them in its header
        self.reductions_member: bytes | None = None
        self.resources: list[Any] = []

    def scoring_digest(self) -> str:
        """8 hex digits of SHA-256 over the log's scorers, metrics, results and reductions (all that
        `inspect score` changes): the same for the same log, different for a re-score of it."""
        scoring = {"scorers": self.spec.get("scorers"), "metrics": self.spec.get("metrics"),
                   "results": self.header.get("results"), "reductions": self.header.get("reductions")}
        return hashlib.sha256(text(scoring).encode()).hexdigest()[:8]

    def close(self) -> None:
        """Close the files and archive the log holds open."""
        for item in reversed(self.resources):
            item.close()
        self.resources.clear()


def _header_field(path: Path, where: str, value: Any, expected: str) -> SourceFormatError:
    shown = repr(value) if isinstance(value, (int, float)) else type(value).__name__
    return SourceFormatError(f"is not a usable Inspect log: its header's {where} is {shown}, not {expected}; "
                             "fix or remove that field", file=str(path))


def _open_eval(path: Path, session: ImportSession, stack: list[SafeZip]) -> InspectLog:
    archive = SafeZip(path, str(path))
    stack.append(archive)
    if "header.json" in archive:
        header_name = "header.json"
    elif "_journal/start.json" in archive:
        header_name = "_journal/start.json"
        session.note(f"{path.name} has no header.json (the run did not finish); read _journal/start.json, "
                     "which has no results")
    else:
        raise SourceFormatError("is a zip archive but not an Inspect log (no header.json)", file=str(path))
    header = _json(archive.read(header_name, budget=MAX_HEADER_BYTES, what="an Inspect log header"),
                   str(path), header_name)
    if not isinstance(header, dict):
        raise SourceFormatError("is not an Inspect log: the header is not a JSON object", file=str(path), record=header_name)
    names = archive.names()
    unknown = [n for n in names if not _KNOWN_MEMBERS.match(n)]
    if unknown:
        session.note(f"{path.name}: archive members not imported: {', '.join(unknown[:5])}")
    members = sorted((n for n in names if _SAMPLE_NAME.match(n)), key=_member_order)

    def samples() -> Samples:
        # Members are read and parsed inside the caller's per-record guard: a bad member
        # is one malformed record, not the end of the archive.
        for name in members:
            yield name, partial(_member_json, archive, str(path), name)

    log = InspectLog(path, "inspect-eval", header, samples())
    log.members = len(members)
    if "reductions.json" in archive:  # Inspect writes each sample's reduced scores here, not in the header
        log.reductions_member = archive.read("reductions.json", budget=MAX_SAMPLE_BYTES,
                                             what="the sample reductions of an Inspect log")
    return log


def _member_order(name: str) -> tuple[int, tuple[int, int | str]]:
    m = _SAMPLE_NAME.match(name)
    sid = m.group(1)  # type: ignore[union-attr]
    numeric = sid.isascii() and sid.isdigit() and len(sid) <= 18  # '²'.isdigit(), yet int('²') fails
    return int(m.group(2)), ((0, int(sid)) if numeric else (1, sid))  # type: ignore[union-attr]


def _member_json(archive: SafeZip, file: str, member: str) -> tuple[Any, list[str] | None, bool, bool]:
    """A sample, the JSON text of each of its events (kept as the steps' payloads), and whether
    it holds no NaN or Infinity float (the strict decoder reads only those literals as such)."""
    data = archive.read(member, budget=MAX_SAMPLE_BYTES, what="one Inspect sample")
    got = fast_items(data, "events")
    if got is not MISS:  # msgspec refuses NaN and Infinity: no need to search 50 MB of samples for them
        return got[0], got[1], True, False
    value, items = parse_json_items(data, file, member, key="events", constants=True, fast=False)
    return value, items, b"NaN" not in data and b"Infinity" not in data, False


def _json(data: bytes, file: str, member: str) -> Any:
    return parse_json(data, file, member, constants=True)


def _open_json(path: Path, stack: list[Any]) -> InspectLog:
    """Stream a .json log: the header first; the samples in one pass when `eval` comes before
    `samples` (as Inspect writes them), otherwise in a second pass over the file."""
    size = path.stat().st_size
    if size > MAX_JSON_LOG_BYTES:
        raise SourceFormatError(f"is {size} bytes, more than the {MAX_JSON_LOG_BYTES}-byte limit for a .json log",
                                file=str(path))
    fh = open(path, "rb")  # noqa: SIM115 - closed by the caller's stack
    stack.append(fh)
    stream = JsonStream(fh, str(path), max_value_chars=MAX_SAMPLE_CHARS, constants=True)
    header: dict[str, Any] = {}
    keys = stream.object_keys()
    samples_first = False
    for key in keys:
        if key == "samples":
            if "eval" in header:
                return InspectLog(path, "inspect-json", header, _rest(stream, keys, header))
            samples_first = True
            stream.skip_value()
        else:
            header[key] = stream.read_value()
    stream.end()
    if not samples_first:
        return InspectLog(path, "inspect-json", header, iter(()))
    return InspectLog(path, "inspect-json", header, _second_pass(path, stack))


def _rest(stream: JsonStream, keys: Iterator[str], header: dict[str, Any]) -> Samples:
    stream.mark_floats = True  # the samples' events are encoded again (the header is read as it is)
    for index, sample in stream.array_items(label="samples[{}]"):
        yield f"samples[{index}]", partial(_value, sample, stream.finite, stream.marked)
    stream.mark_floats = False
    for key in keys:  # members after `samples` (e.g. reductions) are read for completeness
        header[key] = stream.read_value()
    stream.end()


def _second_pass(path: Path, stack: list[Any]) -> Samples:
    fh = open(path, "rb")  # noqa: SIM115 - closed by the caller's stack
    stack.append(fh)
    stream = JsonStream(fh, str(path), max_value_chars=MAX_SAMPLE_CHARS, constants=True)
    for key in stream.object_keys():
        if key != "samples":
            stream.skip_value()
            continue
        stream.mark_floats = True
        for index, sample in stream.array_items(label="samples[{}]"):
            yield f"samples[{index}]", partial(_value, sample, stream.finite, stream.marked)
        stream.mark_floats = False


def _value(value: Any, finite: bool, marked: bool) -> tuple[Any, None, bool, bool]:
    return value, None, finite, marked


def open_log(path: Path, session: ImportSession) -> InspectLog:
    """Open an Inspect log (.eval or .json); notes about it go to `session`. Close it when done."""
    stack: list[Any] = []
    try:
        log = _open(path, session, stack)
    except BaseException:
        for item in reversed(stack):
            item.close()
        raise
    log.resources = stack
    return log


def _open(path: Path, session: ImportSession, stack: list[Any]) -> InspectLog:
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    if head.startswith(b"PK"):
        return _open_eval(path, session, stack)
    if path.suffix == ".eval":
        # a Git LFS pointer under the .eval name is named as one, not as a broken archive
        raise compressed_error(str(path), head) or SourceFormatError(
            "is not a zip archive, so not an Inspect .eval log", file=str(path))
    return _open_json(path, stack)
