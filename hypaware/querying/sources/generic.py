"""Any other `QueryableSink` as a query source: its `scan`, told which partitions to leave out.

A partition is claimed when the progress store says the sink acknowledged
it. Every other partition the sink may hold (pending, in flight after a
crash between the sink's commit and the driver's ack, or answered by the
cache) is passed to `scan` as `exclude`, so no row is read twice. A sink
whose `scan` takes no `exclude` keyword cannot keep that promise and is not
read (`scan_takes_exclude`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hypaware.cache.protocol import ExportFloor
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.errors import SourceUnreadableError
from hypaware.querying.filters import Filters
from hypaware.querying.sources.base import FloorReader, SinkView, _acked, _restricted

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["GenericSource", "scan_takes_exclude"]


def scan_takes_exclude(scan: Any) -> bool:
    """Whether `scan` accepts the `exclude` keyword of `QueryableSink.scan`."""
    try:
        params = inspect.signature(scan).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (p.name == "exclude" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        or p.kind is p.VAR_KEYWORD
        for p in params
    )


class GenericSource:
    """A third-party `QueryableSink`: its `scan`, claims from the progress store."""

    def __init__(self, sink_name: str, sink: Any) -> None:
        self.sink_name = sink_name
        self.sink = sink
        self.part = f"sink {sink_name!r}"

    async def view(self, info: DatasetInfo, filters: Filters, read_floor: FloorReader) -> SinkView:
        return _GenericView(self, info, read_floor())


class _GenericView(SinkView):
    def __init__(self, source: GenericSource, info: DatasetInfo, floor: ExportFloor | None) -> None:
        self.source = source
        self.part = source.part
        self.info = info
        self.floor = floor

    def claims(self, part: PartitionRef) -> bool:
        return _acked(self.floor, part)

    def reader(self, filters: Filters, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa

        target = pa.schema([self.info.schema.field(c) for c in filters.columns])
        # Not acknowledged yet (the sink may have committed them: a lost ack)
        # or answered by the cache: rows of these must come from the cache alone.
        pending = self.floor.pending if self.floor is not None else frozenset()
        exclude = frozenset(pending | {p.id for p in cache_side})
        try:
            reader = self.source.sink.scan(
                self.info, columns=None, filter=filters.tree(self.info), exclude=exclude
            )
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan: {exc}") from exc
        return _restricted(reader, target)
