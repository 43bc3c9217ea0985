"""``@acme/sqlite`` details the conformance suite does not look at: types, tables, ledger."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from hypaware_example_sqlite.sqlite_sink import LEDGER, SqliteSink, read_table

from hypaware import DatasetInfo, ExportBatch, ExportOptions, PartitionRef


def dataset(schema: pa.Schema) -> DatasetInfo:
    return DatasetInfo(name="calls", schema=schema, time_column="ts")


def partition(info: DatasetInfo, pid: str, table: pa.Table) -> PartitionRef:
    return PartitionRef(
        id=pid,
        dataset=info.name,
        seq=1,
        row_count=table.num_rows,
        opener=lambda: pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
    )


@pytest.mark.asyncio
async def test_types_prefix_and_ledger(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("ok", pa.bool_()),
            ("cost", pa.float64()),
            ("blob", pa.binary()),
            ("tags", pa.list_(pa.string())),
        ]
    )
    info = dataset(schema)
    when = datetime(2026, 1, 5, 8, 30, tzinfo=UTC)
    table = pa.table(
        {"ts": [when], "ok": [True], "cost": [1.5], "blob": [b"\x00\x01"], "tags": [["a", "b"]]},
        schema=schema,
    )
    sink = SqliteSink("s", tmp_path / "x.db", table_prefix="acme_")
    batch = ExportBatch("b1", "s", info, [partition(info, "p1", table)])
    result = await sink.export_batch(batch, ExportOptions())
    await sink.close()
    assert result.exported == ("p1",)
    assert result.rows_written == 1
    (row,) = read_table(tmp_path / "x.db", "acme_calls")
    assert row == {
        "_hyp_partition": "p1",
        "ts": "2026-01-05T08:30:00+00:00",
        "ok": 1,
        "cost": 1.5,
        "blob": b"\x00\x01",
        "tags": '["a", "b"]',
    }
    # A connection's `with` only ends a transaction; closing() closes it.
    with contextlib.closing(sqlite3.connect(tmp_path / "x.db")) as conn:
        ledger = conn.execute(f"SELECT dataset, partition_id, batch_id, row_count FROM {LEDGER}")
        assert ledger.fetchall() == [("calls", "p1", "b1", 1)]


@pytest.mark.asyncio
async def test_a_dataset_that_gains_a_column_gets_it_added(tmp_path: Path) -> None:
    old = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("a", pa.int64())])
    new = old.append(pa.field("b", pa.string()))
    when = datetime(2026, 1, 5, tzinfo=UTC)
    sink = SqliteSink("s", tmp_path / "x.db")
    for n, schema in enumerate((old, new)):
        info = dataset(schema)
        values = {"ts": [when], "a": [n], "b": ["new"]}
        table = pa.table({f.name: values[f.name] for f in schema}, schema=schema)
        batch = ExportBatch(f"b{n}", "s", info, [partition(info, f"p{n}", table)])
        assert (await sink.export_batch(batch, ExportOptions())).exported == (f"p{n}",)
    await sink.close()
    rows = read_table(tmp_path / "x.db", "calls")
    assert [(r["a"], r["b"]) for r in rows] == [(0, None), (1, "new")]


@pytest.mark.asyncio
async def test_an_unwritable_database_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()  # a directory where the database file should be
    info = dataset(pa.schema([("ts", pa.timestamp("us", tz="UTC"))]))
    table = pa.table({"ts": [datetime(2026, 1, 5, tzinfo=UTC)]}, schema=info.schema)
    sink = SqliteSink("s", tmp_path / "dir.db")
    batch = ExportBatch("b1", "s", info, [partition(info, "p1", table)])
    result = await sink.export_batch(batch, ExportOptions())
    await sink.close()
    assert result.exported == ()
    (retry,) = result.retry_partitions
    assert retry.partition_id == "p1"
    assert retry.reason.startswith("sqlite dir.db: ")
