from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers import json_stream
from rollout_cards.importers.json_stream import (
    JsonStream,
    iter_jsonl,
    iter_records,
    parse_json,
    parse_json_items,
    read_document,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _items(data: bytes, **kw):
    stream = JsonStream(io.BytesIO(data), "f.json", **kw)
    return [v for _, v in stream.document_items()]


@settings(max_examples=60, deadline=None)
@given(st.lists(json_values, max_size=8), st.integers(1, 40), st.sampled_from([None, 1, 2]))
def test_array_items_equal_json_loads_at_any_chunk_size(values, chunk, indent):
    data = json.dumps(values, indent=indent, ensure_ascii=False).encode()
    old = json_stream._CHUNK
    json_stream._CHUNK = chunk  # cut values, numbers and multi-byte characters at every place
    try:
        assert _items(data) == json.loads(data)
    finally:
        json_stream._CHUNK = old


def test_a_number_cut_by_the_buffer_is_read_whole(monkeypatch):
    monkeypatch.setattr(json_stream, "_CHUNK", 3)
    assert _items(b"[12345, 678.25e1]") == [12345, 6782.5]


def test_truncated_array_names_the_record():
    with pytest.raises(SourceFormatError) as exc:
        _items(b'[{"a": 1}, {"b": [1, 2')
    assert exc.value.file == "f.json" and exc.value.record == "1"
    assert "truncated" in str(exc.value)


def test_missing_closing_bracket_is_truncation():
    with pytest.raises(SourceFormatError, match="truncated"):
        _items(b'[{"a": 1}')


def test_syntax_error_gives_the_character_offset():
    with pytest.raises(SourceFormatError) as exc:
        _items(b'[{"a": 1}, {"b": nope}, {"c": 3}]' + b" " * 100)
    assert exc.value.record == "1" and "character 17" in str(exc.value)


def test_nan_is_refused():
    with pytest.raises(SourceFormatError, match="NaN"):
        _items(b"[1, NaN]")


def test_finite_says_whether_the_value_can_hold_a_nan():
    # msgspec (the fast path) refuses NaN and Infinity, so a value it decoded holds none; the strict
    # decoder with `constants` reads them, so its values may
    stream = JsonStream(io.BytesIO(b'[{"a": [1.5, null]}, {"a": NaN}, {"b": 2}, "text"]'), "f.json", constants=True)
    seen = [(value, stream.finite) for _, value in stream.array_items()]
    assert [finite for _, finite in seen] == [True, False, True, False]
    assert math.isnan(seen[1][0]["a"])


@pytest.mark.parametrize(("chunk", "raw_max"), [(1, 1 << 25), (7, 1 << 25), (64, 1 << 25), (1 << 20, 1 << 25),
                                                (7, 300), (64, 300)])
def test_the_fast_path_reads_the_files_bytes_where_the_text_is(monkeypatch, chunk, raw_max):
    # Non-ASCII text of 1 to 4 bytes a character, values and strings between the containers, cut by
    # chunks: each container is decoded by msgspec from the file's own bytes at the right place
    # (`finite`), the same values as json.loads, also after the bytes were dropped (a value over
    # _RAW_MAX) and kept again.
    monkeypatch.setattr(json_stream, "_CHUNK", chunk)
    monkeypatch.setattr(json_stream, "_MIN_WINDOW", 4)
    monkeypatch.setattr(json_stream, "_RAW_MAX", raw_max)
    items = [{"a": "é" * i, "b": ["😀", "€" * (i % 5), i]} if i % 3 else f"x{'ü' * i}" for i in range(40)]
    items[20] = {"big": "ß" * 400}  # more than 300 bytes: its bytes are dropped, then kept again
    data = json.dumps(items, ensure_ascii=False, indent=1).encode()
    stream = JsonStream(io.BytesIO(data), "f.json")
    seen = [(value, stream.finite) for _, value in stream.array_items()]
    stream.end()
    assert [value for value, _ in seen] == json.loads(data)
    fast = [finite for (value, finite) in seen if isinstance(value, dict)]
    assert all(fast[:6]) and all(fast[-6:])  # the fast path is taken before and after the large value


def test_trailing_data_is_refused():
    with pytest.raises(SourceFormatError, match="after the end"):
        _items(b"[1] [2]")


def test_not_an_array_is_a_file_level_error():
    with pytest.raises(SourceFormatError) as exc:
        _items(b'{"a": 1}')
    assert exc.value.record is None


def test_a_value_over_the_cap_is_refused_before_it_is_buffered(monkeypatch):
    monkeypatch.setattr(json_stream, "_CHUNK", 16)
    with pytest.raises(SourceFormatError, match="refusing to buffer"):
        _items(b'["' + b"x" * 500 + b'"]', max_value_chars=100)


def test_invalid_utf8_is_refused():
    with pytest.raises(SourceFormatError, match="UTF-8"):
        _items(b'["\xff"]')


_BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("read", [
    lambda path: parse_json(path.read_bytes(), str(path)),
    lambda path: read_document(path),
    lambda path: read_document(path, data=path.read_bytes()),
    lambda path: list(iter_records(path)),
    lambda path: list(JsonStream(path.open("rb"), str(path)).object_keys()),
    lambda path: list(iter_jsonl(path.open("rb"), str(path))),
])
@pytest.mark.parametrize("doc", [b'{"a": [1]}', b"[1, 2]", b'{"a": 1}\n{"a": 2}\n'])
def test_a_byte_order_mark_is_named_as_one(tmp_path, read, doc):
    # Before: 'is not valid JSON at character 0: Expecting value', 'ends inside a JSON value (is the
    # file truncated?)' or "expected a JSON object '{' at character 0, found '\\ufeff'".
    path = tmp_path / "bom.json"
    path.write_bytes(_BOM + doc)
    with pytest.raises(SourceFormatError, match=r"bom\.json.*: starts with a byte-order mark; remove it$"):
        read(path)


def test_a_byte_order_mark_inside_a_document_is_not_called_one():
    with pytest.raises(SourceFormatError, match="not valid JSON at character 1") as exc:
        parse_json(b" " + _BOM + b"[1]", "x.json")
    assert "byte-order" not in str(exc.value)
    assert _items(b'["' + _BOM + b'"]') == ["\ufeff"]  # in a string it is text


def test_object_keys_with_a_streamed_member():
    stream = JsonStream(io.BytesIO(b'{"a": 1, "list": [1, 2, 3], "z": {"k": null}}'), "o.json")
    seen = {}
    for key in stream.object_keys():
        if key == "list":
            seen[key] = [v for _, v in stream.array_items()]
        else:
            seen[key] = stream.read_value()
    stream.end()
    assert seen == {"a": 1, "list": [1, 2, 3], "z": {"k": None}}


def test_jsonl_names_the_bad_line_and_skips_blank_lines():
    data = b'{"a": 1}\n\n{"a": 2}\n{"a": \n'
    it = iter_jsonl(io.BytesIO(data), "x.jsonl")
    assert next(it) == (1, {"a": 1}) and next(it) == (3, {"a": 2})
    with pytest.raises(SourceFormatError) as exc:
        next(it)
    assert exc.value.record == "line 4"


def test_jsonl_last_line_without_newline_is_called_truncated():
    with pytest.raises(SourceFormatError, match="truncated"):
        list(iter_jsonl(io.BytesIO(b'{"a": 1}\n{"a"'), "x.jsonl"))


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ('[{"a": 1}, {"a": 2}]', ["0", "1"]),
        ('{"a": 1}\n{"a": 2}\n', ["line 1", "line 2"]),
        ('{\n  "a": 1\n}\n', ["document"]),
    ],
)
def test_iter_records_reads_arrays_lines_and_documents(tmp_path, text, labels):
    path = tmp_path / "r.json"
    path.write_text(text)
    assert [label for label, _ in iter_records(path)] == labels


