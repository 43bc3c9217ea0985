"""`BlobSink`: an encoder and a blob store composed into a `Sink`.

Layout under the store's root::

    <dataset>/date=YYYY-MM-DD/<stem>-<index>.<ext>

- ``<dataset>`` is the dataset name encoded with `hypaware.paths.encode_segment`.
- ``date=`` is the UTC day of the row's time column (hive style, so readers
  prune by day); rows whose time is null go to ``date=__HIVE_DEFAULT_PARTITION__``,
  the name pyarrow, Spark and Hive read back as null.
- ``<stem>`` is ``part-`` and a hash of (sink, dataset, partition id): the
  same partition always maps to the same names, in whatever batch it comes.
- ``<index>`` counts the files of that partition on that day (``0000``,
  ``0001``, ...) when the encoder rolls over at its target size.

Exactly once: re-exporting a partition (a crash before the ack, a respool,
a retry of the whole batch) writes the same names, so objects are replaced,
not copied. An earlier attempt can still have written *more* files for a
day than this one (the encoder's target size changed in between): after a
batch is written, each day directory it touched is listed and any object of
one of its partitions that this attempt did not write is deleted. A
partition is acknowledged only once that is done, so no stale copy can
outlive its ack. Partition contents never change, so an earlier attempt
only ever wrote into the day directories this one writes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from .contracts import BlobStore, Encoder
from .errors import EncodeError, PathError, SinkClosedError, StoreError, TransientStoreError
from .paths import encode_segment
from .types import ExportBatch, ExportOptions, ExportResult, PartitionRef, RetryPartition

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["NULL_DAY", "BlobSink", "object_stem"]

log = logging.getLogger(__name__)

NULL_DAY = "__HIVE_DEFAULT_PARTITION__"
_EPOCH = date(1970, 1, 1)
_DONE = object()
T = TypeVar("T")


def object_stem(sink: str, dataset: str, partition_id: str) -> str:
    """The name every object of one partition starts with (before ``-<index>.<ext>``)."""
    digest = hashlib.sha256("\0".join((sink, dataset, partition_id)).encode("utf-8"))
    return f"part-{digest.hexdigest()[:32]}"


def _day_name(day: int | None) -> str:
    return NULL_DAY if day is None else (_EPOCH + timedelta(days=day)).isoformat()


class _SinkClosing(Exception):
    """Raised inside an in-flight export when the sink is closed under it."""


class _SourceFailed(Exception):
    """Reading or encoding the partition failed (the cause is chained), not the store."""


@attrs.define
class _Written:
    """What one partition's export wrote."""

    paths: dict[str, set[str]] = attrs.field(factory=dict)  # day directory -> object names
    rows: int = 0
    size: int = 0
    files: int = 0


class _DaySplitter:
    """Streams one day's rows of a partition, and records every day it saw.

    The first pass takes the day of the partition's first row; `days` then
    holds every day present, so the caller knows which passes remain.
    Partitions nearly always cover one day: that is one pass, batches passed
    through untouched.
    """

    def __init__(self, column: str) -> None:
        self.column = column
        self.days: set[int | None] = set()
        self.rows = 0

    def day_keys(self, batch: pa.RecordBatch) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.column not in batch.schema.names:
            raise EncodeError(f"time column {self.column!r} is not in the partition's columns")
        col = batch.column(self.column)
        typ = col.type
        if pa.types.is_timestamp(typ):
            # Zoned timestamps hold UTC instants; dropping the zone keeps those
            # values, so the date below is the UTC day, not the zone's.
            if typ.tz is not None:
                col = col.cast(pa.timestamp(typ.unit))
            col = pc.cast(col, pa.date32())
        elif pa.types.is_date64(typ):
            col = pc.cast(col, pa.date32())
        elif not pa.types.is_date32(typ):
            raise EncodeError(
                f"time column {self.column!r} has type {typ}; a timestamp or date is needed"
            )
        return col.cast(pa.int32())

    def rows_of(
        self, reader: pa.RecordBatchReader, target: list[int | None]
    ) -> Iterator[pa.RecordBatch]:
        """Batches of `reader` with only the rows of day ``target[0]`` (set from row 0 if empty)."""
        import pyarrow.compute as pc

        for batch in reader:
            if not batch.num_rows:
                continue
            keys = self.day_keys(batch)
            present = set(pc.unique(keys).to_pylist())
            self.days |= present
            if not target:
                target.append(keys[0].as_py())
            day = target[0]
            if present == {day}:
                out = batch
            elif day not in present:
                continue
            elif day is None:
                out = batch.filter(pc.is_null(keys))
            else:
                out = batch.filter(pc.equal(keys, day))
            self.rows += out.num_rows
            yield out


