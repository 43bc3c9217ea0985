"""Batch-level files: one file per day per batch, reads per partition, and exactly once
across failed batches, lost acks and partitions that cannot be read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypaware import ExportBatch, ExportOptions, PartitionRef, TransientStoreError
from hypaware.blob.batch_index import INDEX_FILE, BatchIndex
from hypaware.blob.object_names import batch_stem
from hypaware.blob.sink import BlobSink
from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder

from .data import RICH_SCHEMA, TIME, dataset, rich_rows
from .test_blob_sink import Crash, FaultyStore, local_store

OPTS = ExportOptions()
DAY0 = datetime(2026, 3, 1, tzinfo=UTC)


class Opens:
    """Counts how often each partition is opened."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()


def day_rows(start: int, n: int, days: Iterable[int], *, nulls: bool = False) -> pa.RecordBatch:
    """`n` rows with ids from `start`, spread over `days` (day numbers after DAY0)."""
    days = list(days)
    rows = rich_rows(start, n)
    times = [DAY0 + timedelta(days=days[i % len(days)], minutes=i) for i in range(n)]
    col = pa.array(times, RICH_SCHEMA.field(TIME).type)
    if nulls:
        col = pa.array([None if i % 4 == 3 else t for i, t in enumerate(times)], col.type)
    return rows.set_column(1, TIME, col)


def part(
    pid: str,
    rows: pa.RecordBatch,
    opens: Opens,
    *,
    hint: tuple[int, int] | None = None,
    seq: int = 0,
    broken: bool = False,
) -> PartitionRef:
    def opener() -> pa.RecordBatchReader:
        opens.count[pid] += 1
        if broken:
            raise OSError(f"{pid}: segment unreadable")
        return pa.Table.from_batches([rows]).to_reader(max_chunksize=7)

    lo = hi = None
    if hint is not None:
        lo, hi = DAY0 + timedelta(days=hint[0]), DAY0 + timedelta(days=hint[1], hours=23)
    return PartitionRef(
        id=pid,
        dataset="events",
        seq=seq,
        row_count=rows.num_rows,
        min_time=lo,
        max_time=hi,
        opener=opener,
    )


def make_batch(batch_id: str, parts: list[PartitionRef]) -> ExportBatch:
    return ExportBatch(batch_id=batch_id, sink="archive", dataset=dataset(), partitions=parts)


def sink_at(tmp_path: Path, store: Any = None, **encoder: Any) -> BlobSink:
    return BlobSink(
        "archive",
        store if store is not None else local_store(tmp_path),
        ParquetEncoder(ParquetConfig(**encoder)),
        BatchIndex(tmp_path / "state" / INDEX_FILE),
    )


def read_ids(tmp_path: Path) -> Counter[int]:
    paths = sorted((tmp_path / "out").rglob("*.parquet"))
    if not paths:
        return Counter()
    table = pa.concat_tables(pq.read_table(p, schema=RICH_SCHEMA) for p in paths)
    return Counter(table.column("row_id").to_pylist())


async def test_partitions_with_time_hints_are_read_once_each(tmp_path: Path) -> None:
    opens = Opens()
    parts = [
        part(f"p{i}", day_rows(i * 10, 10, [i % 3]), opens, hint=(i % 3, i % 3)) for i in range(9)
    ]
    sink = sink_at(tmp_path)
    result = await sink.export_batch(make_batch("b", parts), OPTS)
    assert len(result.exported) == 9 and result.rows_written == 90
    assert result.files_written == 3
    assert set(opens.count.values()) == {1}
    assert read_ids(tmp_path) == Counter(range(90))
    await sink.close()


async def test_partitions_without_hints_or_with_wrong_ones_still_land_once(
    tmp_path: Path,
) -> None:
    opens = Opens()
    parts = [
        part("unhinted", day_rows(0, 30, [0, 1, 2], nulls=True), opens),
        # Claims day 1 only; has rows on days 1 and 3.
        part("liar", day_rows(100, 20, [1, 3]), opens, hint=(1, 1)),
        part("honest", day_rows(200, 10, [2]), opens, hint=(2, 2)),
    ]
    sink = sink_at(tmp_path)
    result = await sink.export_batch(make_batch("b", parts), OPTS)
    assert set(result.exported) == {"unhinted", "liar", "honest"}
    expected = Counter([*range(30), *range(100, 120), *range(200, 210)])
    assert read_ids(tmp_path) == expected
    days = {p.parent.name for p in (tmp_path / "out").rglob("*.parquet")}
    assert days == {
        "date=2026-03-01",
        "date=2026-03-02",
        "date=2026-03-03",
        "date=2026-03-04",
        "date=__HIVE_DEFAULT_PARTITION__",
    }
    await sink.close()


async def test_an_unreadable_partition_is_left_out_of_the_files(tmp_path: Path) -> None:
    opens = Opens()
    parts = [
        part("a", day_rows(0, 20, [0]), opens, hint=(0, 0)),
        part("bad", day_rows(100, 20, [0]), opens, hint=(0, 0), broken=True),
        part("c", day_rows(200, 20, [0, 1]), opens, hint=(0, 1)),
    ]
    sink = sink_at(tmp_path, row_group_size=5, target_file_size=1)
    result = await sink.export_batch(make_batch("b", parts), OPTS)
    assert set(result.exported) == {"a", "c"}
    (retry,) = result.retry_partitions
    assert retry.partition_id == "bad" and "segment unreadable" in retry.reason
    assert read_ids(tmp_path) == Counter([*range(20), *range(200, 220)])
    # What the index says the batch holds is what its files hold.
    stem = batch_stem("archive", "events", "b")
    assert sink.index.lookup([stem])[stem].partitions == {"a", "c"}
    await sink.close()


