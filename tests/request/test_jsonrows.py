"""Arrow rows as JSON: stable bytes, schema key order, and the documented value rules."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.errors import EncodeError
from hypaware.encoding.jsonrows import (
    batch_to_rows,
    dumps_row,
    encode_ndjson,
    iter_ndjson,
    iter_row_bytes,
)


def test_every_documented_type() -> None:
    batch = pa.record_batch(
        {
            "z": [1, None],
            "f": pa.array([math.nan, -math.inf], pa.float64()),
            "h": pa.array([1.5, None], pa.float16()),
            "s": ["é☃", None],
            "b": pa.array([b"\x00\xff", None], pa.binary()),
            "fb": pa.array([b"ab", b"cd"], pa.binary(2)),
            "d": pa.array([decimal.Decimal("1.20"), None], pa.decimal128(10, 2)),
            "ts_ns": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns", "Asia/Tokyo")),
            "ts_s": pa.array([0, -1], pa.timestamp("s")),
            "ts_ms": pa.array([1, 2], pa.timestamp("ms", "UTC")),
            "date": pa.array([dt.date(2026, 6, 1), None]),
            "d64": pa.array([dt.date(1999, 12, 31), None], pa.date64()),
            "t": pa.array([3_723_000_001, None], pa.time64("us")),
            "t32": pa.array([5, 6], pa.time32("s")),
            "dur": pa.array([5, None], pa.duration("ms")),
            "l": pa.array([[1, 2], None]),
            "ll": pa.array([[None], []], pa.large_list(pa.int8())),
            "fl": pa.array([[1, 2], None], pa.list_(pa.int64(), 2)),
            "st": pa.array([{"a": 1, "b": "x"}, None]),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
            "mi": pa.array([[(1, "x")], []], pa.map_(pa.int64(), pa.string())),
            "dict": pa.array(["x", "y"]).dictionary_encode(),
            "nul": pa.array([None, None], pa.null()),
        }
    )
    rows = batch_to_rows(batch)
    assert list(rows[0]) == batch.schema.names
    assert rows[0] == {
        "z": 1,
        "f": None,
        "h": 1.5,
        "s": "é☃",
        "b": "AP8=",
        "fb": "YWI=",
        "d": "1.20",
        "ts_ns": "2023-11-14T22:13:20.123456789Z",
        "ts_s": "1970-01-01T00:00:00Z",
        "ts_ms": "1970-01-01T00:00:00.001Z",
        "date": "2026-06-01",
        "d64": "1999-12-31",
        "t": "01:02:03.000001",
        "t32": "00:00:05",
        "dur": 5,
        "l": [1, 2],
        "ll": [None],
        "fl": [1, 2],
        "st": {"a": 1, "b": "x"},
        "m": {"k": 1},
        "mi": [{"key": 1, "value": "x"}],
        "dict": "x",
        "nul": None,
    }
    assert rows[1]["ts_s"] == "1969-12-31T23:59:59Z"
    assert rows[1]["f"] is None and rows[1]["fl"] is None and rows[1]["m"] is None
    line = dumps_row(rows[0])
    assert line.startswith(b'{"z":1,"f":null') and "é☃".encode() in line


def test_slices_and_ndjson() -> None:
    batch = pa.record_batch({"l": pa.array([[1], [2, 3], None, [4]]), "n": [1, 2, 3, 4]})
    part = batch.slice(1, 2)
    assert encode_ndjson(part) == b'{"l":[2,3],"n":2}\n{"l":null,"n":3}\n'
    assert list(iter_row_bytes(part)) == [b'{"l":[2,3],"n":2}', b'{"l":null,"n":3}']
    assert list(iter_ndjson([batch.slice(0, 0), part])) == [encode_ndjson(part)]


@pytest.mark.parametrize(
    "batch",
    [
        pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"]),
        pa.record_batch({"m": pa.array([[("k", 1), ("k", 2)]], pa.map_(pa.string(), pa.int64()))}),
        pa.record_batch({"t": pa.array([2**62], pa.timestamp("s"))}),
    ],
)
def test_what_json_cannot_hold_is_a_clear_error(batch: pa.RecordBatch) -> None:
    with pytest.raises(EncodeError, match=r"'[amt]'"):
        batch_to_rows(batch)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
            st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
            st.one_of(st.none(), st.text()),
            st.one_of(st.none(), st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=3)),
        ),
        max_size=20,
    )
)
def test_round_trip_of_plain_values(values) -> None:
    batch = pa.record_batch(
        {
            "i": pa.array([v[0] for v in values], pa.int64()),
            "f": pa.array([v[1] for v in values], pa.float64()),
            "s": pa.array([v[2] for v in values], pa.string()),
            "l": pa.array([v[3] for v in values], pa.list_(pa.string())),
        }
    )
    data = encode_ndjson(batch)
    assert data == encode_ndjson(batch)
    back = [json.loads(line) for line in data.splitlines()]
    assert back == [
        {
            "i": i,
            "f": f if f is not None and math.isfinite(f) else None,
            "s": s,
            "l": lst,
        }
        for i, f, s, lst in values
    ]


_PER = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


@given(st.sampled_from(list(_PER)), st.data())
def test_timestamps_match_arrow_formatting(unit: str, data: st.DataObject) -> None:
    import pyarrow.compute as pc

    per = _PER[unit]
    low, high = (
        (-(2**63) + 1, 2**63 - 1) if unit == "ns" else (-62135596800 * per, 253402300799 * per)
    )
    values = data.draw(st.lists(st.one_of(st.none(), st.integers(low, high)), max_size=30))
    arr = pa.array(values, pa.timestamp(unit, "Europe/Berlin"))
    ours = [row["t"] for row in batch_to_rows(pa.record_batch({"t": arr}))]
    utc = arr.cast(pa.timestamp(unit, "UTC"))
    assert ours == pc.strftime(utc, format="%Y-%m-%dT%H:%M:%SZ").to_pylist()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_row_bytes_are_the_json_modules(row) -> None:
    expected = json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert dumps_row(row) == expected.encode("utf-8")
