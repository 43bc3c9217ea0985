"""Shared pieces of the export benchmarks: the batch, the sink, the timing."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import hypaware
from hypaware import DatasetInfo, ExportBatch, PartitionRef, load_config
from hypaware.plugins.format_parquet import ParquetConfig

from .datagen import SCHEMA, day_slices

ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"
# The plain side writes with the encoder's dictionary limit too, so that a
# ratio measures hypaware's work, not a different Parquet setting.
DICTIONARY_PAGE_SIZE = ParquetConfig().dictionary_page_size


def plain_write_table(tbl: pa.Table, where: Any) -> None:
    """The plain side of a benchmark: ``pq.write_table`` with the sink's Parquet settings."""
    import pyarrow.parquet as pq

    pq.write_table(
        tbl,
        where,
        compression=COMPRESSION,
        row_group_size=ROW_GROUP_SIZE,
        dictionary_pagesize_limit=DICTIONARY_PAGE_SIZE,
    )


def day_batch(tbl: pa.Table, *, sink: str = "bench", batch_rows: int = 65_536) -> ExportBatch:
    """`tbl` as the cache would hand it over: one partition per UTC day, read as streams."""
    dataset = DatasetInfo(
        name="events", schema=SCHEMA, time_column="ts", lookup_key="conversation_id"
    )
    parts = []
    for i, day in enumerate(day_slices(tbl)):

        def opener(day: pa.Table = day) -> pa.RecordBatchReader:
            return day.to_reader(max_chunksize=batch_rows)

        times = day.column("ts")
        parts.append(
            PartitionRef(
                id=f"day-{i}",
                dataset="events",
                seq=i,
                row_count=day.num_rows,
                min_time=pc.min(times).as_py(),
                max_time=pc.max(times).as_py(),
                opener=opener,
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


def quiet_disk() -> None:
    """Write back every dirty page before a timed step, so no step pays for the one before.

    Without it, a step that fsyncs (the cache's seal, a commit) also waits
    for whatever the previous step left dirty: on ext4 one fsync commits the
    journal, and with it the data of every file written before.
    """
    os.sync()


@contextmanager
def timer(into: list[float], cpu: list[float] | None = None) -> Iterator[None]:
    """Append the wall time of the block to `into` (and its CPU time, all threads, to `cpu`)."""
    start, start_cpu = time.perf_counter(), _cpu_seconds()
    yield
    into.append(time.perf_counter() - start)
    if cpu is not None:
        cpu.append(_cpu_seconds() - start_cpu)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def best(times: list[float]) -> float:
    return min(times)


def report(
    title: str,
    rows: int,
    ours: list[float],
    theirs: list[float],
    label: str,
    target: float,
    cpu: tuple[list[float], list[float]] | None = None,
) -> bool:
    """Print best wall times, rows/s and the ratio (and CPU seconds when measured)."""
    a, b = best(ours), best(theirs)
    ratio = a / b
    ok = ratio <= target
    verdict = "OK" if ok else "OVER"
    print(f"{title}: {rows:,} rows, best of {len(ours)} (wall clock)")
    extra = ("", "")
    if cpu is not None:
        extra = (f"   cpu {best(cpu[0]):7.3f} s", f"   cpu {best(cpu[1]):7.3f} s")
    print(f"  hypaware             {a:8.3f} s   {rows / a:>12,.0f} rows/s{extra[0]}")
    print(f"  {label:<20} {b:8.3f} s   {rows / b:>12,.0f} rows/s{extra[1]}")
    print(f"  ratio                {ratio:8.3f}     target <= {target:.2f}  {verdict}")
    if cpu is not None:
        print(f"  cpu ratio            {best(cpu[0]) / best(cpu[1]):8.3f}")
    return ok


def run_repeated(repeat: int, *steps: Callable[[], None]) -> None:
    """Run the steps in turn, `repeat` times, alternating so drift hits both sides alike."""
    for _ in range(repeat):
        for step in steps:
            step()
