"""Iceberg tables (`TableSink` over `IcebergTableFormat`) as a query source.

The table is read at one snapshot, and a partition is claimed when a
snapshot in that snapshot's history lists it in its ``hypaware.partitions``
summary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hypaware.cache.protocol import ExportFloor
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.errors import SourceUnreadableError
from hypaware.querying.filters import Filters
from hypaware.querying.sources.base import FloorReader, SinkView, _acked, _restricted

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["IcebergSource"]

_PARTITIONS = "hypaware.partitions"
_FAILED = "hypaware.failed-partitions"


class IcebergSource:
    """A `TableSink` over `IcebergTableFormat` (see the module doc)."""

    def __init__(self, sink_name: str, table_format: Any) -> None:
        self.sink_name = sink_name
        self.table_format = table_format
        self.part = f"sink {sink_name!r} (Iceberg)"

    async def view(self, info: DatasetInfo, filters: Filters, read_floor: FloorReader) -> SinkView:
        import asyncio

        try:
            table = await asyncio.to_thread(self.table_format.load_table, info, create=False)
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot load the table: {exc}") from exc
        listed: set[str] = set()
        unlisted = 0
        if table is not None and table.current_snapshot() is not None:
            from pyiceberg.table.snapshots import ancestors_of

            for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
                extra = snapshot.summary.additional_properties if snapshot.summary else {}
                if "hypaware.batch-id" not in extra:
                    continue
                if _PARTITIONS not in extra:
                    unlisted += 1
                    continue
                failed = set(json.loads(extra.get(_FAILED, "[]")))
                listed.update(p for p in extra[_PARTITIONS].split(",") if p and p not in failed)
        # Read after the table: a partition acknowledged here was committed by then.
        floor = read_floor() if unlisted else None
        return _IcebergView(self, info, table, listed, floor)


class _IcebergView(SinkView):
    def __init__(
        self,
        source: IcebergSource,
        info: DatasetInfo,
        table: Any,
        listed: set[str],
        floor: ExportFloor | None,
    ) -> None:
        self.source = source
        self.part = source.part
        self.info = info
        self.table = table
        self.listed = listed
        self.floor = floor
        self.scan: Any = None

    def claims(self, part: PartitionRef) -> bool:
        # Snapshots too large to list their partitions fall back on the progress store.
        return part.id in self.listed or _acked(self.floor, part)

    def reader(self, filters: Filters, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa

        columns = list(filters.columns)
        target = pa.schema([self.info.schema.field(c) for c in columns])
        if self.table is None:
            return pa.RecordBatchReader.from_batches(target, iter(()))
        from pyiceberg.expressions import And

        from hypaware.iceberg.filter import to_iceberg
        from hypaware.iceberg.scan import row_filter

        try:
            expr = row_filter(self.table, self.info, filters.since, filters.until, filters.keys)
            if filters.where is not None:
                expr = And(expr, to_iceberg(filters.where, self.table.schema()))
            # The table object is pinned at the snapshot the view was taken at;
            # pyiceberg prunes files by the filter and reads only `columns`.
            self.scan = self.table.scan(row_filter=expr, selected_fields=tuple(columns))
            reader = self.scan.to_arrow_batch_reader()
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan the table: {exc}") from exc
        return _restricted(reader, target)
