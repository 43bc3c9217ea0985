"""Where a query reads rows from: cache partitions and one queryable sink, in place.

Each sink source takes a consistent view of what the sink holds and answers,
per cache partition, whether the sink vouches for all of that partition's
rows (`SinkView.claims`). The query reads claimed partitions from the sink
and the rest from the cache, and tells the view which partitions the cache
answers for so the sink never returns them too (`SinkView.reader`).

- Parquet blob sinks (`BlobSink` with a Parquet encoder): object names carry
  the batch (``part-<hash of sink, dataset, batch id>``) and the sink's
  `BatchIndex` says which partitions each batch holds. Files of an open
  batch are never read; a file is left out when its batch holds a partition
  the cache answers for or one still in flight. A partition is claimed when
  the progress store says the sink acknowledged it and a listed batch holds
  it; the store is read before the listing, the index after it, and a sink
  acknowledges only after every file of the batch is in place.
- Iceberg (`TableSink` over `IcebergTableFormat`): the table is read at one
  snapshot, and a partition is claimed when a snapshot in that snapshot's
  history lists it in its ``hypaware.partitions`` summary.
- Any other `QueryableSink`: its `scan`, with partitions claimed by the
  progress store alone.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.cache.protocol import ExportFloor
from hypaware.core.errors import HypawareError
from hypaware.core.paths import encode_segment
from hypaware.querying.errors import QueryInputError, SourceUnreadableError
from hypaware.core.types import DatasetInfo, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

    from hypaware.blob.batch_index import BatchIndex, BatchRecord
    from hypaware.blob.store import ObstoreBlobStore

__all__ = [
    "Filters",
    "GenericSource",
    "IcebergSource",
    "ParquetSource",
    "SinkView",
    "sink_source",
]

log = logging.getLogger(__name__)

FloorReader = Callable[[], ExportFloor | None]

# Listing day by day beats listing the whole dataset up to about this many days.
_MAX_LISTED_DAYS = 366
_PARTITIONS = "hypaware.partitions"
_FAILED = "hypaware.failed-partitions"


@attrs.frozen
class Filters:
    """A query's restrictions, checked against the dataset: times are aware UTC datetimes."""

    columns: tuple[str, ...]
    since: datetime | None = None
    until: datetime | None = None
    keys: tuple[Any, ...] | None = None
    where: pc.Expression | None = None

    def overlaps(self, part: PartitionRef) -> bool:
        """Whether `part` may hold rows in [since, until) (from its time range)."""
        if self.since is not None and part.max_time is not None and part.max_time < self.since:
            return False
        return not (
            self.until is not None and part.min_time is not None and part.min_time >= self.until
        )

    def day_range(self) -> tuple[date | None, date | None]:
        """The first and last UTC day of [since, until); None where open-ended."""
        first = self.since.date() if self.since is not None else None
        last = (self.until - timedelta(microseconds=1)).date() if self.until is not None else None
        return first, last

    def days(self) -> list[str] | None:
        """The UTC days [since, until) spans, or None when open-ended or long."""
        first, last = self.day_range()
        if first is None or last is None:
            return None
        if last < first:
            return []
        count = (last - first).days + 1
        if count > _MAX_LISTED_DAYS:
            return None
        return [(first + timedelta(days=i)).isoformat() for i in range(count)]

    def expression(self, info: DatasetInfo) -> pc.Expression | None:
        """Time range, keys and `where` as one pyarrow expression over the dataset."""
        import pyarrow as pa
        import pyarrow.compute as pc

        parts: list[pc.Expression] = []
        field = info.schema.field(info.time_column)
        column = pc.field(info.time_column)
        if self.since is not None:
            parts.append(column >= _time_scalar(self.since, field.type))
        if self.until is not None:
            parts.append(column < _time_scalar(self.until, field.type))
        if self.keys is not None:
            assert info.lookup_key is not None
            key_type = info.schema.field(info.lookup_key).type
            parts.append(pc.field(info.lookup_key).isin(pa.array(self.keys, type=key_type)))
        if self.where is not None:
            parts.append(self.where)
        if not parts:
            return None
        expr = parts[0]
        for p in parts[1:]:
            expr = expr & p
        return expr


