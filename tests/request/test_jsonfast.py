"""JSON lines built column by column: byte for byte the rows `jsonrows` defines."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware.core.errors import EncodeError
from hypaware.encoding.jsonfast import ndjson_bytes
from hypaware.encoding.jsonrows import batch_to_rows, dumps_row, iter_row_bytes

_INT = {
    pa.int8(): 7,
    pa.int16(): 15,
    pa.int32(): 31,
    pa.int64(): 63,
    pa.uint8(): 8,
    pa.uint32(): 32,
    pa.uint64(): 64,
}
_SECONDS = (-62_135_596_800, 253_402_300_799)  # 0001-01-01 .. 9999-12-31 23:59:59
_PER = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def reference(batch: pa.RecordBatch) -> bytes:
    return b"".join(dumps_row(row) + b"\n" for row in batch_to_rows(batch))


def maybe(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(st.none(), values)


@st.composite
def columns(draw: st.DrawFn, rows: int) -> pa.Array:
    kind = draw(
        st.sampled_from(
            ["int", "bool", "float", "string", "dict", "timestamp", "date", "decimal", "list"]
        )
    )
    if kind == "int":
        t = draw(st.sampled_from(list(_INT)))
        bits = _INT[t]
        lo, hi = (0, 2**bits - 1) if str(t).startswith("uint") else (-(2**bits), 2**bits - 1)
        return pa.array(draw(st.lists(maybe(st.integers(lo, hi)), min_size=rows, max_size=rows)), t)
    if kind == "bool":
        return pa.array(draw(st.lists(maybe(st.booleans()), min_size=rows, max_size=rows)))
    if kind == "float":
        t = draw(st.sampled_from([pa.float16(), pa.float32(), pa.float64()]))
        floats = {
            pa.float16(): st.floats(width=16),
            pa.float32(): st.floats(width=32),
            pa.float64(): st.floats(),
        }[t]
        values = draw(st.lists(maybe(floats), min_size=rows, max_size=rows))
        if t == pa.float16():
            import numpy as np

            return pa.array(np.array([np.nan if v is None else v for v in values], np.float16))
        return pa.array(values, t)
    if kind in ("string", "dict"):
        values = draw(st.lists(maybe(st.text()), min_size=rows, max_size=rows))
        t = draw(st.sampled_from([pa.string(), pa.large_string()]))
        arr = pa.array(values, t)
        return arr.dictionary_encode() if kind == "dict" else arr
    if kind == "timestamp":
        unit = draw(st.sampled_from(list(_PER)))
        tz = draw(st.sampled_from([None, "UTC", "Europe/Paris"]))
        lo, hi = _SECONDS
        if unit == "ns":
            lo, hi = -(2**63) // 10**9 + 1, (2**63 - 1) // 10**9 - 1
        values = draw(
            st.lists(
                maybe(st.integers(lo * _PER[unit], hi * _PER[unit])), min_size=rows, max_size=rows
            )
        )
        return pa.array(values, pa.int64()).cast(pa.timestamp(unit, tz=tz))
    if kind == "date":
        values = draw(st.lists(maybe(st.dates()), min_size=rows, max_size=rows))
        return pa.array(values, draw(st.sampled_from([pa.date32(), pa.date64()])))
    if kind == "decimal":
        values = draw(
            st.lists(
                maybe(st.decimals(places=2, min_value=-(10**6), max_value=10**6, allow_nan=False)),
                min_size=rows,
                max_size=rows,
            )
        )
        return pa.array(values, pa.decimal128(10, 2))
    values = draw(
        st.lists(
            maybe(st.lists(maybe(st.integers(-5, 5)), max_size=3)), min_size=rows, max_size=rows
        )
    )
    return pa.array(values, pa.list_(pa.int64()))


@st.composite
def batches(draw: st.DrawFn) -> pa.RecordBatch:
    rows = draw(st.integers(0, 12))
    names = draw(st.lists(st.text(max_size=4), unique=True, max_size=5))
    batch = pa.record_batch([draw(columns(rows)) for _ in names], names=names) if names else None
    if batch is None:
        return pa.RecordBatch.from_pydict({}).slice(0, 0)
    start = draw(st.integers(0, rows))
    return batch.slice(start, draw(st.integers(0, rows - start)))


@settings(max_examples=300, deadline=None)
@given(batches())
def test_lines_are_the_bytes_of_jsonrows(batch: pa.RecordBatch) -> None:
    assert ndjson_bytes(batch) == reference(batch)
    assert list(iter_row_bytes(batch)) == [dumps_row(r) for r in batch_to_rows(batch)]


def test_every_string_escape_is_the_json_modules() -> None:
    text = "".join(chr(c) for c in range(0x80)) + 'é€😀\u2028"\\'
    batch = pa.record_batch([pa.array([text, None, ""])], names=['k"\n'])
    assert ndjson_bytes(batch) == reference(batch)


def test_floats_keep_pythons_repr_and_non_finite_values_are_null() -> None:
    values = [1.0, -0.0, 1e-05, 1e16, 1e15, 0.1, 9999999999999998.0, float("nan"), float("inf")]
    batch = pa.record_batch([pa.array(values)], names=["f"])
    assert ndjson_bytes(batch) == reference(batch)
    assert b'"f":1.0}' in ndjson_bytes(batch) and b'"f":null}' in ndjson_bytes(batch)


# Nanosecond timestamps cannot leave years 1677-2262.
@pytest.mark.parametrize("unit", ["s", "ms", "us"])
def test_timestamps_outside_years_1_to_9999_name_their_column(unit: str) -> None:
    too_late = (_SECONDS[1] + 1) * _PER[unit]
    batch = pa.record_batch(
        [pa.array([0, too_late], pa.int64()).cast(pa.timestamp(unit))], names=["when"]
    )
    with pytest.raises(EncodeError, match="'when'"):
        ndjson_bytes(batch)


def test_types_without_a_column_rule_use_jsonrows_value_by_value() -> None:
    batch = pa.record_batch(
        [
            pa.array([decimal.Decimal("12.30"), None], pa.decimal128(5, 2)),
            pa.array([b"\x00\xff", None]),
            pa.array([dt.time(12, 0, 0, 123000), None]),
            pa.array([{"a": 1}, None], pa.struct([("a", pa.int64())])),
        ],
        names=["d", "b", "t", "s"],
    )
    assert ndjson_bytes(batch) == reference(batch)
    assert ndjson_bytes(batch).startswith(b'{"d":"12.30","b":"AP8=","t":"12:00:00.123000"')
