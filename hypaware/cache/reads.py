"""The read path of `LocalCache`: sealed segments, listed and opened as `PartitionRef`s.

A segment's metadata (`SEGMENT_META`, in an Arrow segment's schema or a
Parquet segment's footer) says its seq, row count and time range, so listing
partitions reads metadata only; new segments are described from their
seal's index (`hypaware.cache.index`) when there is one, without opening
them. Rows are read when a partition is opened. An Arrow segment opened
as a stream (`PartitionRef.open`) is memory-mapped afresh for each batch,
so memory holds about one batch however big the segment, and uncompressed
rows are not copied; read whole (`PartitionRef.read_all`) it is read into
memory in one call.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypaware.cache.directory import (
    SEALING_NAME,
    SEGMENT_META,
    SEGMENT_NAME,
    SEGMENT_SUFFIXES,
    CacheDirectory,
    log,
)
from hypaware.cache.index import INDEX_NAME, covers, read_index
from hypaware.cache.listing import SealedListing, Segment
from hypaware.core.errors import CacheError
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.core.workers import cores, map_bounded

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CacheReader", "Segment", "sealed_names"]


class CacheReader:
    """Listing sealed partitions and opening them (part of `LocalCache`)."""

    def __init__(self, directory: CacheDirectory) -> None:
        self.directory = directory
        self.stats = directory.stats
        # Segments described so far and those found corrupt, by path (as a string:
        # listing hashes every name on every pass), and each dataset's sealed
        # directory as last listed.
        self._segments: dict[str, Segment] = {}
        self._bad: set[str] = set()
        self._listings: dict[str, SealedListing] = {}

    def ready_partitions(self, dataset: str, *, after: int = 0) -> Sequence[PartitionRef]:
        info = self.directory.dataset(dataset)
        directory = self.directory.path / dataset
        # The sealing directory first: a seal under way hides its seqs and all above.
        pending: int | None = None
        with contextlib.suppress(FileNotFoundError):
            for entry in os.listdir(directory / "sealing"):
                m = SEALING_NAME.match(entry)
                if m:
                    seq = int(m.group(1))
                    pending = seq if pending is None else min(pending, seq)
        listing = self.sealed_listing(dataset, info, pending)
        if listing is None:
            return []
        with listing.lock:
            return listing.between(after, pending)

    def kept_listing(self, dataset: str) -> SealedListing | None:
        """The dataset's listing as last taken, without listing again (None: not taken)."""
        return self._listings.get(dataset)

    def sealed_listing(
        self, dataset: str, info: DatasetInfo, pending: int | None
    ) -> SealedListing | None:
        """The dataset's listing, up to date with its sealed directory (None: no directory)."""
        sealed = self.directory.path / dataset / "sealed"
        try:
            entries = os.listdir(sealed)
        except FileNotFoundError:
            self._listings.pop(dataset, None)
            return None
        except OSError as exc:
            raise CacheError(f"cannot list sealed partitions of {dataset!r}: {exc}") from exc
        listing = self._listings.get(dataset)
        if listing is None:
            listing = self._listings[dataset] = SealedListing()
        with listing.lock:
            listing.listed_at = time.monotonic()
            added, removed = listing.changes(entries)
            base = f"{sealed}{os.sep}"
            if removed:
                for gone in listing.forget(removed):
                    self._segments.pop(str(gone.path), None)
                self._bad.difference_update(base + name for name in removed)
            new: list[Segment] = []
            if added:
                new = self._take_in(listing, sealed, added, pending)
            listing.add(new, info, self.ref)
        return listing

    def _take_in(
        self, listing: SealedListing, sealed: Path, added: set[str], pending: int | None
    ) -> list[Segment]:
        """Describe the `added` names' segments; mark the names handled that need no retry."""
        found, indexes = sealed_names(added, -1)
        listing.indexes.update(indexes)
        # A seal under way may still be renaming its segments into place: they are
        # taken in once it is done, with its index to describe them.
        later = {e for seq, e in found if pending is not None and seq >= pending}
        fresh = [(seq, e) for seq, e in found if e not in later]
        fresh.sort()
        base = f"{sealed}{os.sep}"
        todo = [(seq, e) for seq, e in fresh if base + e not in self._segments]
        if todo:
            hints = self._index_hints(sealed, sorted(listing.indexes), todo)
            # Segments no index describes have their own metadata read, on every core.
            unhinted = [sealed / e for _seq, e in todo if e not in hints]
            map_bounded(self.segment, unhinted, workers=cores())
            for _seq, entry in todo:
                if entry in hints:
                    self.segment(sealed / entry, hint=hints[entry])
        new: list[Segment] = []
        retry: set[str] = set(later)
        for _seq, entry in fresh:
            segment = self._segments.get(base + entry)
            if segment is not None:
                new.append(segment)
            elif base + entry not in self._bad:
                retry.add(entry)  # gone, or not readable yet: the next listing says
        listing.names.update(added - retry)
        return new

    def _index_hints(
        self, sealed: Path, indexes: list[str], fresh: list[tuple[int, str]]
    ) -> dict[str, dict[str, Any]]:
        """Index entries of the `fresh` segments, from the indexes whose seqs cover them."""
        wanted = {entry for _seq, entry in fresh}
        seqs = sorted(seq for seq, _entry in fresh)
        hints: dict[str, dict[str, Any]] = {}
        for name in indexes:
            if not covers(name, seqs):
                continue
            try:
                entries = read_index(sealed / name)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                log.warning(
                    "cache index %s skipped: %s; its segments are read instead",
                    sealed / name,
                    exc,
                    extra={"cache_path": str(sealed / name)},
                )
                continue
            hints.update((k, v) for k, v in entries.items() if k in wanted)
        return hints

    def partition(self, dataset: str, partition_id: str) -> PartitionRef | None:
        info = self.directory.dataset(dataset)
        if not isinstance(partition_id, str) or not SEGMENT_NAME.fullmatch(f"{partition_id}.arrow"):
            raise CacheError(
                f"partition id {partition_id!r} of dataset {dataset!r} is not a partition "
                "id of this cache (<12-digit seq>-<key>, letters, digits, '_' and '-')"
            )
        path = self.sealed_path(dataset, partition_id)
        if path is None:
            return None
        segment = self.segment(path)
        return None if segment is None else self.ref(info, segment)

    def sealed_path(self, dataset: str, partition_id: str) -> Path | None:
        """The sealed segment of `partition_id`, in whichever format it was sealed."""
        sealed = self.directory.path / dataset / "sealed"
        for suffix in SEGMENT_SUFFIXES:
            path = sealed / f"{partition_id}{suffix}"
            if path.exists():
                return path
        return None

    def segment(self, path: Path, *, hint: dict[str, Any] | None = None) -> Segment | None:
        """The segment at `path`, described by `hint` (its index entry) or its own metadata."""
        key = str(path)
        cached = self._segments.get(key)
        if cached is not None:
            return cached
        if key in self._bad:
            return None
        if hint is not None:
            try:
                segment = _describe(path, hint, None, int(hint["size"]))
                # A file of another size than its seal wrote (cut short, replaced) is
                # read below, where a damaged one is found corrupt.
                same = os.stat(path).st_size == segment.byte_size
            except FileNotFoundError:
                return None
            except (KeyError, TypeError, ValueError):
                same = False  # a damaged entry: the segment itself says
            if same:
                self._segments[key] = segment
                return segment
        try:
            rows, raw = _read_meta(path)
            if raw is None:
                raise ValueError("no hypaware segment metadata")
            segment = _describe(path, json.loads(raw), rows, path.stat().st_size)
        except FileNotFoundError:
            return None
        except Exception as exc:  # any unreadable footer is the same fault: a corrupt segment
            self._bad.add(key)
            self.stats.corrupt_segments += 1
            log.warning(
                "cache segment %s skipped: it is corrupt (%s: %s)",
                path,
                type(exc).__name__,
                exc,
                extra={"cache_path": str(path), "dataset": path.parent.parent.name},
            )
            return None
        self._segments[key] = segment
        return segment

    def forget(self, path: Path) -> None:
        """Drop the description of the segment at `path`, which is gone."""
        self._segments.pop(str(path), None)

    def ref(self, info: DatasetInfo, segment: Segment) -> PartitionRef:
        """A `PartitionRef` of `segment` of dataset `info`, opening it when read."""
        path = segment.path
        schema = info.schema

        def opener() -> pa.RecordBatchReader:
            return _open_segment(path, schema)

        def loader() -> pa.Table:
            return _load_arrow(path, schema)

        return PartitionRef(
            id=segment.id,
            dataset=info.name,
            seq=segment.seq,
            row_count=segment.row_count,
            min_time=segment.min_time,
            max_time=segment.max_time,
            byte_size=segment.byte_size,
            opener=opener,
            loader=loader if path.suffix == ".arrow" else None,
        )


