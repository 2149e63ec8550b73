"""Read large JSON documents value by value, so an importer never holds a whole file.

`JsonStream` decodes UTF-8 incrementally into a sliding text buffer and parses one
JSON value at a time with `json.JSONDecoder.raw_decode`; `array_items()` and
`object_keys()` walk the containers around those values. Memory is bounded by the
largest single value (capped by `max_value_chars`), not by the file.

    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path))
        for index, record in stream.array_items():
            ...
        stream.end()

A truncated file, a syntax error or a value over the cap raises `SourceFormatError`
naming the file and the record index. Values are decoded strictly (`jsondoc`): NaN,
Infinity, numbers beyond int64 or a finite float, and lone surrogates are refused.
`parse_json` is the same for one document held in memory (a zip member, a line).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import SourceFormatError
from ..jsondoc import (
    BOM_PROBLEM,
    MISS,
    TRUNCATED,
    fast_container,
    fast_decode,
    fast_items,
    may_hold_surrogate,
    reject_constant,
    surrogate_pointer,
)
from ..jsondoc import CONSTANTS_DECODER as _CONSTANTS_DECODER
from ..jsondoc import DECODER as _DECODER
from .compression import HEAD_BYTES, compressed_error

__all__ = ["DEFAULT_MAX_VALUE_CHARS", "JsonStream", "iter_jsonl", "iter_records", "parse_json", "parse_json_items",
           "read_document", "reject_constant"]

#: One record larger than this (in characters) is refused rather than buffered.
DEFAULT_MAX_VALUE_CHARS = 1 << 30
_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
_NUMBER_CHARS = frozenset("0123456789.eE+-")
# A parse error this close to the end of the buffer may just be a value cut by the buffer.
_TAIL = 16
# The C decoder is first given a window of about twice the last value (at least this); a
# value it finds cut by the end of the buffer goes to the strict decoder, which reads on (or
# fails) exactly as it does alone — msgspec also reports a lone surrogate escape as a cut, and
# the strict decoder refuses an out-of-range number before the rest of its value is read.
_MIN_WINDOW = 1 << 16
# The file's bytes are kept beside the text for the fast path up to this many (past jsondoc's limit
# for the fast path a value is decoded strictly: its bytes need not be held twice).
_RAW_MAX = 1 << 25


_LONE_SURROGATE = "holds a lone surrogate (a \\uD800-\\uDFFF escape that is not half of a pair), which is not text"


def _surrogate_problem(text: str, start: int, end: int, value: Any, *, from_utf8: bool) -> str | None:
    if not may_hold_surrogate(text, start, end, from_utf8=from_utf8):
        return None
    pointer = surrogate_pointer(value)
    return None if pointer is None else f"{pointer} {_LONE_SURROGATE}"


def _decode(data: bytes | str, decoder: json.JSONDecoder = _DECODER, *, fast: bool = True) -> Any:
    """A whole document, decoded strictly; ValueError says what is wrong and where. `fast`: by
    msgspec where that gives the same (`jsondoc.fast_decode`), else by the strict decoder."""
    if fast and (value := fast_decode(data)) is not MISS:
        return value
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not valid UTF-8 at byte {exc.start}: {exc.reason}") from None
    try:
        value = decoder.decode(text)
    except json.JSONDecodeError as exc:
        if exc.pos == 0 and text.startswith("\ufeff"):  # else 'Expecting value' at character 0
            raise ValueError(BOM_PROBLEM) from None
        raise ValueError(f"is not valid JSON at character {exc.pos}: {exc.msg}") from None
    except ValueError as exc:
        raise ValueError(f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("nests JSON too deeply") from None
    problem = _surrogate_problem(text, 0, len(text), value, from_utf8=not isinstance(data, str))
    if problem is not None:
        raise ValueError(f"is not valid JSON: {problem}")
    return value


def parse_json(
    data: bytes | str, name: str, record: str | None = None, *, constants: bool = False, fast: bool = True
) -> Any:
    """One whole JSON document, decoded strictly; SourceFormatError names `name` and `record`.
    `constants`: NaN / Infinity literals are read as floats (`jsondoc.CONSTANTS_DECODER`);
    `fast=False`: the strict decoder only (what the fast path is tested against)."""
    try:
        return _decode(data, _CONSTANTS_DECODER if constants else _DECODER, fast=fast)
    except ValueError as exc:
        head = data[:HEAD_BYTES] if isinstance(data, bytes) else b""
        raise compressed_error(name, head, record) or SourceFormatError(str(exc), file=name, record=record) from None


def parse_json_items(
    data: bytes | str, name: str, record: str | None = None, *, key: str, constants: bool = False, fast: bool = True
) -> tuple[Any, list[str] | None]:
    """`parse_json` of a document that is an object, and the source text of each item of its
    top-level array `key` (None when there is no such array): importers keep an item's own
    JSON text instead of re-serialising its value. Decoded once, by the same strict decoder
    (each item and every other member by its C scanner); the whole text is checked for lone
    surrogates as `parse_json` checks it. Anything unexpected falls back to `parse_json`, so
    a bad document fails with the same message. `fast`: msgspec first (`jsondoc.fast_items`)."""
    if fast and (got := fast_items(data, key)) is not MISS:
        return got
    decoder = _CONSTANTS_DECODER if constants else _DECODER
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
        value, items = _object_items(text, key, decoder)
    except (ValueError, IndexError, StopIteration, RecursionError):
        return parse_json(data, name, record, constants=constants, fast=fast), None
    problem = _surrogate_problem(text, 0, len(text), value, from_utf8=not isinstance(data, str))
    if problem is not None:
        raise SourceFormatError(f"is not valid JSON: {problem}", file=name, record=record)
    return value, items


def _object_items(text: str, key: str, decoder: json.JSONDecoder) -> tuple[dict[str, Any], list[str] | None]:
    """Walk a top-level object member by member (ValueError/IndexError when it is not one)."""
    ws, scan = _WS.match, decoder.scan_once
    pos = ws(text, 0).end()
    if text[pos] != "{":
        raise ValueError("not an object")
    out: dict[str, Any] = {}
    items: list[str] | None = None
    pos = ws(text, pos + 1).end()
    if text[pos] == "}":
        raise ValueError("an empty object: let parse_json read it")
    while True:
        if text[pos] != '"':
            raise ValueError("expected a key")
        name, pos = json.decoder.scanstring(text, pos + 1, True)
        pos = ws(text, pos).end()
        if text[pos] != ":":
            raise ValueError("expected ':'")
        pos = ws(text, pos + 1).end()
        if name == key and text[pos] == "[":
            items, values = [], []
            pos = ws(text, pos + 1).end()
            if text[pos] == "]":
                pos += 1
            else:
                while True:
                    item, end = scan(text, pos)
                    values.append(item)
                    items.append(text[pos:end])
                    pos = ws(text, end).end()
                    if text[pos] == "]":
                        pos += 1
                        break
                    if text[pos] != ",":
                        raise ValueError("expected ',' or ']'")
                    pos = ws(text, pos + 1).end()
            out[name] = values
        else:
            out[name], pos = scan(text, pos)
            if name == key:
                items = None  # a later duplicate key wins, as in json
        pos = ws(text, pos).end()
        if text[pos] == "}":
            if ws(text, pos + 1).end() != len(text):
                raise ValueError("text after the document")
            return out, items
        if text[pos] != ",":
            raise ValueError("expected ',' or '}'")
        pos = ws(text, pos + 1).end()


_CONTINUATION = bytes(range(0x80, 0xC0))  # the bytes after the first of a UTF-8 character


def _characters(data: bytes) -> int:
    """The number of characters valid UTF-8 `data` holds."""
    return len(data) if data.isascii() else len(data.translate(None, _CONTINUATION))


def _utf8_length(text: str, start: int, end: int) -> int:
    """The number of bytes of the UTF-8 of text[start:end] (encoded a chunk at a time)."""
    n = 0
    for at in range(start, end, _CHUNK):
        part = text[at : min(end, at + _CHUNK)]
        n += len(part) if part.isascii() else len(part.encode("utf-8"))
    return n


class JsonStream:
    """A pull parser over a binary file holding one JSON document."""

    def __init__(
        self, fh: BinaryIO, name: str, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS, constants: bool = False,
        fast: bool = True,
    ):
        self._fh = fh
        self.name = name
        self._decode = codecs.getincrementaldecoder("utf-8")("strict")
        self._buf = ""
        self._pos = 0
        self._base = 0  # characters dropped from the front of the buffer so far
        self._eof = False
        self._max = max_value_chars
        self._decoder = _CONSTANTS_DECODER if constants else _DECODER  # constants: NaN, Infinity read
        self.record: str | None = None  # label used in error messages
        self._fast = fast  # objects and arrays decoded by jsondoc.fast_container where it is exact
        self._window = _MIN_WINDOW
        # The file's bytes behind the text buffer, for the fast path (msgspec decodes UTF-8 bytes: the
        # text is not encoded again): self._raw[0] is byte self._raw_base of the file, and
        # self._buf[self._sync_char] starts at byte self._sync_byte (one known place of the text).
        self._raw: bytes | None = b"" if fast else None  # None: not kept (see _fill)
        self._raw_base = 0
        self._sync_char = 0
        self._sync_byte = 0
        self._head = b""  # the file's first bytes: a failure there may be a compressed file
        #: whether the last value `read_value` gave was decoded by msgspec, which refuses NaN and
        #: Infinity: it then holds no non-finite float (a reader may skip looking for one)
        self.finite = False
        #: while set, msgspec-decoded values hold `jsondoc.ReprFloat`s (`fast_container(marked=True)`);
        #: `marked` says whether the last value was decoded so (then `fast_text(s)(marked=True)`)
        self.mark_floats = False
        self.marked = False

    # -- buffer ---------------------------------------------------------------------
    def _error(self, message: str) -> SourceFormatError:
        return compressed_error(self.name, self._head, self.record) or SourceFormatError(
            message, file=self.name, record=self.record)

    def _fill(self, at_least: int = 0) -> bool:
        """Append at least `at_least` (and one chunk) more bytes' worth of text; False at end of file."""
        if self._eof:
            return False
        if self._pos > _CHUNK and self._pos * 2 > len(self._buf):
            if self._fast:
                self._drop_raw()
            self._base += self._pos
            self._buf = self._buf[self._pos :]
            self._pos = 0
        raw = self._fh.read(max(at_least, _CHUNK))
        if not self._head:
            self._head = raw[:HEAD_BYTES]
            if raw.startswith(codecs.BOM_UTF8):  # else "expected '{', found '\ufeff'" or "truncated"
                raise self._error(BOM_PROBLEM)
        try:
            text = self._decode.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise self._error(
                f"is not valid UTF-8 near character {self._base + len(self._buf)}: {exc.reason}"
            ) from None
        if not raw:
            self._eof = True
        self._buf += text
        if self._raw is not None:
            self._raw += raw  # (with the bytes of a character the decoder holds until its end is read)
            if len(self._raw) > _RAW_MAX:  # a value too large for the fast path: not kept twice
                self._raw = None
        return bool(raw) or bool(text)

    def _drop_raw(self) -> None:
        """Before the text up to self._pos is dropped: the bytes behind it too (the known place
        moves to the new front); bytes no longer kept are kept again from here when few enough."""
        front = self._byte_at(self._pos)
        if self._raw is not None:
            self._raw = self._raw[front - self._raw_base :]
        elif len(self._buf) - self._pos <= _RAW_MAX // 2:
            self._raw = self._buf[self._pos :].encode("utf-8") + self._decode.getstate()[0]
        self._raw_base = front
        self._sync_char -= self._pos

    def _byte_at(self, char: int) -> int:
        """The file offset of the byte where self._buf[char] starts (char >= the known place); the
        known place moves there."""
        self._sync_byte += _utf8_length(self._buf, self._sync_char, char)
        self._sync_char = char
        return self._sync_byte

    def _skip_ws(self) -> None:
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf) or not self._fill():
                return

    def peek(self) -> str:
        """The next non-whitespace character, or '' at the end of the file."""
        self._skip_ws()
        return self._buf[self._pos] if self._pos < len(self._buf) else ""

    def offset(self) -> int:
        """Character offset of the parser in the file."""
        return self._base + self._pos

    def byte_offset(self) -> int:
        """Byte offset of the parser in the file (a fast stream's: it keeps the bytes behind the text)."""
        if not self._fast:
            raise ValueError("byte offsets are kept by fast streams only")
        return self._byte_at(self._pos)

    def expect(self, char: str, what: str) -> None:
        """Consume `char` (after whitespace) or fail saying `what` was expected."""
        got = self.peek()
        if got != char:
            raise self._unexpected(got, what)
        self._pos += 1

    def _unexpected(self, got: str, what: str) -> SourceFormatError:
        if not got:
            return self._error(f"ends before {what} (the file is truncated)")
        return self._error(f"expected {what} at character {self.offset()}, found {got!r}")

    # -- values -------------------------------------------------------------------
    def read_value(self, typed: Any = None) -> Any:
        """Parse and return the next JSON value. `typed`: a msgspec type (`jsondoc.fast_container`) an
        object or array read by the fast path is decoded as where it fits; else plain values."""
        self._skip_ws()
        while True:
            start = self._pos
            if self._fast and start < len(self._buf) and self._buf[start] in "{[":
                got = self._fast_value(start, typed)
                if got is not MISS and got is not TRUNCATED:
                    value, end = got
                    self._window = max(_MIN_WINDOW, 2 * (end - start))
                    if end - start > self._max:
                        self._grow(start, held=end - start)  # raises: over the cap
                    self._pos = end
                    self.finite = True
                    self.marked = self.mark_floats
                    return value
                if (got is TRUNCATED and not self._eof and len(self._buf) - start <= self._max
                        and self._buf[-1] not in _NUMBER_CHARS and not may_hold_surrogate(self._buf, start, from_utf8=True)):
                    # Cut by the end of the buffer (msgspec reads a lone surrogate escape as a cut too: none
                    # here): read on. The strict decoder would fail there as well, after decoding the value
                    # so far and counting the lines of the whole buffer for its error (~3% of a tau2 import).
                    # It is still tried (below) where it may fail otherwise than on the whole value: past
                    # the cap (a value over it and bad fails by its first problem, as at every cut before),
                    # and on a number cut by the buffer (1e30 of 1e3000 is out of range too, and named so).
                    self._grow(start)
                    continue
            self.finite = self.marked = False
            try:
                value, end = self._decoder.raw_decode(self._buf, start)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self._buf) - _TAIL
                if cut and not self._eof:
                    self._grow(start)
                    continue
                if cut:
                    raise self._error(f"ends inside a JSON value (is the file truncated?): {exc.msg}") from None
                raise self._error(
                    f"is not valid JSON at character {self._base + exc.pos}: {exc.msg}"
                ) from None
            except ValueError as exc:  # NaN / Infinity, numbers out of range
                raise self._error(f"is not valid JSON at character {self.offset()}: {exc}") from None
            except RecursionError:
                raise self._error(f"nests JSON too deeply at character {self.offset()}") from None
            # A number cut by the end of the buffer ("12" of "125", "0" of "0.5") may go on
            # in the next chunk: read more unless a character that ends a number follows.
            cut_number = type(value) in (int, float) and not self._eof
            if cut_number and _NUMBER_TAIL.match(self._buf, end).end() == len(self._buf):  # type: ignore[union-attr]
                self._grow(start)
                continue
            if end - start > self._max:  # it fitted in what was already read; the cap still holds
                self._grow(start, held=end - start)
            problem = _surrogate_problem(self._buf, start, end, value, from_utf8=True)
            if problem is not None:
                raise self._error(f"is not valid JSON at character {self._base + start}: {problem}")
            self._pos = end
            return value

    def _fast_value(self, start: int, typed: Any = None) -> Any:
        """`jsondoc.fast_container` of the value at text `start` over the file's bytes, in windows
        growing to the whole buffer; (value, end in the text) like the strict decoder."""
        if self._raw is None:
            return MISS
        first = self._byte_at(start) - self._raw_base
        size = len(self._raw)
        window = self._window
        while True:
            stop = min(size, first + window)
            got = fast_container(self._raw, first, stop, marked=self.mark_floats, typed=typed)
            if got is not TRUNCATED and got is not MISS:
                value, cut = got
                end = start + _characters(self._raw[first:cut])
                self._sync_char, self._sync_byte = end, self._raw_base + cut
                return value, end
            if got is MISS or stop == size:
                return got
            window *= 4  # past jsondoc's size limit for the fast path: MISS, decoded strictly

    def _grow(self, start: int, held: int | None = None) -> None:
        held = len(self._buf) - start if held is None else held
        if held > self._max:
            raise self._error(
                f"has a JSON value of more than {self._max} characters at character "
                f"{self._base + start}; refusing to buffer it (raise the limit if the file is trusted)"
            )
        self._fill(max(_CHUNK, held))

    # -- containers ---------------------------------------------------------------
    def array_items(self, *, label: str = "{}", typed: Any = None) -> Iterator[tuple[int, Any]]:
        """Yield (index, value) for each element of the array that starts here.

        `label` formats the record name used in errors (e.g. "samples[{}]"); `typed`: as `read_value`'s.
        """
        self.expect("[", "a JSON array '['")
        index = 0
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            self.record = label.format(index)
            value = self.read_value(typed)
            yield index, value
            index += 1
            self.record = label.format(index)
            got = self.peek()
            if got == ",":
                self._pos += 1
                continue
            if got == "]":
                self._pos += 1
                self.record = None
                return
            raise self._unexpected(got, "',' or ']' after an array element")

    def document_items(self, *, label: str = "{}") -> Iterator[tuple[int, Any]]:
        """`array_items()` of a document that is one array, then `end()`."""
        yield from self.array_items(label=label)
        self.end()

    def object_keys(self) -> Iterator[str]:
        """Yield each key of the object that starts here; the caller must consume its value
        (`read_value`, `array_items` or `skip_value`) before asking for the next key."""
        self.expect("{", "a JSON object '{'")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            if self.peek() != '"':
                raise self._unexpected(self.peek(), "an object key")
            key = self.read_value()
            self.expect(":", "':' after an object key")
            yield key
            got = self.peek()
            if got == ",":
                self._pos += 1
                continue
            if got == "}":
                self._pos += 1
                return
            raise self._unexpected(got, "',' or '}' after an object member")

    def skip_value(self) -> None:
        """Consume the next value without keeping it (arrays element by element)."""
        if self.peek() == "[":
            for _ in self.array_items():
                pass
        else:
            self.read_value()

    def end(self) -> None:
        """Check that nothing but whitespace follows the document."""
        self.record = None
        got = self.peek()
        if got:
            raise self._error(f"has data after the end of the JSON document at character {self.offset()}")


