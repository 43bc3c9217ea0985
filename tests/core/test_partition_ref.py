"""`PartitionRef`: streaming and whole reads, with and without a native loader."""

from __future__ import annotations

from typing import cast

import pyarrow as pa
import pytest

from hypaware import PartitionRef

TABLE = pa.table({"n": pa.array(range(10), pa.int64())})


def _reader(closed: list[bool]) -> pa.RecordBatchReader:
    def batches():  # type: ignore[no-untyped-def]
        try:
            yield from TABLE.to_batches(max_chunksize=3)
        finally:
            closed.append(True)

    return pa.RecordBatchReader.from_batches(TABLE.schema, batches())


def test_read_all_without_a_loader_reads_the_opener_to_the_end() -> None:
    closed: list[bool] = []
    part = PartitionRef("p", "events", 1, 10, opener=lambda: _reader(closed))
    assert part.read_all().equals(TABLE)
    assert closed == [True]


def test_read_all_closes_the_reader_when_reading_fails() -> None:
    closed: list[bool] = []

    class Failing:
        def read_all(self) -> pa.Table:
            raise OSError("the segment ends early")

        def close(self) -> None:
            closed.append(True)

    part = PartitionRef("p", "events", 1, 10, opener=lambda: cast(pa.RecordBatchReader, Failing()))
    with pytest.raises(OSError, match="ends early"):
        part.read_all()
    assert closed == [True]


def test_read_all_prefers_the_loader() -> None:
    def opener() -> pa.RecordBatchReader:
        raise AssertionError("a partition with a loader is not streamed by read_all")

    part = PartitionRef("p", "events", 1, 10, opener=opener, loader=lambda: TABLE)
    assert part.read_all() is TABLE


def test_read_all_without_any_reader_says_so() -> None:
    with pytest.raises(ValueError, match="events/p has no reader"):
        PartitionRef("p", "events", 1, 10).read_all()


def test_the_loader_is_not_part_of_equality_or_repr() -> None:
    a = PartitionRef("p", "events", 1, 10, loader=lambda: TABLE)
    b = PartitionRef("p", "events", 1, 10)
    assert a == b
    assert "loader" not in repr(a)
