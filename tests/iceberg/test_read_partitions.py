"""A batch's partitions are read on several cores at once, their rows in batch order."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pyarrow as pa
import pytest

from hypaware import DatasetInfo, ExportBatch, PartitionRef
from hypaware.core.workers import cores
from hypaware.iceberg.datafiles import read_partitions

SCHEMA = pa.schema([("row_id", pa.int64())])
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="row_id")


def part(pid: str, ids: list[int], gate: threading.Barrier | None = None) -> PartitionRef:
    def opener() -> pa.RecordBatchReader:
        def batches() -> Iterator[pa.RecordBatch]:
            if gate is not None:
                gate.wait()  # passes only when the other partition is being read too
            if pid == "bad":
                raise OSError("segment is unreadable")
            yield pa.record_batch([ids], schema=SCHEMA)

        return pa.RecordBatchReader.from_batches(SCHEMA, batches())

    return PartitionRef(id=pid, dataset="events", seq=0, row_count=len(ids), opener=opener)


def batch(parts: list[PartitionRef]) -> ExportBatch:
    return ExportBatch(batch_id="b", sink="lake", dataset=INFO, partitions=parts)


@pytest.mark.skipif(cores() < 2, reason="one core: partitions are read one at a time")
def test_two_partitions_are_read_at_once() -> None:
    gate = threading.Barrier(2, timeout=20)
    read = read_partitions(batch([part("a", [1, 2], gate), part("b", [3], gate)]), SCHEMA, "t")
    assert read.ok == ["a", "b"] and read.failed == []
    assert read.data is not None and read.data.column("row_id").to_pylist() == [1, 2, 3]


def test_rows_keep_the_batch_order_and_unreadable_partitions_are_set_aside() -> None:
    parts = [part(f"p{i}", list(range(i * 10, i * 10 + i))) for i in range(12)]
    parts.insert(5, part("bad", [999]))
    read = read_partitions(batch(parts), SCHEMA, "sink 'lake'")
    assert read.ok == [f"p{i}" for i in range(12)]
    assert [f.partition_id for f in read.failed] == ["bad"]
    assert "unreadable" in read.failed[0].reason and "'bad'" in read.failed[0].reason
    expected = [r for i in range(12) for r in range(i * 10, i * 10 + i)]
    assert read.data is not None and read.data.column("row_id").to_pylist() == expected
