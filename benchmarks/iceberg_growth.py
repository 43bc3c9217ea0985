"""A year of small passes, shortened: an Iceberg sink's cost and footprint as its table grows.

N passes through `ExportDriver.run_once`, each after 200 new rows
(`--rows-per-pass`) are appended to a `LocalCache` and sealed, five
minutes of data time apart (what a ``*/5`` schedule makes). The driver
gets an injected clock that moves with the data, so nothing waits. Two
drivers over the same cache, in the same process, one pass each in turn:

- ``iceberg``: `@hypaware/format-iceberg` on local disk, sqlite catalog;
- ``blob``: `@hypaware/format-parquet` on local disk;
- ``driver``: a sink that acknowledges every partition and writes nothing:
  the driver's own cost of a pass (cache listing, state, the ledger), which
  grows with the partitions the cache holds (the run keeps them all).
  ``own ms`` is the Iceberg sink's time less it.

The Iceberg sink maintains its table on its default hourly schedule (by the
data's clock: every 12 passes), with ``keep_for`` 0 (see `config`). At each
checkpoint it prints the median time of the last 10 passes of each, the
mean of the Iceberg sink's last 24 (maintenance runs included), the table's metadata on disk (``metadata.json`` files, manifests,
manifest lists, their bytes), the snapshots, the live data files per day
(and how many of them are below the target file size), and the same
footprint for the blob sink's root and both state directories (progress
store, batch index, catalog).

Target: per-pass time at the last checkpoint at most 1.2x that at 50
passes (exit 1 when missed).

    python -m benchmarks.iceberg_growth [--passes 400] [--rows-per-pass 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from hypaware import (
    DatasetInfo,
    ExportBatch,
    ExportDriver,
    ExportOptions,
    ExportResult,
    SinkSpec,
    load_config,
)
from hypaware.cache.local import LocalCache

SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("conversation_id", pa.string()),
        ("n", pa.int64()),
        ("text", pa.string()),
    ]
)
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="ts", lookup_key="conversation_id")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=5)
TARGET = 1.2
WINDOW = 10
MEAN_WINDOW = 24


class DataClock:
    """The driver's clock: the data's time, moved by the benchmark, never waiting."""

    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def pass_rows(i: int, count: int) -> pa.Table:
    start = T0 + STEP * i
    gap = STEP / count
    n0 = i * count
    return pa.table(
        {
            "ts": [start + gap * k for k in range(count)],
            "conversation_id": [f"c{(n0 + k) % 97:03d}" for k in range(count)],
            "n": list(range(n0, n0 + count)),
            "text": [f"message {n0 + k} " + "x" * (k % 40) for k in range(count)],
        },
        schema=SCHEMA,
    )


def config(root: Path, kind: str) -> Any:
    extra: dict[str, Any] = {}
    if kind == "iceberg":
        sink = {"writer": "@hypaware/format-iceberg", "destination": "@hypaware/local-fs"}
        # Snapshot ages are wall-clock, and this run packs days into minutes: with
        # the default hour every snapshot would be young. A */5 daemon keeps about
        # 12 snapshots an hour old; keep_snapshots (10) keeps as many here.
        extra = {"maintenance": {"keep_for": 0}}
    else:
        sink = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"}
    return load_config(
        {
            "state_dir": str(root / f"state-{kind}"),
            "cache": {"path": str(root / "cache")},
            "sinks": {kind: {**sink, "config": {"root": str(root / f"out-{kind}"), **extra}}},
        }
    )


def _files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file()) if root.exists() else iter(())


def table_footprint(driver: ExportDriver, root: Path, target: int) -> dict[str, Any]:
    meta = [p for p in _files(root) if p.parent.name == "metadata"]
    jsons = [p for p in meta if p.name.endswith(".metadata.json")]
    lists = [p for p in meta if p.name.startswith("snap-") and p.suffix == ".avro"]
    manifests = [p for p in meta if p.suffix == ".avro" and not p.name.startswith("snap-")]
    sink: Any = driver.sink("iceberg")
    table = sink.table.load_table(INFO)
    snapshot = table.current_snapshot()
    per_day: Counter[str] = Counter()
    small: Counter[str] = Counter()
    live_manifests = 0
    if snapshot is not None:
        live_manifests = len(snapshot.manifests(table.io))
        for task in table.scan().plan_files():
            day = str(task.file.partition[0])
            per_day[day] += 1
            if task.file.file_size_in_bytes < target:
                small[day] += 1
    return {
        "metadata_json": len(jsons),
        "newest_metadata_kb": max((p.stat().st_size for p in jsons), default=0) / 1024,
        "manifest_lists": len(lists),
        "manifests": len(manifests),
        "live_manifests": live_manifests,
        "metadata_mb": sum(p.stat().st_size for p in meta) / 2**20,
        "snapshots": len(table.metadata.snapshots),
        "data_files_per_day": dict(sorted(per_day.items())),
        "small_files_per_day": dict(sorted(small.items())),
    }


def dir_footprint(root: Path) -> dict[str, Any]:
    files = list(_files(root))
    return {"files": len(files), "mb": sum(p.stat().st_size for p in files) / 2**20}


class AckSink:
    """Acknowledges every partition and writes nothing: the driver's own cost of a pass."""

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        return ExportResult(
            exported=[p.id for p in batch.partitions],
            rows_written=sum(p.row_count for p in batch.partitions),
        )

    async def close(self) -> None:
        return None


