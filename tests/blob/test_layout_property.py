"""Property: whatever the times, every row lands once, in the directory of its UTC day."""

from __future__ import annotations

import asyncio
import io
import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from obstore.store import MemoryStore

from hypaware import DatasetInfo, ExportBatch, ExportOptions, PartitionRef
from hypaware.blob.object_names import NULL_DAY
from hypaware.blob.receipts import RECEIPTS_DIR
from hypaware.blob.sink import BlobSink
from hypaware.blob.store import ObstoreBlobStore
from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Around the epoch and across years, in microseconds.
MICROS = st.integers(min_value=-(40 * 365 * 86_400 * 10**6), max_value=80 * 365 * 86_400 * 10**6)
ZONES = st.sampled_from([None, "UTC", "Asia/Tokyo", "America/Los_Angeles", "+05:45"])


def utc_day(micros: int | None) -> str:
    if micros is None:
        return NULL_DAY
    return (EPOCH + timedelta(microseconds=micros)).date().isoformat()


async def export_twice(batch: ExportBatch, backing: MemoryStore) -> dict[str, bytes]:
    # The second attempt rolls over differently: it must still leave one copy.
    # Each sink gets its own handle on the one backing store, as a restart would,
    # so closing a sink (its store, index and threads) leaves the objects readable.
    for config in (ParquetConfig(row_group_size=3, target_file_size=1), ParquetConfig()):
        sink = BlobSink("prop", ObstoreBlobStore(backing), ParquetEncoder(config))
        try:
            result = await sink.export_batch(batch, ExportOptions())
        finally:
            await sink.close()
        assert result.exported == ("p",), result
    store = ObstoreBlobStore(backing)
    objects = {}
    async for meta in store.list():
        if not meta.path.startswith(RECEIPTS_DIR + "/"):
            objects[meta.path] = await store.get(meta.path)
    await store.close()
    return objects


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(st.none() | MICROS, min_size=0, max_size=40),
    zone=ZONES,
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=4),
)
def test_every_row_lands_once_under_its_utc_day(
    times: list[int | None], zone: str | None, cuts: list[int]
) -> None:
    time_type = pa.timestamp("us", tz=zone)
    schema = pa.schema([("row_id", pa.int64()), ("at", time_type)])
    table = pa.table(
        {"row_id": list(range(len(times))), "at": pa.array(times, pa.int64()).cast(time_type)},
        schema=schema,
    )
    bounds = sorted({0, len(times), *(min(c, len(times)) for c in cuts)})
    pieces = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    part = PartitionRef(
        id="p",
        dataset="d",
        seq=0,
        row_count=len(times),
        opener=lambda: pa.RecordBatchReader.from_batches(
            schema, [b for piece in pieces for b in piece.to_batches()]
        ),
    )
    batch = ExportBatch(
        batch_id="b",
        sink="prop",
        dataset=DatasetInfo(name="d", schema=schema, time_column="at"),
        partitions=[part],
    )
    objects = asyncio.run(export_twice(batch, MemoryStore()))
    seen: Counter[int] = Counter()
    for path, data in objects.items():
        dataset, date, _name = path.split("/")
        assert dataset == "d" and date.startswith("date=")
        rows = pq.read_table(io.BytesIO(data))
        assert rows.schema.equals(schema)
        for row_id, at in zip(
            rows.column("row_id").to_pylist(),
            rows.column("at").cast(pa.int64()).to_pylist(),
            strict=True,
        ):
            assert at == times[row_id]
            assert date == f"date={utc_day(at)}"
            seen[row_id] += 1
    assert seen == Counter(range(len(times)))
