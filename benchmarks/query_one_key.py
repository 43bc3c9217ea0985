"""One conversation on one day: ``hypaware.query`` against a full pyarrow scan of the archive.

The archive is made the way a user's is: rows from `benchmarks.datagen`
(7 days) appended to a `LocalCache`, sealed one partition per day, and
exported by the driver to a local-fs Parquet sink; the cache's segments are
then dropped, so every row comes from the archive. hypaware answers
``conversation_id = X`` on one day (day pruning, then the row filter pushed
into the Parquet scan); the baseline reads every file of the same archive
with ``pyarrow.dataset`` and filters in memory. The Iceberg case exports the
same rows to an Iceberg table on local-fs instead: hypaware's scan pushes the
day, the key and the columns into pyiceberg's scan planning; the baseline
is pyiceberg's full scan of the table, filtered in memory. Lower ratio is
better.

    python -m benchmarks.query_one_key [--rows 1000000] [--repeat 5] [--sink parquet|iceberg|both]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

import hypaware
from hypaware.cache.local import LocalCache
from hypaware.export.driver import ExportDriver

from . import datagen
from ._common import COMPRESSION, ROW_GROUP_SIZE, best, run_repeated, timer

DAY = 3


DATASET = hypaware.DatasetInfo(
    name="events",
    schema=datagen.SCHEMA,
    time_column="ts",
    lookup_key="conversation_id",
    time_grain="day",
)


def _sink(work: Path, kind: str) -> dict[str, Any]:
    if kind == "iceberg":
        return {
            "writer": "@hypaware/format-iceberg",
            "destination": "@hypaware/local-fs",
            "config": {"root": str(work / "archive"), "namespace": "bench"},
        }
    return {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/local-fs",
        "config": {
            "root": str(work / "archive"),
            "compression": COMPRESSION,
            "row_group_size": ROW_GROUP_SIZE,
            "max_batch_rows": 10_000_000,
            "max_batch_bytes": 1 << 40,
        },
    }


def _archive(
    work: Path, rows: int, seed: int, kind: str = "parquet"
) -> tuple[hypaware.HypawareConfig, pa.Table]:
    config = hypaware.load_config(
        {
            "state_dir": str(work / "state"),
            "cache": {"path": str(work / "cache")},
            "sinks": {"archive": _sink(work, kind)},
        }
    )
    tbl = datagen.table(rows, seed=seed)
    cache = LocalCache.from_config(config)
    cache.fsync = False
    cache.define_dataset(DATASET)
    cache.append("events", tbl)
    cache.seal("events")

    async def export() -> None:
        driver = ExportDriver.from_config(config, cache=cache)
        try:
            report = await driver.run_once(backfill=True)
            assert report.ok, report
        finally:
            await driver.close()

    asyncio.run(export())
    for part in cache.ready_partitions("events"):
        (cache.path / "events" / "sealed" / f"{part.id}.arrow").unlink()
    return config, tbl


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--sink", choices=("parquet", "iceberg", "both"), default="both")
    args = parser.parse_args(argv)
    kinds = ("parquet", "iceberg") if args.sink == "both" else (args.sink,)
    for kind in kinds:
        _one(kind, args.rows, args.repeat, args.seed)
    return 0


def _one(kind: str, rows: int, repeat: int, seed: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="hypaware-bench-query-"))
    try:
        config, tbl = _archive(work, rows, seed, kind)
        day_start = datagen.START + timedelta(days=DAY)
        day_end = day_start + timedelta(days=1)
        ts_type = tbl.schema.field("ts").type
        in_day = (pc.field("ts") >= pa.scalar(day_start, ts_type)) & (
            pc.field("ts") < pa.scalar(day_end, ts_type)
        )
        day_rows = tbl.filter(in_day)
        counts_by_key = pc.value_counts(day_rows.column("conversation_id").drop_null())
        top = pc.index(counts_by_key.field("counts"), pc.max(counts_by_key.field("counts")))
        key = counts_by_key.field("values")[top.as_py()].as_py()
        wanted = in_day & (pc.field("conversation_id") == key)
        expected = tbl.filter(wanted).num_rows
        del tbl, day_rows
        files = sorted(str(p) for p in (work / "archive").rglob("*.parquet"))

        ours: list[float] = []
        theirs: list[float] = []
        counts: list[int] = []

        def hypaware_query() -> None:
            with timer(ours), warnings.catch_warnings():
                reader = hypaware.query(
                    config, "events", since=day_start, until=day_end, keys=[key]
                )
                counts.append(reader.read_all().num_rows)

        if kind == "iceberg":
            (plan,) = hypaware.resolve(config)
            sink = hypaware.build(plan, config=config)
            table = sink.table.load_table(DATASET)

            def full_scan() -> None:
                with timer(theirs):
                    everything = table.scan().to_arrow()
                    counts.append(everything.filter(wanted).num_rows)

        else:
            sink = None

            def full_scan() -> None:
                with timer(theirs):
                    everything = pads.dataset(files, format="parquet").to_table()
                    counts.append(everything.filter(wanted).num_rows)

        try:
            run_repeated(repeat, hypaware_query, full_scan)
        finally:
            if sink is not None:
                asyncio.run(sink.close())
        assert set(counts) == {expected}, (counts, expected)
        a, b = best(ours), best(theirs)
        ratio = a / b
        baseline = "pyiceberg full scan" if kind == "iceberg" else "pyarrow full scan"
        print(
            f"{kind}: one key, one day of {rows:,} rows over 7 days "
            f"({len(files)} files, {expected} matching rows), best of {repeat}"
        )
        print(f"  hypaware.query       {a:8.3f} s")
        print(f"  {baseline:<20} {b:8.3f} s")
        print(f"  ratio                {ratio:8.3f}     (hypaware / full scan; lower is better)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
