"""Encoding files and streaming them to the store: the writing half of `BlobSink`.

Each `BlobSink` owns a `FileWriter` and hands it every attempt at a batch;
the sink keeps the bookkeeping (what to write, what to delete, when to
acknowledge) and the writer knows only the store, the encoder and a hook
for each day directory it starts. It reads and encodes on worker threads
of its own, never on the event loop, and hands the encoded bytes to the
store a few MiB at a time, one hand-off ahead: the worker encodes the next
chunks while the store writes these, and the store finishes one file while
the worker encodes the next.

A batch that spans several days writes its day files side by side, one
pass per "lane" (a worker thread of its own), with no more lanes than
cores: pyarrow releases the GIL while it encodes, and each lane holds only
its own encoder's row groups, so memory stays flat per lane. A day is
written by one pass at a time, so its file names come out as they would
one pass after another.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from hypaware.blob.day_passes import DayFeed, PassCursor
from hypaware.blob.object_names import day_name
from hypaware.core.types import ExportBatch, ObjectMeta, PartitionRef
from hypaware.core.workers import cores

if TYPE_CHECKING:
    from hypaware.core.contracts import BlobStore, Encoder

__all__ = ["FileWriter", "PartitionFailed", "SinkClosing", "WrittenFiles"]

# The sink's logger: one name for everything a blob sink logs.
log = logging.getLogger("hypaware.blob.sink")

_DONE = object()
T = TypeVar("T")


class SinkClosing(Exception):
    """Raised inside an in-flight export when the sink is closed under it."""


class _SourceFailed(Exception):
    """Reading or encoding failed (the cause is chained), not the store."""


class PartitionFailed(Exception):
    """`part` could not be read or encoded (the cause is chained)."""

    def __init__(self, part: PartitionRef | None) -> None:
        super().__init__(part.id if part is not None else "")
        self.part = part


@attrs.define
class WrittenFiles:
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


class FileWriter:
    """Writes a batch's files, pass by pass, through `encoder` into `store`.

    - `name`: the sink's name, in the names of the worker threads.
    - `on_day_dir`: called with a batch's stem and a day directory before
      the batch's first object goes there.

    `stop()` makes writes in flight end at their next chunk; `shutdown()`
    then joins the worker threads.
    """

    def __init__(
        self,
        name: str,
        store: BlobStore,
        encoder: Encoder,
        on_day_dir: Callable[[str, str], None],
    ) -> None:
        self.name = name
        self.store = store
        self.encoder = encoder
        self._on_day_dir = on_day_dir
        self._executors: dict[int, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def stop(self) -> None:
        """Writes in flight raise `SinkClosing` at their next chunk."""
        self._stopped = True

    def shutdown(self) -> None:
        """Join the worker threads (once no write is in flight)."""
        with self._lock:
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            # Nothing is queued once the exports have returned, so this is prompt.
            executor.shutdown(wait=True)

    async def write(
        self,
        batch: ExportBatch,
        stem: str,
        dataset_dir: str,
        feed: DayFeed,
        *,
        lanes: int | None = None,
    ) -> WrittenFiles:
        """Write every pass `feed` plans, up to `lanes` at once (None: one per core).

        Returns what was written, once every put has completed.
        """
        lanes = min(lanes or cores(), len(feed.parts))
        if lanes > 1 and feed.parallel_days:
            return await self._write_lanes(batch, stem, dataset_dir, feed, lanes)
        written = WrittenFiles()
        try:
            while (step := feed.next_pass()) is not None:
                target, parts = step
                try:
                    await self._write_pass(batch, stem, dataset_dir, feed, target, parts, written)
                except _SourceFailed as exc:
                    raise PartitionFailed(feed.current) from exc.__cause__
            while written.puts:
                await written.settle_one()
        except BaseException:
            await _abandon(written)
            raise
        return written

    async def _write_lanes(
        self, batch: ExportBatch, stem: str, dataset_dir: str, feed: DayFeed, lanes: int
    ) -> WrittenFiles:
        """`write` with up to `lanes` passes (days) at once, each on a lane of its own."""
        written = WrittenFiles()
        free = list(range(lanes - 1, -1, -1))
        running: dict[asyncio.Future[None], tuple[int | None, int, WrittenFiles]] = {}

        async def one_pass(
            target: list[int | None], parts: list[PartitionRef], mine: WrittenFiles, lane: int
        ) -> None:
            cursor = PassCursor()
            try:
                await self._write_pass(
                    batch, stem, dataset_dir, feed, target, parts, mine, lane=lane, cursor=cursor
                )
                while mine.puts:
                    await mine.settle_one()
            except _SourceFailed as exc:
                raise PartitionFailed(cursor.current) from exc.__cause__
            except BaseException:
                await _abandon(mine)
                raise

        try:
            while True:
                busy = [day for day, _lane, _mine in running.values()]
                while free and (step := feed.next_pass(busy)) is not None:
                    target, parts = step
                    lane = free.pop()
                    # File names are counted per day directory: the lanes share them.
                    mine = WrittenFiles(paths=written.paths)
                    started = asyncio.ensure_future(one_pass(target, parts, mine, lane))
                    running[started] = (target[0], lane, mine)
                    busy.append(target[0])
                if not running:
                    break
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    _day, lane, mine = running.pop(finished)
                    free.append(lane)
                    finished.result()
                    written.size += mine.size
                    written.files += mine.files
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        return written

    async def _write_pass(
        self,
        batch: ExportBatch,
        stem: str,
        dataset_dir: str,
        feed: DayFeed,
        target: list[int | None],
        parts: list[PartitionRef],
        written: WrittenFiles,
        *,
        lane: int = 0,
        cursor: PassCursor | None = None,
    ) -> None:
        rows = feed.rows_of(parts, target, cursor)
        files = self.encoder.encode(batch.dataset.schema, rows)
        try:
            while (chunks := await self._pull(files, lane)) is not _DONE:
                assert isinstance(chunks, Iterator)
                day_dir = f"{dataset_dir}/date={day_name(target[0])}"
                names = written.paths.get(day_dir)
                if names is None:
                    # Recorded before the first object lands there, so that a
                    # later attempt knows where to look for stale objects.
                    self._on_day_dir(stem, day_dir)
                    names = written.paths[day_dir] = set()
                name = f"{stem}-{len(names):04d}.{self.encoder.extension}"
                names.add(name)
                await self._put(f"{day_dir}/{name}", chunks, written, lane)
        finally:
            # Queued behind any pull still running in the worker, so the
            # generators are never closed while they execute; shielded so a
            # cancelled export still releases the reader.
            await asyncio.shield(self._run(_close_all, files, rows, lane=lane))

    # ------------------------------------------------------------------ threads

    async def _pull(self, it: Iterator[T], lane: int = 0) -> T | object:
        return await self._await_pull(self._submit(_next_or_done, it, lane=lane))

    @staticmethod
    async def _await_pull(pending: asyncio.Future[T]) -> T:
        try:
            return await pending
        except Exception as exc:
            raise _SourceFailed from exc

    async def _put(
        self, path: str, chunks: Iterator[bytes], written: WrittenFiles, lane: int = 0
    ) -> None:
        """Start writing one file; return once its bytes are all handed to the store.

        The store finishes the object (the rename, the multipart completion)
        while the worker encodes the next file; at most one such put is
        still completing when the next one starts.
        """
        drained = asyncio.Event()
        put = asyncio.ensure_future(self._put_stream(path, self._stream(chunks, drained, lane)))
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
        # A put that ended already (refused before it read a byte, say) is
        # settled now: its error is the cause; left pending, the next file
        # would fail on the unread stream and hide it.
        while len(written.puts) > 1 or (written.puts and written.puts[-1].done()):
            await written.settle_one()

    async def _put_stream(self, path: str, stream: AsyncGenerator[bytes, None]) -> ObjectMeta:
        try:
            return await self.store.put(path, stream)
        finally:
            # A store that stops early leaves the stream suspended: closed
            # here, so its read-ahead is released now, not at collection.
            await stream.aclose()

    async def _stream(
        self, chunks: Iterator[bytes], drained: asyncio.Event, lane: int = 0
    ) -> AsyncGenerator[bytes, None]:
        # One hand-off ahead: the worker encodes the next chunks while
        # the store writes these.
        pending = self._submit(_take_chunks, chunks, lane=lane)
        try:
            while got := await self._await_pull(pending):
                if self._stopped:
                    raise SinkClosing
                pending = self._submit(_take_chunks, chunks, lane=lane)
                yield got
            drained.set()
        finally:
            # The store may stop early (a failed upload): the read-ahead then
            # finishes on its own and its outcome is dropped on purpose.
            pending.add_done_callback(_discard_outcome)

    # --------------------------------------------------------------- threads

    def _submit(self, fn: Callable[..., T], *args: Any, lane: int = 0) -> asyncio.Future[T]:
        with self._lock:
            executor = self._executors.get(lane)
            if executor is None:
                # One worker per lane: pulls of one generator must never overlap.
                executor = self._executors[lane] = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=f"hypaware-{self.name}-{lane}"
                )
        return asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _run(self, fn: Callable[..., T], *args: Any, lane: int = 0) -> T:
        return await self._submit(fn, *args, lane=lane)


async def _abandon(written: WrittenFiles) -> None:
    """Cancel the puts still completing and wait for them to end."""
    for put in written.puts:
        put.cancel()
    await asyncio.gather(*written.puts, return_exceptions=True)


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
