"""`TableSink`: a `TableFormat` (built on a blob store and an encoder) as a `Sink`."""

from __future__ import annotations

import logging

from hypaware.core.contracts import AsyncClosing, TableFormat
from hypaware.core.errors import SinkClosedError
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult

__all__ = ["TableSink"]

log = logging.getLogger(__name__)


class TableSink(AsyncClosing):
    """Adds the sink lifecycle to a table format.

    Errors from the table format come back as `retry_partitions`, never as
    exceptions; every partition of a batch is accounted for.
    """

    def __init__(self, name: str, table: TableFormat) -> None:
        self.name = name
        self.table = table
        self._closed = False

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self._closed:
            raise SinkClosedError(f"sink {self.name!r} is closed")
        try:
            result = await self.table.write_batch(batch, opts)
        except Exception as exc:
            # One line per batch; the driver warns once per batch and reason.
            log.info(
                "sink %s: dataset %s: batch %s of %d partitions failed: %s",
                self.name,
                batch.dataset.name,
                batch.batch_id,
                len(batch.partitions),
                exc,
                extra={
                    "sink": self.name,
                    "dataset": batch.dataset.name,
                    "batch_id": batch.batch_id,
                    "partitions": len(batch.partitions),
                },
            )
            return ExportResult.failed(batch, f"{type(exc).__name__}: {exc}")
        return result.reconcile(batch)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.table.close()

    def __repr__(self) -> str:
        return f"TableSink({self.name!r}, {self.table!r})"
