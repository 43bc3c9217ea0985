"""BlobSink end to end on local-fs and memory: layout, readers, exactly-once, failures, lifecycle."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hypaware
from hypaware import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    ObjectMeta,
    PartitionRef,
    PermissionDeniedError,
    SinkClosedError,
    TransientStoreError,
    load_config,
)
from hypaware.blob.object_names import NULL_DAY, batch_stem
from hypaware.blob.receipts import RECEIPTS_DIR
from hypaware.blob.sink import BlobSink
from hypaware.destinations.memory import shared_store
from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder
from tests.timing import PROMPT

from .data import RICH_SCHEMA, TIME, expected_table, partition, registry, rich_batch, rich_rows
from .readback import check_store, mirror

OPTS = ExportOptions()


def build(tmp_path: Path, destination: str, **config: Any) -> Any:
    """A sink named ``archive`` built the way users get one: config, resolve, build."""
    if destination == "@hypaware/local-fs":
        config.setdefault("root", str(tmp_path / "out"))
    doc = {
        "state_dir": str(tmp_path / "state"),
        "sinks": {
            "archive": {
                "writer": config.pop("writer", "@hypaware/format-parquet"),
                "destination": destination,
                "config": config,
            }
        },
    }
    loaded = load_config(doc)
    (plan,) = hypaware.resolve(loaded, registry())
    return hypaware.build(plan, config=loaded)


def memory_name(request: pytest.FixtureRequest) -> str:
    return f"blob-{request.node.name}"


@pytest.fixture(params=["@hypaware/local-fs", "@hypaware/memory"])
def destination(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "@hypaware/memory":
        return {"destination": request.param, "name": memory_name(request)}
    return {"destination": request.param}


def make(tmp_path: Path, destination: dict[str, Any], **config: Any) -> BlobSink:
    merged = {**destination, **config}
    sink = build(tmp_path, merged.pop("destination"), **merged)
    assert isinstance(sink, BlobSink)
    return sink


def files(root: Path, pattern: str = "*.parquet") -> list[Path]:
    return sorted(root.rglob(pattern))


def row_ids(table: pa.Table) -> Counter[int]:
    return Counter(table.column("row_id").to_pylist())


async def all_rows(store: Any, tmp: Path) -> pa.Table:
    paths = await mirror(store, tmp)
    return pa.concat_tables(pq.read_table(tmp / p) for p in paths if p.endswith(".parquet"))


# --------------------------------------------------------------------- layout


async def test_multi_day_multi_dataset_batches_read_back_with_every_reader(
    tmp_path: Path, destination: dict[str, Any]
) -> None:
    sink = make(tmp_path, destination, row_group_size=40)
    batches = [
        rich_batch("b-events", dataset_name="events", parts=3, rows=70),
        rich_batch("b-chat", dataset_name="chat messages/v2", parts=2, rows=45, first_id=10_000),
    ]
    results = [await sink.export_batch(b, OPTS) for b in batches]
    for batch, result in zip(batches, results, strict=True):
        assert result.retry_partitions == ()
        assert set(result.exported) == {p.id for p in batch.partitions}
        assert result.rows_written == batch.row_count
    store = sink.store
    for i, batch in enumerate(batches):
        paths = await check_store(
            store, tmp_path / f"copy{i}", batch.dataset.name, expected_table(batch)
        )
        assert results[i].files_written == len(paths)
        sizes = [(await store.head(p)).size for p in paths]
        assert results[i].bytes_written == sum(sizes)
    await sink.close()


async def test_object_names_depend_on_sink_dataset_and_batch_only(tmp_path: Path) -> None:
    stem = batch_stem("archive", "events", "b1")
    assert stem == batch_stem("archive", "events", "b1")
    assert (
        len(
            {
                stem,
                batch_stem("other", "events", "b1"),
                batch_stem("archive", "x", "b1"),
                batch_stem("archive", "events", "b2"),
            }
        )
        == 4
    )
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    batch = rich_batch("b1", parts=1)
    await sink.export_batch(batch, OPTS)
    names = {p.name for p in files(tmp_path / "out")}
    assert names == {f"{stem}-0000.parquet"}
    await sink.close()


async def test_a_batch_writes_one_file_per_day_whatever_its_partition_count(
    tmp_path: Path,
) -> None:
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    batch = rich_batch("many", parts=12, rows=30)
    result = await sink.export_batch(batch, OPTS)
    assert len(result.exported) == 12 and result.rows_written == 360
    written = files(tmp_path / "out")
    days = {p.parent.name for p in written}
    assert len(written) == len(days) == result.files_written
    rows = pa.concat_tables(pq.read_table(p) for p in written)
    assert row_ids(rows) == Counter(range(360))
    await sink.close()


async def test_rows_with_a_null_time_go_to_the_hive_default_partition(tmp_path: Path) -> None:
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    nulls = rich_rows(0, 20).set_column(1, TIME, pa.nulls(20, RICH_SCHEMA.field(TIME).type))
    batch = ExportBatch(
        batch_id="b",
        sink="archive",
        dataset=DatasetInfo(name="events", schema=RICH_SCHEMA, time_column=TIME),
        partitions=[partition("events", "p", lambda: [nulls])],
    )
    result = await sink.export_batch(batch, OPTS)
    assert result.exported == ("p",) and result.rows_written == 20
    written = files(tmp_path / "out" / "events")
    assert [f.parent.name for f in written] == [f"date={NULL_DAY}"]
    import pyarrow.dataset as ds

    hive = ds.partitioning(pa.schema([("date", pa.date32())]), flavor="hive")
    table = ds.dataset(tmp_path / "out" / "events", partitioning=hive).to_table()
    assert table.num_rows == 20 and table.column("date").null_count == 20
    await sink.close()


async def test_day_is_the_utc_day_of_zoned_and_naive_times(tmp_path: Path) -> None:
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    for time_type in (pa.timestamp("s", tz="Asia/Tokyo"), pa.timestamp("ns"), pa.date32()):
        schema = pa.schema([("row_id", pa.int64()), ("at", time_type)])
        # 1999-12-31T23:30Z is already 2000-01-01 in Tokyo; the layout uses UTC.
        at = pa.array([946_682_999 * 10**9 - 1_800 * 10**9 + 10**9], pa.timestamp("ns")).cast(
            time_type
        )
        rows = pa.record_batch([pa.array([1]), at], schema=schema)
        name = f"t-{str(time_type).replace(' ', '')}"
        batch = ExportBatch(
            batch_id="b",
            sink="archive",
            dataset=DatasetInfo(name=name, schema=schema, time_column="at"),
            partitions=[partition(name, "p", lambda rows=rows: [rows], schema=schema)],
        )
        assert (await sink.export_batch(batch, OPTS)).exported == ("p",)
        (file,) = (tmp_path / "out").glob(f"{hypaware.core.paths.encode_segment(name)}/*/*.parquet")
        assert file.parent.name == "date=1999-12-31"
    await sink.close()


async def test_dataset_names_from_data_stay_under_the_root(tmp_path: Path) -> None:
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    for name in ("../../escape", "a/b", ".", "ünï cödé"):
        batch = rich_batch(dataset_name=name, parts=1, rows=5)
        assert (await sink.export_batch(batch, OPTS)).retry_partitions == ()
    out = (tmp_path / "out").resolve()
    for path in files(tmp_path):
        assert out in path.resolve().parents
    names = ("../../escape", "a/b", ".", "ünï cödé")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [RECEIPTS_DIR, *(hypaware.core.paths.encode_segment(n) for n in names)]
    )
    # Receipts are named the same way: nothing from data escapes through them either.
    for path in (out / RECEIPTS_DIR).rglob("*"):
        assert out in path.resolve().parents
    await sink.close()


# ---------------------------------------------------------------- exactly once


async def test_reexporting_a_batch_after_a_crash_before_the_ack_leaves_one_copy(
    tmp_path: Path, destination: dict[str, Any]
) -> None:
    batch = rich_batch(parts=3, rows=50)
    first = make(tmp_path, destination, row_group_size=16, target_file_size=3_000)
    result = await first.export_batch(batch, OPTS)
    assert len(result.exported) == 3
    # The process dies here: no ack, no close. A new process re-sends the batch.
    second = make(tmp_path, destination, row_group_size=16, target_file_size=3_000)
    again = await second.export_batch(batch, ExportOptions(attempt=2))
    assert again.exported == result.exported and again.files_written == result.files_written
    rows = await all_rows(second.store, tmp_path / "copy")
    assert row_ids(rows) == Counter(range(150))
    await first.close()
    await second.close()


class Crash(BaseException):
    """Stands for the process dying: nothing in the sink may catch it."""


class FaultyStore:
    """A BlobStore wrapper that fails on cue, to play crashes and outages."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.label = getattr(inner, "label", "faulty store")
        self.puts = 0
        self.crash_after_puts: int | None = None
        self.put_error: Exception | None = None
        self.list_error: Exception | None = None
        self.fail_after_chunks: int | None = None
        self.closed = False

    async def put(
        self,
        path: str,
        data: bytes | Iterable[bytes] | AsyncIterable[bytes],
        *,
        if_absent: bool = False,
    ) -> ObjectMeta:
        if self.put_error is not None:
            raise self.put_error
        if self.fail_after_chunks is not None:
            assert isinstance(data, AsyncIterable)
            taken = 0
            async for _chunk in data:
                taken += 1
                if taken >= self.fail_after_chunks:
                    break
            raise TransientStoreError(f"{self.label}: connection reset during upload of {path!r}")
        meta = await self.inner.put(path, data, if_absent=if_absent)
        self.puts += 1
        if self.crash_after_puts is not None and self.puts >= self.crash_after_puts:
            raise Crash
        return meta  # type: ignore[no-any-return]

    async def get(self, path: str) -> bytes:
        return await self.inner.get(path)  # type: ignore[no-any-return]

    async def get_range(self, path: str, start: int, end: int) -> bytes:
        return await self.inner.get_range(path, start, end)  # type: ignore[no-any-return]

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectMeta]:
        if self.list_error is not None:
            raise self.list_error
        async for meta in self.inner.list(prefix):
            yield meta

    async def head(self, path: str) -> ObjectMeta:
        return await self.inner.head(path)  # type: ignore[no-any-return]

    async def delete(self, path: str) -> None:
        await self.inner.delete(path)

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


