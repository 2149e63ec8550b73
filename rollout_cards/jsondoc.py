"""Strict JSON decoding: the hooks every JSON reader of the project shares.

Python's `json` accepts what a card must never hold: `1e999` and `1e400` become
infinity (and `Infinity` on rewrite, which the validator then rejects), integers of
any size (beyond int64 they cannot be stored; past 4,300 digits `int()` raises), NaN
and Infinity literals, and `"\\ud800"` escapes that decode to lone surrogates (they
cannot be encoded as UTF-8, so a rewrite silently turns them into U+FFFD and a
signature over one card verifies another). `DECODER` refuses the numbers while
parsing; `surrogate_pointer` finds a lone surrogate in the decoded value, after
`may_hold_surrogate` on the text says there is one (it pairs the escapes the text holds,
so valid emoji escapes cost one regex search, not a walk of the value).

`io.manifest.load_json_document` (card.json, signatures, every small JSON document)
and `importers.json_stream` (large source files, value by value) are built on these.

`fast_decode` / `fast_container` are msgspec's C decoder (about 1.5x the stdlib's speed on
importers' records, and no Python hook per number) used only where it gives exactly what
the strict decoder gives: msgspec refuses NaN / Infinity, out-of-range floats (1e999) and
lone surrogate escapes itself, follows the same recursion limit, keeps the last of
duplicate keys at the first one's place, and parses floats correctly rounded; it accepts
integers of any size, so text holding a run of 19 or more digits (not a fraction's) is left
to the strict decoder. Whenever msgspec refuses, the caller decodes strictly, so a bad
document fails with the strict decoder's own message (tests/test_jsondoc_fast.py compares
both on adversarial JSON).

`fast_text` / `fast_texts` go the other way: `importers.steps.json_text`'s text of decoded
values by msgspec's encoder (floats rewritten where msgspec formats them unlike repr; None
where it could differ), tested against json_text in tests/test_jsondoc_text.py. A value that
`fast_container(..., marked=True)` decoded holds those floats as `ReprFloat`s, which the encoder
writes as repr does, so `marked=True` skips the search for floats to rewrite (it cost an Inspect
`.json` import more than the encoding: a model call's cost, 2.65e-05, is such a float;
tests/test_jsondoc_marked.py).
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from itertools import accumulate
from typing import Any

#: msgspec, imported on the first fast call (`_load`): importing it costs ~10-18 ms of CPU, paid
#: before by every command that reads a card.json (`rcard validate` of a small card calls no fast
#: path; issue 14 item 5). None when it is not installed: a core dependency, but an environment
#: installed before it was one decodes strictly (slower).
msgspec: Any = "not loaded"

__all__ = [
    "CONSTANTS_DECODER",
    "DECODER",
    "MISS",
    "TRUNCATED",
    "BOM_PROBLEM",
    "JsonValueError",
    "ReprFloat",
    "decoder",
    "fast_container",
    "fast_decode",
    "fast_items",
    "fast_text",
    "fast_texts",
    "may_hold_surrogate",
    "reject_constant",
    "surrogate_pointer",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: What every JSON reader says of a document that starts with a UTF-8 byte-order mark (JSON text has
#: none, RFC 8259 8.1; the decoders read it as a stray character): one wording for card.json and sources.
BOM_PROBLEM = "starts with a byte-order mark; remove it"
# An escape of a UTF-16 surrogate; a valid pair decodes to one character, a lone one stays.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonValueError(ValueError):
    """A JSON value the strict decoder refuses (a number out of range, a constant)."""


def reject_constant(name: str) -> Any:
    """`parse_constant` hook that refuses NaN and Infinity (they are not JSON)."""
    raise JsonValueError(f"non-standard JSON constant {name}; JSON numbers are finite")


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > 19 or not _INT64_MIN <= (value := int(text)) <= _INT64_MAX:
        shown = text if len(text) <= 24 else f"{text[:20]}... ({digits:,} digits)"
        raise JsonValueError(f"integer {shown} is outside the 64-bit range")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonValueError(f"number {text[:30]} is outside the range of a 64-bit float")
    return value


def decoder(**kwargs: Any) -> json.JSONDecoder:
    """A `json.JSONDecoder` with the strict number hooks (and any other keyword of JSONDecoder)."""
    return json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=reject_constant, **kwargs)


#: The strict decoder without an object hook (importers' records).
DECODER = decoder()
#: The same, but NaN / Infinity / -Infinity literals are read as floats: for sources whose
#: writer emits them (Python's json does; Inspect logs mark unscored samples with NaN).
#: Numerals stay strict (1e999 and integers beyond int64 are still refused).
CONSTANTS_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float)


def may_hold_surrogate(text: str, start: int = 0, end: int | None = None, *, from_utf8: bool = False) -> bool:
    """Whether the JSON text[start:end] can decode to a lone surrogate: it has a surrogate
    escape that is not half of a high-low pair of escapes, or a surrogate character itself
    (not looked for with `from_utf8`: strictly decoded UTF-8 cannot hold one). Exact for
    escapes: a `\\uD83D` whose backslash is escaped is text, not an escape."""
    end = len(text) if end is None else end
    raw = not from_utf8 and not text.isascii()
    found = _SURROGATE_ESCAPE.search(text, start, end)
    if found is None:
        return raw and _SURROGATE.search(text, start, end) is not None
    pending = -1  # where the low half must start after a high escape; -1: none expected
    for match in _SURROGATE_ESCAPE.finditer(text, found.start(), end):
        at = match.start()
        before = at
        while before > start and text[before - 1] == "\\":
            before -= 1
        if (at - before) % 2:  # an odd run of backslashes before it: the backslash is escaped
            continue
        high = text[at + 3] in "89abAB"
        if pending >= 0:
            if high or at != pending:
                return True  # the pending high escape is not followed by a low one
            pending = -1
        elif high:
            pending = match.end()
        else:
            return True  # a low escape with no high one before it
    if pending >= 0:
        return True
    return raw and _SURROGATE.search(text, start, end) is not None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def surrogate_pointer(value: Any) -> str | None:
    """The JSON pointer of the first string or key in `value` holding a lone surrogate, or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        pointer, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return pointer or "/"
        elif isinstance(item, dict):
            for key, child in item.items():
                if _SURROGATE.search(key):
                    return f"{pointer}/{_escape(key.encode('utf-8', 'backslashreplace').decode())}"
                stack.append((f"{pointer}/{_escape(key)}", child))
        elif isinstance(item, list):
            stack.extend((f"{pointer}/{i}", child) for i, child in enumerate(item))
    return None


