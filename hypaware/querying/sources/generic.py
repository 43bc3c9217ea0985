"""Any other `QueryableSink` as a query source: its `scan`, claims from the progress store alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hypaware.cache.protocol import ExportFloor
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.errors import SourceUnreadableError
from hypaware.querying.filters import Filters
from hypaware.querying.sources.base import FloorReader, SinkView, _acked, _restricted

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["GenericSource"]


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
        try:
            reader = self.source.sink.scan(self.info, columns=None, filter=filters.tree(self.info))
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan: {exc}") from exc
        return _restricted(reader, None, target)