def local_store(tmp_path: Path) -> Any:
    from hypaware.core.resolver import BuildContext
    from hypaware.plugins.local_fs import LocalFsConfig, create

    ctx = BuildContext(sink_name="archive", state_dir=tmp_path / "state", base_dir=tmp_path)
    return create(LocalFsConfig(root=str(tmp_path / "out")), ctx)


async def test_a_crash_in_the_middle_then_a_changed_retry_leaves_exactly_one_copy(
    tmp_path: Path,
) -> None:
    batch = rich_batch(parts=3, rows=80)
    # Attempt 1 writes small files and dies after the fifth object.
    store = FaultyStore(local_store(tmp_path))
    store.crash_after_puts = 5
    small = BlobSink(
        "archive", store, ParquetEncoder(ParquetConfig(row_group_size=10, target_file_size=1))
    )
    with pytest.raises(Crash):
        await small.export_batch(batch, OPTS)
    await asyncio.sleep(0)
    before = list(files(tmp_path / "out"))
    assert len(before) >= 5  # the next file may land while the fifth completes
    # Attempt 2 (after a restart, the target size changed) writes fewer, bigger files.
    big = BlobSink("archive", local_store(tmp_path), ParquetEncoder())
    result = await big.export_batch(batch, ExportOptions(attempt=2))
    assert len(result.exported) == 3
    after = list(files(tmp_path / "out"))
    assert len(after) == result.files_written < len(before) + result.files_written
    rows = pa.concat_tables(pq.read_table(p) for p in after)
    assert row_ids(rows) == Counter(range(240))
    await big.close()
    await small.close()  # the "crashed" attempt's index and threads