#: `fast_decode` / `fast_container`: decode this text strictly instead.
MISS: Any = object()
#: `fast_container`: the value may go on after the end of the text given.
TRUNCATED: Any = object()
class ReprFloat(float):
    """A decoded float that msgspec's encoder would write unlike `repr` (|x| < 1e-4 or >= 1e16, not 0):
    `fast_container(..., marked=True)` gives such floats as this type, which the encoders of
    `fast_text` / `fast_texts` write as `repr` writes them, so a value decoded that way needs no
    search for floats to rewrite (`marked=True`). It is a float: it compares, hashes and converts
    (`float(x)` is a plain float) as one, and the stdlib's encoder writes it as it writes a float."""

    __slots__ = ()


def _marked_float(text: str) -> float:
    """`float_hook` of the marking decoder: the strict decoder's float (`_parse_float`), as a
    ReprFloat where msgspec writes it unlike repr (between 1e-4 and 1e16 both write the same)."""
    value = float(text)
    if 1e-4 <= value < 1e16 or -1e16 < value <= -1e-4 or value == 0.0:
        return value
    if not math.isfinite(value):  # msgspec refuses it (the caller decodes strictly, with its error)
        raise ValueError("out of range")
    return ReprFloat(value)


def _repr_float(value: Any) -> Any:
    """`enc_hook` of the sorted encoder: a ReprFloat as repr writes it."""
    if type(value) is ReprFloat:
        return msgspec.Raw(float.__repr__(value).encode())
    raise TypeError(f"cannot encode {type(value).__name__}")


