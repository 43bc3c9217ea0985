"""A backfill cut short keeps what it has not sent: retention waits until it is sent."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypaware.core.types import ExportBatch, ExportOptions, ExportResult
from hypaware.export.driver import ExportDriver
from tests.driver.helpers import ScriptedSink, all_row_ids, make_cache, spec


class CrashingOnce(ScriptedSink):
    """Writes its first batch, then the process dies before the ack (the batch stays in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.crash = True

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        result = await super().export_batch(batch, opts)
        if self.crash:
            self.crash = False
            raise asyncio.CancelledError
        return result


async def test_a_backfill_cut_short_keeps_the_rest_from_retention_until_it_is_sent(
    tmp_path: Path,
) -> None:
    cache = make_cache(tmp_path / "cache", count=40, retention=timedelta(hours=1))
    everything = all_row_ids(cache)
    sink, idle = CrashingOnce(), CrashingOnce()
    pairs = [(spec("back", max_batch_rows=10), sink), (spec("idle"), idle)]
    driver = ExportDriver(cache, pairs, state=tmp_path / "state")
    try:
        await driver.run_once(sinks=["idle"])  # starts after what is sealed; never backfills
        await driver.run_once(sinks=["back"], backfill=True)
        assert len(sink.batches) == 1, "the pass should stop at the crash"
        assert driver.state.in_flight("back")
        late = datetime.now(UTC) + timedelta(days=30)
        cache.enforce_retention(driver.floors(), now=late)
        kept = {p.id for p in cache.ready_partitions("events")}
        sent = {p.id for p in sink.batches[0].partitions}
        # The batch in flight and every partition the backfill has not sent yet are kept
        # (the idle sink, which never began a backfill, needs none of them).
        assert kept and kept >= sent and len(kept) == len(cache.ready_partitions("events"))
        assert sum(p.row_count for p in cache.ready_partitions("events")) == len(everything)

        report = await driver.run_once(sinks=["back"], backfill=True)
        assert set(sink.rows) == everything
        assert report.sinks["back"].ledger["events"]["before_start"]["partitions"] == 0
        # Sent: retention may now drop them.
        dropped = cache.enforce_retention(driver.floors(), now=late)
        assert dropped.dropped and not cache.ready_partitions("events")
    finally:
        await driver.close()


async def test_partitions_before_a_start_point_no_backfill_began_are_not_kept(
    tmp_path: Path,
) -> None:
    cache = make_cache(tmp_path / "cache", count=20, retention=timedelta(hours=1))
    driver = ExportDriver(cache, [(spec("idle"), ScriptedSink())], state=tmp_path / "state")
    try:
        await driver.run_once()
        cache.enforce_retention(driver.floors(), now=datetime.now(UTC) + timedelta(days=30))
        assert cache.ready_partitions("events") == []
    finally:
        await driver.close()
