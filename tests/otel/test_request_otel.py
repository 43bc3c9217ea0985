"""A request sink's backoff waits and HTTP calls reach the observers, under the batch span."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from opentelemetry.trace import SpanKind, StatusCode

from hypaware import load_config
from hypaware.cache.local import LocalCache
from hypaware.core.types import DatasetInfo
from hypaware.export.driver import ExportDriver
from hypaware.export.observer import CountingObserver
from hypaware.testing.servers.central import CentralServer, Reply
from tests.request.conftest import TOKEN, central  # noqa: F401  (the fixture)

from .helpers import Telemetry

T0 = datetime(2026, 6, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("conv", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)
INFO = DatasetInfo(
    name="events", schema=SCHEMA, time_column="ts", lookup_key="conv", partition_by=("conv",)
)


async def test_waits_and_requests_reach_the_observers(
    tmp_path: Path,
    central: CentralServer,  # noqa: F811
    otel: Telemetry,
) -> None:
    cache = LocalCache(tmp_path / "cache", fsync=False)
    cache.define_dataset(INFO)
    rows = [
        {"row_id": f"r{i:03d}", "conv": f"c{i % 3}", "ts": T0 + timedelta(minutes=i)}
        for i in range(30)
    ]
    cache.append("events", rows)
    cache.seal()
    partitions = len(cache.ready_partitions("events"))
    config = load_config(
        {
            "state_dir": str(tmp_path / "state"),
            "sinks": {
                "fwd": {
                    "plugin": "@hypaware/central",
                    "config": {
                        "endpoint": central.url,
                        "token": "${HYP_TOKEN}",
                        "gateway_id": "gw-otel",
                        "backoff_ladder": [0.001],
                        "backoff_budget": 5,
                    },
                }
            },
        }
    )
    central.script(Reply(503, retry_after="0"), Reply(429, retry_after="0"))
    counting = CountingObserver()
    driver = ExportDriver.from_config(
        config, cache=cache, env={"HYP_TOKEN": TOKEN}, observer=(counting, otel.observer)
    )
    try:
        report = await driver.run_once(backfill=True)
    finally:
        await driver.close()
    assert report.ok and len(central.rows("events")) == 30

    requests = partitions + 2  # one chunk per partition, two of them answered "wait"
    s = {"hypaware.sink": "fwd", "hypaware.dataset": "events"}
    assert otel.total("hypaware.export.retry.waits", **s) == 2
    assert (
        otel.total("hypaware.export.retry.waits", **s, **{"hypaware.retry.cause": "http 503"}) == 1
    )
    assert (
        otel.total("hypaware.export.retry.waits", **s, **{"hypaware.retry.cause": "http 429"}) == 1
    )
    assert otel.total("hypaware.export.retry.wait.duration", **s) == 2
    assert sum(counting.of("fwd").retry_waits.values()) == 2
    assert otel.total("http.client.request.duration") == requests
    assert otel.total("http.client.request.duration", **{"http.response.status_code": 200}) == (
        partitions
    )
    assert otel.total("http.client.request.duration", **{"error.type": "503"}) == 1
    assert otel.total("hypaware.export.rows", **s) == 30

    batch_spans = otel.finished("hypaware.export.batch")
    calls = otel.finished("POST")
    assert len(calls) == requests
    by_id = {span.context.span_id: span for span in batch_spans}
    for call in calls:
        assert call.kind == SpanKind.CLIENT
        assert call.parent is not None and call.parent.span_id in by_id
        assert call.attributes is not None
        assert call.attributes["http.request.method"] == "POST"
        assert call.attributes["server.address"] == "127.0.0.1"
        assert TOKEN not in str(dict(call.attributes))
    assert sum(1 for c in calls if c.status.status_code == StatusCode.ERROR) == 2
    waits = [e for span in batch_spans for e in span.events if e.name == "hypaware.retry.wait"]
    assert len(waits) == 2