_FAST: Any = None  # set last by _load: a thread that sees it set sees the others set too
_FAST_MARKED: Any = None
_FAST_SPAN: Any = None
_SORTED: Any = None
_FAST_ERRORS: tuple[type[BaseException], ...] = ()
_ENCODE_ERRORS: tuple[type[BaseException], ...] = ()


def _load() -> bool:
    """Import msgspec and build its decoders and encoder (the fast paths call this first, as
    `msgspec is None or (_FAST is None and not _load())`: no call once loaded); False when msgspec
    is not installed."""
    global msgspec, _FAST, _FAST_MARKED, _FAST_SPAN, _SORTED, _FAST_ERRORS, _ENCODE_ERRORS
    try:
        import msgspec as module
    except ImportError:
        msgspec = None
        return False
    msgspec = module
    _FAST_MARKED = module.json.Decoder(float_hook=_marked_float).decode
    _FAST_SPAN = module.json.Decoder(module.Raw).decode  # skips a value (validating it), keeps its bytes
    _SORTED = module.json.Encoder(order="sorted", enc_hook=_repr_float).encode
    _FAST_ERRORS = (module.DecodeError, RecursionError, UnicodeError)
    _ENCODE_ERRORS = (module.EncodeError, TypeError, ValueError, OverflowError, RecursionError)
    _FAST = module.json.Decoder().decode
    return True


# Digits to "0", every other byte to " ": a run of 19 digits is then found by bytes.find (C speed;
# a regex for it costs 10x more on digit-rich text).
_DIGIT_RUNS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
# Larger texts are decoded strictly: the fast path holds up to three transient copies of its text
# (the window, its UTF-8 bytes, the digit map), which must not add a large document's size to the peak.
_FAST_MAX = 1 << 24
_TRAILING = re.compile(r"JSON is malformed: trailing characters \(byte ([0-9]{1,18})\)")


def _long_integer(data: bytes | memoryview) -> bool:
    """Whether UTF-8 `data` has a run of >= 19 digits not after a '.': maybe an integer the
    strict decoder refuses (beyond int64) and msgspec would accept. A run in a string is a
    false alarm (that text is decoded strictly, no harm); a fraction's digits parse alike."""
    if isinstance(data, memoryview):
        data = bytes(data)  # a copy costs less than a strided read of the view
    # Every 6th byte is looked at first: a run of >= 19 digits holds three consecutive multiples
    # of 6, so it shows as "000" in the sampled digit map (the strided copy and its map cost ~1/4
    # of mapping every byte, which was ~0.8x msgspec's whole decode of a mini-swe-agent
    # trajectory). Only the bytes around those places are then scanned, in one pass.
    # In digit-dense text (more than 1 byte in 20 a digit: tau2-bench's simulations, ~8%, with a
    # float, an id or a timestamp every ~700 bytes) the windows cost more than the sampling saves:
    # a sparse probe (every 61st byte) sends such a text to the scan of every byte.
    probe = data[::61].translate(_DIGIT_RUNS)
    if probe.count(b"0") * 20 > len(probe):
        return _long_run(data)
    sampled = data[::6].translate(_DIGIT_RUNS)
    j = sampled.find(b"000")
    if j < 0:
        return False
    if sampled.count(b"000") > len(sampled) >> 6:  # dense after all: the windows would cost more
        return _long_run(data)
    # A run's first sampled place m is at most 5 bytes after its start, so data[m - 6 : m + 19]
    # holds the byte before the run and 19 of its digits: every run is judged in the window of
    # its first sampled place. One window covers a whole run of sampled digits j..e-1 (the
    # windows of each of its places, merged). A run cut by a window's start started earlier and
    # is judged in its own window: here it is skipped, as the "." joined before each window
    # makes it a fraction's digits. The text's own start is put after a space.
    pieces: list[bytes] = []
    while j >= 0:
        e = sampled.find(b" ", j + 3)
        if e < 0:
            e = len(sampled)
        pieces += (b"." + data[6 * j - 6 : 6 * e + 1]) if j > 1 else (b" " + data[: 6 * e + 1]),
        j = sampled.find(b"000", e)
    return _long_run(b"".join(pieces))


