"""Small, deterministic datasets, partitions and batches for testing sinks.

Every row carries a `row_id` that is unique across datasets and partitions
(``"<dataset>/<partition>/<n>"``) and an integer `value` derived from it, so a
test can tell a duplicated row from a missing one by reading back only those
two columns. Partitions made for another cache (``cache="..."``) have the
same ids and seqs but rows of their own (``"<dataset>/<cache>:<partition>/<n>"``),
as two gateways' caches do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hypaware.core.types import DatasetInfo, ExportBatch, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BASE_TIME",
    "expected_rows",
    "sample_batch",
    "sample_dataset",
    "sample_partition",
    "sample_schema",
    "sample_table",
]

BASE_TIME = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


def sample_schema() -> pa.Schema:
    """``row_id`` (string), ``ts`` (timestamp, UTC), ``key`` (string), ``value`` (int64)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("row_id", pa.string(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("key", pa.string()),
            pa.field("value", pa.int64()),
        ]
    )


def sample_dataset(name: str = "events") -> DatasetInfo:
    """A dataset of `sample_schema`, timed by ``ts`` and looked up by ``key``."""
    return DatasetInfo(name=name, schema=sample_schema(), time_column="ts", lookup_key="key")


def _value(seq: int, n: int) -> int:
    return seq * 1_000_003 + n * 7


def _row_id(dataset: str, partition_id: str, n: int, cache: str) -> str:
    return f"{dataset}/{cache}:{partition_id}/{n}" if cache else f"{dataset}/{partition_id}/{n}"


def expected_rows(
    dataset: str, partition_id: str, rows: int, *, seq: int = 0, cache: str = ""
) -> dict[str, int]:
    """``{row_id: value}`` of the rows `sample_partition` makes with the same arguments."""
    return {_row_id(dataset, partition_id, n, cache): _value(seq, n) for n in range(rows)}


def sample_table(
    dataset: DatasetInfo,
    partition_id: str,
    rows: int,
    *,
    seq: int = 0,
    cache: str = "",
    nulls: bool = False,
) -> pa.Table:
    """The rows of one sample partition: all within one hour of one day.

    With `nulls`, every sixth row's ``key`` is null.
    """
    import pyarrow as pa

    start = BASE_TIME + timedelta(hours=seq % 12)
    return pa.table(
        {
            "row_id": [_row_id(dataset.name, partition_id, n, cache) for n in range(rows)],
            "ts": [start + timedelta(seconds=n % 3600) for n in range(rows)],
            "key": [None if nulls and n % 6 == 5 else f"k{n % 5}" for n in range(rows)],
            "value": [_value(seq, n) for n in range(rows)],
        },
        schema=dataset.schema,
    )


def sample_partition(
    dataset: DatasetInfo,
    partition_id: str,
    rows: int = 10,
    *,
    seq: int = 0,
    batch_rows: int = 4,
    fail_after: int | None = None,
    error: BaseException | None = None,
    cache: str = "",
    nulls: bool = False,
) -> PartitionRef:
    """A partition whose reader streams `rows` sample rows, `batch_rows` at a time.

    `cache` names the cache it comes from: the same id and seq from another
    cache hold other rows (see the module doc). `nulls` as in `sample_table`.

    With `fail_after`, the reader breaks: ``0`` makes `open()` itself raise,
    ``n > 0`` raises after `n` record batches were read. It raises `error`
    (default: an `OSError` naming the partition), as a cache that lost a
    file would.
    """
    table = sample_table(dataset, partition_id, rows, seq=seq, cache=cache, nulls=nulls)
    boom = error if error is not None else OSError(f"partition {partition_id!r} cannot be read")

    def open_reader() -> pa.RecordBatchReader:
        import pyarrow as pa

        if fail_after == 0:
            raise boom

        def batches() -> Iterator[pa.RecordBatch]:
            for n, record_batch in enumerate(table.to_batches(max_chunksize=batch_rows)):
                if fail_after is not None and n >= fail_after:
                    raise boom
                yield record_batch
            if fail_after is not None:
                raise boom

        return pa.RecordBatchReader.from_batches(table.schema, batches())

    start = BASE_TIME + timedelta(hours=seq % 12)
    return PartitionRef(
        id=partition_id,
        dataset=dataset.name,
        seq=seq,
        row_count=rows,
        min_time=start if rows else None,
        max_time=start + timedelta(seconds=(rows - 1) % 3600) if rows else None,
        byte_size=table.nbytes,
        opener=open_reader,
    )


def sample_batch(
    dataset: DatasetInfo,
    partitions: Iterable[PartitionRef],
    *,
    batch_id: str = "b1",
    sink: str = "conformance",
    cache_identity: str = "conformance-cache",
) -> ExportBatch:
    """An `ExportBatch` of `partitions` for `sink`, from the cache `cache_identity`."""
    return ExportBatch(
        batch_id=batch_id,
        sink=sink,
        dataset=dataset,
        partitions=tuple(partitions),
        cache_identity=cache_identity,
    )
