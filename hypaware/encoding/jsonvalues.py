"""The value rules of `hypaware.encoding.jsonrows`: Arrow values as JSON-ready Python values.

`column_values(arr, path)` turns one Arrow array into JSON-ready Python values
(the table in `jsonrows` says how each type is written); `encode_json(value)`
writes such a value as compact JSON text, the way every row is written;
`check_unique(names, what)` refuses names JSON keys could not tell apart.
`jsonrows` builds rows from them, and `jsonfast` uses them for the types it
has no column-wide rule for.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from hypaware.core.errors import EncodeError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["check_unique", "column_values", "encode_json"]

_EPOCH_DATE = date(1970, 1, 1)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _not_json(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _make_encode() -> Callable[[Any], str]:
    # JSONEncoder.encode builds a new C encoder on every call; build it once.
    # Both paths write the same bytes (floats via float.__repr__ in each).
    make = getattr(json.encoder, "c_make_encoder", None)
    escape = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or escape is None:
        return _encoder.encode
    encoder = make(None, _not_json, escape, None, ":", ",", False, False, False)

    def encode(value: Any) -> str:
        return "".join(encoder(value, 0))

    return encode


encode_json = _make_encode()


# ------------------------------------------------------------------ columns


def check_unique(names: list[str], what: str, where: str = "") -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            prefix = f"{where}: " if where else ""
            raise EncodeError(f"{prefix}{what} name {name!r} appears twice; JSON keys must differ")
        seen.add(name)


def column_values(arr: pa.Array, path: str) -> list[Any]:
    """Convert one Arrow array into a list of JSON-ready Python values."""
    import pyarrow as pa
    import pyarrow.types as pt

    t = arr.type
    if isinstance(arr, pa.ChunkedArray):  # pragma: no cover - batches hold plain arrays
        arr = arr.combine_chunks()
    if pt.is_dictionary(t):
        return column_values(arr.dictionary_decode(), path)
    if isinstance(t, pa.ExtensionType):
        return column_values(arr.storage, path)
    if pt.is_null(t):
        return [None] * len(arr)
    if (
        pt.is_boolean(t)
        or pt.is_integer(t)
        or pt.is_string(t)
        or pt.is_large_string(t)
        or _is(pt, "is_string_view", t)
    ):
        return arr.to_pylist()  # type: ignore[no-any-return]
    if pt.is_floating(t):
        if pt.is_float16(t):
            arr = arr.cast(pa.float32())
        return [v if v is None or math.isfinite(v) else None for v in arr.to_pylist()]
    if pt.is_decimal(t):
        return [None if v is None else format(v, "f") for v in arr.to_pylist()]
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t):
        return [None if v is None else base64.b64encode(v).decode("ascii") for v in arr.to_pylist()]
    if _is(pt, "is_binary_view", t):
        return column_values(arr.cast(pa.large_binary()), path)
    if pt.is_date(t):
        return [None if v is None else v.isoformat() for v in arr.to_pylist()]
    if pt.is_timestamp(t):
        return _ints(arr, path, _timestamp_formatter(t.unit, path))
    if pt.is_time(t):
        return _ints(arr, path, _time_formatter(t.unit))
    if pt.is_duration(t):
        return _ints(arr, path, None)
    if _is(pt, "is_list_view", t) or _is(pt, "is_large_list_view", t):
        return column_values(arr.cast(pa.large_list(t.value_field)), path)
    if pt.is_list(t) or pt.is_large_list(t):
        return _lists(arr, path)
    if pt.is_fixed_size_list(t):
        size = t.list_size
        start = arr.offset * size
        child = column_values(arr.values.slice(start, len(arr) * size), f"{path}[]")
        valid = arr.is_valid().to_pylist()
        return [child[i * size : (i + 1) * size] if ok else None for i, ok in enumerate(valid)]
    if pt.is_map(t):
        return _maps(arr, path)
    if pt.is_struct(t):
        return _structs(arr, path)
    raise EncodeError(f"column {path!r}: type {t} cannot be written as JSON")


def _is(pt: Any, name: str, t: Any) -> bool:
    # Newer pyarrow releases add view types; older ones lack the predicates.
    check = getattr(pt, name, None)
    return bool(check(t)) if check is not None else False


def _ints(arr: pa.Array, path: str, fmt: Callable[[int], str] | None) -> list[Any]:
    import pyarrow as pa

    # 32-bit temporal types only cast to int32.
    width = pa.int32() if arr.type.bit_width == 32 else pa.int64()
    values = arr.cast(width).to_pylist()
    if fmt is None:
        return values  # type: ignore[no-any-return]
    return [None if v is None else fmt(v) for v in values]


def _timestamp_formatter(unit: str, path: str) -> Callable[[int], str]:
    per, digits = _PER_SECOND[unit], _DIGITS[unit]
    # Rows of a batch usually share a day: format the date once per day, the rest by hand.
    last_day: int | None = None
    last_date = ""

    def fmt(value: int) -> str:
        nonlocal last_day, last_date
        seconds, frac = divmod(value, per)
        day, in_day = divmod(seconds, 86_400)
        if day != last_day:
            try:
                last_date = (_EPOCH_DATE + timedelta(days=day)).isoformat()
            except OverflowError:
                raise EncodeError(
                    f"column {path!r}: timestamp {value} ({unit}) is outside years 1-9999"
                ) from None
            last_day = day
        hours, rest = divmod(in_day, 3_600)
        minutes, secs = divmod(rest, 60)
        if digits:
            return f"{last_date}T{hours:02d}:{minutes:02d}:{secs:02d}.{frac:0{digits}d}Z"
        return f"{last_date}T{hours:02d}:{minutes:02d}:{secs:02d}Z"

    return fmt


def _time_formatter(unit: str) -> Callable[[int], str]:
    per, digits = _PER_SECOND[unit], _DIGITS[unit]

    def fmt(value: int) -> str:
        seconds, frac = divmod(value, per)
        minutes, sec = divmod(seconds, 60)
        hours, minute = divmod(minutes, 60)
        text = f"{hours:02d}:{minute:02d}:{sec:02d}"
        return f"{text}.{frac:0{digits}d}" if digits else text

    return fmt


def _slices(arr: Any, child: list[Any]) -> list[Any]:
    offsets = arr.offsets.to_pylist()
    base = offsets[0] if offsets else 0
    valid = arr.is_valid().to_pylist()
    return [
        child[offsets[i] - base : offsets[i + 1] - base] if ok else None
        for i, ok in enumerate(valid)
    ]


def _lists(arr: Any, path: str) -> list[Any]:
    offsets = arr.offsets
    if len(arr) == 0:
        return []
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    child = column_values(arr.values.slice(start, end - start), f"{path}[]")
    return _slices(arr, child)


def _maps(arr: Any, path: str) -> list[Any]:
    import pyarrow.types as pt

    if len(arr) == 0:
        return []
    offsets = arr.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    keys = column_values(arr.keys.slice(start, end - start), f"{path}.key")
    items = column_values(arr.items.slice(start, end - start), f"{path}.value")
    key_type = arr.type.key_type
    as_object = pt.is_string(key_type) or pt.is_large_string(key_type)
    out: list[Any] = []
    for entries_k, entries_v in zip(_slices(arr, keys), _slices(arr, items), strict=True):
        if entries_k is None:
            out.append(None)
        elif as_object:
            obj = dict(zip(entries_k, entries_v, strict=True))
            if len(obj) != len(entries_k):
                raise EncodeError(f"column {path!r}: a map holds the same key twice")
            out.append(obj)
        else:
            out.append([{"key": k, "value": v} for k, v in zip(entries_k, entries_v, strict=True)])
    return out


def _structs(arr: Any, path: str) -> list[Any]:
    t = arr.type
    names = [t.field(i).name for i in range(t.num_fields)]
    check_unique(names, "struct field", f"column {path!r}")
    children = [
        column_values(child, f"{path}.{name}")
        for child, name in zip(arr.flatten(), names, strict=True)
    ]
    valid = arr.is_valid().to_pylist()
    if not children:
        return [{} if ok else None for ok in valid]
    return [
        dict(zip(names, values, strict=False)) if ok else None
        for ok, values in zip(valid, zip(*children, strict=False), strict=False)
    ]