def _long_run(data: bytes | memoryview) -> bool:
    """`_long_integer` by a scan of every byte: NumPy maps the digits (~3x bytes.translate, whose
    byte-at-a-time table walk was a quarter of a tau2-bench simulation's fast decode)."""
    import numpy as np  # here: jsondoc is imported by commands that never scan a text

    codes = np.frombuffer(data, np.uint8)
    runs = np.less(np.subtract(codes, 0x30), 10).tobytes()  # b"\x01" per digit (uint8 wraps below "0")
    at = runs.find(_DIGITS)
    while at >= 0:
        if at == 0 or data[at - 1] != 0x2E:  # "."
            return True
        end = runs.find(b"\x00", at)
        if end < 0:
            return False
        at = runs.find(_DIGITS, end)
    return False


_DIGITS = b"\x01" * 19
def fast_decode(text: str | bytes) -> Any:
    """The value of a whole JSON document as the strict decoder gives it, or `MISS` when msgspec
    refuses it or could differ (then decode it strictly: the error, if any, is the strict one)."""
    if msgspec is None or (_FAST is None and not _load()):
        return MISS
    if len(text) > _FAST_MAX:
        return MISS
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
        if _long_integer(data):
            return MISS
        return _FAST(data)
    except _FAST_ERRORS:
        return MISS


def fast_container(data: bytes, start: int, stop: int, *, marked: bool = False, typed: Any = None) -> Any:
    """(value, end) of the JSON object or array at data[start:stop] (UTF-8 bytes; data[start] is
    `{` or `[`; `end` is the offset of the byte after it), decoded as the strict decoder would
    decode the text; `TRUNCATED` when it does not end before `stop` (or msgspec cannot tell: a lone
    surrogate escape also reads as a cut), `MISS` when it must be decoded strictly. The bytes are
    those of strictly decoded UTF-8 text (the caller decoded them; msgspec checks its strings too).
    `marked`: floats msgspec writes unlike repr are `ReprFloat`s (pass `marked=True` to
    `fast_text(s)` of the value or its parts: no float needs rewriting). `typed`: a msgspec type
    (Structs whose fields are `Any` where the caller checks the values) the value is decoded as
    where it fits — the same checks, fewer objects; where it does not (another key, another shape,
    a number out of range) it is decoded as plain values, as without `typed`."""
    if msgspec is None or (_FAST is None and not _load()):
        return MISS
    if stop - start > _FAST_MAX:
        return MISS
    window = memoryview(data)[start:stop]
    try:
        _FAST_SPAN(window)
        cut = len(window)
    except msgspec.DecodeError as exc:
        message = str(exc)
        if message == "Input data was truncated":
            return TRUNCATED
        trailing = _TRAILING.fullmatch(message)
        if trailing is None:
            return MISS
        cut = int(trailing.group(1)) - 1  # msgspec names the byte after the first character after the value
    except _FAST_ERRORS:
        return MISS
    value = window[:cut]
    if _long_integer(value):
        return MISS
    if typed is not None:
        try:
            return _typed(typed, marked)(value), start + cut
        except msgspec.ValidationError:
            pass  # not of that type: decoded as plain values (or refused) below
        except _FAST_ERRORS:
            return MISS
    try:
        decoded = (_FAST_MARKED if marked else _FAST)(value)
    except _FAST_ERRORS:
        return MISS
    return decoded, start + cut


