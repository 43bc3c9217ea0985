"""`BlobSink`: an encoder and a blob store composed into a `Sink`.

Layout under the store's root::

    <dataset>/date=YYYY-MM-DD/<stem>-<index>.<ext>

- ``<dataset>`` is the dataset name encoded with `hypaware.core.paths.encode_segment`.
- ``date=`` is the UTC day of the row's time column (hive style, so readers
  prune by day); rows whose time is null go to ``date=__HIVE_DEFAULT_PARTITION__``,
  the name pyarrow, Spark and Hive read back as null.
- ``<stem>`` is ``part-`` and a hash of (sink, dataset, batch id): one
  batch writes one file per day it has rows for (more when the encoder
  rolls over at its target size), holding every partition of the batch
  with rows on that day, in batch order. A cache that partitions per
  conversation still gets a few large files per export, not one per
  conversation.
- ``<index>`` counts the batch's files on that day (``0000``, ``0001``, ...).

Exactly once, with the sink's `BatchIndex` (see `hypaware.blob.batch_index`):

- A batch is recorded *open* before its first object is written, and each
  day directory before the first object goes there. Re-exporting the same
  batch (a crash before the ack) writes the same names; afterwards every
  object of the batch this attempt did not write is deleted from every
  directory any attempt touched, and only then is the batch *finished* and
  acknowledged.
- A batch that failed (the destination failed, the sink was closed, the
  process died) stays open; its partitions come back through the driver in
  some other batch. Before the sink writes any other batch it deletes the
  open batch's objects, so its rows are never in two batches' files.
- A partition that cannot be read or encoded is left out: the batch is
  written again without it (same names; the leftovers are deleted as
  above) and the partition goes to `retry_partitions`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from hypaware.blob.batch_index import BatchIndex
from hypaware.core.contracts import BlobStore, Encoder
from hypaware.core.errors import EncodeError, PathError, SinkClosedError, StoreError, TransientStoreError
from hypaware.core.paths import encode_segment
from hypaware.core.types import (
    ExportBatch,
    ExportOptions,
    ExportResult,
    ObjectMeta,
    PartitionRef,
    RetryPartition,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["NULL_DAY", "BlobSink", "batch_stem"]

log = logging.getLogger(__name__)

NULL_DAY = "__HIVE_DEFAULT_PARTITION__"
_EPOCH = date(1970, 1, 1)
_DONE = object()
# A partition whose min/max times span more days than this is read as if
# it had no hint: its days are learned from its rows.
_MAX_HINT_DAYS = 400
T = TypeVar("T")


def batch_stem(sink: str, dataset: str, batch_id: str) -> str:
    """The name every object of one batch starts with (before ``-<index>.<ext>``)."""
    digest = hashlib.sha256("\0".join((sink, dataset, batch_id)).encode("utf-8"))
    return f"part-{digest.hexdigest()[:32]}"


def _day_name(day: int | None) -> str:
    return NULL_DAY if day is None else (_EPOCH + timedelta(days=day)).isoformat()


def _day_number(at: datetime) -> int:
    # Naive times are UTC, as in the cache's Arrow timestamps without a zone.
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return (at.date() - _EPOCH).days


def _day_order(day: int | None) -> tuple[bool, int]:
    return (day is None, day or 0)


class _SinkClosing(Exception):
    """Raised inside an in-flight export when the sink is closed under it."""


class _SourceFailed(Exception):
    """Reading or encoding failed (the cause is chained), not the store."""


class _PartitionFailed(Exception):
    """`part` could not be read or encoded (the cause is chained)."""

    def __init__(self, part: PartitionRef | None) -> None:
        super().__init__(part.id if part is not None else "")
        self.part = part


@attrs.define
class _Written:
    """What one attempt at a batch wrote."""

    paths: dict[str, set[str]] = attrs.field(factory=dict)  # day directory -> object names
    size: int = 0
    files: int = 0
    puts: deque[asyncio.Future[ObjectMeta]] = attrs.field(factory=deque)  # still completing

    async def settle_one(self) -> None:
        """Wait for the oldest put still completing; raises what it raised."""
        meta = await self.puts.popleft()
        self.size += meta.size
        self.files += 1


class _Feed:
    """Plans the passes over a batch and feeds each pass its rows (on the worker thread).

    One pass writes one day: it reads, in batch order, every partition that
    has (or may have) rows on that day and keeps only those rows. A partition
    is read fully each time, so after its first read its exact days are
    known; before that, its min/max times (when the cache gives them) say
    which passes need it. A partition without them is read in the first
    pass, whose day is that of the first row. Partitions that cover one day,
    the common case, are read once and their batches passed through whole.
    """

    def __init__(self, column: str, parts: Sequence[PartitionRef]) -> None:
        self.column = column
        self.parts = list(parts)
        self.hints: dict[str, set[int] | None] = {p.id: _hint(p) for p in parts}
        self.seen: dict[str, set[int | None]] = {}
        self.done: dict[str, set[int | None]] = {p.id: set() for p in parts}
        self.rows: dict[str, int] = dict.fromkeys(self.hints, 0)
        self.current: PartitionRef | None = None

    def next_pass(self) -> tuple[list[int | None], list[PartitionRef]] | None:
        """The next pass's day (an empty list: the first row's) and partitions, or None."""
        unknown = {p.id for p in self.parts if p.id not in self.seen and self.hints[p.id] is None}
        todo = {p.id: self._todo(p) for p in self.parts}
        days = set().union(*todo.values())
        if days:
            day = min(days, key=_day_order)
            parts = [p for p in self.parts if day in todo[p.id] or p.id in unknown]
            return [day], parts
        if unknown:
            return [], [p for p in self.parts if p.id in unknown]
        return None

    def _todo(self, part: PartitionRef) -> set[int | None]:
        known = self.seen.get(part.id)
        days: set[int | None] = set(known if known is not None else self.hints[part.id] or ())
        return days - self.done[part.id]

    def rows_of(self, parts: Sequence[PartitionRef], target: list[int | None]) -> Iterator[Any]:
        """The rows of day ``target[0]`` (set from the first row if empty) in `parts`."""
        import pyarrow.compute as pc

        for part in parts:
            self.current = part
            seen: set[int | None] = set()
            reader = part.open()
            try:
                for batch in reader:
                    if not batch.num_rows:
                        continue
                    keys = self.day_keys(batch)
                    present = set(pc.unique(keys).to_pylist())
                    seen |= present
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
                    self.rows[part.id] += out.num_rows
                    yield out
                    # Not kept while the reader makes the next batch: the
                    # encoder holds what it still needs.
                    del batch, out, keys
            finally:
                reader.close()
            self.seen[part.id] = seen
            if target:
                self.done[part.id].add(target[0])
        self.current = None

    def day_keys(self, batch: pa.RecordBatch) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        problem = _time_column_problem(batch.schema, self.column, "partition's")
        if problem is not None:
            raise EncodeError(problem)
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
        return col.cast(pa.int32())


def _time_column_problem(schema: pa.Schema, column: str, whose: str) -> str | None:
    """Why rows of `schema` cannot be laid out by day (None if they can)."""
    import pyarrow as pa

    if column not in schema.names:
        return f"time column {column!r} is not in the {whose} columns"
    typ = schema.field(column).type
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        return None
    return f"time column {column!r} has type {typ}; a timestamp or date is needed"


def _hint(part: PartitionRef) -> set[int] | None:
    if part.min_time is None or part.max_time is None:
        return None
    first, last = _day_number(part.min_time), _day_number(part.max_time)
    if last < first or last - first > _MAX_HINT_DAYS:
        return None
    return set(range(first, last + 1))


class BlobSink:
    """Writes each batch through `encoder` into `store` (see the module doc).

    - `name`: the sink's name; part of every object name.
    - `store`: where objects go (closed by `close()`).
    - `encoder`: turns rows into file bytes.
    - `index`: what each batch wrote (see `hypaware.blob.batch_index`). Built
      from config, it lives in the sink's state directory; without one it
      is kept in memory, which is exactly-once only within this process.

    Reading and encoding run on one worker thread of the sink's own, never on
    the event loop; `close()` joins it.
    """

    def __init__(
        self, name: str, store: BlobStore, encoder: Encoder, index: BatchIndex | None = None
    ) -> None:
        self.name = name
        self.store = store
        self.encoder = encoder
        self.index = index if index is not None else BatchIndex(None)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._active = 0
        self._writing: set[str] = set()
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
        stem = batch_stem(self.name, dataset.name, batch.batch_id)
        if stem in self._writing:
            return ExportResult.failed(
                batch, f"sink {self.name!r}: batch {batch.batch_id} is already being exported"
            )
        self._writing.add(stem)
        try:
            return await self._export_batch(batch, stem, dataset_dir)
        finally:
            self._writing.discard(stem)

    async def _export_batch(self, batch: ExportBatch, stem: str, dataset_dir: str) -> ExportResult:
        problem = _time_column_problem(batch.dataset.schema, batch.dataset.time_column, "dataset's")
        if problem is not None:
            # No partition of this dataset can be laid out by day, on any retry.
            reason = f"sink {self.name!r}: dataset {batch.dataset.name!r}: {problem}"
            return self._all_failed(batch, {}, RetryPartition("", reason, retryable=False))
        try:
            await self._sweep()
        except StoreError as exc:
            return self._all_failed(batch, {}, self._store_failure(exc))
        # A partition some finished batch already holds was acknowledged
        # before and sent again (its ack was lost): writing it again would
        # double its rows, so it is acknowledged as it is.
        held = self.index.finished_holders(
            batch.dataset.name, [p.id for p in batch.partitions], other_than=stem
        )
        for pid, other in held.items():
            log.info(
                "sink %s: partition %s is already written by batch %s; not written again",
                self.name,
                pid,
                other,
                extra={"sink": self.name, "partition": pid},
            )
        todo = [p for p in batch.partitions if p.id not in held]
        self.index.begin(stem, batch.dataset.name, batch.batch_id, (p.id for p in todo))
        failed: dict[str, RetryPartition] = {}
        while True:
            live = [p for p in todo if p.id not in failed]
            feed = _Feed(batch.dataset.time_column, live)
            try:
                written = await self._write(batch, stem, dataset_dir, feed)
                await self._remove_stale(stem, written)
                break
            except _PartitionFailed as exc:
                cause = exc.__cause__
                assert isinstance(cause, Exception)
                blamed = [exc.part] if exc.part is not None else live
                for part in blamed:
                    failed[part.id] = self._partition_failure(part, cause)
                # Written again without them: the same names, leftovers deleted.
                self.index.drop_partitions(stem, (p.id for p in blamed))
            except _SinkClosing:
                why = RetryPartition("", f"sink {self.name!r} was closed")
                return self._all_failed(batch, failed, why, held)
            except StoreError as exc:
                return self._all_failed(batch, failed, self._store_failure(exc), held)
        self.index.finish(stem)
        exported = tuple(p.id for p in live) + tuple(held)
        result = ExportResult(
            exported=exported,
            retry_partitions=tuple(failed.values()),
            rows_written=sum(feed.rows[p.id] for p in live),
            bytes_written=written.size,
            files_written=written.files,
        )
        return result.reconcile(batch)

    def _all_failed(
        self,
        batch: ExportBatch,
        failed: dict[str, RetryPartition],
        why: RetryPartition,
        held: Collection[str] = (),
    ) -> ExportResult:
        """Every partition back for retry (with its own reason, or `why`), but those in `held`."""
        retry = [
            failed.get(p.id) or attrs.evolve(why, partition_id=p.id)
            for p in batch.partitions
            if p.id not in held
        ]
        for entry in retry:
            if entry.reason == why.reason:
                log.warning(
                    "sink %s: partition %s not written: %s",
                    self.name,
                    entry.partition_id,
                    why.reason,
                    extra={"sink": self.name, "partition": entry.partition_id},
                )
        return ExportResult(exported=tuple(held), retry_partitions=tuple(retry)).reconcile(batch)

    def _store_failure(self, exc: StoreError) -> RetryPartition:
        """The reason every partition of a batch gets when the destination failed."""
        text = str(exc)
        where = "" if self.destination in text else f"{self.destination}: "
        reason = f"sink {self.name!r}: {where}{text}" if where or self.name not in text else text
        return RetryPartition("", reason, isinstance(exc, TransientStoreError))

    def _partition_failure(self, part: PartitionRef, exc: Exception) -> RetryPartition:
        reason = f"sink {self.name!r}: partition {part.id!r}: {type(exc).__name__}: {exc}"
        log.warning(
            "sink %s: partition %s not written: %s",
            self.name,
            part.id,
            reason,
            extra={"sink": self.name, "partition": part.id},
        )
        # Rows the encoder cannot represent will not encode on a retry either.
        return RetryPartition(part.id, reason, retryable=not isinstance(exc, EncodeError))

    async def _write(
        self, batch: ExportBatch, stem: str, dataset_dir: str, feed: _Feed
    ) -> _Written:
        written = _Written()
        try:
            while (step := feed.next_pass()) is not None:
                target, parts = step
                try:
                    await self._write_pass(batch, stem, dataset_dir, feed, target, parts, written)
                except _SourceFailed as exc:
                    raise _PartitionFailed(feed.current) from exc.__cause__
            while written.puts:
                await written.settle_one()
        except BaseException:
            for put in written.puts:
                put.cancel()
            await asyncio.gather(*written.puts, return_exceptions=True)
            raise
        return written

    async def _write_pass(
        self,
        batch: ExportBatch,
        stem: str,
        dataset_dir: str,
        feed: _Feed,
        target: list[int | None],
        parts: list[PartitionRef],
        written: _Written,
    ) -> None:
        rows = feed.rows_of(parts, target)
        files = self.encoder.encode(batch.dataset.schema, rows)
        try:
            while (chunks := await self._pull(files)) is not _DONE:
                assert isinstance(chunks, Iterator)
                day_dir = f"{dataset_dir}/date={_day_name(target[0])}"
                names = written.paths.get(day_dir)
                if names is None:
                    # Recorded before the first object lands there, so that a
                    # later attempt knows where to look for stale objects.
                    self.index.touch(stem, day_dir)
                    names = written.paths[day_dir] = set()
                name = f"{stem}-{len(names):04d}.{self.encoder.extension}"
                names.add(name)
                await self._put(f"{day_dir}/{name}", chunks, written)
        finally:
            # Queued behind any pull still running in the worker, so the
            # generators are never closed while they execute; shielded so a
            # cancelled export still releases the reader.
            await asyncio.shield(self._run(_close_all, files, rows))

    async def _remove_stale(self, stem: str, written: _Written) -> None:
        """Delete every object of `stem` this attempt did not write, wherever any attempt wrote."""
        for day_dir in sorted(self.index.day_dirs(stem)):
            keep = written.paths.get(day_dir, set())
            await self._delete_matching(day_dir, stem, keep, "an earlier attempt")

    async def _sweep(self) -> None:
        """Delete the objects of batches that failed; their partitions went back for retry."""
        for record in self.index.open_batches():
            if record.stem in self._writing:
                continue
            for day_dir in sorted(record.day_dirs):
                await self._delete_matching(
                    day_dir, record.stem, set(), f"failed batch {record.batch_id}"
                )
            self.index.forget(record.stem)

    async def _delete_matching(self, day_dir: str, stem: str, keep: set[str], left_by: str) -> None:
        # Whatever the extension: the encoder may have changed between attempts.
        stale: list[str] = []
        async for meta in self.store.list(day_dir):
            name = meta.path.rpartition("/")[2]
            if name not in keep and name.rpartition("-")[0] == stem:
                stale.append(meta.path)
        for path in stale:
            log.info(
                "sink %s: removing %s left by %s",
                self.name,
                path,
                left_by,
                extra={"sink": self.name},
            )
            await self.store.delete(path)

    # ------------------------------------------------------------------ threads

    async def _pull(self, it: Iterator[T]) -> T | object:
        return await self._await_pull(self._submit(_next_or_done, it))

    @staticmethod
    async def _await_pull(pending: asyncio.Future[T]) -> T:
        try:
            return await pending
        except Exception as exc:
            raise _SourceFailed from exc

    async def _put(self, path: str, chunks: Iterator[bytes], written: _Written) -> None:
        """Start writing one file; return once its bytes are all handed to the store.

        The store finishes the object (the rename, the multipart completion)
        while the worker encodes the next file; at most one such put is
        still completing when the next one starts.
        """
        drained = asyncio.Event()
        put = asyncio.ensure_future(self._put_stream(path, self._stream(chunks, drained)))
        written.puts.append(put)
        handed = asyncio.ensure_future(drained.wait())
        try:
            while True:
                waiting: set[asyncio.Future[Any]] = {handed, *written.puts}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                # An earlier put that failed stops the batch now, not a file later.
                while written.puts and written.puts[0].done():
                    await written.settle_one()
                if handed.done() or put.done():
                    break
        finally:
            handed.cancel()
        while len(written.puts) > 1:
            await written.settle_one()

    async def _put_stream(self, path: str, stream: AsyncGenerator[bytes, None]) -> ObjectMeta:
        try:
            return await self.store.put(path, stream)
        finally:
            # A store that stops early leaves the stream suspended: closed
            # here, so its read-ahead is released now, not at collection.
            await stream.aclose()

    async def _stream(
        self, chunks: Iterator[bytes], drained: asyncio.Event
    ) -> AsyncGenerator[bytes, None]:
        # One hand-off ahead: the worker encodes the next chunks while
        # the store writes these.
        pending = self._submit(_take_chunks, chunks)
        try:
            while got := await self._await_pull(pending):
                if self._closed:
                    raise _SinkClosing
                pending = self._submit(_take_chunks, chunks)
                yield got
            drained.set()
        finally:
            # The store may stop early (a failed upload): the read-ahead then
            # finishes on its own and its outcome is dropped on purpose.
            pending.add_done_callback(_discard_outcome)

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
            self.index.close()
        finally:
            self._close_task.set_result(None)


def _discard_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


# Hand-offs of a few MiB, joined into one piece: every crossing costs a
# wake-up on both sides, and obstore takes a stream of 1 MiB pieces several
# times slower than one of 2-4 MiB pieces (each is a trip through the loop).
_HANDOFF_BYTES = 2 * 1024 * 1024


def _take_chunks(chunks: Iterator[bytes]) -> bytes:
    """The next chunks joined, about `_HANDOFF_BYTES` of them; empty at the end."""
    out: list[bytes] = []
    size = 0
    for chunk in chunks:
        if chunk:
            out.append(chunk)
            size += len(chunk)
            if size >= _HANDOFF_BYTES:
                break
    return out[0] if len(out) == 1 else b"".join(out)


def _next_or_done(it: Iterator[T]) -> T | object:
    return next(it, _DONE)


def _close_all(files: Iterator[Any], rows: Iterator[Any]) -> None:
    # Called on the way out, often after a failure: a second error here
    # would only hide the first, so it is logged, not raised.
    for close in (getattr(files, "close", None), getattr(rows, "close", None)):
        if close is None:
            continue
        try:
            close()
        except Exception:
            log.debug("closing a partition stream failed", exc_info=True)
