"""A cache, a config and a driver for query tests; rows carry a unique `row_id`."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

import hypaware
from hypaware.cache.local import LocalCache
from hypaware.core.types import DatasetInfo
from hypaware.export.driver import ExportDriver

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)

SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("conv", pa.string()),
        pa.field("role", pa.string()),
        pa.field("tokens", pa.int64()),
    ]
)
INFO = DatasetInfo(
    name="events",
    schema=SCHEMA,
    time_column="ts",
    lookup_key="conv",
    partition_by=("conv",),
    time_grain="day",
)


def make_rows(
    start: int, count: int, *, day: int = 0, hour: int = 1, convs: int = 3
) -> list[dict[str, Any]]:
    base = DAY0 + timedelta(days=day, hours=hour)
    return [
        {
            "row_id": start + i,
            "ts": base + timedelta(seconds=i),
            "conv": f"c{(start + i) % convs}",
            "role": "user" if i % 2 else "assistant",
            "tokens": (start + i) % 17,
        }
        for i in range(count)
    ]


def config(
    root: Path, sinks: Mapping[str, Mapping[str, Any]] | None = None, **cache: Any
) -> hypaware.HypawareConfig:
    doc: dict[str, Any] = {
        "state_dir": str(root / "state"),
        "cache": {"path": str(root / "cache"), **cache},
        "sinks": dict(sinks or {}),
    }
    return hypaware.load_config(doc)


def parquet_sink(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/local-fs",
        "config": {"root": str(root), **extra},
    }


def jsonl_sink(root: Path) -> dict[str, Any]:
    return {
        "writer": "@hypaware/format-jsonl",
        "destination": "@hypaware/local-fs",
        "config": {"root": str(root)},
    }


def iceberg_sink(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "writer": "@hypaware/format-iceberg",
        "destination": "@hypaware/local-fs",
        "config": {"root": str(root), "namespace": "hyp", **extra},
    }


def cache_for(cfg: hypaware.HypawareConfig, info: DatasetInfo = INFO) -> LocalCache:
    cache = LocalCache.from_config(cfg)
    cache.fsync = False
    cache.define_dataset(info)
    return cache


def export(cfg: hypaware.HypawareConfig, cache: LocalCache, *, backfill: bool = True) -> Any:
    async def run() -> Any:
        driver = ExportDriver.from_config(cfg, cache=cache)
        try:
            return await driver.run_once(backfill=backfill)
        finally:
            await driver.close()

    # In a thread of its own, so async tests (already on a loop) can call it too.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def ids(reader: pa.RecordBatchReader) -> list[int]:
    table = reader.read_all()
    return sorted(table.column("row_id").to_pylist())


def fill(cache: LocalCache, rows: Iterable[Mapping[str, Any]]) -> None:
    cache.append(INFO.name, list(rows))
    cache.seal(INFO.name)


def drop_segments(cache: LocalCache, count: int | None = None) -> None:
    """Delete sealed segments behind the cache's back, as retention would (oldest first)."""
    for part in cache.ready_partitions(INFO.name)[:count]:
        (cache.path / INFO.name / "sealed" / f"{part.id}.arrow").unlink()
