"""Peak memory of exporting one large partition: it must not grow with the partition.

A child process (so nothing else skews its numbers) exports one single-day
partition of `--rows` rows (with ``--days N``: N single-day partitions of
``rows / N`` rows each, which the sink encodes side by side, one encoder per
core) through a BlobSink (local-fs + Parquet). Where the partitions come
from is `--source`:

- ``cache`` (the default): sealed segments of a real
  `hypaware.cache.local.LocalCache` on local disk, one per day, opened by
  the sink through `PartitionRef.open` as the export driver does. Another
  process appends the rows (from `benchmarks.datagen`, a batch at a time)
  and seals them before the child starts, so none of that work is in the
  child's figures. This is the path users run, and the one where reads
  from memory-mapped segments showed up as memory growing with the
  partition, which a generated stream cannot show. It needs the
  partitions' room on disk (in the temporary directory), which is removed
  afterwards.
- ``stream``: generated on the fly by `benchmarks.datagen` (each batch
  owns its bytes in Arrow memory, as one read from a cache does): the
  sink and encoder alone, with no reads from disk.

A thread samples the child's resident set every few milliseconds: the
figure before the export (interpreter, pyarrow, the sink, the generator's
text pool, the opened cache) and the peak during it. The growth is
compared with the Arrow size of one row group per encoder, and with the
growth for a partition a fifth of the size. Target: growth under 2x one row
group per encoder, and no growth with the partition's size.

    python -m benchmarks.export_memory [--rows 5000000] [--days 1] [--source cache|stream]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

TARGET = 2.0
SOURCES = ("cache", "stream")
DATASET = "events"


def _rss_bytes() -> int:
    """The resident set now (Linux /proc), else the high-water mark so far."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Sampler:
    """Samples the resident set on a thread until stopped; `peak` is the highest seen."""

    def __init__(self, every: float = 0.005) -> None:
        self.peak = _rss_bytes()
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.peak = max(self.peak, _rss_bytes())

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def prepare(cache_dir: str, rows: int, days: int = 1) -> None:
    """Fill a LocalCache at `cache_dir` with `days` sealed one-day partitions of ``rows / days`` rows.

    Run in a process of its own, before the child: appending and sealing
    leave their memory behind, which must not count as the child's "before".
    """
    from datetime import timedelta

    from hypaware import DatasetInfo
    from hypaware.cache.local import LocalCache

    from . import datagen

    cache = LocalCache(cache_dir, fsync=False)
    cache.define_dataset(
        DatasetInfo(name=DATASET, schema=datagen.SCHEMA, time_column="ts", time_grain="day")
    )
    for day in range(days):
        start = datagen.START + timedelta(days=day)
        # One append per batch, so the whole day never sits in memory.
        for batch in datagen.batches(rows // days, days=1, start=start, seed=day):
            cache.append(DATASET, batch)
    cache.seal()


def child(
    rows: int, row_group_size: int, days: int = 1, cache_dir: str | None = None
) -> dict[str, float]:
    """Export the partitions and measure; from the cache at `cache_dir`, else a generated stream."""
    from datetime import timedelta

    import numpy as np
    import pyarrow as pa

    from hypaware import ExportBatch, ExportOptions, PartitionRef
    from hypaware.core.workers import cores
    from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder

    from . import datagen
    from ._common import build_sink

    sample = next(datagen.batches(10_000, days=1))
    compact = sample.take(pa.array(np.arange(sample.num_rows)))
    row_bytes = compact.nbytes / compact.num_rows
    # Warm every code path once, so imports and caches count as "before".
    for chunks in ParquetEncoder(ParquetConfig()).encode(datagen.SCHEMA, [compact]):
        for _ in chunks:
            pass
    del sample, compact

    with tempfile.TemporaryDirectory(prefix="hypaware-mem-") as work:
        from hypaware import DatasetInfo
        from hypaware.cache.local import LocalCache

        def day_part(day: int) -> PartitionRef:
            start = datagen.START + timedelta(days=day)
            count = rows // days

            def opener() -> pa.RecordBatchReader:
                return pa.RecordBatchReader.from_batches(
                    datagen.SCHEMA,
                    datagen.batches(count, days=1, batch_rows=65_536, start=start),
                )

            # With its day known up front (as the cache tells it), so days run side by side.
            return PartitionRef(
                id=f"day-{day}",
                dataset=DATASET,
                seq=day,
                row_count=count,
                min_time=start,
                max_time=start + timedelta(hours=23),
                opener=opener,
            )

        if cache_dir is None:
            dataset = DatasetInfo(name=DATASET, schema=datagen.SCHEMA, time_column="ts")
            parts = [day_part(d) for d in range(days)]
        else:
            # The sealed segments, listed (and their metadata read) before "before".
            cache = LocalCache(cache_dir)
            dataset = cache.dataset(DATASET)
            parts = list(cache.ready_partitions(DATASET))
            assert len(parts) == days, f"{len(parts)} sealed partitions, expected {days}"
        batch = ExportBatch(batch_id="mem", sink="bench", dataset=dataset, partitions=parts)

        async def export() -> tuple[float, float, dict[str, int]]:
            sink = build_sink(
                "@hypaware/local-fs",
                {"root": str(Path(work) / "out"), "row_group_size": row_group_size},
                Path(work) / "state",
            )
            # One small export first: the worker thread and the store's I/O
            # runtime start once per process and belong to "before".
            warm = PartitionRef(
                id="warm-up",
                dataset=DATASET,
                seq=1,
                row_count=1_000,
                opener=lambda: pa.RecordBatchReader.from_batches(
                    datagen.SCHEMA, datagen.batches(1_000, days=1)
                ),
            )
            await sink.export_batch(
                ExportBatch(batch_id="warm", sink="bench", dataset=dataset, partitions=[warm]),
                ExportOptions(),
            )
            gc.collect()
            before = _rss_bytes()
            with _Sampler() as sampler:
                result = await sink.export_batch(batch, ExportOptions())
                await sink.close()
            assert not result.retry_partitions, result.retry_partitions
            return (
                before,
                sampler.peak,
                {"rows": result.rows_written, "files": result.files_written},
            )

        before, peak, result = asyncio.run(export())
    return {
        "rows": rows,
        "written_rows": result["rows"],
        "files": result["files"],
        "before": before,
        "peak": peak,
        "row_group_bytes": row_bytes * row_group_size,
        "encoders": min(cores(), days),
    }


def measure(
    rows: int, row_group_size: int, days: int = 1, source: str = "cache"
) -> dict[str, float]:
    """One child's figures; for the cache source, a cache filled by another process first."""
    module = [sys.executable, "-m", "benchmarks.export_memory"]
    command = [*module, "--rows", str(rows), "--days", str(days)]
    child_args = ["--child", "--source", source, "--row-group-size", str(row_group_size)]
    if source == "stream":
        return _run_child([*command, *child_args])
    with tempfile.TemporaryDirectory(prefix="hypaware-mem-cache-") as work:
        cache_dir = str(Path(work) / "cache")
        subprocess.run([*command, "--prepare", cache_dir], check=True)
        return _run_child([*command, *child_args, "--cache-dir", cache_dir])


def _run_child(command: list[str]) -> dict[str, float]:
    proc = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--row-group-size", type=int, default=128 * 1024)
    parser.add_argument("--days", type=int, default=1, help="split the rows over this many days")
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="cache",
        help="export sealed partitions of a LocalCache (default) or a generated stream",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(args.prepare, args.rows, args.days)
        return 0
    if args.child:
        if args.source == "cache" and not args.cache_dir:
            parser.error("--child --source cache needs --cache-dir")
        cache_dir = args.cache_dir if args.source == "cache" else None
        print(json.dumps(child(args.rows, args.row_group_size, args.days, cache_dir)))
        return 0

    mib = 2**20
    results = [
        measure(max(args.rows // 5, args.days), args.row_group_size, args.days, args.source),
        measure(args.rows, args.row_group_size, args.days, args.source),
    ]
    what = "one partition" if args.days == 1 else f"{args.days} one-day partitions"
    where = "from a LocalCache" if args.source == "cache" else "generated as a stream"
    print(f"peak memory exporting {what} {where} (row groups of {args.row_group_size:,} rows)")
    ok = True
    for r in results:
        growth = r["peak"] - r["before"]
        ratio = growth / (r["row_group_bytes"] * r["encoders"])
        ok &= ratio < TARGET and r["written_rows"] == r["rows"]
        print(
            f"  {int(r['rows']):>10,} rows: before {r['before'] / mib:7.1f} MiB, "
            f"peak {r['peak'] / mib:7.1f} MiB, growth {growth / mib:6.1f} MiB "
            f"= {ratio:4.2f}x one row group ({r['row_group_bytes'] / mib:.1f} MiB) "
            f"x {int(r['encoders'])} encoder(s), {int(r['files'])} file(s)"
        )
    small, large = (r["peak"] - r["before"] for r in results)
    flat = large <= small + 0.25 * results[1]["row_group_bytes"] * results[1]["encoders"]
    ok &= flat
    print(
        f"  growth at {results[1]['rows'] / results[0]['rows']:.0f}x the rows: "
        f"{(large - small) / mib:+.1f} MiB ({'flat' if flat else 'GROWS'}); "
        f"target < {TARGET:.0f}x one row group per encoder  {'OK' if ok else 'OVER'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