_TYPED: dict[tuple[Any, bool], Any] = {}  # (type, marked) -> its decoder's decode


def _typed(typ: Any, marked: bool) -> Any:
    decode = _TYPED.get((typ, marked))
    if decode is None:
        hook = {"float_hook": _marked_float} if marked else {}
        decode = _TYPED[(typ, marked)] = msgspec.json.Decoder(typ, **hook).decode
    return decode


_ITEMS: dict[str, Any] = {}  # key -> a decoder of the texts of the items of the array member `key`


def fast_items(text: str | bytes, key: str) -> Any:
    """(value, the JSON text of each item of its array member `key`) of a whole document that
    is an object, as `importers.json_stream.parse_json_items` gives them (a repeated key: the
    last one's items), or `MISS` (no such array, msgspec refuses or could differ)."""
    if msgspec is None or (_FAST is None and not _load()):
        return MISS
    if len(text) > _FAST_MAX:
        return MISS
    spans = _ITEMS.get(key)
    if spans is None:
        shape = msgspec.defstruct("_Items", [("items", list[msgspec.Raw])], rename={"items": key})
        spans = _ITEMS[key] = msgspec.json.Decoder(shape).decode
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
        if _long_integer(data):
            return MISS
        value = _FAST(data)
        if type(value) is not dict:
            return MISS
        items = spans(data).items
    except _FAST_ERRORS:
        return MISS
    return value, [bytes(item).decode("utf-8") for item in items]


# Floats msgspec writes unlike Python's repr (which json.dumps writes): an exponent (msgspec 1e16,
# 1.5e-7; repr 1e+16, 1.5e-07) or fixed notation below 1e-4 (msgspec 0.0000265; repr 2.65e-05); the
# digits are the same (both the shortest that round-trip). Candidates are found by bytes.find (a
# regex tried at every byte cost 3x the encoding): "0.0000", and an exponent, which shows as
# "0e0" or "0e-0" once digits map to "0", e/E to "e", signs to "-" and all else to " ".
_EXPONENTS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x65 if b in b"eE" else 0x2D if b in b"-+" else 0x20
                   for b in range(256))
_EXPONENT = re.compile(rb"0e-?0")
_NUMBER = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_LONGEST_FLOAT = 32  # bytes back from a candidate to the `:`, `,` or `[` its number follows


def fast_text(value: Any, *, marked: bool = False) -> str | None:
    """`importers.steps.json_text(value)` (sorted keys, UTF-8 kept, compact) by msgspec's encoder
    (several times faster), for a dict or list made of what a JSON decoder gives (str keys, lists,
    str, int, float, bool, None); None when the caller must use json_text: no msgspec, another
    type, msgspec refuses it, or the text holds `null` (msgspec writes NaN and Infinity as null,
    which json_text refuses; a None costs the slow path). `marked`: every float of `value` that
    msgspec writes unlike repr is a ReprFloat (`fast_container(..., marked=True)` decoded it)."""
    if type(value) not in (dict, list) or msgspec is None or (_FAST is None and not _load()):
        return None
    out = _sorted_text(value, marked)
    return None if out is None or out.find(b"null") >= 0 else out.decode("utf-8")


