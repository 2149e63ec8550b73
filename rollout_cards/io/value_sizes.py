"""The per-value size cap: no single text or JSON cell of a card larger than a limit.

One value of hundreds of megabytes (a source's 400 MB `input` string) is not a record
any reader can show, and Arrow's Parquet writer needs several times its size to write
it: under an address-space limit it aborts the process (C++ `bad_alloc`, no Python
exception) instead of failing. So every value is checked before it reaches Parquet, in
the one place every writer path goes through: `CardWriter`'s row API checks each value
at the call (`check_text`), its bulk path each table it is given (`check_table`: a
vectorized maximum of the byte lengths per column, the row located only when over) —
and the importers reach the card through that bulk path. The limit is
`MAX_VALUE_BYTES` unless the caller raises it (`CardWriter(max_value_bytes=...)`,
`rcard import --max-value-mb N`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ValueTooLargeError

__all__ = ["MAX_VALUE_BYTES", "MAX_VALUE_LIMIT", "check_limit", "check_table", "check_text", "mib"]

#: Default largest text or JSON value of one cell, in bytes of UTF-8 (64 MiB).
MAX_VALUE_BYTES = 64 * 1024**2
#: Largest limit one may ask for: an Arrow string array addresses at most 2 GiB.
MAX_VALUE_LIMIT = 2047 * 1024**2


def mib(n: int, *, exact: bool = False) -> str:
    """`n` bytes in MiB for messages (with the byte count when `exact`); in bytes below 1 MiB."""
    if n < 1024**2:
        return f"{n:,} bytes"
    return f"{n / 1024**2:,.1f} MiB" + (f" ({n:,} bytes)" if exact else "")


def check_limit(limit: Any) -> int:
    """`limit` if it is a usable value cap in bytes (raises ValueTooLargeError's base, WriterError)."""
    from ..errors import WriterError

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_VALUE_LIMIT:
        raise WriterError(f"max_value_bytes must be an integer from 1 to {MAX_VALUE_LIMIT:,} (2047 MiB), got {limit!r}")
    return limit


def check_text(what: str, value: str, limit: int) -> None:
    """Refuse a string whose UTF-8 encoding is longer than `limit` bytes; `what` names it."""
    if len(value) * 4 <= limit:  # a character is at most 4 bytes: no encoding needed
        return
    size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueTooLargeError(f"{what} is {mib(size, exact=True)}, more than the {mib(limit)} a single value "
                                 "may hold; pass a larger max_value_bytes to CardWriter, or store the value as an "
                                 "artifact (add_artifact) and reference its digest", column=what, size=size,
                                 limit=limit)


def _sized(typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_binary(typ) \
        or pa.types.is_large_binary(typ)


def check_table(table: pa.Table, which: str, limit: int) -> None:
    """Refuse `table` ('episodes' or 'steps') when one of its text/binary cells is longer than
    `limit` bytes, naming the episode (and the step's seq), the column, the size and the limit."""
    for name, column in zip(table.column_names, table.columns, strict=True):
        typ = column.type
        dictionary = pa.types.is_dictionary(typ)
        if not _sized(typ.value_type if dictionary else typ):
            continue
        offset = 0
        for chunk in column.chunks:
            values = chunk.dictionary_decode() if dictionary and chunk.dictionary.nbytes > limit else chunk
            if pa.types.is_dictionary(values.type) or not len(values) or values.nbytes <= limit:
                offset += len(chunk)  # no cell can be over when all of them together fit
                continue
            lengths = pc.binary_length(values)
            largest = pc.max(lengths).as_py()
            if largest is not None and largest > limit:
                hit = pc.indices_nonzero(pc.greater(lengths, limit))[0].as_py()
                _refuse(table, which, name, offset + hit, lengths[hit].as_py(), limit)
            offset += len(chunk)


def _refuse(table: pa.Table, which: str, column: str, row: int, size: int, limit: int) -> None:
    episode = table.column("episode_id")[row].as_py() if "episode_id" in table.column_names else None
    seq = table.column("seq")[row].as_py() if which == "steps" and "seq" in table.column_names else None
    where = f"episode {episode!r}" + (f", step {seq}" if seq is not None else "")
    raise ValueTooLargeError(
        f"{which} table, {where}: {column} is {mib(size, exact=True)}, more than the {mib(limit)} a single value "
        "may hold; pass a larger max_value_bytes to CardWriter, or store the value as an artifact and reference its "
        "digest",
        column=column, size=size, limit=limit, episode_id=episode, seq=seq, table=which)