async def test_shrinking_rollover_between_attempts_removes_the_extra_files(
    tmp_path: Path, destination: dict[str, Any]
) -> None:
    batch = rich_batch(parts=2, rows=120)
    many = make(tmp_path, destination, row_group_size=8, target_file_size=1)
    first = await many.export_batch(batch, OPTS)
    few = make(tmp_path, destination)
    second = await few.export_batch(batch, ExportOptions(attempt=2))
    assert second.files_written < first.files_written
    rows = await all_rows(few.store, tmp_path / "copy")
    assert row_ids(rows) == Counter(range(240))
    assert len(await mirror(few.store, tmp_path / "copy2")) == second.files_written
    # The other sink's objects and other partitions in the same directories are left alone.
    await many.close()
    await few.close()


async def test_cleanup_keeps_objects_of_other_sinks_and_partitions(tmp_path: Path) -> None:
    batch_a = rich_batch("a", parts=1, rows=50)
    batch_b = rich_batch("b", parts=1, rows=50, first_id=50)
    batch_b = ExportBatch(
        batch_id="b",
        sink="archive",
        dataset=batch_b.dataset,
        partitions=[partition("events", "events-other", lambda: [rich_rows(50, 50)])],
    )
    store = local_store(tmp_path)
    other = BlobSink(
        "other", store, ParquetEncoder(ParquetConfig(row_group_size=5, target_file_size=1))
    )
    await other.export_batch(batch_a, OPTS)
    sink = BlobSink(
        "archive",
        local_store(tmp_path),
        ParquetEncoder(ParquetConfig(row_group_size=5, target_file_size=1)),
    )
    await sink.export_batch(batch_b, OPTS)
    before = sorted(files(tmp_path / "out"))
    await sink.export_batch(batch_a, OPTS)
    sink2 = BlobSink("archive", local_store(tmp_path), ParquetEncoder())
    await sink2.export_batch(batch_a, OPTS)
    after = sorted(files(tmp_path / "out"))
    assert set(before) <= set(after)
    rows = pa.concat_tables(pq.read_table(p) for p in after)
    # Sink "other" and sink "archive" each hold one copy of batch a; b is untouched.
    assert row_ids(rows) == Counter(
        {**dict.fromkeys(range(50), 2), **dict.fromkeys(range(50, 100), 1)}
    )
    for s in (other, sink, sink2):
        await s.close()


