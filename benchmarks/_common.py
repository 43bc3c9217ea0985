"""Shared pieces of the export benchmarks: the batch, the sink, the timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

import hypaware
from hypaware import DatasetInfo, ExportBatch, PartitionRef, load_config

from .datagen import SCHEMA, day_slices

ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"


def day_batch(tbl: pa.Table, *, sink: str = "bench", batch_rows: int = 65_536) -> ExportBatch:
    """`tbl` as the cache would hand it over: one partition per UTC day, read as streams."""
    dataset = DatasetInfo(
        name="events", schema=SCHEMA, time_column="ts", lookup_key="conversation_id"
    )
    parts = []
    for i, day in enumerate(day_slices(tbl)):

        def opener(day: pa.Table = day) -> pa.RecordBatchReader:
            return day.to_reader(max_chunksize=batch_rows)

        parts.append(
            PartitionRef(
                id=f"day-{i}", dataset="events", seq=i, row_count=day.num_rows, opener=opener
            )
        )
    return ExportBatch(batch_id="bench-1", sink=sink, dataset=dataset, partitions=parts)


def build_sink(destination: str, config: Mapping[str, Any], state_dir: Path) -> Any:
    """A BlobSink with the Parquet encoder, built from config like a user's."""
    doc = {
        "state_dir": str(state_dir),
        "sinks": {
            "bench": {
                "writer": "@hypaware/format-parquet",
                "destination": destination,
                "config": {"compression": COMPRESSION, "row_group_size": ROW_GROUP_SIZE, **config},
            }
        },
    }
    loaded = load_config(doc)
    (plan,) = hypaware.resolve(loaded)
    return hypaware.build(plan, config=loaded)


@contextmanager
def timer(into: list[float]) -> Iterator[None]:
    start = time.perf_counter()
    yield
    into.append(time.perf_counter() - start)


def best(times: list[float]) -> float:
    return min(times)


def report(title: str, rows: int, ours: list[float], theirs: list[float], label: str, target: float) -> bool:
    a, b = best(ours), best(theirs)
    ratio = a / b
    ok = ratio <= target
    print(f"{title}: {rows:,} rows, best of {len(ours)}")
    print(f"  hypaware             {a:8.3f} s   {rows / a:>12,.0f} rows/s")
    print(f"  {label:<20} {b:8.3f} s   {rows / b:>12,.0f} rows/s")
    print(f"  ratio                {ratio:8.3f}     target <= {target:.2f}  {'OK' if ok else 'OVER'}")
    return ok


def run_repeated(repeat: int, *steps: Callable[[], None]) -> None:
    """Run the steps in turn, `repeat` times, alternating so drift hits both sides alike."""
    for _ in range(repeat):
        for step in steps:
            step()