async def test_a_failed_batch_is_deleted_before_its_partitions_are_written_again(
    tmp_path: Path,
) -> None:
    opens = Opens()
    parts = [part(f"p{i}", day_rows(i * 10, 10, [i]), opens, hint=(i, i)) for i in range(4)]
    store = FaultyStore(local_store(tmp_path))
    sink = sink_at(tmp_path, store)
    # Two objects land, then the destination fails: nothing is acknowledged.
    original = store.put

    async def failing_put(path: str, data: Any, *, if_absent: bool = False) -> Any:
        if store.puts >= 2:
            raise TransientStoreError("connection reset")
        return await original(path, data, if_absent=if_absent)

    store.put = failing_put  # type: ignore[method-assign]
    first = await sink.export_batch(make_batch("b1", parts), OPTS)
    assert first.exported == () and len(first.retry_partitions) == 4
    assert 20 <= sum(read_ids(tmp_path).values()) < 40  # the failed batch's leftovers
    await sink.close()

    # After a restart the driver sends the partitions again, in a new batch.
    again = sink_at(tmp_path)
    second = await again.export_batch(make_batch("b2", parts), OPTS)
    assert len(second.exported) == 4
    assert read_ids(tmp_path) == Counter(range(40))
    assert again.index.open_batches() == []
    await again.close()


async def test_partitions_whose_ack_was_lost_are_not_written_twice(tmp_path: Path) -> None:
    opens = Opens()
    parts = [part(f"p{i}", day_rows(i * 10, 10, [0]), opens, hint=(0, 0)) for i in range(3)]
    sink = sink_at(tmp_path)
    assert len((await sink.export_batch(make_batch("b1", parts), OPTS)).exported) == 3
    # The ack never reached the driver: the partitions come back in another batch.
    extra = part("p3", day_rows(30, 10, [0]), opens, hint=(0, 0))
    result = await sink.export_batch(make_batch("b2", [*parts, extra]), OPTS)
    assert set(result.exported) == {"p0", "p1", "p2", "p3"}
    assert result.rows_written == 10
    assert read_ids(tmp_path) == Counter(range(40))
    await sink.close()


async def test_the_index_survives_a_restart_and_a_crash_keeps_the_batch_open(
    tmp_path: Path,
) -> None:
    opens = Opens()
    parts = [part(f"p{i}", day_rows(i * 10, 10, [i]), opens, hint=(i, i)) for i in range(3)]
    store = FaultyStore(local_store(tmp_path))
    store.crash_after_puts = 1
    sink = sink_at(tmp_path, store)
    with pytest.raises(Crash):
        await sink.export_batch(make_batch("b1", parts), OPTS)
    index = BatchIndex(tmp_path / "state" / INDEX_FILE)
    (record,) = index.open_batches()
    assert record.batch_id == "b1"
    # Recorded before its object: the one that landed, and at most the next.
    assert 1 <= len(record.day_dirs) <= 2
    assert record.day_dirs <= {f"events/date=2026-03-0{d}" for d in (1, 2, 3)}
    index.close()
    # The "crashed" sink still holds its own handle on the index; let it go.
    await sink.close()


# ------------------------------------------------------------------ property


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    specs = []
    next_id = 0
    for i in range(draw(st.integers(1, 6))):
        days = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True))
        n = draw(st.integers(0, 25))
        hint_kind = draw(st.sampled_from(["none", "true", "wrong"]))
        hint = None
        if hint_kind == "true":
            hint = (min(days), max(days))
        elif hint_kind == "wrong":
            hint = (min(days), min(days))
        specs.append(
            {
                "pid": f"p{i}",
                "start": next_id,
                "n": n,
                "days": days,
                "nulls": draw(st.booleans()),
                "hint": hint,
                "broken": draw(st.integers(0, 9)) == 0,
            }
        )
        next_id += n
    return specs


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(specs=batches(), rollover=st.booleans(), resend=st.booleans())
def test_every_exported_row_lands_exactly_once_in_its_utc_day(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[dict[str, Any]],
    rollover: bool,
    resend: bool,
) -> None:
    import asyncio

    tmp_path = tmp_path_factory.mktemp("prop")
    opens = Opens()
    parts = [
        part(
            s["pid"],
            day_rows(s["start"], s["n"], s["days"], nulls=s["nulls"]),
            opens,
            hint=s["hint"],
            broken=s["broken"],
        )
        for s in specs
    ]
    encoder = {"row_group_size": 4, "target_file_size": 1} if rollover else {}

    async def run() -> Any:
        sink = sink_at(tmp_path, **encoder)
        result = await sink.export_batch(make_batch("b", parts), OPTS)
        if resend:
            # The same batch again (a crash before the ack), with other file sizes.
            await sink.close()
            sink = sink_at(tmp_path)
            result = await sink.export_batch(make_batch("b", parts), ExportOptions(attempt=2))
        await sink.close()
        return result

    result = asyncio.run(run())
    good = [s for s in specs if not s["broken"]]
    assert set(result.exported) == {s["pid"] for s in good}
    assert {r.partition_id for r in result.retry_partitions} == {
        s["pid"] for s in specs if s["broken"]
    }
    expected = Counter(i for s in good for i in range(s["start"], s["start"] + s["n"]))
    assert read_ids(tmp_path) == expected
    assert result.rows_written == sum(expected.values())
    for path in (tmp_path / "out").rglob("*.parquet"):
        table = pq.read_table(path, schema=RICH_SCHEMA)
        days = {
            "__HIVE_DEFAULT_PARTITION__" if t is None else t.astimezone(UTC).date().isoformat()
            for t in table.column(TIME).to_pylist()
        }
        assert days == {path.parent.name.removeprefix("date=")}