# ------------------------------------------------------------------- failures


async def test_a_failing_partition_goes_to_retry_and_the_others_are_exported(
    tmp_path: Path,
) -> None:
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    good = rich_batch(parts=2, rows=30)

    def broken() -> list[pa.RecordBatch]:
        raise OSError("segment file vanished")

    def mid_stream() -> Iterable[pa.RecordBatch]:
        yield rich_rows(1000, 10)
        raise OSError("checksum mismatch")

    bad = partition("events", "events-bad", lambda: [rich_rows(900, 5)])
    bad = PartitionRef(
        id="events-bad", dataset="events", seq=9, row_count=5, opener=lambda: broken()
    )  # type: ignore[arg-type,return-value]
    worse = partition("events", "events-worse", list)
    worse = PartitionRef(
        id="events-worse",
        dataset="events",
        seq=10,
        row_count=10,
        opener=lambda: pa.RecordBatchReader.from_batches(RICH_SCHEMA, mid_stream()),
    )
    batch = ExportBatch(
        batch_id="b",
        sink="archive",
        dataset=good.dataset,
        partitions=[good.partitions[0], bad, worse, good.partitions[1]],
    )
    result = await sink.export_batch(batch, OPTS)
    assert set(result.exported) == {"events-p0", "events-p1"}
    reasons = {r.partition_id: r for r in result.retry_partitions}
    assert set(reasons) == {"events-bad", "events-worse"}
    assert (
        "sink 'archive'" in reasons["events-bad"].reason
        and "segment file vanished" in reasons["events-bad"].reason
    )
    assert "checksum mismatch" in reasons["events-worse"].reason
    assert all(r.retryable for r in reasons.values())
    assert result.rows_written == 60
    await sink.close()


