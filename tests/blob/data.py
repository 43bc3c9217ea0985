"""Test data for blob sinks: a dataset with every Arrow type a user would have.

Rows are spread over three UTC days (one zoned timestamp falls on a
different local day than its UTC day) plus rows with a null time, and carry
a unique `row_id` so copies can be counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa

from hypaware import DatasetInfo, ExportBatch, PartitionRef

TIME = "ts"

RICH_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.int64(), nullable=False),
        pa.field(TIME, pa.timestamp("us", tz="UTC")),
        pa.field("local_ts", pa.timestamp("ms", tz="America/New_York")),
        pa.field("naive_ts", pa.timestamp("ns")),
        pa.field("day", pa.date32()),
        pa.field("name", pa.string()),
        pa.field("count", pa.int32()),
        pa.field("small", pa.int8()),
        pa.field("big", pa.uint64()),
        pa.field("score", pa.float64()),
        pa.field("ratio", pa.float32()),
        pa.field("ok", pa.bool_()),
        pa.field("blob", pa.binary()),
        pa.field("price", pa.decimal128(12, 3)),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("meta", pa.struct([("k", pa.string()), ("n", pa.int64())])),
        pa.field("attrs", pa.map_(pa.string(), pa.int32())),
    ]
)

# Columns fastparquet (the reader) handles.
FLAT_COLUMNS = ["row_id", TIME, "naive_ts", "name", "count", "small", "score", "ratio", "ok"]

BASE = datetime(2026, 3, 1, 20, 0, tzinfo=UTC)


def rich_rows(start: int, n: int) -> pa.RecordBatch:
    """`n` rows with ids from `start`: three days of times, a null time every 11th row."""
    ids = list(range(start, start + n))
    times: list[datetime | None] = [
        None if i % 11 == 5 else BASE + timedelta(hours=(i * 7) % 60) for i in ids
    ]
    cols: dict[str, list[Any]] = {
        "row_id": ids,
        TIME: times,
        "local_ts": [BASE + timedelta(minutes=i * 37) for i in ids],
        "naive_ts": [
            None if i % 5 == 0 else datetime(2026, 1, 1) + timedelta(seconds=i) for i in ids
        ],
        "day": [None if i % 6 == 0 else (BASE + timedelta(days=i % 3)).date() for i in ids],
        "name": [None if i % 4 == 0 else f"név-{i}-{'x' * (i % 9)}" for i in ids],
        "count": [None if i % 3 == 0 else i * 3 - 50 for i in ids],
        "small": [(i % 200) - 100 for i in ids],
        "big": [2**63 + i for i in ids],
        "score": [None if i % 7 == 0 else i / 3 for i in ids],
        "ratio": [float(i % 13) / 4 for i in ids],
        "ok": [None if i % 10 == 0 else i % 2 == 0 for i in ids],
        "blob": [None if i % 8 == 0 else bytes([i % 256, 0, 255]) for i in ids],
        "price": [Decimal(i) / 1000 for i in ids],
        "tags": [None if i % 9 == 0 else [f"t{j}" for j in range(i % 4)] for i in ids],
        "meta": [None if i % 12 == 0 else {"k": f"k{i}", "n": i} for i in ids],
        "attrs": [None if i % 14 == 0 else [("a", i % 5), ("b", None)] for i in ids],
    }
    return pa.RecordBatch.from_pydict(cols, schema=RICH_SCHEMA)


def dataset(name: str = "events", schema: pa.Schema = RICH_SCHEMA) -> DatasetInfo:
    return DatasetInfo(name=name, schema=schema, time_column=TIME, lookup_key="row_id")


def partition(
    dataset_name: str,
    pid: str,
    batches: Callable[[], Sequence[pa.RecordBatch]],
    schema: pa.Schema = RICH_SCHEMA,
    seq: int = 0,
) -> PartitionRef:
    rows = sum(b.num_rows for b in batches())
    return PartitionRef(
        id=pid,
        dataset=dataset_name,
        seq=seq,
        row_count=rows,
        opener=lambda: pa.RecordBatchReader.from_batches(schema, batches()),
    )


def rich_batch(
    batch_id: str = "batch-1",
    *,
    sink: str = "archive",
    dataset_name: str = "events",
    parts: int = 3,
    rows: int = 60,
    first_id: int = 0,
) -> ExportBatch:
    """A batch of `parts` partitions of `rows` rows each, in batches of 25 rows."""
    partitions = []
    for p in range(parts):
        start = first_id + p * rows

        def batches(start: int = start) -> list[pa.RecordBatch]:
            return [rich_rows(s, min(25, start + rows - s)) for s in range(start, start + rows, 25)]

        partitions.append(partition(dataset_name, f"{dataset_name}-p{p}", batches, seq=p))
    return ExportBatch(
        batch_id=batch_id, sink=sink, dataset=dataset(dataset_name), partitions=partitions
    )


def expected_table(batch: ExportBatch) -> pa.Table:
    """Every row of `batch`, ordered by row id."""
    tables = []
    for part in batch.partitions:
        tables.append(part.open().read_all())
    return pa.concat_tables(tables).sort_by("row_id")


def utc_day(value: datetime | None) -> str:
    return (
        "__HIVE_DEFAULT_PARTITION__" if value is None else value.astimezone(UTC).date().isoformat()
    )


def iter_days(table: pa.Table) -> Iterator[str]:
    for value in table.column(TIME).to_pylist():
        yield utc_day(value)


def registry() -> Any:
    """The first-party plugins these tests use, registered by hand.

    Independent of whatever else is installed in the environment; the entry
    points themselves are checked in the encoder tests.
    """
    from hypaware import Registry
    from hypaware.plugins import azure, format_jsonl, format_parquet, gcs, local_fs, memory, s3

    return Registry(
        m.MANIFEST for m in (format_parquet, format_jsonl, local_fs, memory, s3, azure, gcs)
    )
