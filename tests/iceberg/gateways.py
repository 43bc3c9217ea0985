"""Gateways for the shared-table tests: each its own `LocalCache` and state dir, one table.

Every gateway's cache starts its seqs at 1 and buckets its rows by the same
hours, so the partition ids of different gateways are aligned: exactly what
made ids alone a wrong key for "already committed". Importable by module
path, so spawned writer processes can run `export_gateway`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa

import hypaware
from hypaware.cache.local import LocalCache
from hypaware.core.types import DatasetInfo
from hypaware.export.driver import ExportDriver

__all__ = [
    "DAY0",
    "HOURS",
    "ROWS",
    "export_gateway",
    "fill_gateway",
    "gateway_config",
    "gateway_info",
    "gateway_rows",
]

DAY0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
ROWS = 3000  # per gateway
HOURS = 10  # one partition per hour: seqs 1..10 in every gateway


def gateway_info(*, tokens: pa.DataType | None = None, extra: bool = False) -> DatasetInfo:
    tokens = pa.int64() if tokens is None else tokens
    fields = [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("gateway", pa.string()),
        pa.field("row_id", pa.int64()),
        pa.field("tokens", tokens),
    ]
    if extra:
        fields.append(pa.field("region", pa.string()))
    return DatasetInfo(
        name="messages",
        schema=pa.schema(fields),
        time_column="ts",
        lookup_key="gateway",
        time_grain="hour",
    )


def gateway_rows(
    gateway: int, count: int = ROWS, *, start: int = 0, hours: int = HOURS, day: int = 0
) -> list[dict[str, Any]]:
    per_hour = max(1, count // hours)
    base = DAY0 + dt.timedelta(days=day)
    return [
        {
            "ts": base + dt.timedelta(hours=(i // per_hour) % hours, seconds=i % per_hour),
            "gateway": f"g{gateway}",
            "row_id": gateway * 1_000_000 + start + i,
            "tokens": i % 17,
        }
        for i in range(start, start + count)
    ]


def gateway_config(
    root: Path, gateway: int, destination: str, sink: dict[str, Any]
) -> dict[str, Any]:
    return {
        "state_dir": str(root / f"state-{gateway}"),
        "cache": {"path": str(root / f"cache-{gateway}")},
        "sinks": {
            "archive": {
                "writer": "@hypaware/format-iceberg",
                "destination": destination,
                "config": {
                    "namespace": "hyp",
                    "commit_backoff": 0.02,
                    "commit_retries": 40,
                    **sink,
                },
            }
        },
    }


def fill_gateway(
    doc: dict[str, Any],
    gateway: int,
    *,
    info: DatasetInfo | None = None,
    data: list[dict[str, Any]] | None = None,
    **rows: Any,
) -> LocalCache:
    """The gateway's cache with its rows (`data`, or `gateway_rows`) appended and sealed."""
    cache = LocalCache(Path(doc["cache"]["path"]), fsync=False)
    info = info or gateway_info()
    cache.define_dataset(info)
    if data is None:
        data = gateway_rows(gateway, **rows)
    if "region" in info.schema.names:
        data = [{**r, "region": f"r{gateway}"} for r in data]
    cache.append("messages", pa.Table.from_pylist(data, schema=info.schema))
    cache.seal()
    return cache


def run_export(doc: dict[str, Any], cache: LocalCache, *, backfill: bool = True) -> dict[str, Any]:
    """One `run_once` of the gateway's driver; its sink's report as a dict."""

    async def run() -> dict[str, Any]:
        driver = ExportDriver.from_config(hypaware.load_config(doc), cache=cache)
        try:
            report = await driver.run_once(backfill=backfill)
        finally:
            await driver.close()
        return report.sinks["archive"].as_dict()

    # In a thread of its own, so async tests (already on a loop) can call it too.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def export_gateway(
    doc: dict[str, Any], gateway: int, start: Any = None, batches: int = 1
) -> dict[str, Any]:
    """In a writer process: fill the gateway's cache, wait for the others, export it."""
    cache = fill_gateway(doc, gateway)
    sink = doc["sinks"]["archive"]
    if batches > 1:
        # Several batches (so several commits racing the other writers'), not one.
        sink["config"]["max_batch_rows"] = ROWS // batches
    if start is not None:
        start.wait()
    return run_export(doc, cache)
