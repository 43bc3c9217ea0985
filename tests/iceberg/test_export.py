"""Export to an Iceberg table and read it back with pyiceberg, pyarrow, fastparquet and DuckDB."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import fastparquet
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from hypaware.core.types import ExportOptions, PartitionRef
from hypaware.iceberg.record import read_record, writer_key

from .helpers import DATASET, DAY0, batch, build_sink, local_path, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


def _sort_key(row: dict[str, object]) -> tuple[object, ...]:
    return (row["conversation_id"], row["ts"])


def _read_with_fastparquet(path: str):  # type: ignore[no-untyped-def]
    with Path(path).open("rb") as handle:
        return fastparquet.ParquetFile(handle).to_pandas()


def _files(table) -> list[str]:  # type: ignore[no-untyped-def]
    return [task.file.file_path for task in table.scan().plan_files()]


async def test_round_trip_read_back_by_every_reader(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    parts = [
        partition(f"conv-{c}-day-{d}", rows_for(f"conv-{c:02d}", d, 5 + c, hour=c), seq=i)
        for i, (c, d) in enumerate((c, d) for c in range(12) for d in range(3))
    ]
    expected = [row for p in parts for row in p.open().read_all().to_pylist()]

    result = await sink.export_batch(batch("batch-1", parts), ExportOptions())

    assert set(result.exported) == {p.id for p in parts}
    assert result.retry_partitions == ()
    assert result.rows_written == len(expected)
    assert result.files_written == 3

    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.name() == ("hyp", "messages")
    got = table.scan().to_arrow()
    assert got.num_rows == len(expected)
    assert sorted(got.to_pylist(), key=_sort_key) == sorted(expected, key=_sort_key)

    files = _files(table)
    assert len(files) == 3
    paths = [local_path(f) for f in files]
    by_day: dict[dt.date, int] = {}
    for path in paths:
        data = pq.read_table(path)
        rows = data.to_pylist()
        days = {r["ts"].date() for r in rows}
        assert len(days) == 1, f"{path} spans {days}"
        by_day[days.pop()] = len(rows)
        assert rows == sorted(rows, key=_sort_key), f"{path} is not sorted by key then time"
        schema = pq.read_schema(path)
        ids = [int(f.metadata[b"PARQUET:field_id"]) for f in schema]
        assert ids == [table.schema().find_field(n).field_id for n in schema.names]
        assert f"ts_day={next(iter({r['ts'].date() for r in rows})).isoformat()}" in path

        fp = _read_with_fastparquet(path)
        assert len(fp) == len(rows)
        assert list(fp["conversation_id"]) == [r["conversation_id"] for r in rows]
        assert list(fp["tokens"]) == [r["tokens"] for r in rows]
    assert by_day == {
        (DAY0 + dt.timedelta(days=d)).date(): sum(5 + c for c in range(12)) for d in range(3)
    }

    con = duckdb.connect()
    count, total, convs = con.execute(
        "select count(*), sum(tokens), count(distinct conversation_id) from read_parquet(?)",
        [paths],
    ).fetchone()
    assert count == len(expected)
    assert total == sum(r["tokens"] for r in expected)
    assert convs == 12

    # A plain pyiceberg catalog over the same sqlite file reads the table too.
    plain = SqlCatalog(
        "hypaware",
        uri=f"sqlite:///{tmp_path / 'state' / 'sinks' / 'archive' / 'iceberg-catalog.db'}",
    )
    assert plain.load_table("hyp.messages").scan().to_arrow().num_rows == len(expected)
    plain.engine.dispose()

    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary["hypaware.batch-id"] == "batch-1"
    record = read_record(table, "test")
    assert record.of(writer_key("", "archive")).count == len(parts)
    assert all(record.of("sink:archive").holds(p.seq) for p in parts)
    assert (
        table.sort_order().fields[0].source_id
        == table.schema().find_field("conversation_id").field_id
    )
    await sink.close()


async def test_5000_small_partitions_over_3_days_make_3_files_and_one_snapshot(
    tmp_path: Path,
) -> None:
    sink = build_sink(sink_config(tmp_path))
    parts = [
        partition(f"conv-{i:05d}", rows_for(f"c{i:05d}", i % 3, 2, hour=i % 24), seq=i + 1)
        for i in range(5000)
    ]

    result = await sink.export_batch(batch("big", parts), ExportOptions())

    assert len(result.exported) == 5000
    assert result.files_written <= 3
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert len(table.metadata.snapshots) == 1
    assert len(_files(table)) <= 3
    assert table.scan().to_arrow().num_rows == 10_000
    summary = table.current_snapshot().summary
    assert summary["hypaware.partition-count"] == "5000"
    # The record keeps 5,000 in-order seqs as one interval, not a list of ids.
    assert summary["hypaware.partitions"] is None
    assert '"seqs":[[1,5000]]' in summary["hypaware.writers"]
    assert len(summary["hypaware.batch-digest"]) == 64
    await sink.close()


async def test_rows_with_null_time_land_in_the_null_partition(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    rows = rows_for("a", 0, 3)
    rows += [{"ts": None, "conversation_id": "b", "role": "user", "tokens": 99}]
    rows += [{"ts": None, "conversation_id": "a", "role": "user", "tokens": 98}]

    result = await sink.export_batch(batch("b", [partition("p", rows)]), ExportOptions())

    assert result.exported == ("p",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 5
    nulls = table.scan(row_filter="ts is null").to_arrow().to_pylist()
    assert sorted(r["tokens"] for r in nulls) == [98, 99]
    tasks = list(table.scan().plan_files())
    partitions = {task.file.partition[0] for task in tasks}
    assert None in partitions
    null_file = next(t.file.file_path for t in tasks if t.file.partition[0] is None)
    assert "ts_day=null" in null_file
    # Sorted by key within the null partition too.
    assert [r["conversation_id"] for r in pq.read_table(local_path(null_file)).to_pylist()] == [
        "a",
        "b",
    ]
    await sink.close()


async def test_far_times_are_written_not_dropped(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    rows = [
        {
            "ts": dt.datetime(1, 1, 1, tzinfo=dt.UTC),
            "conversation_id": "x",
            "role": "u",
            "tokens": 1,
        },
        {
            "ts": dt.datetime(1969, 12, 31, 23, 59, tzinfo=dt.UTC),
            "conversation_id": "x",
            "role": "u",
            "tokens": 2,
        },
        {
            "ts": dt.datetime(9999, 12, 31, tzinfo=dt.UTC),
            "conversation_id": "x",
            "role": "u",
            "tokens": 3,
        },
    ]
    result = await sink.export_batch(batch("b", [partition("p", rows)]), ExportOptions())
    assert result.exported == ("p",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    got = sorted(r["tokens"] for r in table.scan().to_arrow().to_pylist())
    assert got == [1, 2, 3]
    assert result.files_written == 3
    await sink.close()


async def test_nanosecond_and_zoned_times_are_stored_as_utc_microseconds(tmp_path: Path) -> None:
    schema = pa.schema(
        [("ts", pa.timestamp("ns", tz="America/New_York")), ("conversation_id", pa.string())]
    )
    dataset = type(DATASET)(
        name="zoned", schema=schema, time_column="ts", lookup_key="conversation_id"
    )
    sink = build_sink(sink_config(tmp_path))
    # 2026-03-01 23:30 in New York is 2026-03-02 04:30 UTC: the UTC day is what counts.
    local = pa.array([1772425800_123456789], pa.timestamp("ns", tz="America/New_York"))
    data = pa.table({"ts": local, "conversation_id": ["k"]})
    part = PartitionRef(id="p", dataset="zoned", seq=0, row_count=1, opener=data.to_reader)
    result = await sink.export_batch(batch("b", [part], dataset=dataset), ExportOptions())
    assert result.exported == ("p",), result
    table = sink.table.load_table(dataset)  # type: ignore[attr-defined]
    (task,) = table.scan().plan_files()
    assert "ts_day=2026-03-02" in task.file.file_path
    value = table.scan().to_arrow().column("ts")[0].as_py()
    assert value == dt.datetime(2026, 3, 2, 4, 30, 0, 123456, tzinfo=dt.UTC)
    await sink.close()


async def test_a_date_time_column_partitions_by_that_day(tmp_path: Path) -> None:
    schema = pa.schema([("day", pa.date32()), ("conversation_id", pa.string())])
    dataset = type(DATASET)(
        name="daily", schema=schema, time_column="day", lookup_key="conversation_id"
    )
    data = pa.table(
        {
            "day": [dt.date(2026, 3, 2), dt.date(2026, 3, 1), dt.date(2026, 3, 2)],
            "conversation_id": ["b", "a", "a"],
        },
        schema=schema,
    )
    part = PartitionRef(id="p", dataset="daily", seq=0, row_count=3, opener=data.to_reader)
    sink = build_sink(sink_config(tmp_path))
    result = await sink.export_batch(batch("b", [part], dataset=dataset), ExportOptions())
    assert result.exported == ("p",)
    assert result.files_written == 2
    got = sink.table.scan(dataset, since=dt.date(2026, 3, 2)).read_all().to_pylist()  # type: ignore[attr-defined]
    assert got == [
        {"day": dt.date(2026, 3, 2), "conversation_id": "a"},
        {"day": dt.date(2026, 3, 2), "conversation_id": "b"},
    ]
    await sink.close()