def iter_jsonl(fh: BinaryIO, name: str, *, max_line_bytes: int = DEFAULT_MAX_VALUE_CHARS) -> Iterator[tuple[int, Any]]:
    """Yield (line number, value) for each non-blank line of a JSON Lines file (1-based).

    A line that is not valid JSON raises SourceFormatError naming the line; a last
    line without its newline that does not parse is reported as a truncated file.
    """
    for number, raw in enumerate(_lines(fh, name, max_line_bytes), start=1):
        if not raw.strip():
            continue
        try:
            value = _decode(raw)
        except ValueError as exc:
            if number == 1 and (compressed := compressed_error(name, _head(fh, raw))) is not None:
                raise compressed from None
            whole = raw.endswith(b"\n") or str(exc) == BOM_PROBLEM
            truncated = "" if whole else " (the last line has no newline: is the file truncated?)"
            raise SourceFormatError(f"{exc}{truncated}", file=name, record=f"line {number}") from None
        yield number, value


def _head(fh: BinaryIO, line: bytes) -> bytes:
    """The file's first HEAD_BYTES bytes (a Git LFS pointer is known by its whole text, not its
    first line); the first line when the file cannot be read again."""
    try:
        at = fh.tell()
        fh.seek(0)
        head = fh.read(HEAD_BYTES)
        fh.seek(at)
        return head
    except (OSError, ValueError):  # not seekable (io.UnsupportedOperation is both)
        return line[:HEAD_BYTES]


