"""`TableSink`: a `TableFormat` (built on a blob store and an encoder) as a `Sink`."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hypaware.core.contracts import AsyncClosing, MaintainedTableFormat, TableFormat
from hypaware.core.errors import SinkClosedError
from hypaware.core.query_source import GenericSource, ProvidesQuerySource, QuerySource
from hypaware.core.types import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    ExportResult,
    MaintenanceReport,
)

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

    def query_source(self, name: str, cache_identity: str | None) -> QuerySource | None:
        """The table format's own source if it provides one, else its exact `scan`'s, if any.

        A table format without either cannot be read back (`ProvidesQuerySource`).
        """
        table = self.table
        if isinstance(table, ProvidesQuerySource):
            return table.query_source(name, cache_identity)
        return GenericSource(name, table) if GenericSource.exact(table) else None

    def maintenance_schedule(self) -> str | None:
        """The table format's maintenance schedule (`MaintainedSink`); None if it has none."""
        table = self.table
        return table.maintenance_schedule() if isinstance(table, MaintainedTableFormat) else None

    async def maintain(
        self, datasets: Sequence[DatasetInfo], *, now: datetime
    ) -> MaintenanceReport:
        """Run the table format's `maintain(dataset, now=)` for each dataset (`MaintainedSink`).

        A table format that is not a `MaintainedTableFormat` has nothing to maintain.
        """
        if self._closed:
            raise SinkClosedError(f"sink {self.name!r} is closed")
        table = self.table
        if not isinstance(table, MaintainedTableFormat):
            return MaintenanceReport(self.name)
        started = time.monotonic()
        counts: dict[str, dict[str, Any]] = {}
        errors: list[str] = []
        for dataset in datasets:
            try:
                result = await table.maintain(dataset, now=now)
            except SinkClosedError:
                raise
            except Exception as exc:
                errors.append(f"dataset {dataset.name!r}: {type(exc).__name__}: {exc}")
                continue
            body = dict(result.as_dict())
            body.pop("dataset", None)
            errors.extend(body.pop("errors", ()))
            counts[dataset.name] = body
        return MaintenanceReport(self.name, counts, tuple(errors), time.monotonic() - started)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.table.close()

    def __repr__(self) -> str:
        return f"TableSink({self.name!r}, {self.table!r})"
