"""Data files: a batch's rows read, laid out by day and written as Parquet files.

`DataFileWriter` reads a batch's partitions conformed to the table's write
schema (unreadable ones are set aside; see `hypaware.iceberg.pipeline`),
sorts the rows by day, lookup key and time (see `hypaware.iceberg.day_layout`),
encodes one or more files per day through the blob store, at names fixed by
sink, dataset and batch, and describes each file as the Iceberg `DataFile` a
commit registers (see `hypaware.iceberg.commit`).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import attrs
import obstore
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from hypaware.blob.errors import translate_error
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.iceberg import day_layout
from hypaware.iceberg.catalog import IcebergError
from hypaware.iceberg.fileio import ObstoreInputFile, StoreRoot
from hypaware.iceberg.pipeline import ReadBatch, run_pipeline

if TYPE_CHECKING:
    from hypaware.encoding.parquet import ParquetEncoder

__all__ = ["DataFileWriter", "WrittenFile"]

# The table format's logger: one name for everything a sink's writes log.
log = logging.getLogger("hypaware.iceberg.table_format")

# Multipart part size for data files (S3 needs at least 5 MiB per part).
PUT_CHUNK_SIZE = 8 * 1024 * 1024


@attrs.frozen
class WrittenFile:
    """One data file written: where it is, its day partition and its size.

    `tail` is the file's last bytes as they were written (None if unknown):
    when they hold the whole Parquet footer, its statistics are read from
    them instead of fetching the footer back from the store. `data_file` is
    the file as a commit registers it (`DataFileWriter.data_file`), made
    right after the write when `write_partitions` wrote it.
    """

    location: str
    key: str
    day: int | None
    size: int
    tail: bytes | None = attrs.field(default=None, repr=False)
    data_file: DataFile | None = attrs.field(default=None, repr=False, eq=False)


@attrs.define
class _DayFiles:
    """One day of a batch being written: its pieces, those started and finished, their files."""

    pieces: int
    started: set[int] = attrs.field(factory=set)
    finished: int = 0
    keys: set[str] = attrs.field(factory=set)


class DataFileWriter:
    """Writes a batch's rows as Parquet data files under a table's location.

    - `root`: the store the files go to, and the URL they are named by.
    - `encoder`: turns rows into Parquet bytes (with Iceberg field ids).
    - `sink`: the sink's name, part of every file name.

    A day of more rows than `split_rows` (half the encoder's row group
    size) is written in two pieces, so that two encoders share it; None
    never splits.
    """

    def __init__(self, root: StoreRoot, encoder: ParquetEncoder, sink: str) -> None:
        self._root = root
        self._encoder = encoder
        self.sink = sink
        group = encoder.config.row_group_size
        self.split_rows: int | None = None
        if group > 0:
            # Half a row group: each piece is still at least a quarter of one.
            self.split_rows = max(1, group // 2)

    @property
    def root(self) -> StoreRoot:
        """The store the files go to."""
        return self._root

    def write_partitions(
        self,
        table: Table,
        dataset: DatasetInfo,
        partitions: Sequence[PartitionRef],
        target: pa.Schema,
        digest: str,
        what: str,
    ) -> tuple[ReadBatch, list[WrittenFile]]:
        """Read `partitions` and write their rows as files under `table`'s location.

        One or more files per day, encoded while other partitions are still
        being read (see `hypaware.iceberg.pipeline`). Partitions that cannot
        be read are set aside in the `ReadBatch`. Files an earlier attempt of
        this batch left are replaced or deleted; if a file fails, the ones
        written are deleted and the error raised.
        """
        batch = _BatchFiles(self, self._encoder, table, dataset, target, digest, what)
        try:
            read = run_pipeline(
                partitions,
                target,
                what,
                time_column=dataset.time_column,
                lookup_key=dataset.lookup_key,
                write_day=batch.write_day,
                split_rows=self.split_rows,
            )
        except BaseException:
            self.delete(batch.written)
            raise
        batch.written.sort(key=lambda w: w.location)
        return read, batch.written

    def put(self, key: str, location: str, chunks: Iterable[bytes]) -> tuple[int, bytes]:
        """Stream `chunks` to the store at `key`; the bytes written, and the last of them."""
        size = 0
        last: list[bytes] = []
        producer_error: BaseException | None = None

        def counted() -> Iterator[bytes]:
            nonlocal size, producer_error
            try:
                for chunk in chunks:
                    if chunk:
                        size += len(chunk)
                        # The footer ends the file: the last two chunks nearly always hold it.
                        last[:] = [*last[-1:], chunk]
                    yield chunk
            except BaseException as exc:
                producer_error = exc
                raise

        try:
            stream = counted()
            head = _head(stream, PUT_CHUNK_SIZE)
            if head.complete:
                # A file smaller than one part goes in one request: a multipart
                # upload costs three (and, on local disk, a staging file).
                obstore.put(self._root.store, key, b"".join(head.chunks), use_multipart=False)
            else:
                whole = itertools.chain(head.chunks, stream)
                obstore.put(self._root.store, key, whole, chunk_size=PUT_CHUNK_SIZE)
        except Exception as exc:
            if producer_error is not None:
                # The encoder failed, not the store: its own error says more.
                raise producer_error from None
            raise translate_error(exc, label=self._root.label, op="write", path=location) from exc
        return size, b"".join(last)

    def delete_leftovers(self, directory: str, stem: str, keep: set[str]) -> None:
        """Remove files an earlier, interrupted attempt of this batch left in `directory`."""
        prefix = self._root.key(directory, "list") + "/"
        try:
            for chunk in obstore.list(self._root.store, prefix=prefix):
                for meta in chunk:
                    key = meta["path"]
                    if key not in keep and day_layout.owned_by(key.rsplit("/", 1)[-1], stem):
                        obstore.delete(self._root.store, key)
        except FileNotFoundError:
            return

    def delete(self, written: Sequence[WrittenFile]) -> None:
        """Remove files no snapshot will reference (failures are logged)."""
        for w in written:
            try:
                obstore.delete(self._root.store, w.key)
            except FileNotFoundError:
                pass
            except Exception as exc:
                log.warning(
                    "sink %s: cannot remove unused data file %s: %s", self.sink, w.location, exc
                )

    def data_file(self, table: Table, written: WrittenFile, what: str) -> DataFile:
        """The `DataFile` a commit registers for `written`, with its column statistics."""
        metadata = _footer_of(written.tail)
        if metadata is None:
            # The size is known from the write: only the footer is fetched.
            footer = ObstoreInputFile(self._root, written.location, size=written.size)
            with footer.open() as stream:
                metadata = pq.read_metadata(stream)
        schema = table.schema()
        arrow = metadata.schema.to_arrow_schema()
        if any(f.metadata is None or b"PARQUET:field_id" not in f.metadata for f in arrow):
            raise IcebergError(
                f"{what}: the encoder wrote {written.location} without Iceberg field ids",
                retryable=False,
            )
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=metadata,
            stats_columns=compute_statistics_plan(schema, table.metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(schema),
        )
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=written.location,
            file_format=FileFormat.PARQUET,
            partition=Record(written.day),
            file_size_in_bytes=written.size,
            sort_order_id=table.sort_order().order_id,
            spec_id=table.spec().spec_id,
            equality_ids=None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )


class _BatchFiles:
    """One batch's days being written as files by `DataFileWriter.write_partitions`.

    `write_day` runs on several threads at once; `written` and the days'
    progress are only touched under `_lock`.
    """

    def __init__(
        self,
        writer: DataFileWriter,
        encoder: ParquetEncoder,
        table: Table,
        dataset: DatasetInfo,
        target: pa.Schema,
        digest: str,
        what: str,
    ) -> None:
        self._writer = writer
        self._encoder = encoder
        self._table = table
        self._time_column = dataset.time_column
        self._target = target
        self._what = what
        self.stem = day_layout.data_file_stem(writer.sink, dataset.name, digest)
        self.base = table.location().rstrip("/")
        # Every file put so far, described or not: all of them are deleted on failure.
        self.written: list[WrittenFile] = []
        self._days: dict[int | None, _DayFiles] = {}
        self._lock = threading.Lock()

    def claim(self, rows: day_layout.DayRows) -> None:
        """Mark `rows`' piece of its day as started, or raise if it already was."""
        with self._lock:
            day = self._days.setdefault(rows.day, _DayFiles(rows.pieces))
            if day.pieces != rows.pieces or rows.piece in day.started:
                # Two writes of one day would pick the same file names.
                raise IcebergError(
                    f"{self._what}: rows of day {day_layout.day_label(rows.day)} came from two "
                    "groups of partitions: a partition's time range (min_time, "
                    "max_time) does not cover its rows",
                    retryable=False,
                )
            day.started.add(rows.piece)

    def file_name(self, piece: int, index: int) -> str:
        """The name of the `index`-th file of a day's `piece`."""
        try:
            return day_layout.data_file_name(self.stem, day_layout.piece_file_index(piece, index))
        except ValueError as exc:
            raise IcebergError(
                f"{self._what}: {exc}; raise target_file_size", retryable=False
            ) from exc

    def write_day(
        self, data: pa.Table, rows: day_layout.DayRows, whole: Callable[[], pa.Table]
    ) -> None:
        """Encode and put one day (or piece of one) of `data`, as one or more files."""
        self.claim(rows)
        writer = self._writer
        directory = f"{self.base}/{day_layout.day_directory(self._time_column, rows.day)}"
        batches = day_layout.day_batches(data, rows, self._target, whole=whole)
        mine: set[str] = set()
        for index, chunks in enumerate(self._encoder.encode(self._target, batches)):
            location = f"{directory}/{self.file_name(rows.piece, index)}"
            key = writer.root.key(location, "write")
            size, tail = writer.put(key, location, chunks)
            mine.add(key)
            done = WrittenFile(location, key, rows.day, size, tail)
            try:
                # Described here, while other days still encode, not one
                # after another once the last file is in.
                done = attrs.evolve(done, data_file=writer.data_file(self._table, done, self._what))
            finally:
                with self._lock:
                    self.written.append(done)
        # Only once every piece of the day is in: a piece still writing
        # would otherwise have its new file taken for a leftover.
        keep = self._finish(rows, mine)
        if keep is not None:
            writer.delete_leftovers(directory, self.stem, keep)

    def _finish(self, rows: day_layout.DayRows, keys: set[str]) -> set[str] | None:
        """Record `rows`' piece as written to `keys`; all the day's keys if it was the last."""
        with self._lock:
            day = self._days[rows.day]
            day.keys |= keys
            day.finished += 1
            last = day.finished == day.pieces
        return day.keys if last else None


@attrs.frozen
class _Head:
    chunks: list[bytes]
    complete: bool


def _head(chunks: Iterator[bytes], limit: int) -> _Head:
    """The first chunks of `chunks`, up to `limit` bytes or the end, whichever comes first."""
    taken: list[bytes] = []
    size = 0
    for chunk in chunks:
        taken.append(chunk)
        size += len(chunk)
        if size > limit:
            return _Head(taken, complete=False)
    return _Head(taken, complete=True)


def _footer_of(tail: bytes | None) -> pq.FileMetaData | None:
    """The Parquet metadata in a file's last bytes, or None if they do not hold it all."""
    if tail is None or len(tail) < 12 or tail[-4:] != b"PAR1":
        return None
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 8 > len(tail):
        return None
    try:
        return pq.read_metadata(pa.BufferReader(tail[-(length + 8) :]))
    except (pa.ArrowException, OSError):
        return None
