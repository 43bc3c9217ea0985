"""An Iceberg export pass timed the way users run one, against pyiceberg doing the same.

Both sides start from the same prepared `LocalCache` (rows from
`benchmarks.datagen`, appended and sealed before timing starts; partitions
by hour) and write zstd Parquet in row groups of 128 Ki rows to a table
partitioned by day in a sqlite catalog on local disk.

- cold: ``hypaware export --once --backfill`` as a new process (the table
  is registered by that pass) against a new Python process that imports
  pyiceberg and pyarrow, reads the cache's sealed segments, creates the
  table and calls ``table.append``. Imports and interpreter start-up count
  on both sides. Target: <= 1.0x.
- warm: an `ExportDriver` built and used once (its table exists), then
  `--rows` new rows appended and sealed, then one timed ``run_once``;
  against ``table.append`` of the same rows, already in memory, on a table
  loaded and appended to once in the same process. Our side also sorts by
  day, lookup key and time (its output is day-partitioned and sorted);
  "sort+append" is pyiceberg's time with that sort added. Targets: <= 1.0x
  append at 1M rows, <= 1.2x at 100k (`--target` to set one).

Runs alternate between the sides; medians are reported.

    python -m benchmarks.iceberg_pass [--rows 100000] [--repeat 3] [--only cold|warm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hypaware import DatasetInfo, load_config
from hypaware.cache.local import LocalCache

from . import datagen
from ._common import COMPRESSION, ROW_GROUP_SIZE, quiet_disk

ROOT = Path(__file__).resolve().parents[1]

PYICEBERG_SCRIPT = """
import sys, time
start = time.perf_counter()
import pyarrow as pa, pyarrow.compute as pc, pyarrow.dataset as pds
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.io.pyarrow import pyarrow_to_schema
cache, work = sys.argv[1], sys.argv[2]
data = pds.dataset(cache + "/events/sealed", format="arrow").to_table()
data = data.cast(pa.schema([f.with_nullable(True) for f in data.schema]))
catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}/wh")
catalog.create_namespace("bench")
table = catalog.create_table(
    "bench.events",
    schema=data.schema,
    properties={
        "write.parquet.compression-codec": "zstd",
        "write.parquet.row-group-limit": "131072",
    },
)
with table.update_spec() as spec:
    spec.add_field("ts", DayTransform(), "ts_day")