def fast_texts(values: list[Any], *, finite: bool = False, marked: bool = False) -> list[str | None] | None:
    """`fast_text` of each item of `values` (decoded JSON, where a scalar item is allowed too), with
    the checks for floats to rewrite made once over all the texts; None: use json_text. `finite`:
    the values are known to hold no NaN or Infinity float (msgspec decoded them, or their source
    text has no such literal), so a `null` in a text is a JSON null, as json_text writes it.
    `marked`: as for `fast_text` (then no text is searched for floats to rewrite)."""
    if msgspec is None or (_FAST is None and not _load()):
        return None
    try:
        outs = list(map(_SORTED, values))
    except _ENCODE_ERRORS:
        return None
    blob = b"".join(outs)
    texts: list[str | None] = list(map(bytes.decode, outs))
    hits = [] if marked else _candidates(blob)
    if hits:  # rewrite the floats of the items that hold a candidate
        blank = blob.find(b"\\\\") >= 0
        ends = list(accumulate(map(len, outs)))
        items: dict[int, list[int]] = {}
        for at in hits:
            i = bisect_right(ends, at)
            items.setdefault(i, []).append(at - ends[i - 1] if i else at)
        for i, places in items.items():
            fixed = _python_floats(outs[i], places, blank)
            texts[i] = None if fixed is None else fixed.decode("utf-8")
    if not finite and blob.find(b"null") >= 0:
        texts = [None if text is None or "null" in text else text for text in texts]
    return texts


def _candidates(out: bytes) -> list[int]:
    """The sorted places in `out` where a float msgspec writes unlike repr may start (see `_EXPONENTS`).
    bytes.find, not `in`: `b"x" in data` first tries the operand as an integer and clears the
    TypeError, ~1.5 us a test (3.11), more than the search of a short text (here and in fast_text(s))."""
    hits = []
    if out.find(b"e") >= 0 or out.find(b"E") >= 0:
        marks = out.translate(_EXPONENTS)
        if marks.find(b"0e0") >= 0 or marks.find(b"0e-0") >= 0:
            hits = [m.start() for m in _EXPONENT.finditer(marks)]
    at = out.find(b"0.0000")
    if at >= 0:
        while at >= 0:
            hits.append(at)
            at = out.find(b"0.0000", at + 1)
        hits.sort()
    return hits


def _sorted_text(value: Any, marked: bool = False) -> bytes | None:
    """msgspec's sorted encoding of `value` with floats as repr writes them (`_python_floats`, unless
    `marked`: see `fast_text`); None when msgspec refuses it or a float cannot be placed."""
    try:
        out = _SORTED(value)
    except _ENCODE_ERRORS:
        return None
    if marked:
        return out
    hits = _candidates(out)
    return _python_floats(out, hits, out.find(b"\\\\") >= 0) if hits else out


def _python_floats(out: bytes, hits: list[int], blank: bool) -> bytes | None:
    """`out` with the float at every candidate `hits` (sorted places) outside a string written by
    repr; None if one is not a JSON number after `:`, `,` or `[` (or at the start: `out` is a bare
    number) ending at `,`, `]` or `}` (never seen; then json_text decides). A candidate is in a
    string when an odd number of quotes that delimit strings precede it. `blank`: `out` may hold an
    escaped backslash (then the text is copied with every escape pair blanked out to count them)."""
    # Without an escaped backslash, every backslash-quote pair is an escaped quote: the delimiters
    # are the quotes less those pairs. Positions are the same in `plain`.
    plain = _ESCAPE.sub(b"__", out) if blank else out
    parts: list[bytes] = []
    done = counted = quotes = 0
    for at in hits:
        quotes += plain.count(b'"', counted, at)
        if not blank:  # less the escaped quotes in [counted, at): the pairs whose quote is there
            quotes -= plain.count(b'\\"', max(0, counted - 1), at)
        counted = at
        if quotes % 2 or at < done:
            continue  # in a string, or in a number already rewritten
        back = max(0, at - _LONGEST_FLOAT)
        start = max(plain.rfind(b":", back, at), plain.rfind(b",", back, at), plain.rfind(b"[", back, at)) + 1
        number = _NUMBER.match(plain, start) if start or back == 0 else None  # 0: out is a bare number
        if number is None or number.end() <= at + 1 or plain[number.end() : number.end() + 1] not in b",]}":
            return None
        parts += (out[done:start], repr(float(number.group())).encode())
        done = number.end()
    parts.append(out[done:])
    return b"".join(parts)
