"""JSON lines built column by column with Arrow compute: the bytes `jsonrows` defines, fast.

`jsonrows` defines the JSON of a row (its value rules and the exact bytes)
with one Python dict per row. Building those dicts costs most of an
export's time, so this module builds each column's JSON text at once
instead, in Arrow's C++ kernels, and joins the columns into lines:

- integers: their decimal text; booleans: ``true``/``false``;
- strings: escaped exactly as Python's ``json`` escapes them with
  ``ensure_ascii=False`` (``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``,
  ``\\b``, ``\\f``, other control characters as ``\\u00xx``), then quoted;
- timestamps and dates: Arrow's ISO text in UTC, with the fraction digits
  of the unit (as `jsonrows` writes them);
- floats: Python's own shortest round-trip text (``float.__repr__``, which
  Arrow's float formatting does not match), through the C JSON encoder;
- every other type (decimals, binaries, nested types, times, durations),
  and timestamps or dates outside years 1-9999: `jsonrows`' own value
  rules (`hypaware.encoding.jsonvalues`), value by value.

The output is byte for byte that of `jsonrows.dumps_row` on every row (the
tests check it on generated batches), so chunk ids that hash the bytes stay
the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypaware.encoding.jsonvalues import check_unique, column_values, encode_json

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ndjson_bytes", "row_texts"]

# The control characters JSON escapes by name; the rest of 0x00-0x1f become \u00xx.
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
_CONTROL = r"[\x00-\x1f]"
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
# Seconds from 1970 to 0001-01-01 and to 10000-01-01: the years isoformat writes.
_MIN_SECONDS = -62_135_596_800
_END_SECONDS = 253_402_300_800


def row_texts(batch: pa.RecordBatch, end: str = "") -> pa.Array:
    """Each row of `batch` as its JSON object text followed by `end` (a large_string array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(batch.schema.names)
    check_unique(names, "column")
    text = pa.large_string()
    if not names:
        return pa.array(["{}" + end] * batch.num_rows, text)
    # Literal text and value columns in row order; adjacent literals are merged.
    pieces: list[Any] = []
    literal = ""
    for i, name in enumerate(names):
        literal += ("{" if i == 0 else ",") + encode_json(name) + ":"
        core, (before, after) = _values(batch.column(i), name)
        if core.null_count == 0:
            # No nulls: the quotes around every value go into the literals.
            pieces += [literal + before, core]
            literal = after
        else:
            joined = pc.binary_join_element_wise(
                pa.scalar(before, text), core, pa.scalar(after, text), pa.scalar("", text)
            )
            pieces += [literal, pc.fill_null(joined, pa.scalar("null", text))]
            literal = ""
    pieces.append(literal + "}" + end)
    args = [pa.scalar(p, text) if isinstance(p, str) else p for p in pieces]
    return pc.binary_join_element_wise(*args, pa.scalar("", text))


def ndjson_bytes(batch: pa.RecordBatch) -> bytes:
    """All rows of `batch` as JSON lines, each ending with ``\\n``."""
    if batch.num_rows == 0:
        return b""
    import pyarrow as pa

    lines = row_texts(batch, "\n")
    _validity, offsets_buffer, data = lines.buffers()
    offsets = pa.Array.from_buffers(
        pa.int64(), len(lines) + 1, [None, offsets_buffer], offset=lines.offset
    )
    start, stop = offsets[0].as_py(), offsets[-1].as_py()
    out: bytes = data.slice(start, stop - start).to_pybytes()
    return out


_BARE = ("", "")
_QUOTED = ('"', '"')


def _values(arr: pa.Array, path: str) -> tuple[pa.Array, tuple[str, str]]:
    """The JSON text of every value of `arr` (large strings, null where the value is), and
    the literal text that goes before and after each non-null one (its quotes)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    t = arr.type
    text = pa.large_string()
    if pt.is_dictionary(t):
        return _values(arr.dictionary_decode(), path)
    if isinstance(t, pa.ExtensionType):
        return _values(arr.storage, path)
    if pt.is_integer(t):
        return pc.cast(arr, text), _BARE
    if pt.is_boolean(t):
        return pc.if_else(arr, pa.scalar("true", text), pa.scalar("false", text)), _BARE
    if pt.is_string(t) or pt.is_large_string(t) or _is_view(pt, t):
        return _escaped(pc.cast(arr, text)), _QUOTED
    if pt.is_floating(t):
        return _floats(arr), _BARE
    if pt.is_timestamp(t) or pt.is_date(t):
        iso = _iso(arr)
        if iso is not None:
            return iso, (_QUOTED if pt.is_date(t) else ('"', 'Z"'))
    # jsonrows' value rules, one value at a time (and its errors, naming the column).
    return pa.array([encode_json(v) for v in column_values(arr, path)], text), _BARE


def _is_view(pt: Any, t: Any) -> bool:
    check = getattr(pt, "is_string_view", None)
    return bool(check(t)) if check is not None else False


def _escaped(arr: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    if pc.any(pc.match_substring_regex(arr, _NEEDS_ESCAPE)).as_py():
        arr = pc.replace_substring(arr, "\\", "\\\\")
        arr = pc.replace_substring(arr, '"', '\\"')
        for char, escaped in _NAMED.items():
            arr = pc.replace_substring(arr, char, escaped)
        if pc.any(pc.match_substring_regex(arr, _CONTROL)).as_py():
            for code in range(0x20):
                if chr(code) not in _NAMED:
                    arr = pc.replace_substring(arr, chr(code), f"\\u{code:04x}")
    return arr


def _floats(arr: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_float16(arr.type):
        arr = arr.cast(pa.float32())
    # NaN and infinities have no JSON form: null, as jsonrows writes them.
    finite = pc.if_else(pc.is_finite(arr), arr, pa.scalar(None, arr.type))
    # One C encoder call writes every value with float.__repr__; no value holds a comma.
    listed = encode_json(finite.to_pylist())
    return pa.array(listed[1:-1].split(",") if len(arr) else [], pa.large_string())


def _iso(arr: pa.Array) -> pa.Array | None:
    """ISO-8601 UTC text without quotes or ``Z``, or None when some value is outside
    years 1-9999 (jsonrows then says which column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_date(t):
        unit = "s" if pa.types.is_date32(t) else "ms"
        raw = pc.cast(arr, pa.timestamp(unit)).cast(pa.int64())
    else:
        unit = t.unit
        raw = arr.cast(pa.int64())
    lo_hi = pc.min_max(raw)
    lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
    if lo is not None:
        per = _PER_SECOND[unit]
        # Whole seconds, floored: the range check needs no more.
        if lo // per < _MIN_SECONDS or hi // per >= _END_SECONDS:
            return None
    # Zoned timestamps hold UTC instants: without the zone, the cast writes them as UTC,
    # "2026-01-05 00:00:01.326722" (the unit's fraction digits), or "2026-01-05" for dates.
    plain = raw.cast(pa.timestamp(unit))
    text = pa.large_string()
    if pa.types.is_date(t):
        return pc.cast(pc.cast(plain, pa.date32()), text)
    return pc.replace_substring(pc.cast(plain, text), " ", "T", max_replacements=1)
