"""@hypaware/central under the real export driver and cache: storms, drops, respools, ticks."""

from __future__ import annotations

import collections
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from hypaware import load_config
from hypaware.cache.local import LocalCache
from hypaware.core.types import DatasetInfo
from hypaware.export.driver import ExportDriver
from hypaware.testing.servers.central import CentralServer, Drop, Reply

from .conftest import TOKEN

T0 = datetime(2026, 6, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("conv", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="ts", lookup_key="conv")


async def test_driver_ticks_deliver_every_row_exactly_once(
    tmp_path: Path, central: CentralServer
) -> None:
    cache = LocalCache(tmp_path / "cache", fsync=False)
    cache.define_dataset(INFO)
    rows = [
        {"row_id": f"r{i:05d}", "conv": f"c{i % 5}", "ts": T0 + timedelta(minutes=7 * i)}
        for i in range(400)
    ]
    cache.append("events", rows)
    cache.seal()
    config = load_config(
        {
            "state_dir": str(tmp_path / "state"),
            "sinks": {
                "fwd": {
                    "plugin": "@hypaware/central",
                    "config": {
                        "endpoint": central.url,
                        "token": "${HYP_TOKEN}",
                        "gateway_id": "gw-driver",
                        "max_chunk_rows": 15,
                        "backoff_ladder": [0.005, 0.01, 0.02],
                        "backoff_budget": 0.05,
                    },
                }
            },
        }
    )
    central.script(
        Reply(429, retry_after="0.01"),
        Reply(503, retry_after="junk"),
        Reply(429, retry_after="60"),  # past the budget: respooled to the next tick
        Drop(after_apply=True),
        Reply(503, retry_after="0"),
        Drop(),
        Reply(429, retry_after="-1"),
        Reply(502),
        Reply(429, retry_after="3600"),
        Drop(after_apply=True),
    )
    driver = ExportDriver.from_config(config, cache=cache, env={"HYP_TOKEN": TOKEN})
    retried = 0
    try:
        for _tick in range(20):
            report = await driver.run_once(backfill=True)
            # Backpressure is a failure of the pass, always a retryable one.
            fwd = report.sinks["fwd"]
            assert len(fwd.errors) == len(fwd.failures), fwd.errors
            assert all(f.retryable for f in fwd.failures), fwd.failures
            retried += report.sinks["fwd"].retried
            if len(central.rows("events")) == len(rows) and report.sinks["fwd"].retried == 0:
                break
    finally:
        await driver.close()

    stored = collections.Counter(r["row_id"] for r in central.rows("events"))
    assert set(stored) == {r["row_id"] for r in rows}
    assert max(stored.values()) == 1
    assert retried >= 2  # the two long Retry-After answers sent partitions back a tick
    assert central.pending_script == 0
    assert any(s.outcome == "duplicate" for s in central.seen)
