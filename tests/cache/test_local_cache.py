"""LocalCache: appends, partitioning, atomic seals, seqs, bad directories and segments."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from hypaware.cache.local import LocalCache
from hypaware.cache.protocol import Cache, ExportFloor, RetentionAware
from hypaware.core.errors import CacheError
from tests.driver.helpers import SCHEMA, T0, events_info, make_cache, rows


def test_is_a_cache() -> None:
    cache = LocalCache("/nonexistent")
    assert isinstance(cache, Cache)
    assert isinstance(cache, RetentionAware)


def test_partitions_by_conversation_and_hour(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 30, convs=3))  # 7-minute steps: 30 rows span 3.5 hours
    sealed = cache.seal()
    assert sum(p.row_count for p in sealed) == 30
    for part in sealed:
        table = part.open().read_all()
        assert table.schema.equals(SCHEMA)
        assert len(set(table.column("conv").to_pylist())) == 1
        hours = {t.replace(minute=0, second=0) for t in table.column("ts").to_pylist()}
        assert len(hours) == 1
        assert part.min_time is not None and part.max_time is not None
        assert part.min_time <= part.max_time
        assert part.byte_size > 0
    assert [p.seq for p in sealed] == list(range(1, len(sealed) + 1))
    assert len(sealed) == len({(r["conv"], r["ts"].hour) for r in rows(0, 30)})  # type: ignore[union-attr]


def test_append_forms(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    table = pa.Table.from_pylist(rows(0, 4), schema=SCHEMA)
    assert cache.append("events", table) == 4
    assert cache.append("events", table.to_batches()[0]) == 4
    assert cache.append("events", iter(table.to_batches())) == 4
    reordered = table.select(["n", "ts", "conv", "row_id"])
    assert cache.append("events", reordered) == 4
    assert cache.append("events", []) == 0
    assert sum(p.row_count for p in cache.seal()) == 16


def test_bad_rows_name_the_column(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    with pytest.raises(CacheError, match=r"missing column.*n"):
        cache.append("events", pa.table({"row_id": ["a"], "conv": ["c"], "ts": [T0]}))
    with pytest.raises(CacheError, match="column 'n' is string"):
        cache.append("events", pa.table({"row_id": ["a"], "conv": ["c"], "ts": [T0], "n": ["x"]}))
    with pytest.raises(CacheError, match=r"unknown column.*extra"):
        cache.append("events", pa.table({**{n: [None] for n in SCHEMA.names}, "extra": [1]}))
    with pytest.raises(CacheError, match="time column 'ts' has nulls"):
        cache.append("events", [{"row_id": "a", "conv": "c", "ts": None, "n": 1}])
    with pytest.raises(CacheError, match="no dataset 'nope'"):
        cache.append("nope", rows(0, 1))


def test_define_dataset_is_idempotent_and_checked(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    assert cache.define_dataset(events_info()) == events_info()
    other = events_info()
    other = type(other)(
        name="events", schema=SCHEMA, time_column="ts", partition_by=(), time_grain="day"
    )
    with pytest.raises(CacheError, match="different schema or partitioning"):
        cache.define_dataset(other)
    with pytest.raises(CacheError, match="not usable as a directory"):
        cache.define_dataset(
            type(other)(name="../x", schema=SCHEMA, time_column="ts", time_grain=None)
        )
    with pytest.raises(CacheError, match="time_grain"):
        cache.define_dataset(
            type(other)(name="weekly", schema=SCHEMA, time_column="ts", time_grain="week")
        )
    # A fresh instance reads the description back from disk.
    assert LocalCache(tmp_path).datasets() == [events_info()]


def test_rows_are_durable_before_sealing_and_seqs_survive_reopen(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 10))
    reopened = LocalCache(tmp_path, fsync=False)
    assert reopened.ready_partitions("events") == []
    first = reopened.seal()
    assert sum(p.row_count for p in first) == 10
    reopened.append("events", rows(10, 10))
    again = LocalCache(tmp_path, fsync=False).seal()
    assert min(p.seq for p in again) == max(p.seq for p in first) + 1


def test_seqs_are_never_reused_after_retention_drops_everything(tmp_path: Path) -> None:
    clock = [T0]
    cache = make_cache(tmp_path, count=0, retention=timedelta(hours=1), clock=lambda: clock[0])
    cache.append("events", rows(0, 5, convs=1))
    top = max(p.seq for p in cache.seal())
    clock[0] += timedelta(hours=2)
    report = cache.enforce_retention({})
    assert len(report.dropped) > 0
    assert cache.ready_partitions("events") == []
    cache.append("events", rows(5, 1, convs=1))
    assert [p.seq for p in LocalCache(tmp_path, fsync=False).seal()] == [top + 1]


def test_seal_before_only_seals_closed_buckets(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 20, convs=1))  # 0:00 .. 2:13
    sealed = cache.seal(before=T0 + timedelta(hours=2))
    assert sum(p.row_count for p in sealed) == 18  # rows up to 1:59
    assert sum(p.row_count for p in cache.seal()) == 2


def test_reader_ignores_temp_files_and_pending_seals(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=9)
    sealed_dir = tmp_path / "events" / "sealed"
    parts = cache.ready_partitions("events")
    (sealed_dir / ".tmp-000000000099-x.arrow-1").write_bytes(b"ARROW1 half a file")
    assert [p.id for p in cache.ready_partitions("events")] == [p.id for p in parts]
    # A seal cut short by a crash: seq 3's chunks are claimed but its segment is not written.
    victim = parts[2]
    os.unlink(sealed_dir / f"{victim.id}.arrow")
    keydir = victim.id.split("-", 1)[1]
    claimed = (
        tmp_path / "events" / "sealing" / f"{victim.seq:012d}.{keydir}.{0:020d}-1-000001.arrow"
    )
    claimed.write_bytes(b"")
    fresh = LocalCache(tmp_path, fsync=False)
    # Nothing at or past the pending seq is listed, so a high-water never skips it.
    assert [p.seq for p in fresh.ready_partitions("events")] == [1, 2]
    claimed.unlink()


def test_interrupted_seal_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 6, convs=2))
    directory = tmp_path / "events"
    # Simulate a crash right after the commit point (chunks moved to sealing/).
    chunks = sorted((directory / "open").iterdir())
    keys = sorted({c.name.split(".")[0] for c in chunks})
    assert len(keys) == 2
    for chunk in chunks:
        seq = keys.index(chunk.name.split(".")[0]) + 1
        os.rename(chunk, directory / "sealing" / f"{seq:012d}.{chunk.name}")
    reader = LocalCache(tmp_path, fsync=False)
    assert reader.ready_partitions("events") == []
    writer = LocalCache(tmp_path, fsync=False)
    writer.recover()
    parts = reader.ready_partitions("events")
    assert sum(p.row_count for p in parts) == 6
    assert [p.seq for p in parts] == [1, 2]
    assert writer.stats.recovered_seals == 2
    assert not list((directory / "sealing").iterdir())


def test_corrupt_segment_is_reported_skipped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache(tmp_path, count=12)
    parts = cache.ready_partitions("events")
    bad = tmp_path / "events" / "sealed" / f"{parts[1].id}.arrow"
    bad.write_bytes(b"garbage, not a segment")
    fresh = LocalCache(tmp_path, fsync=False)
    with caplog.at_level(logging.WARNING, logger="hypaware.cache.local"):
        listed = fresh.ready_partitions("events")
        fresh.ready_partitions("events")
    assert [p.id for p in listed] == [p.id for p in parts if p.id != parts[1].id]
    assert fresh.stats.corrupt_segments == 1
    assert "corrupt" in caplog.text and parts[1].id in caplog.text
    assert fresh.partition("events", parts[1].id) is None


def test_missing_cache_directory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = LocalCache(tmp_path / "nope")
    with caplog.at_level(logging.WARNING):
        assert cache.datasets() == []
        assert cache.datasets() == []
    assert cache.stats.missing_root == 1
    assert "does not exist" in caplog.text
    with pytest.raises(CacheError, match="no dataset"):
        cache.ready_partitions("events")


def test_unreadable_dataset_description_is_skipped(tmp_path: Path) -> None:
    make_cache(tmp_path, count=3)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "dataset.json").write_text("{not json")
    cache = LocalCache(tmp_path)
    assert [d.name for d in cache.datasets()] == ["events"]
    assert cache.stats.unreadable_datasets == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_cache_reads_but_refuses_writes(tmp_path: Path) -> None:
    make_cache(tmp_path, count=6)
    for root, dirs, _files in os.walk(tmp_path):
        for d in dirs:
            os.chmod(Path(root) / d, 0o555)
    os.chmod(tmp_path, 0o555)
    try:
        reader = LocalCache(tmp_path)
        parts = reader.ready_partitions("events")
        assert sum(p.open().read_all().num_rows for p in parts) == 6
        with pytest.raises(CacheError, match="cannot"):
            reader.append("events", rows(100, 1))
    finally:
        for root, dirs, _files in os.walk(tmp_path):
            for d in dirs:
                os.chmod(Path(root) / d, 0o755)
        os.chmod(tmp_path, 0o755)


def test_read_only_cache_as_root_is_simulated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = make_cache(tmp_path, count=6)

    def refuse(*_args: object, **_kwargs: object) -> int:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr("hypaware.cache.directory.os.open", refuse)
    with pytest.raises(CacheError, match="cannot write to dataset 'events'"):
        cache.append("events", rows(100, 1))
    monkeypatch.undo()
    assert sum(p.row_count for p in cache.ready_partitions("events")) == 6


class TestRetention:
    def _cache(self, tmp_path: Path, **kwargs: object) -> tuple[LocalCache, list[object]]:
        clock = [T0]
        cache = make_cache(tmp_path, count=0, clock=lambda: clock[0], **kwargs)
        cache.append("events", rows(0, 21, convs=1))  # 3 hourly partitions
        cache.seal()
        return cache, clock

    def test_soft_horizon_drops_only_exported(self, tmp_path: Path) -> None:
        cache, clock = self._cache(tmp_path, retention=timedelta(hours=1))
        clock[0] += timedelta(hours=2)  # type: ignore[operator]
        parts = cache.ready_partitions("events")
        floor = ExportFloor(high_water=2, pending=frozenset({parts[0].id}))
        report = cache.enforce_retention({"events": floor})
        assert report.dropped == (f"events/{parts[1].id}",)
        assert report.forced == ()
        assert [p.id for p in cache.ready_partitions("events")] == [parts[0].id, parts[2].id]

    def test_not_old_enough_is_kept(self, tmp_path: Path) -> None:
        cache, clock = self._cache(tmp_path, retention=timedelta(hours=5))
        clock[0] += timedelta(hours=2)  # type: ignore[operator]
        assert cache.enforce_retention({}).dropped == ()

    def test_hard_age_cap_forces_with_warning_and_counter(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        cache, clock = self._cache(tmp_path, retention=None, max_age=timedelta(hours=3))
        clock[0] += timedelta(hours=4)  # type: ignore[operator]
        with caplog.at_level(logging.WARNING):
            report = cache.enforce_retention({"events": ExportFloor(0)})
        assert len(report.forced) == 3
        assert cache.stats.forced_drops == 3
        assert "hard cap" in caplog.text

    def test_size_cap_drops_unneeded_first(self, tmp_path: Path) -> None:
        cache, _clock = self._cache(tmp_path, retention=None)
        parts = cache.ready_partitions("events")
        total = sum(p.byte_size for p in parts)
        cache.max_bytes = total - 1
        # Partition 3 is exported by everyone, so it goes first and nothing is forced.
        floor = ExportFloor(high_water=3, pending=frozenset({parts[0].id, parts[1].id}))
        report = cache.enforce_retention({"events": floor})
        assert report.dropped == (f"events/{parts[2].id}",)
        assert report.forced == ()
        cache.max_bytes = 1
        report = cache.enforce_retention({"events": floor})
        assert len(report.forced) == 2
        assert cache.stats.forced_drops == 2


def test_retention_on_a_read_only_cache_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [T0]
    cache = make_cache(tmp_path, count=6, retention=timedelta(hours=1), clock=lambda: clock[0])
    clock[0] += timedelta(hours=2)

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    with caplog.at_level(logging.WARNING):
        report = cache.enforce_retention({})
    assert report.dropped == ()
    assert cache.stats.io_errors == len(cache.ready_partitions("events"))
    assert "could not drop" in caplog.text


def test_seal_interrupted_between_claims_of_one_partition(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 3, convs=1))
    cache.append("events", rows(3, 3, convs=1))
    directory = tmp_path / "events"
    first, second = sorted((directory / "open").iterdir())
    assert first.name.split(".")[0] == second.name.split(".")[0]  # one partition key
    os.rename(first, directory / "sealing" / f"{1:012d}.{first.name}")
    # The crash came before the second chunk was claimed.
    writer = LocalCache(tmp_path, fsync=False)
    writer.recover()
    sealed = writer.seal()
    parts = writer.ready_partitions("events")
    assert [p.seq for p in parts] == [1, 2]
    assert [p.seq for p in sealed] == [2]
    ids = [r for p in parts for r in p.open().read_all().column("row_id").to_pylist()]
    assert ids == [f"r{i:06d}" for i in range(6)]
