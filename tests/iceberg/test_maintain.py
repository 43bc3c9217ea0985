"""Table maintenance: compaction, snapshot expiry, file cleanup, properties on old tables."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hypaware.core.types import ExportOptions
from hypaware.iceberg.compact import live_files
from hypaware.iceberg.record import read_record, writer_key

from .helpers import DATASET, DAY0, batch, build_sink, local_path, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["conversation_id"], row["ts"], row["tokens"])


async def _passes(
    sink: Any, days: int, per_day: int, *, start: int = 0, first_day: int = 0
) -> list[dict[str, Any]]:
    """One small batch per pass: `per_day` passes on each of `days` days."""
    rows: list[dict[str, Any]] = []
    seq = start
    for d in range(first_day, first_day + days):
        for k in range(per_day):
            seq += 1
            part = partition(f"p{seq}", rows_for(f"c{k % 3}", d, 4, start=10 * k, hour=k), seq=seq)
            rows += part.open().read_all().to_pylist()
            result = await sink.export_batch(batch(f"b{seq}", [part]), ExportOptions())
            assert list(result.exported) == [f"p{seq}"], result
    return rows


def _by_day(table: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    for f in live_files(table):
        out[f.partition[0]] = out.get(f.partition[0], 0) + 1
    return out


def _all_rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=_key)


async def test_closed_days_are_compacted_into_one_sorted_file_and_history_is_cut(
    tmp_path: Path,
) -> None:
    sink = build_sink(sink_config(tmp_path, maintenance={"keep_snapshots": 3, "keep_for": 0}))
    fmt = sink.table  # type: ignore[attr-defined]
    rows = await _passes(sink, days=3, per_day=6)
    table = fmt.load_table(DATASET)
    assert sorted(_by_day(table).values()) == [6, 6, 6]
    before_snapshots = len(table.metadata.snapshots)
    record_before = read_record(table, "t").of(writer_key("", "archive"))

    # The driver's clock: day 2 has not ended (plus an hour), days 0 and 1 have.
    now = DAY0 + dt.timedelta(days=2, hours=12)
    report = fmt.maintain_sync(DATASET, now=now)
    assert report.errors == ()
    assert report.days_compacted == ("2026-03-01", "2026-03-02")
    assert (report.files_replaced, report.files_written) == (12, 2)

    table.refresh()
    day0 = (DAY0.date() - dt.date(1970, 1, 1)).days
    assert _by_day(table) == {day0: 1, day0 + 1: 1, day0 + 2: 6}
    assert _all_rows(table) == sorted(rows, key=_key)
    for f in live_files(table):
        if f.partition[0] < day0 + 2:
            got = pq.read_table(local_path(f.file_path)).to_pylist()
            assert got == sorted(got, key=lambda r: (r["conversation_id"], r["ts"]))
            assert "-compact-" in f.file_path
    # The record survives expiry: it still holds every seq.
    assert read_record(table, "t").of(writer_key("", "archive")) == record_before
    assert report.snapshots_expired == before_snapshots + 2 - 3
    assert len(table.metadata.snapshots) == 3
    # The newest append still reads the replaced files (its snapshot carries the
    # record), and so do the compactions but the last: they go with them, once
    # three later passes have come.
    assert report.files_deleted > 0
    more = await _passes(sink, days=1, per_day=3, start=200, first_day=2)
    fmt.maintain_sync(DATASET, now=now)
    table.refresh()
    on_disk = {str(p) for p in (tmp_path / "warehouse").rglob("*.parquet") if "data" in p.parts}
    assert on_disk == {local_path(f.file_path) for f in live_files(table)}
    assert len(list((tmp_path / "warehouse").rglob("snap-*.avro"))) == 3

    # A respool of a committed partition is still recognised after expiry.
    again = partition("p1", rows_for("c0", 0, 4), seq=1)
    result = await sink.export_batch(batch("b-again", [again]), ExportOptions())
    assert list(result.already_held) == ["p1"]
    table.refresh()
    rows += more
    assert _all_rows(table) == sorted(rows, key=_key)

    # A second run has nothing left to compact; late rows of a closed day are.
    assert fmt.maintain_sync(DATASET, now=now).files_replaced == 0
    late = await _passes(sink, days=1, per_day=2, start=100)
    report = fmt.maintain_sync(DATASET, now=now)
    assert (report.files_replaced, report.files_written) == (3, 1)
    table.refresh()
    assert _by_day(table)[day0] == 1
    assert _all_rows(table) == sorted(rows + late, key=_key)
    await sink.close()


async def test_an_older_table_gets_the_properties_it_lacks_and_keeps_its_own(
    tmp_path: Path,
) -> None:
    sink = build_sink(sink_config(tmp_path))
    fmt = sink.table  # type: ignore[attr-defined]
    await _passes(sink, days=1, per_day=1)
    table = fmt.load_table(DATASET)
    with table.transaction() as tx:
        tx.remove_properties(
            "commit.manifest-merge.enabled", "write.metadata.previous-versions-max"
        )
        tx.set_properties({"commit.manifest.min-count-to-merge": "50"})
    report = fmt.maintain_sync(DATASET, now=DAY0)
    assert report.properties_set == (
        "commit.manifest-merge.enabled",
        "write.metadata.previous-versions-max",
    )
    table.refresh()
    assert table.properties["commit.manifest.min-count-to-merge"] == "50"
    assert table.properties["commit.manifest-merge.enabled"] == "true"
    assert fmt.maintain_sync(DATASET, now=DAY0).properties_set == ()
    await sink.close()


async def test_manifests_stay_few_as_passes_add_up(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path, maintenance={"merge_manifests_at": 4}))
    await _passes(sink, days=1, per_day=20)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    manifests = table.current_snapshot().manifests(table.io)
    assert len(manifests) <= 4
    assert len(live_files(table)) == 20
    # The manifest each merge-append wrote for its own files, then merged, is gone.
    from hypaware.iceberg.expire import reachable

    listed, _ = reachable(table)
    lists = {s.manifest_list for s in table.metadata.snapshots}
    on_disk = {f"file://{p}" for p in (tmp_path / "warehouse").rglob("metadata/*.avro")}
    assert on_disk == listed | lists
    await sink.close()


async def test_a_leftover_of_a_crashed_compaction_is_removed_once_old(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path, maintenance={"keep_for": 600}))
    fmt = sink.table  # type: ignore[attr-defined]
    await _passes(sink, days=2, per_day=3)
    now = DAY0 + dt.timedelta(days=1, hours=12)

    class Crash(Exception):
        pass

    def crash() -> None:
        raise Crash("the process died here")

    report = fmt.maintain_sync(DATASET, now=now, before_commit=crash)
    assert report.errors and "the process died here" in report.errors[0]
    # The files of the commit that never happened were removed by the failing run...
    table = fmt.load_table(DATASET)
    data = tmp_path / "warehouse"
    assert not list(data.rglob("*-compact-*.parquet"))
    # ...and a process killed outright leaves them: planted here, as it would.
    leftover = next(iter(data.rglob("*.parquet"))).with_name("archive-compact-dead-00000.parquet")
    leftover.write_bytes(b"PAR1")
    fresh = leftover.with_name("archive-compact-live-00000.parquet")
    fresh.write_bytes(b"PAR1")
    old = (DAY0 - dt.timedelta(days=1)).timestamp()
    os.utime(leftover, (old, old))
    report = fmt.maintain_sync(DATASET, now=now)
    assert report.leftovers_deleted == 1
    assert not leftover.exists()
    assert fresh.exists()  # younger than keep_for: maybe a compaction still writing
    table.refresh()
    assert _by_day(table)[(DAY0.date() - dt.date(1970, 1, 1)).days] == 1
    await sink.close()


def _day_number(day: int) -> int:
    return (DAY0.date() - dt.date(1970, 1, 1)).days + day


async def test_an_append_landing_during_a_compaction_is_kept(tmp_path: Path) -> None:
    """The compaction's commit is rebased onto the late append, and keeps its file.

    The late rows belong to the very day being compacted: a compaction that
    replaced "the day" rather than the files it read would drop them.
    """
    config = sink_config(tmp_path)
    sink = build_sink(config)
    other = build_sink(config)  # another gateway on the same table
    fmt = sink.table  # type: ignore[attr-defined]
    rows = await _passes(sink, days=2, per_day=4)
    late_part = partition("late", rows_for("c9", 0, 5, hour=23), seq=999)
    late = late_part.open().read_all().to_pylist()
    landed: list[Any] = []

    def append_meanwhile() -> None:
        landed.append(other.table.write_batch_sync(batch("late-batch", [late_part])))  # type: ignore[attr-defined]

    report = fmt.maintain_sync(
        DATASET, now=DAY0 + dt.timedelta(days=1, hours=12), before_commit=append_meanwhile
    )
    assert list(landed[0].exported) == ["late"]
    assert report.errors == () and report.compactions_lost == 0
    assert (report.files_replaced, report.files_written) == (4, 1)
    table = fmt.load_table(DATASET)
    assert _all_rows(table) == sorted(rows + late, key=_key)
    assert _by_day(table) == {_day_number(0): 2, _day_number(1): 4}
    # The record still holds the late partition: it is not written twice.
    again = await sink.export_batch(batch("late-again", [late_part]), ExportOptions())
    assert list(again.already_held) == ["late"]
    # The next run compacts the late file into the day's.
    report = fmt.maintain_sync(DATASET, now=DAY0 + dt.timedelta(days=1, hours=12))
    table.refresh()
    assert _by_day(table) == {_day_number(0): 1, _day_number(1): 4}
    assert _all_rows(table) == sorted(rows + late, key=_key)
    await sink.close()
    await other.close()


async def test_two_compactions_of_one_day_double_nothing(tmp_path: Path) -> None:
    config = sink_config(tmp_path)
    sink = build_sink(config)
    other = build_sink(config)
    fmt = sink.table  # type: ignore[attr-defined]
    rows = await _passes(sink, days=2, per_day=4)
    now = DAY0 + dt.timedelta(days=1, hours=12)
    theirs: list[Any] = []

    def the_other_compacts_first() -> None:
        theirs.append(other.table.maintain_sync(DATASET, now=now))  # type: ignore[attr-defined]

    mine = fmt.maintain_sync(DATASET, now=now, before_commit=the_other_compacts_first)
    assert theirs[0].files_replaced == 4
    assert mine.compactions_lost == 1 and mine.files_replaced == 0
    assert mine.errors == ()
    table = fmt.load_table(DATASET)
    assert _all_rows(table) == sorted(rows, key=_key)
    assert _by_day(table) == {_day_number(0): 1, _day_number(1): 4}
    # The loser's files were deleted: only the winner's compacted file is on disk.
    compacted = list((tmp_path / "warehouse").rglob("*-compact-*.parquet"))
    assert [str(p) for p in compacted] == [
        local_path(f.file_path) for f in live_files(table) if "-compact-" in f.file_path
    ]
    await sink.close()
    await other.close()


async def test_expiry_keeps_the_chain_to_the_record_and_young_snapshots(tmp_path: Path) -> None:
    from hypaware.iceberg.expire import LEGACY_GRACE_MS, plan_expiry

    sink = build_sink(sink_config(tmp_path))
    fmt = sink.table  # type: ignore[attr-defined]
    await _passes(sink, days=2, per_day=3)
    table = fmt.load_table(DATASET)
    fmt.maintain_sync(DATASET, now=DAY0 + dt.timedelta(days=5))  # two compactions on top
    table.refresh()
    snaps = table.metadata.snapshots
    newest = max(s.timestamp_ms for s in snaps)
    ops = [s.summary.operation.value for s in snaps]
    assert ops[-2:] == ["overwrite", "overwrite"]

    later = newest + LEGACY_GRACE_MS + 1
    plan = plan_expiry(table, keep_snapshots=1, keep_for_ms=0, now_ms=later)
    # The current snapshot and back through the compactions to the last append,
    # whose summary carries the record.
    kept = [s for s in snaps if s.snapshot_id in plan.keep]
    assert [s.summary.operation.value for s in kept] == ["append", "overwrite", "overwrite"]
    assert "hypaware.writers" in kept[0].summary.additional_properties
    # Young snapshots are all kept.
    young = plan_expiry(table, keep_snapshots=1, keep_for_ms=10**9, now_ms=newest)
    assert young.expire == frozenset()
    await sink.close()


async def test_expiring_many_snapshots_makes_the_tables_metadata_a_few_times_not_per_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyiceberg's transaction deep-copies the metadata on every read; expiring by id
    read it twice per snapshot, which grew a maintenance run with the table's history."""
    import pyiceberg.table

    from hypaware.iceberg.expire import expire_snapshots, plan_expiry

    sink = build_sink(sink_config(tmp_path))
    fmt = sink.table  # type: ignore[attr-defined]
    await _passes(sink, days=1, per_day=12)
    table = fmt.load_table(DATASET)
    newest = max(s.timestamp_ms for s in table.metadata.snapshots)
    plan = plan_expiry(table, keep_snapshots=1, keep_for_ms=0, now_ms=newest + 1)
    assert len(plan.expire) >= 10

    made: list[int] = []
    real = pyiceberg.table.update_table_metadata

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pyiceberg.table, "update_table_metadata", counted)
    removed, _ = expire_snapshots(table, plan, delete=table.io.delete)
    assert removed == len(plan.expire)
    assert len(made) <= 3, f"{len(made)} metadata copies to expire {removed} snapshots"
    table.refresh()
    assert {s.snapshot_id for s in table.metadata.snapshots} == plan.keep
    await sink.close()