async def test_rows_that_cannot_be_encoded_are_not_retryable(tmp_path: Path) -> None:
    sink = make(tmp_path, {"destination": "@hypaware/local-fs"})
    schema = pa.schema([("row_id", pa.int64()), ("at", pa.string())])
    rows = pa.record_batch([pa.array([1]), pa.array(["yesterday"])], schema=schema)
    batch = ExportBatch(
        batch_id="b",
        sink="archive",
        dataset=DatasetInfo(name="odd", schema=schema, time_column="at"),
        partitions=[partition("odd", "p", lambda: [rows], schema=schema)],
    )
    result = await sink.export_batch(batch, OPTS)
    (retry,) = result.retry_partitions
    assert not retry.retryable and "time column 'at'" in retry.reason
    await sink.close()


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (
            TransientStoreError(
                "sink 'archive' (@hypaware/s3 s3://b): write 'x' failed: timed out"
            ),
            True,
        ),
        (
            PermissionDeniedError(
                "sink 'archive' (@hypaware/s3 s3://b): write 'x' refused: AccessDenied"
            ),
            False,
        ),
    ],
)
async def test_destination_failures_come_back_for_retry_naming_sink_and_destination(
    tmp_path: Path, error: Exception, retryable: bool
) -> None:
    store = FaultyStore(local_store(tmp_path))
    store.put_error = error
    sink = BlobSink("archive", store, ParquetEncoder())
    batch = rich_batch(parts=3)
    result = await sink.export_batch(batch, OPTS)
    assert result.exported == ()
    assert [r.partition_id for r in result.retry_partitions] == [p.id for p in batch.partitions]
    for retry in result.retry_partitions:
        assert retry.retryable is retryable
        assert "sink 'archive'" in retry.reason and "@hypaware/s3" in retry.reason
    await sink.close()


@pytest.mark.parametrize("fail_after_chunks", [None, 1])
async def test_a_refused_put_is_the_reason_even_when_more_files_follow(
    tmp_path: Path, fail_after_chunks: int | None
) -> None:
    # Many small files per day: the store refuses the first one before (or
    # while) taking its bytes. The batch fails on the store's error, not on
    # the encoder's complaint that the refused file was never read to its end.
    store = FaultyStore(local_store(tmp_path))
    if fail_after_chunks is None:
        store.put_error = TransientStoreError("sink 'archive' (local): write refused")
    store.fail_after_chunks = fail_after_chunks
    sink = BlobSink(
        "archive", store, ParquetEncoder(ParquetConfig(row_group_size=5, target_file_size=1))
    )
    try:
        result = await sink.export_batch(rich_batch(parts=2, rows=40), OPTS)
    finally:
        await sink.close()
    assert result.exported == ()
    reasons = [r.reason for r in result.retry_partitions]
    assert len(reasons) == 2
    assert all("refused" in r or "connection reset" in r for r in reasons), reasons
    assert all(r.retryable for r in result.retry_partitions)


async def test_an_upload_failing_midway_drops_the_read_ahead_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One chunk per hand-off, so the read-ahead is the pull that hits the bad segment.
    monkeypatch.setattr("hypaware.blob.file_writer._HANDOFF_BYTES", 1)
    store = FaultyStore(local_store(tmp_path))
    store.fail_after_chunks = 1
    sink = BlobSink("midway", store, ParquetEncoder(ParquetConfig(row_group_size=8)))

    def one_day(start: int) -> pa.RecordBatch:
        noon = pa.array([1_772_452_800_000_000] * 8, pa.int64()).cast(RICH_SCHEMA.field(TIME).type)
        return rich_rows(start, 8).set_column(1, TIME, noon)

    def failing_later() -> Iterable[pa.RecordBatch]:
        yield one_day(0)
        raise OSError("read-ahead hit a bad segment")

    part = PartitionRef(
        id="p",
        dataset="events",
        seq=0,
        row_count=8,
        opener=lambda: pa.RecordBatchReader.from_batches(RICH_SCHEMA, failing_later()),
    )
    batch = ExportBatch(
        batch_id="b", sink="midway", dataset=rich_batch().dataset, partitions=[part]
    )
    result = await sink.export_batch(batch, OPTS)
    (retry,) = result.retry_partitions
    assert retry.retryable and "connection reset" in retry.reason
    await sink.close()
    assert sink_threads("midway") == []
    import gc

    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0.01)
    assert "never retrieved" not in caplog.text


