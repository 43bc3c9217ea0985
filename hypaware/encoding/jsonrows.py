"""Arrow record batches as JSON objects, one per row, byte-for-byte deterministic.

Public functions:

- `batch_to_rows(batch)`: the batch's rows as JSON-ready dicts (keys in schema order).
- `dumps_row(row)`: one such dict as compact UTF-8 JSON bytes, no trailing newline.
- `iter_row_bytes(batch)`: every row of the batch as `dumps_row` bytes.
- `encode_ndjson(batch)`: the whole batch as newline-terminated JSON lines.
- `iter_ndjson(batches)`: `encode_ndjson` for each batch in turn (streaming: one
  batch in memory at a time).

The same rows always give the same bytes, in any process. Value rules:

| Arrow type | JSON |
|---|---|
| null, bool, integers | null, true/false, numbers (exact, even past 2**53) |
| floats | numbers (shortest round-trip repr); NaN and +/-inf become null |
| string, large_string, string_view | strings (UTF-8, not escaped to ASCII) |
| binary, large_binary, fixed_size_binary | base64 strings (standard alphabet, padded) |
| decimal | strings in plain notation (``"12.30"``: the scale is kept) |
| date32, date64 | ``"2026-06-01"`` |
| timestamp | UTC ISO-8601 with ``Z``: ``"2026-06-01T12:00:00.123Z"`` (1) |
| time32, time64 | ``"12:00:00.123"`` (fraction digits by unit, as above) |
| duration | integer count of the column's unit |
| list, large_list, fixed_size_list, list_view | arrays |
| struct | objects, keys in field order |
| map | objects when keys are strings, else arrays of ``{"key": k, "value": v}`` (2) |
| dictionary, extension | as their value / storage type |

(1) The fraction has 0 (s), 3 (ms), 6 (us) or 9 (ns) digits; a timestamp
without a time zone is taken as UTC. (2) A map holding one key twice is an
`EncodeError`.

Other types (unions, run-end encoded) and timestamps outside years 1-9999 raise
`EncodeError` naming the column, as do duplicate column or struct field names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from hypaware.encoding.jsonfast import ndjson_bytes, row_texts
from hypaware.encoding.jsonvalues import check_unique, column_values, encode_json

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["batch_to_rows", "dumps_row", "encode_ndjson", "iter_ndjson", "iter_row_bytes"]


def dumps_row(row: Mapping[str, Any]) -> bytes:
    """`row` (JSON-ready, as from `batch_to_rows`) as compact UTF-8 JSON bytes."""
    return encode_json(row).encode("utf-8")


def batch_to_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of `batch` as dicts of JSON-ready values, keys in schema order.

    Raises `EncodeError` naming the column for a type or value JSON cannot hold.
    """
    names = list(batch.schema.names)
    check_unique(names, "column")
    columns = [column_values(batch.column(i), names[i]) for i in range(batch.num_columns)]
    if not columns:
        return [{} for _ in range(batch.num_rows)]
    # Every column has the batch's length; strict zips would cost 4x here.
    return [dict(zip(names, values, strict=False)) for values in zip(*columns, strict=False)]


def iter_row_bytes(batch: pa.RecordBatch) -> Iterator[bytes]:
    """Each row of `batch` as `dumps_row` bytes (no newline).

    Built column by column in Arrow (`hypaware.encoding.jsonfast`): the same
    bytes as `dumps_row` of `batch_to_rows`, several times faster.
    """
    import pyarrow as pa

    if batch.num_rows:
        yield from row_texts(batch).cast(pa.large_binary()).to_pylist()


def encode_ndjson(batch: pa.RecordBatch) -> bytes:
    """All rows of `batch` as JSON lines, each ending with ``\\n`` (see `iter_row_bytes`)."""
    return ndjson_bytes(batch)


def iter_ndjson(batches: Iterable[pa.RecordBatch]) -> Iterator[bytes]:
    """`encode_ndjson` of each batch in turn; empty batches yield nothing."""
    for batch in batches:
        data = encode_ndjson(batch)
        if data:
            yield data