@pytest.mark.parametrize(
    ("value", "message"),
    [("1e999", "64-bit float"), ("-1e400", "64-bit float"), ("18446744073709551616", "64-bit range"),
     ("7" * 5000, "5,000 digits"), ('"\\ud800"', "lone surrogate"), ('{"\\udfff": 1}', "lone surrogate"),
     ("NaN", "NaN")],
)
@pytest.mark.parametrize("layout", ["array", "jsonl", "document"])
def test_values_no_card_can_hold_are_refused_with_the_record(tmp_path, value, message, layout):
    path = tmp_path / "f.json"
    records = ['{"id": 1}', '{"id": 2, "v": [' + value + "]}"]
    text = {"array": "[" + ",\n".join(records) + "]", "jsonl": "\n".join(records) + "\n",
            "document": '{"a": {"id": 2, "v": [' + value + "]}}"}[layout]
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceFormatError, match=message) as info:
        list(iter_records(path))
    assert info.value.file == str(path)
    assert info.value.record == {"array": "1", "jsonl": "line 2", "document": "document"}[layout]


@given(json_values)
@settings(max_examples=50, deadline=None)
def test_read_document_equals_json_loads(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("doc") / "d.json"
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")
    assert read_document(path) == json.loads(path.read_text(encoding="utf-8"))


_MUTATIONS = [b"", b"{", b"}", b"]", b",", b'"', b"\\", b"\\ud800", b"NaN", b"1e999", b"12345678901234567890",
              b"\xff", b"\xed\xa0\x80", b"\xef\xbb\xbf", b" x"]


@given(json_values, st.integers(0, 200), st.sampled_from(_MUTATIONS), st.booleans())
@settings(max_examples=100, deadline=None)
def test_read_document_given_the_bytes_is_the_streamed_read(tmp_path_factory, value, at, insert, whole):
    """`data=` (msgspec on the bytes the caller read) gives what the streamed strict read gives:
    the same value as json.loads, or the same error, for valid and broken documents alike."""
    data = json.dumps(value, indent=1, ensure_ascii=False).encode()
    if not whole:
        data = data[:at] + insert + data[at:]
    path = tmp_path_factory.mktemp("doc") / "d.json"
    path.write_bytes(data)
    try:
        want = read_document(path, max_value_chars=10_000)
    except SourceFormatError as exc:
        with pytest.raises(SourceFormatError) as got:
            read_document(path, max_value_chars=10_000, data=data)
        assert (str(got.value), got.value.record) == (str(exc), exc.record)
        return
    assert read_document(path, max_value_chars=10_000, data=data) == want
    if whole:
        assert want == json.loads(data)


@pytest.mark.parametrize(("text", "message", "record"), [
    ('{"a": 1} {"b": 2}', "after the end of the JSON document at character 9", None),  # a file-level error
    ('{"a": [1, 2', "truncated", "instance x"), ('{"a": "' + "x" * 300 + '"}', "refusing to buffer", "instance x")])
def test_read_document_names_the_file_and_the_record(tmp_path, monkeypatch, text, message, record):
    monkeypatch.setattr(json_stream, "_CHUNK", 16)
    path = tmp_path / "t.traj"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceFormatError, match=message) as info:
        read_document(path, max_value_chars=100, record="instance x")
    assert (info.value.file, info.value.record) == (str(path), record)