async def grow(root: Path, passes: int, rows: int, checkpoints: list[int]) -> list[dict[str, Any]]:
    cache = LocalCache(root / "cache", retention=None, fsync=False)
    cache.define_dataset(INFO)
    clock = DataClock()
    drivers = {
        kind: ExportDriver.from_config(config(root, kind), cache=cache, clock=clock)
        for kind in ("iceberg", "blob")
    }
    drivers["driver"] = ExportDriver(
        cache,
        [(SinkSpec(name="driver", plugin="ack"), AckSink())],
        state=root / "state-driver",
        clock=clock,
    )
    times: dict[str, list[float]] = {kind: [] for kind in drivers}
    out = []
    try:
        for i in range(passes):
            cache.append("events", pass_rows(i, rows))
            cache.seal()
            clock.at = T0 + STEP * (i + 1)
            for kind, driver in drivers.items():
                t0 = time.perf_counter()
                report = await driver.run_once(backfill=i == 0)
                times[kind].append(time.perf_counter() - t0)
                if not report.ok or report.rows != rows:
                    raise RuntimeError(f"pass {i + 1} of {kind}: {report.errors or report.rows}")
            if i + 1 in checkpoints:
                target = drivers["iceberg"].sink("iceberg").table.config.target_file_size  # type: ignore[attr-defined]
                out.append(
                    {
                        "passes": i + 1,
                        "iceberg_ms": 1000 * statistics.median(times["iceberg"][-WINDOW:]),
                        "blob_ms": 1000 * statistics.median(times["blob"][-WINDOW:]),
                        "driver_ms": 1000 * statistics.median(times["driver"][-WINDOW:]),
                        # Every pass of the last two hours of data, maintenance runs in.
                        "iceberg_mean_ms": 1000 * statistics.mean(times["iceberg"][-MEAN_WINDOW:]),
                        "table": table_footprint(drivers["iceberg"], root / "out-iceberg", target),
                        "blob_root": dir_footprint(root / "out-blob"),
                        "state_iceberg": dir_footprint(root / "state-iceberg"),
                        "state_blob": dir_footprint(root / "state-blob"),
                    }
                )
    finally:
        for driver in drivers.values():
            await driver.close()
    return out


def checkpoints_for(passes: int) -> list[int]:
    marks = [m for m in (50, 150, 400, 1000, 2000, 5000, 10000) if m < passes]
    return [*marks, passes]


def show(results: list[dict[str, Any]], rows: int) -> None:
    print(f"Iceberg growth: {rows} rows a pass, 5 minutes of data apart")
    head = (
        f"{'passes':>6} {'iceberg ms':>10} {'mean ms':>7} {'driver ms':>9} {'own ms':>6} "
        f"{'blob ms':>8} {'ratio':>6} {'snaps':>6} "
        f"{'m.json':>6} {'newest KB':>9} {'manif':>6} {'live':>5} {'lists':>6} "
        f"{'meta MB':>8} {'state MB':>8} {'blob files':>10} {'blob state MB':>13}"
    )
    print(head)
    for r in results:
        t = r["table"]
        print(
            f"{r['passes']:>6} {r['iceberg_ms']:>10.1f} {r['iceberg_mean_ms']:>7.1f} "
            f"{r['driver_ms']:>9.1f} {r['iceberg_ms'] - r['driver_ms']:>6.1f} "
            f"{r['blob_ms']:>8.1f} "
            f"{r['iceberg_ms'] / r['blob_ms']:>6.1f} {t['snapshots']:>6} {t['metadata_json']:>6} "
            f"{t['newest_metadata_kb']:>9.1f} {t['manifests']:>6} {t['live_manifests']:>5} "
            f"{t['manifest_lists']:>6} {t['metadata_mb']:>8.2f} {r['state_iceberg']['mb']:>8.2f} "
            f"{r['blob_root']['files']:>10} {r['state_blob']['mb']:>13.2f}"
        )
    last = results[-1]["table"]
    print("data files per day (live):", json.dumps(last["data_files_per_day"]))
    print("  of them below the target size:", json.dumps(last["small_files_per_day"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=400)
    parser.add_argument("--rows-per-pass", type=int, default=200)
    # The whole-suite runner hands every benchmark --rows and --repeat.
    parser.add_argument("--rows", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args(argv)
    marks = checkpoints_for(args.passes)
    with tempfile.TemporaryDirectory(prefix="hyp-growth-") as tmp:
        results = asyncio.run(grow(Path(tmp), args.passes, args.rows_per_pass, marks))
    show(results, args.rows_per_pass)
    if args.json:
        print(json.dumps(results))
    first = next((r for r in results if r["passes"] == 50), None)
    if first is None or results[-1]["passes"] == 50:
        return 0
    ratio = results[-1]["iceberg_ms"] / first["iceberg_ms"]
    mean_ratio = results[-1]["iceberg_mean_ms"] / first["iceberg_mean_ms"]
    last = results[-1]
    own = (last["iceberg_ms"] - last["driver_ms"]) / (first["iceberg_ms"] - first["driver_ms"])
    print(
        f"per-pass time at {last['passes']} passes: {ratio:.2f}x that at 50 "
        f"(median); {mean_ratio:.2f}x (mean of {MEAN_WINDOW}, maintenance included); "
        f"the Iceberg sink's own share (less the driver's): {own:.2f}x"
    )
    if ratio > TARGET:
        print(f"MISSED: target at most {TARGET}x")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
