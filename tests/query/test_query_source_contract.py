"""The query-source contract: a sink that provides its own `QuerySource` is read through it,
as the first-party sinks are."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from hypaware.blob.table_sink import TableSink
from hypaware.core.query_scope import QueryScope
from hypaware.core.query_source import (
    FloorReader,
    GenericSource,
    ProvidesQuerySource,
    SinkView,
    filtered,
)
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.api import plan_query
from hypaware.querying.sources import sink_source

from .helpers import ids
from .test_thirdparty_exact import TaggedTableSink, UntaggedSink, commit_then_crash, driver_for


class SelfReadSink(TaggedTableSink):
    """Knows which partitions it committed, so it claims them with or without an ack."""

    def __init__(self) -> None:
        super().__init__()
        self.identities: list[str | None] = []

    def query_source(self, name: str, cache_identity: str | None) -> _Source:
        self.identities.append(cache_identity)
        return _Source(self, name)


class _Source:
    def __init__(self, sink: SelfReadSink, name: str) -> None:
        self.sink = sink
        self.part = f"sink {name!r}"

    async def view(self, info: DatasetInfo, scope: QueryScope, read_floor: FloorReader) -> SinkView:
        held = {pid for (name, pid) in self.sink.tables if name == info.name}
        return _View(self.sink, info, held, self.part)


class _View(SinkView):
    def __init__(self, sink: SelfReadSink, info: DatasetInfo, held: set[str], part: str) -> None:
        self.sink, self.info, self.held, self.part = sink, info, held, part

    def claims(self, part: PartitionRef) -> bool:
        return part.id in self.held

    def reader(self, scope: QueryScope, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        target = pa.schema([self.info.schema.field(c) for c in scope.columns])
        left_out = {p.id for p in cache_side}
        tables = [
            t
            for (name, pid), t in sorted(self.sink.tables.items())
            if name == self.info.name and pid in self.held and pid not in left_out
        ]
        expr = scope.expression(self.info)
        batches = [
            out
            for t in tables
            for batch in t.to_batches()
            for out in filtered(batch, expr, list(scope.columns), target)
        ]
        return pa.RecordBatchReader.from_batches(target, iter(batches))


async def test_a_sinks_own_source_claims_what_it_committed_though_the_ack_was_lost(
    tmp_path: Path,
) -> None:
    sink = SelfReadSink()
    assert isinstance(sink, ProvidesQuerySource)
    driver, cache = driver_for(tmp_path, sink)
    try:
        await commit_then_crash(driver, cache, sink)

        plan, reader = await plan_query(driver, "events")
        assert ids(reader) == list(range(48))
        # Unlike a plain `scan` (read by acknowledgement), the sink vouches for
        # the batch it committed: nothing is read from the cache.
        assert plan.cache_partitions == []
        assert sink.identities and sink.identities[-1] == cache.identity
        _plan, reader = await plan_query(driver, "events", where="tokens > 3")
        assert ids(reader) == [i for i in range(48) if i % 17 > 3]
    finally:
        await driver.close()


class _Format:
    """A table format without a source of its own, with or without an exact `scan`."""

    def __init__(self, scan: Any) -> None:
        if scan is not None:
            self.scan = scan

    async def write_batch(self, batch: Any, opts: Any) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        pass


def test_a_table_sink_is_read_through_its_table_formats_source_or_exact_scan() -> None:
    tagged = TaggedTableSink()
    exact = sink_source("t", TableSink("t", _Format(tagged.scan)))  # type: ignore[arg-type]
    assert isinstance(exact, GenericSource)
    loose = TableSink("t", _Format(UntaggedSink().scan))  # type: ignore[arg-type]
    assert sink_source("t", loose) is None
    assert sink_source("t", TableSink("t", _Format(None))) is None  # type: ignore[arg-type]
    own = SelfReadSink()
    via = TableSink("t", own)  # type: ignore[arg-type]
    source = sink_source("t", via, "cache-1")
    assert isinstance(source, _Source) and own.identities == ["cache-1"]