class BlobSink:
    """Writes each batch's partitions through `encoder` into `store` (see the module doc).

    - `name`: the sink's name; part of every object name.
    - `store`: where objects go (closed by `close()`).
    - `encoder`: turns rows into file bytes.

    Reading and encoding run on one worker thread of the sink's own, never on
    the event loop; `close()` joins it.
    """

    def __init__(self, name: str, store: BlobStore, encoder: Encoder) -> None:
        self.name = name
        self.store = store
        self.encoder = encoder
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._active = 0
        self._idle: asyncio.Event | None = None
        self._close_task: asyncio.Future[None] | None = None

    @property
    def destination(self) -> str:
        """The store as named in messages (no credentials)."""
        label = getattr(self.store, "label", None)
        return str(label) if label else repr(self.store)

    def __repr__(self) -> str:
        return f"BlobSink({self.name!r}, {self.store!r}, {self.encoder!r})"

    # ------------------------------------------------------------------ export

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write the batch; failures come back in `retry_partitions`, never raised."""
        if self._closed:
            raise SinkClosedError(f"sink {self.name!r} is closed")
        self._active += 1
        if self._idle is not None:
            self._idle.clear()
        try:
            return await self._export(batch)
        except Exception as exc:
            # Nothing may raise through the driver; every partition goes back.
            log.exception("sink %s: batch %s failed", self.name, batch.batch_id)
            return ExportResult.failed(batch, f"sink {self.name!r}: {type(exc).__name__}: {exc}")
        finally:
            self._active -= 1
            if self._active == 0 and self._idle is not None:
                self._idle.set()

    async def _export(self, batch: ExportBatch) -> ExportResult:
        dataset = batch.dataset
        try:
            dataset_dir = encode_segment(dataset.name)
        except PathError as exc:
            return ExportResult.failed(batch, f"sink {self.name!r}: {exc}", retryable=False)
        exported: dict[str, _Written] = {}
        retry: list[RetryPartition] = []
        blocked: RetryPartition | None = None
        for part in batch.partitions:
            if self._closed:
                retry.append(RetryPartition(part.id, f"sink {self.name!r} was closed"))
                continue
            if blocked is not None:
                retry.append(attrs.evolve(blocked, partition_id=part.id))
                continue
            try:
                exported[part.id] = await self._export_partition(batch, part, dataset_dir)
            except _SinkClosing:
                retry.append(RetryPartition(part.id, f"sink {self.name!r} was closed"))
            except _SourceFailed as exc:
                cause = exc.__cause__
                assert isinstance(cause, Exception)
                retry.append(self._partition_failure(part, cause))
            except StoreError as exc:
                failure = self._store_failure(part, exc)
                retry.append(failure)
                if not isinstance(exc, PathError):
                    # The destination itself is failing: the other partitions
                    # would fail the same way, after the same timeouts.
                    blocked = failure
            except Exception as exc:
                retry.append(self._partition_failure(part, exc))

        if exported:
            try:
                await self._remove_stale(dataset.name, exported)
            except Exception as exc:
                # Without the cleanup an earlier attempt's extra file could
                # double rows: hold the ack back; the retry rewrites and cleans.
                if isinstance(exc, StoreError):
                    reason = self._store_failure(None, exc).reason
                else:
                    reason = f"sink {self.name!r}: {type(exc).__name__}: {exc}"
                retry.extend(RetryPartition(pid, reason) for pid in exported)
                exported = {}
        result = ExportResult(
            exported=tuple(exported),
            retry_partitions=tuple(retry),
            rows_written=sum(w.rows for w in exported.values()),
            bytes_written=sum(w.size for w in exported.values()),
            files_written=sum(w.files for w in exported.values()),
        )
        return result.reconcile(batch)

    def _store_failure(self, part: PartitionRef | None, exc: StoreError) -> RetryPartition:
        text = str(exc)
        where = "" if self.destination in text else f"{self.destination}: "
        reason = f"sink {self.name!r}: {where}{text}" if where or self.name not in text else text
        retryable = isinstance(exc, TransientStoreError)
        if part is not None:
            self._log_not_written(part, reason)
        return RetryPartition(part.id if part is not None else "", reason, retryable)

    def _log_not_written(self, part: PartitionRef, reason: str) -> None:
        log.warning(
            "sink %s: partition %s not written: %s",
            self.name,
            part.id,
            reason,
            extra={"sink": self.name, "partition": part.id},
        )

    def _partition_failure(self, part: PartitionRef, exc: Exception) -> RetryPartition:
        reason = f"sink {self.name!r}: partition {part.id!r}: {type(exc).__name__}: {exc}"
        self._log_not_written(part, reason)
        # Rows the encoder cannot represent will not encode on a retry either.
        return RetryPartition(part.id, reason, retryable=not isinstance(exc, EncodeError))

    async def _export_partition(
        self, batch: ExportBatch, part: PartitionRef, dataset_dir: str
    ) -> _Written:
        stem = object_stem(self.name, batch.dataset.name, part.id)
        splitter = _DaySplitter(batch.dataset.time_column)
        written = _Written()
        done: set[int | None] = set()
        target: list[int | None] = []
        while True:
            try:
                reader = await self._run(part.open)
            except Exception as exc:
                raise _SourceFailed from exc
            day_dir = await self._write_day(
                reader, splitter, target, stem, f"{dataset_dir}/date=", written
            )
            if day_dir is None:
                break  # an empty partition: nothing to write
            done.add(target[0])
            remaining = sorted(splitter.days - done, key=lambda d: (d is None, d or 0))
            if not remaining:
                break
            target = [remaining[0]]
        written.rows = splitter.rows
        return written

    async def _write_day(
        self,
        reader: pa.RecordBatchReader,
        splitter: _DaySplitter,
        target: list[int | None],
        stem: str,
        day_prefix: str,
        written: _Written,
    ) -> str | None:
        files = self.encoder.encode(reader.schema, splitter.rows_of(reader, target))
        day_dir: str | None = None
        try:
            index = 0
            while (chunks := await self._pull(files)) is not _DONE:
                assert isinstance(chunks, Iterator)
                if day_dir is None:
                    day_dir = f"{day_prefix}{_day_name(target[0])}"
                name = f"{stem}-{index:04d}.{self.encoder.extension}"
                meta = await self.store.put(f"{day_dir}/{name}", self._stream(chunks))
                written.paths.setdefault(day_dir, set()).add(name)
                written.size += meta.size
                written.files += 1
                index += 1
        finally:
            # Queued behind any pull still running in the worker, so the
            # generator is never closed while it executes; shielded so a
            # cancelled export still releases the reader.
            await asyncio.shield(self._run(_close_all, files, reader))
        return day_dir

    async def _pull(self, it: Iterator[T]) -> T | object:
        return await self._await_pull(self._submit(_next_or_done, it))

    @staticmethod
    async def _await_pull(pending: asyncio.Future[T]) -> T:
        try:
            return await pending
        except Exception as exc:
            raise _SourceFailed from exc

    async def _stream(self, chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
        # One step ahead: the worker encodes the next chunks while the store
        # writes these. Chunks cross threads a few MiB at a time, since every
        # crossing costs a wake-up on both sides.
        pending = self._submit(_take_chunks, chunks)
        try:
            while got := await self._await_pull(pending):
                if self._closed:
                    raise _SinkClosing
                pending = self._submit(_take_chunks, chunks)
                for chunk in got:
                    yield chunk
        finally:
            # The store may stop early (a failed upload): the read-ahead then
            # finishes on its own and its outcome is dropped on purpose.
            pending.add_done_callback(_discard_outcome)

    async def _remove_stale(self, dataset: str, exported: dict[str, _Written]) -> None:
        stems: dict[str, set[str]] = {}
        keep: dict[str, set[str]] = {}
        for pid, written in exported.items():
            stem = object_stem(self.name, dataset, pid)
            for day_dir, names in written.paths.items():
                stems.setdefault(day_dir, set()).add(stem)
                keep.setdefault(day_dir, set()).update(names)
        suffix = f".{self.encoder.extension}"
        for day_dir in sorted(stems):
            stale: list[str] = []
            async for meta in self.store.list(day_dir):
                name = meta.path.rpartition("/")[2]
                if name in keep[day_dir] or not name.endswith(suffix):
                    continue
                if name.rpartition("-")[0] in stems[day_dir]:
                    stale.append(meta.path)
            for path in stale:
                log.info(
                    "sink %s: removing %s left by an earlier attempt",
                    self.name,
                    path,
                    extra={"sink": self.name},
                )
                await self.store.delete(path)

    # --------------------------------------------------------------- threads

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        with self._lock:
            if self._executor is None:
                # One worker: pulls of one generator must never overlap.
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=f"hypaware-{self.name}"
                )
            executor = self._executor
        return asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._submit(fn, *args)

    # -------------------------------------------------------------- lifecycle

    async def close(self) -> None:
        """Stop: in-flight exports end at their next chunk (partitions sent back
        for retry), the encoding threads are joined and the store is closed.
        A second call waits for the first and returns."""
        if self._close_task is not None:
            await asyncio.shield(self._close_task)
            return
        self._closed = True
        self._close_task = asyncio.get_running_loop().create_future()
        try:
            if self._active:
                self._idle = asyncio.Event()
                await self._idle.wait()
            with self._lock:
                executor, self._executor = self._executor, None
            if executor is not None:
                # Nothing is queued once the exports have returned, so this is prompt.
                executor.shutdown(wait=True)
            await self.store.close()
        finally:
            self._close_task.set_result(None)


def _discard_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


_HANDOFF_BYTES = 2 * 1024 * 1024


def _take_chunks(chunks: Iterator[bytes]) -> list[bytes]:
    """The next non-empty chunks, about `_HANDOFF_BYTES` of them; empty at the end."""
    out: list[bytes] = []
    size = 0
    for chunk in chunks:
        if chunk:
            out.append(chunk)
            size += len(chunk)
            if size >= _HANDOFF_BYTES:
                break
    return out


def _next_or_done(it: Iterator[T]) -> T | object:
    return next(it, _DONE)


def _close_all(files: Iterator[Any], reader: pa.RecordBatchReader) -> None:
    # Called on the way out, often after a failure: a second error here
    # would only hide the first, so it is logged, not raised.
    for close in (getattr(files, "close", None), reader.close):
        if close is None:
            continue
        try:
            close()
        except Exception:
            log.debug("closing a partition stream failed", exc_info=True)
