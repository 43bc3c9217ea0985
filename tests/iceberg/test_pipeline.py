"""The read-and-write pipeline: partitions read on several cores at once, days written
as soon as their partitions are read, and the same day files as reading the batch first."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware import PartitionRef, RetryPartition
from hypaware.core.workers import cores
from hypaware.iceberg import day_layout
from hypaware.iceberg.pipeline import ReadBatch, day_clusters, read_partition, run_pipeline

SCHEMA = pa.schema(
    [("row_id", pa.int64()), ("key", pa.string()), ("ts", pa.timestamp("us", "UTC"))]
)
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)


def part(
    pid: str,
    rows: list[tuple[int, str | None, dt.datetime | None]],
    *,
    gate: threading.Barrier | None = None,
    bad: bool = False,
    ranged: bool = True,
) -> PartitionRef:
    times = [t for _r, _k, t in rows if t is not None]

    def opener() -> pa.RecordBatchReader:
        def batches() -> Iterator[pa.RecordBatch]:
            if gate is not None:
                gate.wait()  # passes only when another partition is being read too
            if bad:
                raise OSError("segment is unreadable")
            yield pa.RecordBatch.from_pylist(
                [{"row_id": r, "key": k, "ts": t} for r, k, t in rows], schema=SCHEMA
            )

        return pa.RecordBatchReader.from_batches(SCHEMA, batches())

    return PartitionRef(
        id=pid,
        dataset="events",
        seq=0,
        row_count=len(rows),
        min_time=min(times) if times and ranged else None,
        max_time=max(times) if times and ranged else None,
        opener=opener,
    )


Days = dict[int | None, list[int]]


def collect() -> tuple[Days, Callable[..., None]]:
    days: Days = {}
    lock = threading.Lock()

    def write_day(data: pa.Table, rows: day_layout.DayRows, whole: Callable[[], pa.Table]) -> None:
        got = pa.Table.from_batches(list(day_layout.day_batches(data, rows, SCHEMA, whole=whole)))
        with lock:
            assert rows.day not in days, f"day {rows.day} written twice"
            days[rows.day] = got.column("row_id").to_pylist()

    return days, write_day


def reference(parts: list[PartitionRef]) -> Days:
    """The days as the whole batch read first and laid out at once would make them."""
    tables = [pa.Table.from_batches(list(p.open()), schema=SCHEMA) for p in parts]
    data = pa.concat_tables(tables)
    out: Days = {}
    for rows in day_layout.plan_days(data, "ts", "key"):
        got = pa.Table.from_batches(list(day_layout.day_batches(data, rows, SCHEMA)))
        out[rows.day] = got.column("row_id").to_pylist()
    return out


def run(parts: list[PartitionRef], workers: int | None = None) -> tuple[Days, ReadBatch]:
    days, write_day = collect()
    read = run_pipeline(
        parts, SCHEMA, "t", time_column="ts", lookup_key="key", write_day=write_day, workers=workers
    )
    return days, read


@pytest.mark.skipif(cores() < 2, reason="one core: partitions are read one at a time")
def test_two_partitions_are_read_at_once() -> None:
    gate = threading.Barrier(2, timeout=20)
    t = START
    parts = [part("a", [(1, "k", t), (2, "k", t)], gate=gate), part("b", [(3, "k", t)], gate=gate)]
    days, read = run(parts)
    assert read.ok == ["a", "b"] and read.failed == [] and read.rows == 3
    assert days == {day_layout.day_numbers(pa.array([t])).to_pylist()[0]: [1, 2, 3]}


@pytest.mark.skipif(cores() < 2, reason="one core: nothing runs beside a read")
def test_a_day_is_written_while_later_partitions_are_still_read() -> None:
    # The second day's partition cannot finish reading until the first day is
    # being written: only a pipeline that writes before reading all gets through.
    writing = threading.Event()
    day1, day2 = START, START + dt.timedelta(days=1)
    first = part("a", [(1, "k", day1)])
    blocked = part("b", [(2, "k", day2)])
    inner = blocked.opener
    assert inner is not None

    def waits_for_the_first_day() -> pa.RecordBatchReader:
        assert writing.wait(20), "the first day was not written while a partition was read"
        return inner()

    blocked = PartitionRef(
        id="b",
        dataset="events",
        seq=0,
        row_count=1,
        min_time=day2,
        max_time=day2,
        opener=waits_for_the_first_day,
    )
    days, write_day = collect()

    def signalling(data: pa.Table, rows: day_layout.DayRows, whole: Callable[[], pa.Table]) -> None:
        writing.set()
        write_day(data, rows, whole)

    read = run_pipeline(
        [blocked, first], SCHEMA, "t", time_column="ts", lookup_key="key", write_day=signalling
    )
    assert read.ok == ["b", "a"] and sorted(v for d in days.values() for v in d) == [1, 2]


def test_unreadable_partitions_are_set_aside_and_the_rest_written() -> None:
    parts = [part(f"p{i}", [(i * 10 + j, f"k{j}", START) for j in range(i)]) for i in range(12)]
    parts.insert(5, part("bad", [(999, "k", START)], bad=True))
    days, read = run(parts)
    assert read.ok == [f"p{i}" for i in range(12)]
    failed = read.failed
    assert [f.partition_id for f in failed] == ["bad"]
    assert "unreadable" in failed[0].reason and "'bad'" in failed[0].reason
    assert days == reference([p for p in parts if p.id != "bad"])


def test_a_write_error_stops_the_pipeline_and_is_raised() -> None:
    parts = [part(f"p{i}", [(i, "k", START + dt.timedelta(days=i))]) for i in range(6)]

    def fails(data: pa.Table, rows: day_layout.DayRows, whole: Callable[[], pa.Table]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_pipeline(parts, SCHEMA, "t", time_column="ts", lookup_key="key", write_day=fails)


def test_day_clusters_never_split_a_day() -> None:
    d = [START + dt.timedelta(days=i, hours=1) for i in range(5)]
    parts = [
        part("a", [(1, "k", d[0])]),
        part("b", [(2, "k", d[2]), (3, "k", d[3])]),
        part("c", [(4, "k", d[0])]),
        part("d", [(5, "k", d[3])]),
        part("e", [(6, "k", d[4])]),
    ]
    assert day_clusters(parts) == [[0, 2], [1, 3], [4]]
    parts.append(part("f", [(7, "k", d[1])], ranged=False))
    assert day_clusters(parts) == [[0, 1, 2, 3, 4, 5]]


row = st.tuples(
    st.sampled_from(["a", "b", "c", None]),
    st.one_of(
        st.none(), st.integers(0, 4 * 24 * 60).map(lambda m: START + dt.timedelta(minutes=m))
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(row, min_size=0, max_size=12), min_size=1, max_size=8),
    st.booleans(),
    st.sampled_from([1, 2, 3]),
)
def test_same_days_as_reading_the_whole_batch_first(
    shapes: list[list[tuple[str | None, dt.datetime | None]]], ranged: bool, workers: int
) -> None:
    ids = iter(range(10_000))
    parts = [
        part(f"p{i}", [(next(ids), k, t) for k, t in rows], ranged=ranged)
        for i, rows in enumerate(shapes)
    ]
    days, read = run(parts, workers=workers)
    want = reference(parts)
    assert read.rows == sum(len(s) for s in shapes)
    assert days.keys() == want.keys()
    for day, rows in want.items():
        if day is None:
            # Null-time rows are gathered from every cluster: the same rows, and
            # each key's rows together in key order (ties have no order to keep).
            assert sorted(days[day]) == sorted(rows)
        else:
            assert days[day] == rows, f"day {day}"


def _loaded(pid: str, load: Callable[[], pa.Table]) -> PartitionRef:
    def opener() -> pa.RecordBatchReader:
        raise AssertionError("a partition with a loader is read whole, not streamed")

    return PartitionRef(id=pid, dataset="events", seq=0, row_count=1, opener=opener, loader=load)


def test_a_partition_with_a_loader_is_read_whole_and_conformed() -> None:
    nullable = pa.schema([f.with_nullable(True) for f in SCHEMA])
    rows = pa.Table.from_pylist([{"row_id": 1, "key": "a", "ts": START}], schema=nullable)
    result = read_partition(_loaded("p", lambda: rows), SCHEMA, "table t")
    assert isinstance(result, pa.Table)
    assert result.schema.equals(SCHEMA, check_metadata=True)
    assert result.to_pylist() == rows.to_pylist()


def test_a_loader_that_fails_sets_the_partition_aside_for_a_retry() -> None:
    def load() -> pa.Table:
        raise OSError("segment is unreadable")

    result = read_partition(_loaded("p", load), SCHEMA, "table t")
    assert isinstance(result, RetryPartition)
    assert result.retryable
    assert "partition 'p': cannot read" in result.reason
    assert "segment is unreadable" in result.reason


def test_rows_the_table_cannot_hold_are_set_aside_for_good() -> None:
    wrong = pa.table({"row_id": ["x"], "key": ["a"], "ts": [START]})
    result = read_partition(_loaded("p", lambda: wrong), SCHEMA, "table t")
    assert isinstance(result, RetryPartition)
    assert not result.retryable
    assert "'row_id'" in result.reason


def test_a_cast_that_fails_otherwise_is_set_aside_for_a_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hypaware.iceberg.pipeline as pipeline

    def no_memory(table: pa.Table, target: pa.Schema, *, what: str) -> pa.Table:
        raise pa.ArrowMemoryError("malloc of 1 GiB failed")

    monkeypatch.setattr(pipeline, "conform_table", no_memory)
    rows = pa.Table.from_pylist([{"row_id": 1, "key": "a", "ts": START}], schema=SCHEMA)
    result = read_partition(_loaded("p", lambda: rows), SCHEMA, "table t")
    assert isinstance(result, RetryPartition)
    assert result.retryable
    assert "malloc" in result.reason


def _pieces_of(
    parts: list[PartitionRef], split_rows: int
) -> list[tuple[int | None, int, int, int]]:
    handed: list[tuple[int | None, int, int, int]] = []
    lock = threading.Lock()

    def write_day(data: pa.Table, rows: day_layout.DayRows, whole: Callable[[], pa.Table]) -> None:
        with lock:
            handed.append((rows.day, rows.piece, rows.pieces, rows.rows))

    run_pipeline(
        parts,
        SCHEMA,
        "t",
        time_column="ts",
        lookup_key="key",
        write_day=write_day,
        split_rows=split_rows,
    )
    return sorted(handed, key=lambda h: (h[0] is None, h[0] or 0, h[1]))


def test_only_a_day_of_more_than_split_rows_is_handed_over_in_two_pieces() -> None:
    day0, day1 = START, START + dt.timedelta(days=1)
    parts = [
        part("a", [(i, "k", day0) for i in range(4)]),
        part("b", [(10 + i, "k", day1) for i in range(5)]),
    ]
    d0, d1 = (day_layout.day_numbers(pa.array([t])).to_pylist()[0] for t in (day0, day1))
    assert _pieces_of(parts, split_rows=4) == [(d0, 0, 1, 4), (d1, 0, 2, 2), (d1, 1, 2, 3)]


def test_the_null_day_is_never_split() -> None:
    parts = [part("a", [(i, "k", None) for i in range(6)], ranged=False)]
    assert _pieces_of(parts, split_rows=2) == [(None, 0, 1, 6)]