def _lines(fh: BinaryIO, name: str, limit: int) -> Iterator[bytes]:
    number = 0
    while True:
        number += 1
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            raise SourceFormatError(
                f"is longer than {limit} bytes; refusing to buffer it", file=name, record=f"line {number}"
            )
        yield line


def iter_records(path: Path, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS) -> Iterator[tuple[str, Any]]:
    """(label, record) of a file that is a JSON array, JSON Lines, or one JSON document.

    A file whose first line is a complete JSON value is read as JSON Lines (labels
    "line N"); one starting with `[` as an array streamed element by element (labels
    "N"); anything else as a single document (label "document").
    """
    name = str(path)
    with open(path, "rb") as fh:
        first = fh.readline(1 << 20)
        fh.seek(0)
        if first.lstrip().startswith(b"["):
            stream = JsonStream(fh, name, max_value_chars=max_value_chars)
            for index, value in stream.document_items():
                yield str(index), value
            return
        try:
            _decode(first)
            whole_line = first.strip() != b""
        except ValueError:
            whole_line = False
        if whole_line:
            for number, value in iter_jsonl(fh, name, max_line_bytes=max_value_chars):
                yield f"line {number}", value
            return
        stream = JsonStream(fh, name, max_value_chars=max_value_chars)
        stream.record = "document"
        value = stream.read_value()
        stream.end()
        yield "document", value


def read_document(path: Path, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS, record: str | None = "document",
                  data: bytes | None = None, constants: bool = False) -> Any:
    """The one JSON value `path` holds (a trajectory, a report), streamed with the strict decoder
    (`constants`: NaN / Infinity literals read as floats, for writers that emit them).

    Errors name the file and `record`; a value longer than `max_value_chars` is refused
    before it is buffered, and anything but whitespace after the value is an error. `data`:
    the file's bytes, when the caller has read them (to hash them too): decoded whole by
    msgspec where that gives the strict decoder's value (`jsondoc.fast_decode`), else the
    file is streamed as without them, so an error is the stream's own.
    """
    if data is not None and len(data) <= max_value_chars and (value := fast_decode(data)) is not MISS:
        return value
    with open(path, "rb") as fh:
        stream = JsonStream(fh, str(path), max_value_chars=max_value_chars, constants=constants)
        stream.record = record
        value = stream.read_value()
        stream.end()
    return value
