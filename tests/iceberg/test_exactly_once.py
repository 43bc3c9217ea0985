"""Exactly-once commits: crashes after the commit, failed commits, interrupted attempts."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.exceptions import CommitFailedException

from hypaware.core.types import ExportOptions
from hypaware.core.workers import cores
from hypaware.iceberg import table_format
from hypaware.iceberg.catalog import IcebergError
from hypaware.iceberg.datafiles import DataFileWriter

from .helpers import DATASET, DAY0, batch, build_sink, local_path, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


def _parts(n: int = 6) -> list[Any]:
    return [partition(f"p{i}", rows_for(f"c{i}", i % 2, 4), seq=i) for i in range(n)]


def _data_files_on_disk(root: Path) -> set[str]:
    data = root / "warehouse" / "hyp" / "messages" / "data"
    return {str(p) for p in data.rglob("*.parquet")} if data.exists() else set()


def _referenced(table: Any) -> set[str]:
    return {local_path(t.file.file_path) for t in table.scan().plan_files()}


async def test_crash_after_commit_before_ack_does_not_duplicate(tmp_path: Path) -> None:
    cfg = sink_config(tmp_path)
    first = build_sink(cfg)
    parts = _parts()
    result = await first.export_batch(batch("b-7", parts), ExportOptions())
    assert len(result.exported) == 6
    # The process dies here: the driver never saw the ack. A new process retries the batch.
    # (Closing only lets this test's "dead" process go; nothing it does reaches the table.)
    await first.close()

    second = build_sink(cfg)
    again = await second.export_batch(batch("b-7", parts), ExportOptions(attempt=2))

    assert set(again.exported) == {p.id for p in parts}
    assert again.rows_written == 0
    assert again.files_written == 0
    table = second.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 24
    assert len(table.metadata.snapshots) == 1
    await second.close()


async def test_failed_commit_removes_its_data_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = build_sink(sink_config(tmp_path, commit_retries=1, commit_backoff=0.001))

    def lose(*_args: Any, **_kwargs: Any) -> str:
        raise CommitFailedException("another writer won")

    monkeypatch.setattr(table_format, "commit_files", lose)
    result = await sink.export_batch(batch("b", _parts()), ExportOptions())

    assert result.exported == ()
    assert len(result.retry_partitions) == 6
    reason = result.retry_partitions[0].reason
    assert "sink 'archive'" in reason
    assert "dataset 'messages'" in reason
    assert "table hyp.messages" in reason
    assert "commit lost to other writers 2 times" in reason
    assert all(r.retryable for r in result.retry_partitions)
    assert _data_files_on_disk(tmp_path) == set()

    monkeypatch.undo()
    retry = await sink.export_batch(batch("b", _parts()), ExportOptions(attempt=2))
    assert len(retry.exported) == 6
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 24
    await sink.close()


class _Killed(BaseException):
    """Stands for the process dying: no cleanup code runs past it."""


async def test_files_of_an_interrupted_attempt_are_reused_not_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = sink_config(tmp_path, target_file_size=2048, row_group_size=500)
    sink = build_sink(cfg)
    parts = [partition(f"p{i}", rows_for(f"c{i}", 0, 300), seq=i) for i in range(8)]

    def die(*_args: Any, **_kwargs: Any) -> str:
        raise _Killed

    monkeypatch.setattr(table_format, "commit_files", die)
    with pytest.raises(_Killed):
        sink.table.write_batch_sync(batch("b", parts))  # type: ignore[attr-defined]
    await sink.close()  # the "killed" process's catalog connections
    orphans = _data_files_on_disk(tmp_path)
    assert len(orphans) > 1  # rolled at the small target size
    # A stray extra file of the same batch, as a differently-rolled attempt would leave.
    stray = sorted(orphans)[0].replace("-00000.parquet", "-09999.parquet")
    os.link(sorted(orphans)[0], stray)

    monkeypatch.undo()
    fresh = build_sink(cfg)
    result = await fresh.export_batch(batch("b", parts), ExportOptions(attempt=2))

    assert len(result.exported) == 8
    table = fresh.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 2400
    # Same names were overwritten; nothing on disk is unreferenced.
    assert _data_files_on_disk(tmp_path) == _referenced(table)
    assert orphans == _referenced(table)
    await fresh.close()


async def test_a_partition_that_cannot_be_read_goes_back_alone(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))

    def broken() -> pa.RecordBatchReader:
        raise OSError("segment file is gone")

    parts = [*_parts(3), partition("bad", [], opener=broken)]
    result = await sink.export_batch(batch("b", parts), ExportOptions())

    assert set(result.exported) == {"p0", "p1", "p2"}
    (retry,) = result.retry_partitions
    assert retry.partition_id == "bad"
    assert "segment file is gone" in retry.reason
    assert "partition 'bad'" in retry.reason

    # Crash before ack: the same batch again. Only the unread partition comes back.
    again = await sink.export_batch(batch("b", parts), ExportOptions(attempt=2))
    assert set(again.exported) == {"p0", "p1", "p2"}
    assert [r.partition_id for r in again.retry_partitions] == ["bad"]

    # The driver respools the bad one (now readable) under the same batch id.
    fixed = partition("bad", rows_for("zz", 0, 5))
    last = await sink.export_batch(batch("b", [fixed]), ExportOptions(attempt=3))
    assert last.exported == ("bad",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 12 + 5
    assert len(table.metadata.snapshots) == 2
    await sink.close()


async def test_empty_partitions_are_acked_without_a_snapshot(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    result = await sink.export_batch(batch("b", [partition("e", [])]), ExportOptions())
    assert result.exported == ("e",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.metadata.snapshots == []
    await sink.close()


async def _failed_without_a_trace(sink: Any, root: Path) -> Any:
    """Export the six-day batch, which must fail with no data file or snapshot left."""
    result = await sink.export_batch(batch("b", _parts()), ExportOptions())
    assert result.exported == ()
    assert _data_files_on_disk(root) == set()
    table = sink.table.load_table(DATASET)
    assert table.metadata.snapshots == []
    await sink.close()
    return result


async def test_a_failed_file_write_removes_the_files_of_other_days(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = build_sink(sink_config(tmp_path))
    real_put = DataFileWriter.put

    def flaky(self: DataFileWriter, key: str, location: str, chunks: Any) -> int:
        if "ts_day=2026-03-02" in location:
            for _ in chunks:
                pass
            raise PermissionError("the disk said no")
        return real_put(self, key, location, chunks)

    monkeypatch.setattr(DataFileWriter, "put", flaky)
    result = await _failed_without_a_trace(sink, tmp_path)
    assert "the disk said no" in result.retry_partitions[0].reason


async def test_a_file_that_cannot_be_described_removes_every_file_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Files are described (their statistics read) as soon as each is written,
    # while other days still encode: a failure there must not leave that file.
    sink = build_sink(sink_config(tmp_path))
    real = DataFileWriter.data_file

    def picky(self: DataFileWriter, table: Any, written: Any, what: str) -> Any:
        if "ts_day=2026-03-02" in written.location:
            raise IcebergError(f"{what}: {written.location} has no field ids", retryable=False)
        return real(self, table, written, what)

    monkeypatch.setattr(DataFileWriter, "data_file", picky)
    result = await _failed_without_a_trace(sink, tmp_path)
    assert "has no field ids" in result.retry_partitions[0].reason
    assert not result.retry_partitions[0].retryable


def _names(root: Path) -> list[str]:
    return sorted(Path(p).name.rsplit("-", 1)[-1] for p in _data_files_on_disk(root))


async def test_a_big_day_is_written_in_two_pieces_that_keep_its_order(tmp_path: Path) -> None:
    # Over a row group of rows, a day is written as two files (so two encoders
    # share it); read in name order, they are the day's rows in table order.
    sink = build_sink(sink_config(tmp_path, row_group_size=100))
    parts = [
        partition(f"p{i}", rows_for(f"c{i % 3}", 0, 50, start=i * 50), seq=i) for i in range(5)
    ]
    result = await sink.export_batch(batch("b", parts), ExportOptions())
    assert len(result.exported) == 5
    assert _names(tmp_path) == ["00000.parquet", "10000.parquet"]
    files = sorted(_data_files_on_disk(tmp_path))
    rows = pa.concat_tables(pq.read_table(f) for f in files)
    keys, times = rows.column("conversation_id").to_pylist(), rows.column("ts").to_pylist()
    order = list(zip(keys, times, strict=True))
    assert order == sorted(order) and len(order) == 250
    assert [pq.read_metadata(f).num_rows for f in files] == [125, 125]
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert _referenced(table) == set(files)
    await sink.close()


@pytest.mark.skipif(cores() < 2, reason="one core: the pieces of a day are not written at once")
async def test_pieces_of_a_day_never_take_each_other_for_leftovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Piece 1's file is in place before piece 0 finishes: piece 0 must not
    # clean the day up as if that file were left by an earlier attempt.
    second_done = threading.Event()
    put = DataFileWriter.put

    def ordered(self: DataFileWriter, key: str, location: str, chunks: Any) -> Any:
        if "-00000.parquet" in location:
            assert second_done.wait(20), "the second piece was not written beside the first"
            return put(self, key, location, chunks)
        out = put(self, key, location, chunks)
        second_done.set()
        return out

    monkeypatch.setattr(DataFileWriter, "put", ordered)
    sink = build_sink(sink_config(tmp_path, row_group_size=100))
    parts = [partition(f"p{i}", rows_for(f"c{i}", 0, 50), seq=i) for i in range(5)]
    result = await sink.export_batch(batch("b", parts), ExportOptions())
    assert len(result.exported) == 5
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert _names(tmp_path) == ["00000.parquet", "10000.parquet"]
    assert _data_files_on_disk(tmp_path) == _referenced(table)
    assert table.scan().to_arrow().num_rows == 250
    await sink.close()


async def test_a_day_in_two_groups_of_partitions_is_refused_not_overwritten(
    tmp_path: Path,
) -> None:
    # A partition whose declared time range misses its rows puts one day in two
    # groups; writing it twice would reuse the same file names and lose rows.
    sink = build_sink(sink_config(tmp_path))
    honest = partition("p0", rows_for("c0", 0, 4), seq=0)
    lying = partition("p1", rows_for("c1", 0, 4), seq=1)
    far = DAY0 + timedelta(days=5)
    parts = [
        attrs.evolve(honest, min_time=DAY0, max_time=DAY0 + timedelta(hours=1)),
        attrs.evolve(lying, min_time=far, max_time=far),
    ]
    result = await sink.export_batch(batch("b", parts), ExportOptions())
    assert result.exported == ()
    assert {r.partition_id for r in result.retry_partitions} == {"p0", "p1"}
    reason = result.retry_partitions[0].reason
    assert "came from two groups of partitions" in reason
    assert "2026-03-01" in reason
    assert not result.retry_partitions[0].retryable
    assert _data_files_on_disk(tmp_path) == set()
    await sink.close()


@pytest.mark.parametrize("where", ["catalog", "commit"], ids=["rebased", "refreshed"])
@pytest.mark.parametrize(
    ("other", "landed_first"),
    [("b-9", 6), ("b-10", 6), ("b-10", 3)],
    ids=["same-batch", "respooled", "half-respooled"],
)
async def test_an_attempt_whose_rows_land_meanwhile_does_not_commit_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other: str, landed_first: int, where: str
) -> None:
    # An attempt given up on (its export timed out) still commits in its thread, while
    # the next attempt, of the same batch or of its partitions respooled into a new
    # one, lands first: while the late one's commit is at the catalog (which refuses
    # it; pyiceberg's own retry rebases it), or just before the late one commits.
    # Rebased or committed blindly, the late attempt would append the rows twice.
    from pyiceberg.catalog.sql import SqlCatalog

    cfg = sink_config(tmp_path)
    late, next_attempt = build_sink(cfg), build_sink(cfg)
    parts = _parts()
    landed: list[Any] = []
    owner, name = (
        (SqlCatalog, "commit_table") if where == "catalog" else (table_format, "commit_files")
    )
    step = getattr(owner, name)

    def the_other_lands_first(*args: Any, **kwargs: Any) -> Any:
        if not landed:  # the late attempt's first commit; the other's passes straight on
            landed.append(None)
            first = batch(other, parts[:landed_first])
            landed[0] = next_attempt.table.write_batch_sync(first)  # type: ignore[attr-defined]
        return step(*args, **kwargs)

    monkeypatch.setattr(owner, name, the_other_lands_first)
    result = late.table.write_batch_sync(batch("b-9", parts))  # type: ignore[attr-defined]

    assert landed[0].rows_written == 4 * landed_first
    assert set(result.exported) == {p.id for p in parts}
    assert not result.retry_partitions
    assert result.rows_written == 4 * (len(parts) - landed_first)  # only what had not landed
    table = late.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert len(table.metadata.snapshots) == (1 if landed_first == len(parts) else 2)
    rows = table.scan().to_arrow()
    assert rows.num_rows == 24
    identities = zip(rows["conversation_id"].to_pylist(), rows["tokens"].to_pylist(), strict=True)
    assert len(set(identities)) == 24  # no row twice
    assert _data_files_on_disk(tmp_path) == _referenced(table)
    await late.close()
    await next_attempt.close()


async def test_a_late_attempt_keeps_the_files_of_its_own_landed_attempt_once_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the same-batch case above, but the snapshot of the attempt that landed
    # is gone from history (maintenance expired it) when the late attempt finds
    # its partitions committed: the files, same names as its own, stay.
    cfg = sink_config(tmp_path)
    late, next_attempt = build_sink(cfg), build_sink(cfg)
    parts = _parts()
    step = table_format.commit_files
    landed: list[Any] = []

    def the_same_batch_lands_first(*args: Any, **kwargs: Any) -> Any:
        if not landed:  # the late attempt's commit; the other's own passes straight on
            landed.append(None)
            landed[0] = next_attempt.table.write_batch_sync(batch("b-9", parts))  # type: ignore[attr-defined]
        return step(*args, **kwargs)

    monkeypatch.setattr(table_format, "commit_files", the_same_batch_lands_first)
    monkeypatch.setattr(table_format, "find_commit", lambda *a, **k: None)
    result = late.table.write_batch_sync(batch("b-9", parts))  # type: ignore[attr-defined]
    assert not landed[0].retry_partitions, landed[0].retry_partitions[0].reason
    assert set(result.exported) == {p.id for p in parts} and not result.retry_partitions
    table = late.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 24
    assert _data_files_on_disk(tmp_path) == _referenced(table)
    await late.close()
    await next_attempt.close()
