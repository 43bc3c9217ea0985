"""Small in-memory sinks for testing the conformance suite itself.

`ListSink` keeps every promise; each subclass breaks exactly one, the way a
real sink gets it wrong.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from typing import Any

import pyarrow as pa

from hypaware import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    ExportResult,
    RetryPartition,
    SinkClosedError,
)
from hypaware.core.filter import Filter
from hypaware.core.filter_bind import to_arrow


class Destination:
    """Where the toy sinks write: rows per (dataset, partition), as a server would keep them."""

    def __init__(self) -> None:
        # (cache identity, dataset, partition id): an id is unique only within its cache.
        self.partitions: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self.appended: dict[str, list[dict[str, Any]]] = {}

    def rows(self, dataset: str) -> list[dict[str, Any]]:
        out = [row for (_, ds, _), rows in self.partitions.items() if ds == dataset for row in rows]
        return out + self.appended.get(dataset, [])


class ListSink:
    """Replaces a partition's rows on re-export, reports unreadable partitions, closes promptly."""

    def __init__(self, dest: Destination, token: str = "") -> None:
        self.dest = dest
        self._token = token
        self._closed = False
        self._closing = asyncio.Event()

    def _read(self, batch: ExportBatch, part_id: str) -> list[dict[str, Any]]:
        part = next(p for p in batch.partitions if p.id == part_id)
        return [row for record_batch in part.open() for row in record_batch.to_pylist()]

    def _store(self, batch: ExportBatch, part_id: str, rows: list[dict[str, Any]]) -> None:
        self.dest.partitions[(batch.cache_identity, batch.dataset.name, part_id)] = rows

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self._closed:
            raise SinkClosedError("list sink is closed")
        exported: list[str] = []
        retry: list[RetryPartition] = []
        rows = 0
        for part in batch.partitions:
            if self._closing.is_set():
                retry.append(RetryPartition(part.id, "the sink is closing"))
                continue
            try:
                data = self._read(batch, part.id)
            except Exception as exc:
                retry.append(RetryPartition(part.id, f"cannot read: {exc}"))
                continue
            self._store(batch, part.id, data)
            rows += len(data)
            exported.append(part.id)
            await asyncio.sleep(0)
        return ExportResult(exported=exported, retry_partitions=retry, rows_written=rows)

    async def close(self) -> None:
        self._closing.set()
        self._closed = True

    def __repr__(self) -> str:
        return "ListSink()"


class DuplicatingSink(ListSink):
    """Appends on every export, so a re-exported batch doubles its rows."""

    def _store(self, batch: ExportBatch, part_id: str, rows: list[dict[str, Any]]) -> None:
        self.dest.appended.setdefault(batch.dataset.name, []).extend(rows)


class BatchKeyedSink(ListSink):
    """Dedupes per (batch id, partition): a partition respooled into a new batch lands twice."""

    def _store(self, batch: ExportBatch, part_id: str, rows: list[dict[str, Any]]) -> None:
        key = (batch.cache_identity, batch.dataset.name, f"{batch.batch_id}/{part_id}")
        self.dest.partitions[key] = rows


class IdKeyedSink(ListSink):
    """Keys partitions by (dataset, id) alone: a second cache's p1 replaces the first's."""

    def _store(self, batch: ExportBatch, part_id: str, rows: list[dict[str, Any]]) -> None:
        self.dest.partitions[("", batch.dataset.name, part_id)] = rows


class BlockingCloseSink(ListSink):
    """close() waits for a drain that never comes."""

    async def close(self) -> None:
        self._closed = True
        await asyncio.Event().wait()


class RaisingSink(ListSink):
    """Lets a partition's read error escape through export_batch."""

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self._closed:
            raise SinkClosedError("raising sink is closed")
        rows = 0
        for part in batch.partitions:
            data = self._read(batch, part.id)
            self._store(batch, part.id, data)
            rows += len(data)
        return ExportResult(exported=[p.id for p in batch.partitions], rows_written=rows)


class ReopeningSink(ListSink):
    """Quietly exports after close() instead of refusing."""

    async def close(self) -> None:
        self._closing.set()


class ForgetfulSink(ListSink):
    """Drops the last partition of each batch from its result."""

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        result = await super().export_batch(batch, opts)
        return ExportResult(exported=result.exported[:-1], rows_written=result.rows_written)


class LeakyReprSink(ListSink):
    """Shows its token in repr()."""

    def __repr__(self) -> str:
        return f"LeakyReprSink(token={self._token!r})"


class ScanListSink(ListSink):
    """A queryable `ListSink`: scans its partitions, leaving out those in `exclude`."""

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        rows = [
            row
            for (_, name, part_id), held in sorted(self.dest.partitions.items())
            if name == dataset.name and part_id not in self._left_out(exclude)
            for row in held
        ]
        table = pa.Table.from_pylist(rows, schema=dataset.schema)
        if filter is not None:
            table = table.filter(to_arrow(filter, dataset.schema))
        if columns is not None:
            table = table.select(list(columns))
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())

    def _left_out(self, exclude: Collection[str]) -> Collection[str]:
        return exclude


class ExcludeIgnoringSink(ScanListSink):
    """Takes `exclude` but returns every partition anyway."""

    def _left_out(self, exclude: Collection[str]) -> Collection[str]:
        return ()


class PartlyExcludingSink(ScanListSink):
    """Honours only the first id of `exclude` (in sorted order), returning the others' rows."""

    def _left_out(self, exclude: Collection[str]) -> Collection[str]:
        return sorted(exclude)[:1]


class OverridingScanSink(ScanListSink):
    """A `ScanListSink` whose scan output passes through `_finish` (each subclass breaks it)."""

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        table = super().scan(dataset, columns=columns, filter=filter, exclude=exclude).read_all()
        table = self._finish(table)
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())

    def _finish(self, table: pa.Table) -> pa.Table:
        return table


class ShiftedValueSink(OverridingScanSink):
    """Returns every `value` one too high: the right rows, the wrong answers."""

    def _finish(self, table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        if "value" not in table.column_names:
            return table
        at = table.column_names.index("value")
        return table.set_column(at, "value", pc.add(table.column("value"), 1))


class EpochSecondsSink(OverridingScanSink):
    """Returns `ts` as int64 epoch seconds, a type that casts to a timestamp (to another time)."""

    def _finish(self, table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        if "ts" not in table.column_names:
            return table
        at = table.column_names.index("ts")
        seconds = pc.divide(table.column("ts").cast(pa.int64()), 1_000_000)
        return table.set_column(at, "ts", seconds)


class NullsAsEmptySink(OverridingScanSink):
    """Returns a null `key` as the empty string, as a store without nulls would."""

    def _finish(self, table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        if "key" not in table.column_names:
            return table
        at = table.column_names.index("key")
        return table.set_column(at, "key", pc.fill_null(table.column("key"), ""))


class FilterIgnoringSink(ScanListSink):
    """Takes `filter` but returns every row anyway."""

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        return super().scan(dataset, columns=columns, exclude=exclude)


class DatasetOrderSink(ScanListSink):
    """Returns the requested columns in the dataset's order, not the order asked for."""

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        wanted = None if columns is None else set(columns)
        ordered = None if wanted is None else [n for n in dataset.schema.names if n in wanted]
        return super().scan(dataset, columns=ordered, filter=filter, exclude=exclude)
