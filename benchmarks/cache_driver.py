"""The embedded cache and the export driver against plain pyarrow doing the same work.

1. Append + seal: `LocalCache.append` then `seal` (partitioned by gateway and hour,
   one segment per partition, every file fsynced and renamed into place)
   against `pyarrow.dataset.write_dataset` writing the same partitions in the
   cache's own segment format and codec (no fsync; Arrow IPC with LZ4 by
   default). Target: ratio <= 2.0 (the cache also makes every append durable).
   For reference, `write_dataset` of the same partitions as Snappy Parquet
   (what segments were before they were Arrow) is timed too.
2. Export: `ExportDriver.run_once` of every sealed partition to local-fs Parquet
   (batches recorded and settled in sqlite, BlobSink, atomic writes) against a
   loop that reads each segment and writes it with `pyarrow.parquet.write_table`.
   Target: ratio <= 1.5.

    python -m benchmarks.cache_driver [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from hypaware import DatasetInfo, load_config
from hypaware.cache.local import LocalCache
from hypaware.export.driver import ExportDriver

from . import datagen
from ._common import quiet_disk

SEAL_TARGET = 2.0
# The cache seals with its defaults; the plain-pyarrow side writes the same.
_DEFAULTS = LocalCache(".")
SEGMENT_FORMAT, SEGMENT_CODEC = _DEFAULTS.segment_format, _DEFAULTS.compression
EXPORT_TARGET = 1.5


def _info() -> DatasetInfo:
    return DatasetInfo(
        name="events",
        schema=datagen.SCHEMA,
        time_column="ts",
        lookup_key="conversation_id",
        partition_by=("gateway",),
        time_grain="hour",
    )


def _raw_seal(tbl: pa.Table, out: Path, fmt: str, codec: str) -> None:
    hour = pc.strftime(pc.floor_temporal(tbl.column("ts"), unit="hour"), format="%Y%m%dT%H")
    if fmt == "arrow":
        options = ds.IpcFileFormat().make_write_options(
            compression=None if codec == "none" else codec
        )
    else:
        options = ds.ParquetFileFormat().make_write_options(compression=codec)
    ds.write_dataset(
        tbl.append_column("hour", hour),
        out,
        format="ipc" if fmt == "arrow" else "parquet",
        partitioning=["gateway", "hour"],
        file_options=options,
        max_partitions=100_000,
        max_open_files=100_000,
    )


def _cache_seal(tbl: pa.Table, out: Path) -> LocalCache:
    cache = LocalCache(out)
    cache.define_dataset(_info())
    cache.append("events", tbl)
    cache.seal()
    return cache


def _raw_export(cache: LocalCache, out: Path) -> None:
    out.mkdir(parents=True)
    for part in cache.ready_partitions("events"):
        table = part.open().read_all()
        pq.write_table(table, out / f"{part.id}.parquet", compression="zstd")


def _driver_export(cache_dir: Path, work: Path) -> int:
    doc = {
        "state_dir": str(work / "state"),
        "cache": {"path": str(cache_dir)},
        "sinks": {
            "bench": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(work / "export"), "compression": "zstd"},
            }
        },
    }
    config = load_config(json.loads(json.dumps(doc)))

    async def once() -> int:
        driver = ExportDriver.from_config(config)
        try:
            report = await driver.run_once(backfill=True)
        finally:
            await driver.close()
        return report.rows

    return asyncio.run(once())


def _best(times: list[float]) -> float:
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    tbl = datagen.table(args.rows, seed=args.seed)
    work = Path(tempfile.mkdtemp(prefix="hypaware-bench-cache-"))
    raw_seal: list[float] = []
    parquet_seal: list[float] = []
    our_seal: list[float] = []
    raw_export: list[float] = []
    our_export: list[float] = []
    partitions = 0
    try:
        for i in range(args.repeat):
            run = work / str(i)
            quiet_disk()
            t = time.perf_counter()
            _raw_seal(tbl, run / "raw-seal", SEGMENT_FORMAT, SEGMENT_CODEC)
            raw_seal.append(time.perf_counter() - t)
            quiet_disk()
            t = time.perf_counter()
            _raw_seal(tbl, run / "parquet-seal", "parquet", "snappy")
            parquet_seal.append(time.perf_counter() - t)
            quiet_disk()
            t = time.perf_counter()
            cache = _cache_seal(tbl, run / "cache")
            our_seal.append(time.perf_counter() - t)
            partitions = len(cache.ready_partitions("events"))
            quiet_disk()
            t = time.perf_counter()
            _raw_export(cache, run / "raw-export")
            raw_export.append(time.perf_counter() - t)
            quiet_disk()
            t = time.perf_counter()
            rows = _driver_export(run / "cache", run)
            our_export.append(time.perf_counter() - t)
            assert rows == args.rows, (rows, args.rows)
            shutil.rmtree(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ok = True
    print(
        f"{args.rows:,} rows, {partitions} partitions (gateway x hour), best of {args.repeat}; "
        f"segments: {SEGMENT_FORMAT}, {SEGMENT_CODEC}"
    )
    for label, ours, theirs, target in (
        ("append+seal", our_seal, raw_seal, SEAL_TARGET),
        ("export", our_export, raw_export, EXPORT_TARGET),
    ):
        ratio = _best(ours) / _best(theirs)
        verdict = "ok" if ratio <= target else "MISSED"
        ok = ok and ratio <= target
        print(
            f"  {label:<12} hypaware {_best(ours):7.3f}s  pyarrow {_best(theirs):7.3f}s  "
            f"ratio {ratio:5.2f} (target <= {target}) {verdict}"
        )
        if label == "append+seal":
            reference = _best(ours) / _best(parquet_seal)
            print(
                f"  {'':<12} against write_dataset as Snappy Parquet "
                f"{_best(parquet_seal):7.3f}s: ratio {reference:5.2f} (for reference)"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