async def test_a_failed_cleanup_holds_back_the_ack(tmp_path: Path) -> None:
    store = FaultyStore(local_store(tmp_path))
    store.list_error = TransientStoreError("list failed: connection reset")
    sink = BlobSink("archive", store, ParquetEncoder())
    batch = rich_batch(parts=2)
    result = await sink.export_batch(batch, OPTS)
    assert result.exported == ()
    assert {r.partition_id for r in result.retry_partitions} == {"events-p0", "events-p1"}
    assert all("connection reset" in r.reason for r in result.retry_partitions)
    await sink.close()


# ------------------------------------------------------------------ lifecycle


def sink_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"hypaware-{name}")]


async def test_close_is_idempotent_closes_the_store_and_leaves_no_thread(tmp_path: Path) -> None:
    store = FaultyStore(local_store(tmp_path))
    sink = BlobSink("lifecycle", store, ParquetEncoder())
    await sink.export_batch(rich_batch(parts=1), OPTS)
    assert sink_threads("lifecycle")
    await sink.close()
    await sink.close()
    assert store.closed
    assert sink_threads("lifecycle") == []
    with pytest.raises(SinkClosedError, match="lifecycle"):
        await sink.export_batch(rich_batch(parts=1), OPTS)


async def test_close_during_an_export_sends_the_rest_back_for_retry(tmp_path: Path) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow() -> Iterable[pa.RecordBatch]:
        for i in range(100):
            started.set()
            release.wait(PROMPT)
            yield rich_rows(i * 10, 10)

    sink = BlobSink(
        "closing", local_store(tmp_path), ParquetEncoder(ParquetConfig(row_group_size=10))
    )
    slow_part = PartitionRef(
        id="slow",
        dataset="events",
        seq=0,
        row_count=1000,
        opener=lambda: pa.RecordBatchReader.from_batches(RICH_SCHEMA, slow()),
    )
    batch = ExportBatch(
        batch_id="b",
        sink="closing",
        dataset=rich_batch().dataset,
        partitions=[slow_part, *rich_batch(parts=2).partitions],
    )
    export = asyncio.create_task(sink.export_batch(batch, OPTS))
    assert await asyncio.to_thread(started.wait, PROMPT), "the slow partition was never read"
    closing = asyncio.create_task(sink.close())
    await asyncio.sleep(0.01)
    release.set()
    result = await asyncio.wait_for(export, 10)
    await asyncio.wait_for(closing, 10)
    assert result.exported == ()
    assert {r.partition_id for r in result.retry_partitions} == {p.id for p in batch.partitions}
    assert all("closed" in r.reason for r in result.retry_partitions)
    assert sink_threads("closing") == []


# ---------------------------------------------------------------------- JSONL


async def test_jsonl_through_the_sink_round_trips(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import gzip
    import json

    name = memory_name(request)
    sink = build(
        tmp_path, "@hypaware/memory", writer="@hypaware/format-jsonl", name=name, compression="gzip"
    )
    batch = rich_batch(parts=2, rows=40)
    result = await sink.export_batch(batch, OPTS)
    assert len(result.exported) == 2
    again = await sink.export_batch(batch, OPTS)
    assert again.files_written == result.files_written
    import obstore

    rows = []
    for chunk in obstore.list(shared_store(name)):
        for meta in chunk:
            if meta["path"].startswith(RECEIPTS_DIR + "/"):
                continue
            assert meta["path"].endswith(".jsonl.gz")
            day = meta["path"].split("/")[1].removeprefix("date=")
            data = gzip.decompress(obstore.get(shared_store(name), meta["path"]).bytes().to_bytes())
            for line in data.decode().splitlines():
                row = json.loads(line)
                assert day == (NULL_DAY if row["ts"] is None else row["ts"][:10])
                rows.append(row)
    assert sorted(r["row_id"] for r in rows) == list(range(80))
    assert not files(tmp_path, "*.jsonl*")
    await sink.close()
