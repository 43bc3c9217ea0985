"""Building Iceberg sinks from config and making cache-like partitions for tests."""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import hypaware
from hypaware.blob.table_sink import TableSink
from hypaware.core.types import DatasetInfo, ExportBatch, PartitionRef

SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("conversation_id", pa.string()),
        ("role", pa.string()),
        ("tokens", pa.int64()),
    ]
)
DATASET = DatasetInfo(
    name="messages", schema=SCHEMA, time_column="ts", lookup_key="conversation_id"
)
DAY0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def sink_config(
    root: Path,
    *,
    state: Path | None = None,
    destination: str = "@hypaware/local-fs",
    name: str = "archive",
    **config: Any,
) -> dict[str, Any]:
    cfg: dict[str, Any] = {"namespace": "hyp"}
    if destination == "@hypaware/local-fs":
        cfg["root"] = str(root / "warehouse")
    cfg.update(config)
    return {
        "state_dir": str(state or root / "state"),
        "sinks": {
            name: {
                "writer": "@hypaware/format-iceberg",
                "destination": destination,
                "config": cfg,
            }
        },
    }


def build_sink(document: Mapping[str, Any]) -> TableSink:
    """resolve + build with the entry-point registry, as the daemon does."""
    config = hypaware.load_config(document)
    (plan,) = hypaware.resolve(config)
    sink = hypaware.build(plan, config=config)
    assert isinstance(sink, TableSink)
    return sink


def rows_for(
    conversation: str, day: int, count: int, *, start: int = 0, hour: int = 0
) -> list[dict[str, Any]]:
    base = DAY0 + dt.timedelta(days=day, hours=hour)
    return [
        {
            "ts": base + dt.timedelta(seconds=7 * (start + i)),
            "conversation_id": conversation,
            "role": "user" if i % 2 == 0 else "assistant",
            "tokens": start + i,
        }
        for i in range(count)
    ]


def partition(
    pid: str,
    rows: Sequence[dict[str, Any]],
    *,
    seq: int = 0,
    schema: pa.Schema = SCHEMA,
    dataset: str = "messages",
    opener: Callable[[], pa.RecordBatchReader] | None = None,
) -> PartitionRef:
    table = pa.Table.from_pylist(list(rows), schema=schema)
    return PartitionRef(
        id=pid,
        dataset=dataset,
        # A cache's seqs are unique per dataset (the table's record keeps them):
        # one per id unless a test says otherwise.
        seq=seq or zlib.crc32(pid.encode()) % 1_000_000_000 + 1,
        row_count=table.num_rows,
        opener=opener or (lambda: table.to_reader(max_chunksize=1000)),
    )


def batch(
    batch_id: str,
    parts: Iterable[PartitionRef],
    *,
    dataset: DatasetInfo = DATASET,
    sink: str = "archive",
    cache: str = "",
) -> ExportBatch:
    """A batch from the cache `cache` (an identity; "" is the sink's only writer)."""
    return ExportBatch(
        batch_id=batch_id,
        sink=sink,
        dataset=dataset,
        partitions=tuple(parts),
        cache_identity=cache,
    )


def local_path(location: str) -> str:
    assert location.startswith("file://"), location
    return location[len("file://") :]
