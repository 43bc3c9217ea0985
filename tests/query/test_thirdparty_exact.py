"""A third-party `QueryableSink` is read exactly: every row once, even after a lost ack."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hypaware.core.config import SinkSpec
from hypaware.core.filter import Filter
from hypaware.core.filter_bind import to_arrow
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.export.driver import ExportDriver
from hypaware.querying.api import plan_query
from hypaware.querying.errors import NotQueryableError

from .helpers import INFO, cache_for, config, fill, ids, make_rows


class TaggedTableSink:
    """Keeps each partition's rows under its id, commits per partition, scans honouring exclude."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], pa.Table] = {}
        self.crash = False
        self.closed = False

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        rows = 0
        for part in batch.partitions:
            key = (batch.dataset.name, part.id)
            if key not in self.tables:
                self.tables[key] = part.open().read_all()
                rows += part.row_count
        if self.crash:
            # Committed at the destination, then the process dies before the ack.
            raise asyncio.CancelledError
        return ExportResult(exported=[p.id for p in batch.partitions], rows_written=rows)

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        wanted = list(columns) if columns is not None else dataset.schema.names
        kept = [
            table
            for (name, part_id), table in sorted(self.tables.items())
            if name == dataset.name and part_id not in exclude
        ]
        table = pa.concat_tables(kept) if kept else dataset.schema.empty_table()
        if filter is not None:
            table = table.filter(to_arrow(filter, dataset.schema))
        return pa.RecordBatchReader.from_batches(
            table.select(wanted).schema, table.select(wanted).to_batches()
        )

    async def close(self) -> None:
        self.closed = True


class UntaggedSink(TaggedTableSink):
    """Its scan cannot leave partitions out: no `exclude` keyword."""

    def scan(  # type: ignore[override]
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
    ) -> pa.RecordBatchReader:
        return super().scan(dataset, columns=columns, filter=filter)


def driver_for(tmp_path: Path, sink: Any) -> tuple[ExportDriver, Any]:
    cfg = config(tmp_path)
    cache = cache_for(cfg)
    driver = ExportDriver(cache, [(SinkSpec(name="acme"), sink)], state=tmp_path / "state")
    return driver, cache


async def commit_then_crash(driver: ExportDriver, cache: Any, sink: TaggedTableSink) -> None:
    """48 rows exported in two passes; the second batch commits, then the ack is lost."""
    fill(cache, make_rows(0, 24, day=0))
    await driver.run_once(backfill=True)
    fill(cache, make_rows(24, 24, day=1))
    sink.crash = True
    await driver.run_once(backfill=True)
    assert driver.state.in_flight("acme"), "the second batch should be left in flight"


async def test_commit_then_crash_before_ack_reads_every_row_once(tmp_path: Path) -> None:
    sink = TaggedTableSink()
    driver, cache = driver_for(tmp_path, sink)
    try:
        await commit_then_crash(driver, cache, sink)
        # The sink holds all 48 rows; 24 of them are not acknowledged.
        assert sum(t.num_rows for t in sink.tables.values()) == 48

        plan, reader = await plan_query(driver, "events")
        assert ids(reader) == list(range(48))
        assert len(plan.cache_partitions) == 3  # the unacknowledged ones (one per conv)
        _plan, reader = await plan_query(driver, "events", where="tokens > 3")
        got = ids(reader)
        assert got == sorted(set(got)) and len(got) == sum(1 for i in range(48) if i % 17 > 3)

        # The re-send is acknowledged: still every row once, now all from the sink.
        sink.crash = False
        await driver.run_once(backfill=True)
        assert not driver.state.in_flight("acme")
        plan, reader = await plan_query(driver, "events")
        assert ids(reader) == list(range(48))
        assert plan.cache_partitions == []
    finally:
        await driver.close()


async def test_a_scan_without_exclude_is_not_read(tmp_path: Path) -> None:
    driver, cache = driver_for(tmp_path, UntaggedSink())
    try:
        fill(cache, make_rows(0, 10))
        await driver.run_once(backfill=True)
        with pytest.raises(NotQueryableError, match="'acme' is not queryable"):
            await plan_query(driver, INFO.name, sink="acme")
    finally:
        await driver.close()