def _time_scalar(when: datetime, typ: pa.DataType) -> pa.Scalar:
    import pyarrow as pa

    if pa.types.is_date(typ):
        return pa.scalar(when.date(), type=typ)
    if pa.types.is_timestamp(typ) and typ.tz is None:
        return pa.scalar(when.astimezone(UTC).replace(tzinfo=None), type=typ)
    return pa.scalar(when, type=typ)


class SinkView(abc.ABC):
    """One consistent view of a sink's data for one query."""

    part: str

    @abc.abstractmethod
    def claims(self, part: PartitionRef) -> bool:
        """Whether the sink holds every row of cache partition `part`, for this query."""

    @abc.abstractmethod
    def reader(self, filters: Filters, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        """The sink's rows matching `filters`, leaving out the partitions in `cache_side`."""

    def describe(self) -> dict[str, Any]:
        """What the view will read, for `QueryPlan`."""
        return {}


def _acked(floor: ExportFloor | None, part: PartitionRef) -> bool:
    return floor is not None and not floor.needs(part)


# ------------------------------------------------------------------- parquet


class ParquetSource:
    """A `BlobSink` writing Parquet through an `ObstoreBlobStore` (see the module doc)."""

    def __init__(
        self, sink_name: str, store: ObstoreBlobStore, extension: str, index: BatchIndex
    ) -> None:
        self.sink_name = sink_name
        self.store = store
        self.extension = extension
        self.index = index
        self.part = f"sink {sink_name!r} ({store.label})"

    async def view(self, info: DatasetInfo, filters: Filters, read_floor: FloorReader) -> SinkView:
        # Progress first, listing second: whatever the store calls acknowledged
        # was completely written before the listing starts.
        floor = read_floor()
        try:
            directory = encode_segment(info.name)
        except HypawareError as exc:
            raise QueryInputError(f"dataset {info.name!r}: {exc}") from exc
        days = filters.days()
        prefixes = [f"{directory}/date={d}" for d in days] if days is not None else [directory]
        files: dict[str, list[tuple[str, str, int]]] = {}
        suffix = f".{self.extension}"
        try:
            for prefix in prefixes:
                async for meta in self.store.list(prefix):
                    rel = meta.path[len(directory) + 1 :]
                    segments = rel.split("/")
                    # Only <date=...>/<name>: reserved or hidden entries are not data.
                    if len(segments) != 2 or not segments[0].startswith("date="):
                        continue
                    name = segments[1]
                    if name.startswith(("_", ".")) or not name.endswith(suffix):
                        continue
                    stem = name.rpartition("-")[0]
                    files.setdefault(stem, []).append((meta.path, segments[0][5:], meta.size))
        except HypawareError as exc:
            raise SourceUnreadableError(self.part, f"cannot list {directory}/: {exc}") from exc
        # Read after the listing: a batch listed while open is seen open or
        # finished here, never missing (its record is written before its files).
        try:
            records = self.index.lookup(files)
        except HypawareError as exc:
            raise SourceUnreadableError(self.part, str(exc)) from exc
        return _ParquetView(self, info, floor, files, records, directory)


class _ParquetView(SinkView):
    def __init__(
        self,
        source: ParquetSource,
        info: DatasetInfo,
        floor: ExportFloor | None,
        files: dict[str, list[tuple[str, str, int]]],
        records: dict[str, BatchRecord],
        directory: str,
    ) -> None:
        self.source = source
        self.part = source.part
        self.info = info
        self.floor = floor
        self.directory = directory
        self.selected: list[str] = []
        # Files of an open batch may be partial or about to be deleted.
        self.files = {
            stem: entries
            for stem, entries in files.items()
            if stem not in records or not records[stem].open
        }
        self.records = {stem: r for stem, r in records.items() if stem in self.files}
        self.held = frozenset().union(*(r.partitions for r in self.records.values()))
        # Files whose batch the index no longer knows (older than its memory)
        # are taken as acknowledged long ago.
        self.unknown = any(stem not in records for stem in self.files)

    def claims(self, part: PartitionRef) -> bool:
        return _acked(self.floor, part) and (part.id in self.held or self.unknown)

    def reader(self, filters: Filters, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa
        import pyarrow.dataset as pads
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq

        # Files of a partition not acknowledged yet may be incomplete; those of
        # a partition the cache answers for would double it.
        pending = self.floor.pending if self.floor is not None else frozenset()
        elsewhere = pending | {p.id for p in cache_side}
        excluded = {stem for stem, record in self.records.items() if record.partitions & elsewhere}
        chosen = [
            f
            for stem, entries in sorted(self.files.items())
            if stem not in excluded
            for f in entries
        ]
        self.selected = [path for path, _day, _size in chosen]
        schema = self.info.schema
        columns = list(filters.columns)
        target = pa.schema([schema.field(c) for c in columns])
        if not chosen:
            return pa.RecordBatchReader.from_batches(target, iter(()))
        fs, root = _filesystem(self.source.store)
        rows = filters.expression(self.info)
        first_day, last_day = filters.day_range()

        from hypaware.blob.sink import NULL_DAY

        def day_may_match(day: str) -> bool:
            # Hive pruning: files whose date= cannot match are skipped unopened.
            if day == NULL_DAY:
                return first_day is None and last_day is None
            return (first_day is None or day >= first_day.isoformat()) and (
                last_day is None or day <= last_day.isoformat()
            )

        read = _needed_columns(schema, columns, rows)
        pyfs = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
        fmt = pads.ParquetFileFormat()

        def batches() -> Iterator[pa.RecordBatch]:
            # Every read happens here, on the caller's thread: arrow's scanner
            # would read ahead on its own threads, through this Python file
            # system, and a scan abandoned early (--limit) would leave such a
            # task to finish during interpreter shutdown, which aborts.
            for path, day, size in chosen:
                if not day_may_match(day):
                    continue
                where = f"{root}/{path}"
                try:
                    # Sizes known from the listing: no extra HEAD per file.
                    fragment = fmt.make_fragment(where, filesystem=pyfs, file_size=size)
                    groups = None
                    if rows is not None:
                        # Row groups whose statistics may match; reads the footer.
                        fragment = fragment.subset(filter=rows, schema=schema)
                        groups = [g.id for g in fragment.row_groups]
                        if not groups:
                            continue
                    with pyfs.open_input_file(where) as handle:
                        parquet = pq.ParquetFile(handle, metadata=fragment.metadata)
                        for batch in parquet.iter_batches(
                            batch_size=65536, row_groups=groups, columns=read, use_threads=False
                        ):
                            yield from _filtered(batch, rows, columns, target)
                except (pa.ArrowException, OSError, HypawareError) as exc:
                    raise SourceUnreadableError(self.part, f"cannot read {path}: {exc}") from exc

        return pa.RecordBatchReader.from_batches(target, batches())

    def describe(self) -> dict[str, Any]:
        return {"files": list(self.selected)}


def _needed_columns(
    schema: pa.Schema, columns: Sequence[str], expr: pc.Expression | None
) -> list[str]:
    """`columns` and every column `expr` refers to, in the schema's order."""
    wanted = set(columns)
    if expr is not None:
        for name in schema.names:
            if name in wanted:
                continue
            # The filter binds to a schema without the column only if it does
            # not refer to it (pyarrow has no API to list an expression's fields).
            try:
                schema.remove(schema.get_field_index(name)).empty_table().filter(expr)
            except Exception:
                wanted.add(name)
    return [n for n in schema.names if n in wanted]


def _filtered(
    batch: pa.RecordBatch, expr: pc.Expression | None, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of `batch` matching `expr`, as `target`'s columns; nothing when none match.

    Evaluated on the caller's thread (arrow may use its own threads for the
    work, but never holds Python objects there).
    """
    import pyarrow as pa

    if not batch.num_rows:
        return
    if expr is None:
        yield conform(batch.select(columns), target)
        return
    table = pa.Table.from_batches([batch]).filter(expr)
    for out in table.select(columns).to_batches():
        if out.num_rows:
            yield conform(out, target)


def _filesystem(store: ObstoreBlobStore) -> tuple[Any, str]:
    return store.filesystem()


# ------------------------------------------------------------------- iceberg


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

    def claims(self, part: PartitionRef) -> bool:
        # Snapshots too large to list their partitions fall back on the progress store.
        return part.id in self.listed or _acked(self.floor, part)

    def reader(self, filters: Filters, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa

        columns = list(filters.columns)
        target = pa.schema([self.info.schema.field(c) for c in columns])
        if self.table is None:
            return pa.RecordBatchReader.from_batches(target, iter(()))
        from hypaware.iceberg.table_format import _row_filter

        try:
            row_filter = _row_filter(
                self.table, self.info, filters.since, filters.until, filters.keys
            )
            # The table object is pinned at the snapshot the view was taken at.
            scan = self.table.scan(
                row_filter=row_filter,
                selected_fields=("*",) if filters.where is not None else tuple(columns),
            )
            reader = scan.to_arrow_batch_reader()
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan the table: {exc}") from exc
        return _restricted(reader, filters.where, target)


def _restricted(
    reader: pa.RecordBatchReader, where: pc.Expression | None, target: pa.Schema
) -> pa.RecordBatchReader:
    """`reader`'s rows that pass `where`, as `target`'s columns and types."""
    import pyarrow as pa

    def batches() -> Iterator[pa.RecordBatch]:
        with reader:
            for batch in reader:
                table = pa.Table.from_batches([batch])
                if where is not None:
                    table = table.filter(where)
                for out in table.select(target.names).to_batches():
                    yield conform(out, target)

    return pa.RecordBatchReader.from_batches(target, batches())


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """`batch` with `target`'s column types (sinks may widen or rename types on the way)."""
    import pyarrow as pa

    if batch.schema.equals(target):
        return batch
    arrays = [
        col if col.type == field.type else col.cast(field.type)
        for col, field in zip(batch.columns, target, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=target)


# ------------------------------------------------------------------- generic


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
            reader = self.source.sink.scan(
                self.info, columns=None, filter=filters.expression(self.info)
            )
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan: {exc}") from exc
        return _restricted(reader, None, target)


def sink_source(name: str, sink: Any) -> ParquetSource | IcebergSource | GenericSource | None:
    """The query source for a built sink, or None if it cannot be read back."""
    from hypaware.blob.sink import BlobSink
    from hypaware.blob.store import ObstoreBlobStore
    from hypaware.blob.table_sink import TableSink

    if isinstance(sink, BlobSink):
        ext = sink.encoder.extension
        if ext == "parquet" and isinstance(sink.store, ObstoreBlobStore):
            return ParquetSource(name, sink.store, ext, sink.index)
        return None
    if isinstance(sink, TableSink):
        if hasattr(sink.table, "load_table"):
            return IcebergSource(name, sink.table)
        scan = getattr(sink.table, "scan", None)
        return GenericSource(name, sink.table) if callable(scan) else None
    if callable(getattr(sink, "scan", None)):
        return GenericSource(name, sink)
    return None


def cache_reader(
    parts: Iterable[tuple[PartitionRef, pa.RecordBatchReader | None]],
    info: DatasetInfo,
    filters: Filters,
) -> Iterator[pa.RecordBatch]:
    """Batches of cache partitions, filtered and projected.

    A pair with a reader was opened while planning (so retention cannot take
    it away); one without is opened now and skipped if the cache dropped it.
    """
    import pyarrow as pa

    from hypaware.core.errors import CacheError

    expr = filters.expression(info)
    target = pa.schema([info.schema.field(c) for c in filters.columns])
    for part, opened in parts:
        reader = opened
        if reader is None:
            try:
                reader = part.open()
            except (CacheError, FileNotFoundError) as exc:
                log.info(
                    "cache partition %s/%s left the cache during the query: %s",
                    info.name,
                    part.id,
                    exc,
                    extra={"dataset": info.name, "partition": part.id},
                )
                continue
        columns = list(filters.columns)
        for batch in reader:
            yield from _filtered(batch, expr, columns, target)