def sealed_names(
    entries: Iterable[str], after: int, pending: int | None = None
) -> tuple[list[tuple[int, str]], list[str]]:
    """The segments among a sealed directory's `entries` past seq `after` and before
    `pending` (as ``(seq, name)``, unsorted), and the seal index files among them.

    Every segment name starts with its seq as 12 digits, so one at or below
    `after` is passed over on that prefix instead of matched: a directory of
    50k segments is sifted in 8 ms, not 42, on every pass of every sink.
    Index names start with ``.`` and are always matched.
    """
    floor = f"{after:012d}"
    found: list[tuple[int, str]] = []
    indexes: list[str] = []
    for entry in entries:
        if entry[:12] <= floor and not entry.startswith("."):
            continue
        m = SEGMENT_NAME.match(entry)
        if m is None:
            if INDEX_NAME.match(entry):
                indexes.append(entry)
            continue
        seq = int(m.group(1))
        if seq > after and (pending is None or seq < pending):
            found.append((seq, entry))
    return found, indexes


_READ_BATCH = 65536
_THREADED_ROWS = 65536


def _describe(path: Path, doc: dict[str, Any], rows: int | None, size: int) -> Segment:
    """A `Segment` from its metadata; `rows` (from a Parquet footer) overrides the doc's."""
    return Segment(
        seq=int(doc["seq"]),
        id=path.stem,
        path=path,
        row_count=int(doc["rows"]) if rows is None else rows,
        byte_size=size,
        min_time=_parse_iso(doc.get("min_time")),
        max_time=_parse_iso(doc.get("max_time")),
        sealed_at=_parse_iso(doc["sealed_at"]) or datetime.fromtimestamp(0, UTC),
    )


