"""Iceberg: a batch committed but never acknowledged (a crash) is read once, from the table."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import hypaware
from hypaware.blob.table_sink import TableSink
from hypaware.core.config import SinkSpec
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult
from hypaware.export.driver import ExportDriver
from hypaware.querying.api import plan_query

from .helpers import cache_for, config, iceberg_sink, ids, make_rows

pytestmark = pytest.mark.iceberg


class CrashingSink(TableSink):
    """Commits, then dies before the driver records the acknowledgement."""

    crash = True

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        result = await super().export_batch(batch, opts)
        if self.crash:
            raise asyncio.CancelledError
        return result


async def test_committed_unacknowledged_batch_is_read_once(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"ice": iceberg_sink(tmp_path / "wh")})
    cache = cache_for(cfg)
    cache.append("events", make_rows(0, 40, day=0))
    cache.seal("events")
    (plan_,) = hypaware.resolve(cfg)
    built = hypaware.build(plan_, config=cfg)
    sink = CrashingSink("ice", built.table)
    driver = ExportDriver(cache, [(SinkSpec(name="ice"), sink)], state=tmp_path / "state")
    try:
        await driver.run_once(backfill=True)
        assert driver.state.in_flight("ice"), "the batch should be left in flight"
        plan, reader = await plan_query(driver, "events")
        assert ids(reader) == list(range(40))
        assert plan.cache_partitions == []  # the table's snapshot lists them

        # The re-send finds its commit; still every row once.
        sink.crash = False
        cache.append("events", make_rows(40, 10, day=1))
        cache.seal("events")
        await driver.run_once(backfill=True)
        assert not driver.state.in_flight("ice")
        plan, reader = await plan_query(driver, "events")
        assert ids(reader) == list(range(50))
    finally:
        await driver.close()