def test_valid_surrogate_pairs_pass(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"t": "\\ud83d\\ude00 \\\\ud800"}\n', encoding="utf-8")
    assert list(iter_records(path)) == [("line 1", {"t": "\U0001F600 \\ud800"})]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["events", "id", "x"]), _JSON, min_size=1), st.sampled_from(["", " ", "\n  "]))
def test_parse_json_items_reads_as_parse_json_and_keeps_each_items_text(doc, ws):
    """Against parse_json: the same value or the same refusal (ints beyond int64); each item's
    text is a span of the source that parses to that item."""
    text = json.dumps(doc, indent=1 if ws else None)
    try:
        want = parse_json(text, "f", constants=True)
    except SourceFormatError as exc:
        with pytest.raises(SourceFormatError) as got:
            parse_json_items(text, "f", key="events", constants=True)
        assert str(got.value) == str(exc)
        return
    value, items = parse_json_items(text, "f", key="events", constants=True)
    assert value == want
    if isinstance(doc.get("events"), list):
        assert items is not None and [json.loads(i) for i in items] == want["events"]
        assert all(i in text for i in items)
    else:
        assert items is None


@pytest.mark.parametrize("numeral", ["1e999", "-1E+400", "9223372036854775808", "1" + "0" * 400])
def test_parse_json_items_refuses_the_numerals_parse_json_refuses(numeral):
    text = '{"events": [{"n": ' + numeral + "}]}"
    with pytest.raises(SourceFormatError, match="outside"):
        parse_json_items(text, "f", key="events", constants=True)