def _read_meta(path: Path) -> tuple[int | None, bytes | None]:
    """A segment's row count (None: take the metadata's) and its `SEGMENT_META` bytes."""
    if path.suffix == ".arrow":
        schema = open_ipc(path).schema
        return None, (schema.metadata or {}).get(SEGMENT_META.encode())
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    return int(meta.num_rows), (meta.metadata or {}).get(SEGMENT_META.encode())


def _unreadable(path: Path, exc: BaseException) -> CacheError:
    """The error for segment `path` failing to read with `exc`, saying if it is gone."""
    if isinstance(exc, FileNotFoundError):
        return CacheError(f"cache segment {path} is gone (dropped by retention?)")
    return CacheError(f"cache segment {path} cannot be read: {exc}")


def _open_segment(path: Path, schema: pa.Schema) -> pa.RecordBatchReader:
    if path.suffix == ".arrow":
        return _open_arrow(path, schema)
    return _open_parquet(path, schema)


def map_ipc(fd: int) -> pa.ipc.RecordBatchFileReader:
    """The Arrow IPC file open as `fd`, read through a fresh memory map of it.

    Through an in-memory buffer over the map, not Arrow's own memory-mapped
    file: that one sends every read through Arrow's I/O threads, a hand-off
    that was most of the cost of opening a small file (168 segment footers:
    21-33 ms, 6-9 ms this way). Raises `OSError` or `ValueError` (an empty
    file) for a file that cannot be mapped, `pyarrow.ArrowException` for one
    that is not Arrow IPC.
    """
    import mmap

    import pyarrow as pa

    view = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    # Decompressing a small file's buffers on Arrow's pool costs more in hand-offs
    # than it saves, and callers already read several files at once.
    options = pa.ipc.IpcReadOptions(use_threads=False)
    return pa.ipc.open_file(pa.BufferReader(pa.py_buffer(view)), options=options)


