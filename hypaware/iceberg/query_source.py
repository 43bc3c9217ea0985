"""Iceberg tables (`TableSink` over `IcebergTableFormat`) as a query source.

`IcebergTableFormat.query_source` makes it (`hypaware.core.query_source`).

The table is read at one snapshot, and a cache partition is claimed when
that snapshot's exactly-once record (`hypaware.iceberg.record`) lists its
seq under the query's own cache identity: rows other caches wrote into a
shared table are read from the table, and this cache's partitions that are
not in the record are read from the cache. A table with snapshots written
before the record existed (``legacy``), or a cache without an identity,
also claims what the progress store says the sink acknowledged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hypaware.core.errors import SourceUnreadableError
from hypaware.core.query_scope import QueryScope
from hypaware.core.query_source import FloorReader, SinkView, acked, restricted
from hypaware.core.types import DatasetInfo, ExportFloor, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.iceberg.record import WriterRecord

__all__ = ["IcebergSource"]


class IcebergSource:
    """A `TableSink` over `IcebergTableFormat` (see the module doc)."""

    def __init__(self, sink_name: str, table_format: Any, cache_identity: str | None) -> None:
        self.sink_name = sink_name
        self.table_format = table_format
        self.cache_identity = cache_identity
        self.part = f"sink {sink_name!r} (Iceberg)"

    async def view(self, info: DatasetInfo, scope: QueryScope, read_floor: FloorReader) -> SinkView:
        import asyncio

        from hypaware.iceberg.record import WriterRecord, read_record, writer_key

        try:
            table = await asyncio.to_thread(self.table_format.load_table, info, create=False)
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot load the table: {exc}") from exc
        held = WriterRecord()
        by_floor = self.cache_identity is None
        if table is not None and table.current_snapshot() is not None:
            try:
                record = read_record(table, self.part)
            except Exception as exc:
                raise SourceUnreadableError(self.part, str(exc)) from exc
            if self.cache_identity is not None:
                held = record.of(writer_key(self.cache_identity, self.sink_name))
            by_floor = by_floor or record.legacy
        # Read after the table: a partition acknowledged here was committed by then.
        floor = read_floor() if by_floor else None
        return _IcebergView(self, info, table, held, floor)


class _IcebergView(SinkView):
    def __init__(
        self,
        source: IcebergSource,
        info: DatasetInfo,
        table: Any,
        held: WriterRecord,
        floor: ExportFloor | None,
    ) -> None:
        self.source = source
        self.part = source.part
        self.info = info
        self.table = table
        self.held = held
        self.floor = floor
        self.scan: Any = None

    def claims(self, part: PartitionRef) -> bool:
        return self.held.holds(part.seq) or acked(self.floor, part)

    def reader(self, scope: QueryScope, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa

        columns = list(scope.columns)
        target = pa.schema([self.info.schema.field(c) for c in columns])
        if self.table is None:
            return pa.RecordBatchReader.from_batches(target, iter(()))
        from pyiceberg.expressions import And

        from hypaware.iceberg.filter import to_iceberg
        from hypaware.iceberg.scan import row_filter

        try:
            expr = row_filter(self.table, self.info, scope.since, scope.until, scope.keys)
            if scope.where is not None:
                expr = And(expr, to_iceberg(scope.where, self.table.schema()))
            # The table object is pinned at the snapshot the view was taken at;
            # pyiceberg prunes files by the filter and reads only `columns`.
            self.scan = self.table.scan(row_filter=expr, selected_fields=tuple(columns))
            reader = self.scan.to_arrow_batch_reader()
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan the table: {exc}") from exc
        return restricted(reader, target)
