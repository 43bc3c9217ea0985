"""Partitions that fail to encode for one cause are one failure, not one per partition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

import hypaware
from hypaware import DatasetInfo, ExportBatch, ExportOptions, PartitionRef
from hypaware.export.reports import summarise

SCHEMA = pa.schema(
    [("ts", pa.timestamp("us", tz="UTC")), ("tags", pa.map_(pa.string(), pa.string()))]
)
T0 = datetime(2026, 3, 1, tzinfo=UTC)
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="ts")


def bad(pid: str, seq: int) -> PartitionRef:
    # JSONL cannot write an object holding one key twice: an encode error, the rows' fault.
    rows = pa.table(
        {"ts": [T0 + timedelta(minutes=seq)], "tags": [[("k", "a"), ("k", "b")]]}, schema=SCHEMA
    )
    return PartitionRef(id=pid, dataset="events", seq=seq, row_count=1, opener=rows.to_reader)


async def test_encode_errors_of_one_cause_group_into_one_failure(tmp_path: Path) -> None:
    config = hypaware.load_config(
        {
            "sinks": {
                "files": {
                    "writer": "@hypaware/format-jsonl",
                    "destination": "@hypaware/local-fs",
                    "config": {"root": str(tmp_path / "out")},
                }
            }
        }
    )
    (plan,) = hypaware.resolve(config)
    sink = hypaware.build(plan, config=config)
    try:
        parts = [bad(f"p{i}", i) for i in range(1, 4)]
        batch = ExportBatch(batch_id="b-1", sink="files", dataset=INFO, partitions=parts)
        result = await sink.export_batch(batch, ExportOptions())
    finally:
        await sink.close()
    assert {r.partition_id for r in result.retry_partitions} == {"p1", "p2", "p3"}
    assert all(not r.retryable and not r.sink_fault for r in result.retry_partitions)
    (failure,) = summarise("events", result.retry_partitions)
    assert failure.partitions == 3 and failure.first_ids == ["p1", "p2", "p3"]
    assert "EncodeError" in failure.reason and "p1" not in failure.reason
