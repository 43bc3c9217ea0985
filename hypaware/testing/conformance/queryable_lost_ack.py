"""The queryable check that runs the real export driver and query planner.

The sink commits a batch of several partitions, the process "dies" before
the driver records the ack, and `hypaware.query` must still return every
row once: the partitions in flight are read from the cache, and the sink
must leave every one of them out (`exclude` names them all), not only some.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from hypaware.core.contracts import Sink
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult
from hypaware.testing.conformance.data import sample_dataset, sample_table
from hypaware.testing.conformance.promises import ContractViolation, Promise
from hypaware.testing.conformance.scan_rules import expect_ids, ids_once
from hypaware.testing.conformance.sink_harness import SinkHarness, _build

__all__ = ["check_query_after_lost_ack_reads_rows_once"]


async def check_query_after_lost_ack_reads_rows_once(h: SinkHarness) -> None:
    """Commit, crash before the ack: `hypaware.query` still reads every row once."""
    with tempfile.TemporaryDirectory(prefix="hypaware-conformance-") as scratch:
        await _lost_ack(h, Path(scratch))


def _crash_after_commit(sink: Sink) -> Callable[[], None]:
    """Make `sink` die right after its export returns, as a killed process would."""
    real: Callable[[ExportBatch, ExportOptions], Awaitable[ExportResult]] = sink.export_batch

    async def commit_then_crash(batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        await real(batch, opts)
        raise asyncio.CancelledError  # the ack is never recorded

    sink.export_batch = commit_then_crash  # type: ignore[method-assign]

    def heal() -> None:
        sink.export_batch = real  # type: ignore[method-assign,assignment]

    return heal


async def _lost_ack(h: SinkHarness, scratch: Path) -> None:
    from hypaware.cache.local import LocalCache
    from hypaware.core.config import SinkSpec
    from hypaware.core.config_loader import load_config
    from hypaware.export.driver import ExportDriver
    from hypaware.querying.api import plan_query
    from hypaware.querying.sources import sink_source

    dataset = sample_dataset("conformance_query")
    config = load_config(
        {"state_dir": str(scratch / "state"), "cache": {"path": str(scratch / "cache")}}
    )
    cache = LocalCache.from_config(config)
    cache.define_dataset(dataset)
    sink = await _build(h)
    if sink_source("conformance", sink) is None:
        await sink.close()
        raise ContractViolation(
            Promise.SCAN_EXCLUDE,
            f"{type(sink).__name__} is declared queryable but cannot be read exactly "
            "(its scan() takes no 'exclude' keyword)",
        )
    spec = SinkSpec(name="conformance")
    driver = ExportDriver(cache, [(spec, sink)], state=scratch / "state")
    expected: list[str] = []

    def seal(part: str, rows: int, seq: int) -> None:
        table = sample_table(dataset, part, rows, seq=seq)
        cache.append(dataset.name, table.to_pylist())
        cache.seal(dataset.name)
        expected.extend(str(r) for r in table.column("row_id").to_pylist())

    async def read(doing: str) -> None:
        _plan, reader = await plan_query(driver, dataset.name)
        got = ids_once(reader.read_all(), doing, Promise.SCAN_EXCLUDE)
        expect_ids(got, expected, doing, Promise.SCAN_EXCLUDE)

    try:
        seal("a", 20, 1)
        await driver.run_once(backfill=True)
        await read("a query after an acknowledged export")
        # Several partitions in the lost batch, so `exclude` names several ids.
        for n, part in enumerate(("b", "c", "d"), start=2):
            seal(part, 15 - n, n)
        heal = _crash_after_commit(sink)
        await driver.run_once(backfill=True)
        lost = driver.state.in_flight("conformance")
        if sum(len(b.partitions) for b in lost) != 3:
            raise AssertionError("the crashed export should have left 3 partitions in flight")
        await read(
            "a query after the sink committed a batch of 3 partitions whose ack was lost "
            "(the partitions are in flight, and held by both the cache and the sink)"
        )
        heal()
        await driver.run_once(backfill=True)
        await read("a query after the lost batch was sent again and acknowledged")
    finally:
        await driver.close()
