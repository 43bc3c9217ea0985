"""Conformance checks for sinks that claim ``queryable``: reads are exact.

`scan_is_exact` calls `QueryableSink.scan` directly: every committed row
once, none of a partition in `exclude`, the columns asked for, only rows the
filter passes. `query_after_lost_ack_reads_rows_once` runs the real export
driver and query planner over a local cache: the sink commits a batch, the
process "dies" before the driver records the ack, and `hypaware.query` must
still return every row once (the partitions in flight are read from the
cache and left out of the sink). First-party sinks read through their own
query sources take only the second check.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypaware.core.contracts import QueryableSink, Sink
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.testing.data import expected_rows, sample_dataset, sample_table
from hypaware.testing.promises import CheckSkipped, ContractViolation, Promise
from hypaware.testing.sink_harness import (
    SinkHarness,
    _build,
    _closing,
    _export,
    _healthy_batch,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["QUERYABLE_CHECKS"]


def _ids_once(table: pa.Table, doing: str) -> Counter[str]:
    counts = Counter(str(r) for r in table.column("row_id").to_pylist())
    twice = sorted(r for r, n in counts.items() if n > 1)
    if twice:
        raise ContractViolation(
            Promise.SCAN_EXACT, f"{doing} returned {len(twice)} row(s) twice (e.g. {twice[:3]})"
        )
    return counts


def _expect(counts: Counter[str], expected: Iterable[str], doing: str) -> None:
    want = set(expected)
    missing = sorted(want - set(counts))
    extra = sorted(set(counts) - want)
    if missing or extra:
        raise ContractViolation(
            Promise.SCAN_EXACT,
            f"{doing} returned {len(extra)} row(s) it should not (e.g. {extra[:3]}) and "
            f"missed {len(missing)} (e.g. {missing[:3]})",
        )


def _scan(sink: QueryableSink, dataset: DatasetInfo, doing: str, **kw: Any) -> pa.Table:
    try:
        return sink.scan(dataset, **kw).read_all()
    except Exception as exc:
        raise ContractViolation(
            Promise.SCAN_EXACT, f"{doing} raised {type(exc).__name__}: {exc}"
        ) from exc


async def check_scan_is_exact(h: SinkHarness) -> None:
    """`scan`: committed rows once, `exclude` honoured, projection and filter honoured."""
    from hypaware.core.filter import col
    from hypaware.core.filter_bind import bind_filter

    batch = _healthy_batch("conformance_scan", [12, 7, 5], batch_id="b1")
    dataset = batch.dataset
    async with _closing(h, await _build(h)) as sink:
        if not callable(getattr(sink, "scan", None)):
            raise CheckSkipped(
                f"{type(sink).__name__} has no scan(); hypaware reads it through its own "
                "query source (checked by query_after_lost_ack_reads_rows_once)"
            )
        assert isinstance(sink, QueryableSink)
        await _export(h, sink, batch)
        every: dict[str, int] = {}
        for part in batch.partitions:
            every.update(expected_rows(dataset.name, part.id, part.row_count, seq=part.seq))
        doing = f"scan() after exporting batch {batch.batch_id!r}"
        _expect(_ids_once(_scan(sink, dataset, doing), doing), every, doing)

        doing = "scan(exclude={'p2'})"
        got = _ids_once(_scan(sink, dataset, doing, exclude=frozenset({"p2"})), doing)
        _expect(got, [r for r in every if "/p2/" not in r], doing)

        doing = "scan(columns=['value', 'row_id'])"
        table = _scan(sink, dataset, doing, columns=["value", "row_id"])
        if table.schema.names != ["value", "row_id"]:
            raise ContractViolation(
                Promise.SCAN_PROJECTION, f"{doing} returned columns {table.schema.names}"
            )
        for field in table.schema:
            want = dataset.schema.field(field.name).type
            if field.type != want and not _casts(table.column(field.name), want):
                raise ContractViolation(
                    Promise.SCAN_PROJECTION,
                    f"{doing} returned {field.name!r} as {field.type}, which does not cast "
                    f"to the dataset's {want}",
                )
        _expect(_ids_once(table, doing), every, doing)

        threshold = sorted(every.values())[len(every) // 2]
        doing = f"scan(filter=col('value') >= {threshold})"
        where = bind_filter(col("value") >= threshold, dataset.schema)
        table = _scan(sink, dataset, doing, filter=where)
        _expect(_ids_once(table, doing), [r for r, v in every.items() if v >= threshold], doing)


def _casts(column: Any, target: Any) -> bool:
    try:
        column.cast(target)
    except Exception:
        return False
    return True


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
            Promise.SCAN_EXACT,
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
        got = _ids_once(reader.read_all(), doing)
        _expect(got, expected, doing)

    try:
        seal("a", 20, 1)
        await driver.run_once(backfill=True)
        await read("a query after an acknowledged export")
        seal("b", 15, 2)
        heal = _crash_after_commit(sink)
        await driver.run_once(backfill=True)
        if not driver.state.in_flight("conformance"):
            raise AssertionError("the crashed export should have left its batch in flight")
        await read(
            "a query after the sink committed a batch whose ack was lost (the partitions "
            "are in flight, and held by both the cache and the sink)"
        )
        heal()
        await driver.run_once(backfill=True)
        await read("a query after the lost batch was sent again and acknowledged")
    finally:
        await driver.close()


QUERYABLE_CHECKS: dict[str, Callable[[SinkHarness], Awaitable[None]]] = {
    "scan_is_exact": check_scan_is_exact,
    "query_after_lost_ack_reads_rows_once": check_query_after_lost_ack_reads_rows_once,
}
