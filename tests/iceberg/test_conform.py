"""`conform_table` gives what conforming each batch would, and fails the same way."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.iceberg.schema import IncompatibleSchemaError, conform_batch, conform_table

TARGET = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us", "UTC")),
    ]
)
T0 = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)

# Source columns the table can hold, each as the cache might have it.
SOURCES = {
    "same": (pa.int64(), pa.string(), pa.timestamp("us", "UTC")),
    "nullable-id": (pa.int64(), pa.string(), pa.timestamp("us", "UTC")),
    "narrower": (pa.int32(), pa.string(), pa.timestamp("us", "UTC")),
    "dictionary": (pa.int64(), pa.dictionary(pa.int32(), pa.string()), pa.timestamp("us", "UTC")),
    "nanoseconds": (pa.int64(), pa.large_string(), pa.timestamp("ns", "UTC")),
}


def _table(kind: str, sizes: list[int], null_id: bool) -> pa.Table:
    id_type, name_type, ts_type = SOURCES[kind]
    schema = pa.schema(
        [
            pa.field("id", id_type, nullable=kind != "same"),
            pa.field("name", name_type),
            pa.field("ts", ts_type),
        ]
    )
    batches, n = [], 0
    for size in sizes:
        ids = [None if null_id and i == 0 else n + i for i in range(size)]
        names = [f"k{(n + i) % 3}" if i % 4 else None for i in range(size)]
        times = [T0 + dt.timedelta(seconds=n + i) for i in range(size)]
        arrays = [
            pa.array(ids, pa.int64()).cast(id_type),
            pa.array(names, pa.string()).cast(name_type)
            if kind != "dictionary"
            else pa.array(names, pa.string()).dictionary_encode(),
            pa.array(times, pa.timestamp("us", "UTC")).cast(ts_type),
        ]
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
        n += size
    return pa.Table.from_batches(batches, schema=schema)


@given(
    st.sampled_from(sorted(SOURCES)),
    st.lists(st.integers(0, 5), max_size=4),
    st.booleans(),
)
def test_conform_table_matches_conforming_each_batch(
    kind: str, sizes: list[int], null_id: bool
) -> None:
    if kind == "same":
        null_id = False  # a non-nullable source column holds no nulls
    table = _table(kind, sizes, null_id and sum(sizes) > 0)
    refused: str | None = None
    try:
        expected = pa.Table.from_batches(
            [conform_batch(b, TARGET, what="t") for b in table.to_batches()], schema=TARGET
        )
    except IncompatibleSchemaError as exc:
        refused = str(exc)
    if refused is not None:
        with pytest.raises(IncompatibleSchemaError) as caught:
            conform_table(table, TARGET, what="t")
        assert str(caught.value) == refused
        return
    got = conform_table(table, TARGET, what="t")
    assert got.schema.equals(TARGET, check_metadata=True)
    assert got.to_pylist() == expected.to_pylist()


def test_nulls_in_a_required_column_are_refused_by_name() -> None:
    table = _table("nullable-id", [3], null_id=True)
    with pytest.raises(IncompatibleSchemaError, match="'id' is required"):
        conform_table(table, TARGET, what="t")


def test_a_table_already_in_the_target_schema_is_returned_as_is() -> None:
    table = pa.Table.from_batches(
        [conform_batch(b, TARGET, what="t") for b in _table("same", [2], False).to_batches()],
        schema=TARGET,
    )
    assert conform_table(table, TARGET, what="t") is table
