"""The Arrow compute kernels the read and validate paths use, called by name.

`import pyarrow.compute` wraps each of pyarrow's ~290 kernels in a generated Python function,
with a signature built by `inspect` and a docstring scraped with numpydoc: about 50 ms of CPU,
a seventh of what the start-up baseline `import pyarrow.parquet, pydantic` costs, and as much
as `rcard validate` spends validating a small card. These functions call the same kernels
through `call_function` with the options pyarrow's own wrappers build, so the results are the
same. pyarrow's Array and Table methods `.cast()`, `.take()`, `.filter()`, `.is_valid()`,
`.dictionary_encode()`, `.unique()` import pyarrow.compute on their first call: the modules
that use this one call the functions here instead. Layers that do heavy compute anyway (rules,
statistics, importers) import pyarrow.compute itself.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

try:  # the kernels' entry point without the wrappers; pyarrow >= 1.0 has it here
    from pyarrow._compute import (
        CastOptions,
        Expression,
        MatchSubstringOptions,
        SetLookupOptions,
        call_function,
    )
except ImportError:  # a pyarrow that moved its private module: the public one re-exports them
    from pyarrow.compute import (  # type: ignore[assignment]
        CastOptions,
        Expression,
        MatchSubstringOptions,
        SetLookupOptions,
        call_function,
    )

__all__ = [
    "Expression", "and_", "any", "binary_length", "cast", "cast_batch", "dictionary_encode", "equal", "field", "fill_null", "filter", "greater_equal",
    "index_in", "invert", "is_finite", "is_in", "is_null", "is_valid", "less", "match_substring_regex", "min", "or_",
    "or_kleene", "sum", "take", "unique",
]

Values = Any  # an Arrow array, chunked array or scalar (or, for the second operand, a Python value)


def field(name: str) -> Expression:
    """A reference to column `name`, for filters (`field("episode_id") == x`), as `pyarrow.compute.field`."""
    return Expression._field(name)


def fill_null(values: Values, fill_value: Any) -> Any:
    """`values` with nulls replaced, as `pyarrow.compute.fill_null` (coalesce with a scalar of the
    values' type)."""
    if not isinstance(fill_value, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        fill_value = pa.scalar(fill_value, type=values.type)
    elif fill_value.type != values.type:
        fill_value = pa.scalar(fill_value.as_py(), type=values.type)
    return call_function("coalesce", [values, fill_value])


def cast(values: Values, target_type: pa.DataType) -> Any:
    """A safe cast (overflow and truncation raise), as `pyarrow.compute.cast` and `.cast()`."""
    return call_function("cast", [values], CastOptions.safe(target_type))


def cast_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with each column cast (safely) to its field's type in `schema` (same names, same
    order), as `RecordBatch.cast`."""
    if batch.schema.names != schema.names:
        raise ValueError(f"cannot cast a batch of columns {batch.schema.names} to {schema.names}")
    columns = []
    for column, target in zip(batch.columns, schema, strict=True):
        if not target.nullable and column.null_count:
            raise ValueError(f"column {target.name!r} has nulls but its field is not nullable")
        columns.append(column if column.type == target.type else cast(column, target.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def take(values: Values, indices: Values) -> Any:
    """Rows at `indices`, bounds-checked, as `.take()` (arrays, record batches and tables)."""
    return call_function("take", [values, indices])


def filter(values: Values, mask: Values) -> Any:  # noqa: A001 - the kernel's name
    """Rows where `mask` is true (a null drops the row), as `.filter()` with a boolean mask."""
    return call_function("filter", [values, mask])


def is_in(values: Values, value_set: pa.Array) -> Any:
    return call_function("is_in", [values], SetLookupOptions(value_set))


def index_in(values: Values, value_set: pa.Array, skip_nulls: bool = False) -> Any:
    return call_function("index_in", [values], SetLookupOptions(value_set, skip_nulls=skip_nulls))


def match_substring_regex(values: Values, pattern: str) -> Any:
    return call_function("match_substring_regex", [values], MatchSubstringOptions(pattern))


def _kernel(name: str, doc: str) -> Any:
    def call(*args: Values) -> Any:
        return call_function(name, list(args))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    return call


# Kernels called with their default options (as pyarrow's wrappers call them without options).
and_ = _kernel("and", "Boolean and (null if either is null).")
or_ = _kernel("or", "Boolean or (null if either is null).")
or_kleene = _kernel("or_kleene", "Boolean or in Kleene logic (true or null is true).")
invert = _kernel("invert", "Boolean not.")
equal = _kernel("equal", "Element-wise ==.")
less = _kernel("less", "Element-wise <.")
greater_equal = _kernel("greater_equal", "Element-wise >=.")
is_finite = _kernel("is_finite", "Not NaN nor infinite.")
is_valid = _kernel("is_valid", "Not null, as `.is_valid()`.")
is_null = _kernel("is_null", "Null (NaN is not null), as `.is_null()`.")
binary_length = _kernel("binary_length", "Byte length of each binary or string value.")
unique = _kernel("unique", "Distinct values in order of first appearance, as `.unique()`.")
dictionary_encode = _kernel("dictionary_encode", "Dictionary-encoded values (nulls kept as nulls), as "
                            "`.dictionary_encode()`.")
any = _kernel("any", "Whether any value is true (nulls skipped).")  # noqa: A001 - the kernel's name
min = _kernel("min", "Smallest value (nulls skipped).")  # noqa: A001
sum = _kernel("sum", "Sum (nulls skipped; null when every value is null).")  # noqa: A001
