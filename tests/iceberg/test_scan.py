"""Scanning a table in place: time range, lookup keys, filters, pruning."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo

from hypaware.core.errors import FilterError
from hypaware.core.filter import col, parse_filter
from hypaware.core.types import DatasetInfo, ExportOptions

from .helpers import DATASET, DAY0, batch, build_sink, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


@pytest.fixture
async def filled(tmp_path: Path):  # type: ignore[no-untyped-def]
    sink = build_sink(sink_config(tmp_path))
    parts = [
        partition(f"c{c}-d{d}", rows_for(f"c{c}", d, 10, hour=c), seq=c * 10 + d)
        for c in range(5)
        for d in range(4)
    ]
    result = await sink.export_batch(batch("b", parts), ExportOptions())
    assert len(result.exported) == 20
    yield sink
    await sink.close()


def _planned(sink, **kwargs) -> int:  # type: ignore[no-untyped-def]
    table = sink.table.load_table(DATASET)
    return len(list(table.scan(**kwargs).plan_files()))


async def test_time_range_prunes_by_day(filled) -> None:  # type: ignore[no-untyped-def]
    since = DAY0 + dt.timedelta(days=1)
    until = DAY0 + dt.timedelta(days=3)
    rows = filled.table.scan(DATASET, since=since, until=until).read_all().to_pylist()
    assert len(rows) == 5 * 2 * 10
    assert {r["ts"].date() for r in rows} == {since.date(), (since + dt.timedelta(days=1)).date()}
    assert (
        _planned(filled, row_filter=f"ts >= '{since.isoformat()}' and ts < '{until.isoformat()}'")
        == 2
    )


async def test_naive_bounds_are_taken_as_utc(filled) -> None:  # type: ignore[no-untyped-def]
    since = dt.datetime(2026, 3, 2)
    rows = filled.table.scan(DATASET, since=since, until=since + dt.timedelta(days=1)).read_all()
    assert rows.num_rows == 50


async def test_keys_and_columns(filled) -> None:  # type: ignore[no-untyped-def]
    reader = filled.table.scan(DATASET, keys=["c1", "c3"], columns=["conversation_id", "tokens"])
    table = reader.read_all()
    assert table.schema.names == ["conversation_id", "tokens"]
    assert set(table.column("conversation_id").to_pylist()) == {"c1", "c3"}
    assert table.num_rows == 2 * 4 * 10


async def test_parsed_and_built_filters_are_pushed_down(filled) -> None:  # type: ignore[no-untyped-def]
    by_text = filled.table.scan(
        DATASET, filter=parse_filter("role = 'user' and tokens >= 8")
    ).read_all()
    by_tree = filled.table.scan(DATASET, filter=col("tokens") == 9).read_all()
    assert by_text.num_rows == 5 * 4 * 1  # tokens 8 is the only even one >= 8
    assert by_tree.num_rows == 20
    day = parse_filter(f"ts >= '{(DAY0 + dt.timedelta(days=3)).isoformat()}'")
    assert filled.table.scan(DATASET, filter=day).read_all().num_rows == 5 * 10


async def test_filter_on_columns_not_returned(filled) -> None:  # type: ignore[no-untyped-def]
    tree = (col("tokens") < 2) & (col("conversation_id") == "c4")
    table = filled.table.scan(DATASET, filter=tree, columns=["tokens"]).read_all()
    assert table.schema.names == ["tokens"]
    assert sorted(table.column("tokens").to_pylist()) == [0, 0, 0, 0, 1, 1, 1, 1]


async def test_filter_is_checked_against_the_dataset(filled) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FilterError, match="did you mean 'tokens'"):
        filled.table.scan(DATASET, filter=col("tokes") > 1)
    with pytest.raises(FilterError, match="expected a number"):
        filled.table.scan(DATASET, filter=col("tokens") > "many")


async def test_unregistered_dataset_scans_empty(filled) -> None:  # type: ignore[no-untyped-def]
    other = DatasetInfo(
        name="nothing",
        schema=pa.schema([("ts", pa.timestamp("ns")), ("k", pa.large_string())]),
        time_column="ts",
        lookup_key="k",
    )
    reader = filled.table.scan(other)
    assert reader.schema == pa.schema([("ts", pa.timestamp("us")), ("k", pa.string())])
    assert reader.read_all().num_rows == 0


async def test_bad_filter_type_is_refused(filled) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="filter must be"):
        filled.table.scan(DATASET, filter=42)
    with pytest.raises(TypeError, match="filter must be"):
        filled.table.scan(DATASET, filter="tokens > 1")
    with pytest.raises(TypeError, match="filter must be"):
        filled.table.scan(DATASET, filter=EqualTo("tokens", 9))
    with pytest.raises(ValueError, match="no lookup key"):
        filled.table.scan(
            DatasetInfo(name="messages", schema=DATASET.schema, time_column="ts"), keys=["a"]
        )