table = catalog.load_table("bench.events")
table.append(data)
print(len(list(table.scan().plan_files())))
"""


def info() -> DatasetInfo:
    return DatasetInfo(
        name="events",
        schema=datagen.SCHEMA,
        time_column="ts",
        lookup_key="conversation_id",
        time_grain="hour",
    )


def rows_at(rows: int, seed: int, shift_days: int) -> pa.Table:
    """`rows` generated rows, moved `shift_days` later (new rows for a later pass)."""
    tbl = datagen.table(rows, seed=seed)
    if not shift_days:
        return tbl
    shift = pa.scalar(timedelta(days=shift_days), pa.duration("us"))
    moved = pc.add(tbl.column("ts"), shift)
    return tbl.set_column(tbl.schema.get_field_index("ts"), tbl.schema.field("ts"), moved)


def prepare_cache(path: Path, tbl: pa.Table, compression: str | None = None) -> LocalCache:
    cache = LocalCache(path, fsync=False, compression=compression)  # type: ignore[arg-type]
    cache.define_dataset(info())
    cache.append("events", tbl)
    cache.seal()
    return cache


def config_doc(work: Path, cache: Path) -> dict[str, Any]:
    return {
        "state_dir": str(work / "state"),
        "cache": {"path": str(cache)},
        "sinks": {
            "lake": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/local-fs",
                "config": {
                    "root": str(work / "warehouse"),
                    "compression": COMPRESSION,
                    "row_group_size": ROW_GROUP_SIZE,
                },
            }
        },
    }


def cold_ours(work: Path, cache: Path) -> float:
    work.mkdir(parents=True)
    config = work / "hypaware.json"
    config.write_text(json.dumps(config_doc(work, cache)))
    command = [sys.executable, "-m", "hypaware", "export", "--config", str(config)]
    quiet_disk()
    start = time.perf_counter()
    proc = subprocess.run(
        [*command, "--once", "--backfill", "--json"], capture_output=True, text=True, cwd=ROOT
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"hypaware export failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds


def cold_theirs(work: Path, cache: Path) -> float:
    work.mkdir(parents=True)
    quiet_disk()
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PYICEBERG_SCRIPT, str(cache), str(work)],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pyiceberg script failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds


class WarmOurs:
    """A driver used once already; each `step` seals new rows and times one pass."""

    def __init__(self, work: Path, cache_path: Path, compression: str | None = None) -> None:
        from hypaware.export.driver import ExportDriver

        work.mkdir(parents=True)
        self.cache = LocalCache(cache_path, fsync=False, compression=compression)  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()
        self.driver = ExportDriver.from_config(load_config(config_doc(work, cache_path)))
        self.loop.run_until_complete(self.driver.run_once(backfill=True))

    def step(self, tbl: pa.Table) -> float:
        self.cache.append("events", tbl)
        self.cache.seal()
        quiet_disk()
        start = time.perf_counter()
        report = self.loop.run_until_complete(self.driver.run_once())
        seconds = time.perf_counter() - start
        if report.rows != tbl.num_rows:
            raise SystemExit(f"hypaware pass exported {report.rows} rows, not {tbl.num_rows}")
        return seconds

    def close(self) -> None:
        self.loop.run_until_complete(self.driver.close())
        self.loop.close()


class WarmTheirs:
    """A pyiceberg table loaded and appended to once; each `step` times one append."""

    def __init__(self, work: Path, first: pa.Table) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        from hypaware.iceberg.schema import dataset_schema, layout_for

        (work / "wh").mkdir(parents=True)
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{work / 'catalog.db'}", warehouse=f"file://{work / 'wh'}"
        )
        catalog.create_namespace("bench")
        schema = dataset_schema(first.schema)
        spec, sort = layout_for(schema, "ts", "conversation_id")
        self.table = catalog.create_table(
            "bench.events",
            schema=schema,
            partition_spec=spec,
            sort_order=sort,
            properties={
                "write.parquet.compression-codec": COMPRESSION,
                "write.parquet.row-group-limit": str(ROW_GROUP_SIZE),
            },
        )
        self.table.append(nullable(first))
        self.sort_seconds: list[float] = []

    def step(self, tbl: pa.Table) -> float:
        data = nullable(tbl)
        quiet_disk()
        start = time.perf_counter()
        self.table.append(data)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        sort_like_ours(data)
        self.sort_seconds.append(time.perf_counter() - start)
        return seconds


def nullable(tbl: pa.Table) -> pa.Table:
    # pyiceberg's tables are all-optional; the data's non-null fields must say so too.
    return tbl.cast(pa.schema([f.with_nullable(True) for f in tbl.schema]))


def sort_like_ours(tbl: pa.Table) -> pa.Table:
    day = pc.cast(pc.cast(tbl.column("ts"), pa.timestamp("us")), pa.date32())
    keyed = pa.table({"day": day, "key": tbl.column("conversation_id"), "ts": tbl.column("ts")})
    order = pc.sort_indices(
        keyed, [("day", "ascending"), ("key", "ascending"), ("ts", "ascending")]
    )
    return tbl.take(order)


def line(label: str, ours: list[float], theirs: list[float], target: float, name: str) -> bool:
    a, b = statistics.median(ours), statistics.median(theirs)
    ok = a / b <= target
    print(f"  {label:<26} hypaware {a:7.3f} s  {name} {b:7.3f} s  ratio {a / b:5.2f}", end="")
    print(f"  target <= {target:.2f}  {'OK' if ok else 'OVER'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--only", choices=["cold", "warm"], action="append", default=[])
    parser.add_argument("--target", type=float, help="the warm target (default by size)")
    parser.add_argument(
        "--cache-compression",
        choices=["lz4", "zstd", "none"],
        help="codec of the cache's Arrow segments (default: the cache's own)",
    )
    args = parser.parse_args(argv)
    which = args.only or ["cold", "warm"]
    warm_target = args.target or (1.0 if args.rows >= 1_000_000 else 1.2)
    root = Path(tempfile.mkdtemp(prefix="hypaware-bench-iceberg-pass-"))
    ok = True
    try:
        first = rows_at(args.rows, args.seed, 0)
        cache = root / "cache"
        prepare_cache(cache, first, args.cache_compression)
        codec = LocalCache(cache, compression=args.cache_compression).compression
        print(
            f"Iceberg pass: {args.rows:,} rows per pass, median of {args.repeat}, "
            f"{os.cpu_count()} cores, cache segments: arrow, {codec}"
        )
        if "cold" in which:
            ours: list[float] = []
            theirs: list[float] = []
            for i in range(args.repeat):
                ours.append(cold_ours(root / f"cold-ours-{i}", cache))
                theirs.append(cold_theirs(root / f"cold-theirs-{i}", cache))
            ok &= line("cold (new process)", ours, theirs, 1.0, "pyiceberg script")
        if "warm" in which:
            warm_ours = WarmOurs(root / "warm-ours", cache, args.cache_compression)
            warm_theirs = WarmTheirs(root / "warm-theirs", first)
            ours, theirs = [], []
            try:
                for i in range(args.repeat):
                    new = rows_at(args.rows, args.seed + i + 1, 7 * (i + 1))
                    ours.append(warm_ours.step(new))
                    theirs.append(warm_theirs.step(new))
            finally:
                warm_ours.close()
            ok &= line("warm (driver used once)", ours, theirs, warm_target, "append")
            sorted_append = [t + s for t, s in zip(theirs, warm_theirs.sort_seconds, strict=True)]
            line("warm vs sort+append", ours, sorted_append, 0.6, "sort+append")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
