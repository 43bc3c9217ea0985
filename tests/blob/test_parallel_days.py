"""Day files written side by side: the same objects as one day after another, bounded lanes."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypaware import DatasetInfo, ExportBatch, ExportOptions, PartitionRef
from hypaware.blob.sink import BlobSink
from hypaware.core.workers import cores
from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder

from .test_blob_sink import Crash, FaultyStore, local_store

SCHEMA = pa.schema([("row_id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="ts")
OPTS = ExportOptions()


def part(pid: str, seq: int, rows: list[tuple[int, int]], *, widen: int = 0) -> PartitionRef:
    """A partition of (row id, day) rows, with the min/max-time hints a cache gives.

    `widen` stretches the hint past the rows by that many days: hints may
    promise days a partition does not have.
    """
    times = [DAY0 + timedelta(days=d, minutes=i % 1000) for i, d in rows]
    table = pa.table({"row_id": [i for i, _d in rows], "ts": times}, schema=SCHEMA)
    return PartitionRef(
        id=pid,
        dataset="events",
        seq=seq,
        row_count=len(rows),
        min_time=min(times),
        max_time=max(times) + timedelta(days=widen),
        opener=lambda: table.to_reader(max_chunksize=7),
    )


def batch_of(parts: list[PartitionRef]) -> ExportBatch:
    return ExportBatch(batch_id="b1", sink="archive", dataset=INFO, partitions=parts)


def sink(tmp_path: Path, lanes: int, target_file_size: int = 256 << 20) -> BlobSink:
    encoder = ParquetEncoder(ParquetConfig(row_group_size=5, target_file_size=target_file_size))
    out = BlobSink("archive", local_store(tmp_path), encoder)
    out.lanes = lanes
    return out


def objects(root: Path) -> dict[str, list[int]]:
    return {
        str(p.relative_to(root)): pq.read_table(p).column("row_id").to_pylist()
        for p in sorted(root.rglob("*.parquet"))
    }


partitions = st.lists(
    st.tuples(
        st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=40),
        st.integers(min_value=0, max_value=2),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=partitions, lanes=st.integers(min_value=2, max_value=4))
def test_lanes_write_the_objects_one_lane_writes(
    tmp_path_factory: pytest.TempPathFactory, layout: list[tuple[list[int], int]], lanes: int
) -> None:
    parts = []
    next_id = 0
    for n, (days, widen) in enumerate(layout):
        rows = [(next_id + i, d) for i, d in enumerate(days)]
        next_id += len(rows)
        parts.append(part(f"p{n}", n, rows, widen=widen))
    batch = batch_of(parts)

    async def export(where: Path, lanes: int) -> tuple[dict[str, list[int]], int, int]:
        out = sink(where, lanes, target_file_size=1)
        try:
            result = await out.export_batch(batch, OPTS)
        finally:
            await out.close()
        assert result.retry_partitions == ()
        return objects(where / "out"), result.files_written, result.rows_written

    one = asyncio.run(export(tmp_path_factory.mktemp("one"), 1))
    many = asyncio.run(export(tmp_path_factory.mktemp("many"), lanes))
    assert many == one
    assert Counter(r for ids in many[0].values() for r in ids) == Counter(range(next_id))
    assert many[2] == next_id


async def test_two_days_are_read_at_the_same_time_and_the_threads_end(tmp_path: Path) -> None:
    # Each day's reader waits for the other day's: only two passes at once get past it.
    meet = threading.Barrier(2, timeout=20)

    def meeting(p: PartitionRef) -> PartitionRef:
        def opener() -> pa.RecordBatchReader:
            reader = p.open()

            def batches() -> Iterator[pa.RecordBatch]:
                meet.wait()
                yield from reader

            return pa.RecordBatchReader.from_batches(SCHEMA, batches())

        return PartitionRef(
            id=p.id,
            dataset=p.dataset,
            seq=p.seq,
            row_count=p.row_count,
            min_time=p.min_time,
            max_time=p.max_time,
            opener=opener,
        )

    batch = batch_of([meeting(part("a", 0, [(0, 0), (1, 0)])), meeting(part("b", 1, [(2, 1)]))])
    out = sink(tmp_path, 2)
    result = await out.export_batch(batch, OPTS)
    assert result.retry_partitions == () and result.files_written == 2
    assert sorted(r for ids in objects(tmp_path / "out").values() for r in ids) == [0, 1, 2]
    await out.close()
    assert [t for t in threading.enumerate() if t.name.startswith("hypaware-archive")] == []


async def test_lanes_default_to_the_cores(tmp_path: Path) -> None:
    parts = [part(f"p{d}", d, [(d, d)]) for d in range(cores() + 3)]
    out = sink(tmp_path, 0)
    out.lanes = None
    original = out._files._submit

    def spy(*args: object, lane: int = 0) -> asyncio.Future[object]:
        assert 0 <= lane < cores()
        return original(*args, lane=lane)  # type: ignore[arg-type]

    out._files._submit = spy  # type: ignore[method-assign,assignment]
    result = await out.export_batch(batch_of(parts), OPTS)
    assert result.files_written == len(parts)
    assert len(out._files._executors) == min(cores(), len(parts))
    await out.close()


async def test_a_failing_day_blames_its_partition_and_the_others_are_exported(
    tmp_path: Path,
) -> None:
    good = [part("a", 0, [(0, 0), (1, 0)]), part("c", 2, [(3, 2)])]

    def broken() -> pa.RecordBatchReader:
        def batches() -> Iterator[pa.RecordBatch]:
            yield pa.record_batch([[2], [DAY0 + timedelta(days=1)]], schema=SCHEMA)
            raise OSError("segment b is unreadable")

        return pa.RecordBatchReader.from_batches(SCHEMA, batches())

    bad = PartitionRef(
        id="b",
        dataset="events",
        seq=1,
        row_count=2,
        min_time=DAY0 + timedelta(days=1),
        max_time=DAY0 + timedelta(days=1),
        opener=broken,
    )
    out = sink(tmp_path, 3)
    result = await out.export_batch(batch_of([good[0], bad, good[1]]), OPTS)
    assert [r.partition_id for r in result.retry_partitions] == ["b"]
    assert "unreadable" in result.retry_partitions[0].reason
    assert set(result.exported) == {"a", "c"}
    assert sorted(r for ids in objects(tmp_path / "out").values() for r in ids) == [0, 1, 3]
    await out.close()


async def test_a_crash_while_lanes_write_then_a_retry_leaves_exactly_one_copy(
    tmp_path: Path,
) -> None:
    parts = [part(f"p{d}", d, [(d * 10 + i, d) for i in range(10)]) for d in range(4)]
    batch = batch_of(parts)
    store = FaultyStore(local_store(tmp_path))
    store.crash_after_puts = 3
    first = BlobSink(
        "archive", store, ParquetEncoder(ParquetConfig(row_group_size=3, target_file_size=1))
    )
    first.lanes = 2
    with pytest.raises(Crash):
        await first.export_batch(batch, OPTS)
    second = sink(tmp_path, 2)
    result = await second.export_batch(batch, ExportOptions(attempt=2))
    assert len(result.exported) == 4
    rows = objects(tmp_path / "out")
    assert len(rows) == result.files_written == 4
    assert Counter(r for ids in rows.values() for r in ids) == Counter(range(40))
    await first.close()
    await second.close()
