"""Parquet blob sinks (`BlobSink` with a Parquet encoder) as a query source.

Object names carry the batch (``part-<hash of sink, dataset, batch id>``)
and the sink's `BatchIndex` says which partitions each batch holds. Files of
an open batch are never read; a file is left out when its batch holds a
partition the cache answers for or one still in flight. A partition is
claimed when the progress store says the sink acknowledged it and a listed
batch holds it; the store is read before the listing, the index after it,
and a sink acknowledges only after every file of the batch is in place.

`BlobSink.query_source` makes it (`hypaware.core.query_source`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

from hypaware.core.errors import HypawareError, QueryInputError, SourceUnreadableError
from hypaware.core.paths import encode_segment
from hypaware.core.query_scope import QueryScope
from hypaware.core.query_source import FloorReader, SinkView, acked, filtered
from hypaware.core.types import DatasetInfo, ExportFloor, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.blob.batch_index import BatchIndex, BatchRecord
    from hypaware.blob.store import ObstoreBlobStore

__all__ = ["ParquetSource"]


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

    async def view(self, info: DatasetInfo, scope: QueryScope, read_floor: FloorReader) -> SinkView:
        # Progress first, listing second: whatever the store calls acknowledged
        # was completely written before the listing starts.
        floor = read_floor()
        try:
            directory = encode_segment(info.name)
        except HypawareError as exc:
            raise QueryInputError(f"dataset {info.name!r}: {exc}") from exc
        days = scope.days()
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
        return acked(self.floor, part) and (part.id in self.held or self.unknown)

    def reader(self, scope: QueryScope, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa
        import pyarrow.dataset as pads
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq

        chosen = self._files_to_read(cache_side)
        self.selected = [path for path, _day, _size in chosen]
        schema = self.info.schema
        columns = list(scope.columns)
        target = pa.schema([schema.field(c) for c in columns])
        if not chosen:
            return pa.RecordBatchReader.from_batches(target, iter(()))
        fs, root = _filesystem(self.source.store)
        rows = scope.expression(self.info)
        day_may_match = _day_filter(*scope.day_range())
        read = scope.read_columns(self.info)
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
                            yield from filtered(batch, rows, columns, target)
                except (pa.ArrowException, OSError, HypawareError) as exc:
                    raise SourceUnreadableError(self.part, f"cannot read {path}: {exc}") from exc

        return pa.RecordBatchReader.from_batches(target, batches())

    def _files_to_read(self, cache_side: Sequence[PartitionRef]) -> list[tuple[str, str, int]]:
        """(path, day, size) of each file to read: none of a batch holding a partition
        still pending or one the cache answers for (`cache_side`)."""
        # Files of a partition not acknowledged yet may be incomplete; those of
        # a partition the cache answers for would double it.
        pending = self.floor.pending if self.floor is not None else frozenset()
        elsewhere = pending | {p.id for p in cache_side}
        excluded = {stem for stem, record in self.records.items() if record.partitions & elsewhere}
        return [
            f
            for stem, entries in sorted(self.files.items())
            if stem not in excluded
            for f in entries
        ]

    def describe(self) -> dict[str, Any]:
        return {"files": list(self.selected)}


def _filesystem(store: ObstoreBlobStore) -> tuple[Any, str]:
    return store.filesystem()


def _day_filter(first_day: date | None, last_day: date | None) -> Callable[[str], bool]:
    """Whether files under a date= directory may hold rows between the two days (both included)."""
    from hypaware.blob.object_names import NULL_DAY

    def day_may_match(day: str) -> bool:
        # Hive pruning: files whose date= cannot match are skipped unopened.
        if day == NULL_DAY:
            return first_day is None and last_day is None
        return (first_day is None or day >= first_day.isoformat()) and (
            last_day is None or day <= last_day.isoformat()
        )

    return day_may_match