def open_ipc(path: Path) -> pa.ipc.RecordBatchFileReader:
    """`map_ipc` of the file at `path` (the map outlives the file being closed or removed)."""
    with open(path, "rb") as file:
        return map_ipc(file.fileno())


def _open_arrow(path: Path, schema: pa.Schema) -> pa.RecordBatchReader:
    import pyarrow as pa

    try:
        # Held open to the end, so a segment dropped meanwhile is still read whole;
        # Arrow's file object, which a reader dropped unread closes quietly.
        file = pa.OSFile(str(path))
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, exc) from exc

    def reader() -> pa.ipc.RecordBatchFileReader:
        # A new mapping for every batch: a mapping keeps each page it has touched
        # in the resident set until it is unmapped, so one mapping for the whole
        # stream grew memory with the segment (1.2 GiB exporting a 5M-row
        # partition). Now a batch's pages go when its mapping does: at once for
        # a compressed batch, with the batch's rows for an uncompressed one
        # (read without a copy). Read with read() instead, every batch's body
        # would be one more allocation to free, and the peak was higher.
        return map_ipc(file.fileno())

    try:
        # The reader that counted the batches reads the first: a segment of one
        # batch (most are) is opened once.
        first = [reader()]
        count = first[0].num_record_batches
    except BaseException as exc:
        file.close()
        if isinstance(exc, pa.ArrowException | OSError | ValueError):
            raise _unreadable(path, exc) from exc
        raise

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for i in range(count):
                try:
                    batch = (first.pop() if first else reader()).get_batch(i)
                except (pa.ArrowException, OSError, ValueError) as exc:
                    raise _unreadable(path, exc) from exc
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        finally:
            file.close()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _load_arrow(path: Path, schema: pa.Schema) -> pa.Table:
    """A whole Arrow segment in one native read: no per-batch work in the interpreter."""
    import pyarrow as pa

    try:
        # Read into memory in one call, then parsed there. A memory-mapped file
        # sends its reads through Arrow's I/O threads (a hand-off for the footer
        # alone, most of a small segment's cost) and faults its pages in one by
        # one: 168 segments of 100k rows loaded in 26 ms this way, 55-72 mapped;
        # 187 ms against 246 for 1M rows. The rows are in memory either way.
        with pa.OSFile(str(path)) as file:
            data = file.read_buffer()
        options = pa.ipc.IpcReadOptions(use_threads=False)
        table = pa.ipc.open_file(pa.BufferReader(data), options=options).read_all()
        # Only the segment's own metadata differs, most of the time: swapping it
        # costs a tenth of building the table again (2.3 against 0.2 ms a pass
        # of 168 segments).
        if table.schema.remove_metadata().equals(schema.remove_metadata(), check_metadata=True):
            return table.replace_schema_metadata(schema.metadata)
        return pa.Table.from_arrays(table.columns, schema=schema)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, exc) from exc


def _open_parquet(path: Path, schema: pa.Schema) -> pa.RecordBatchReader:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, exc) from exc

    # A small segment (most are: one per partition key and hour) decodes faster on
    # this thread than through Arrow's pool, and callers already read several at once.
    threads = pf.metadata.num_rows >= _THREADED_ROWS

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in pf.iter_batches(batch_size=_READ_BATCH, use_threads=threads):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        finally:
            pf.close()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _parse_iso(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
