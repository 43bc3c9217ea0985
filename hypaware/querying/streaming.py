"""A plan's rows as one stream: the limit, reads that may fail partway, closing what was opened.

`_limited` stops after `limit` rows, `_guarded` turns a source failing
mid-read into `SourceUnreadableError` (or, with `allow_partial`, a
`CacheOnlyWarning` and the rows read so far), and `_close` / `_close_now`
close the sinks and stores a query opened, on or off an event loop.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from hypaware.core.errors import HypawareError
from hypaware.querying.errors import CacheOnlyWarning, QueryError, SourceUnreadableError
from hypaware.querying.planner import QueryPlan

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


async def _close(objects: Iterable[Any]) -> None:
    for obj in objects:
        close = getattr(obj, "close", None)
        if close is None:
            continue
        try:
            result = close()
            if asyncio.iscoroutine(result):
                await result
        except Exception as exc:  # closing must not hide the answer
            log.debug("closing %r failed: %s", obj, exc)


def _limited(
    schema: pa.Schema, batches: Iterator[pa.RecordBatch], limit: int | None
) -> Iterator[pa.RecordBatch]:
    left = limit
    try:
        if left == 0:
            return
        for batch in batches:
            if left is not None:
                if batch.num_rows > left:
                    batch = batch.slice(0, left)
                left -= batch.num_rows
            yield batch
            if left == 0:
                # Stop now: another batch would start reads only to be dropped.
                return
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


class _Releasing(Iterator["pa.RecordBatch"]):
    """`batches`, and `release` called once: when they end or fail, are closed, or are dropped.

    A generator dropped before its first batch never runs its ``finally``, so
    the release cannot live there: a reader whose schema alone was looked at
    (or with ``limit=0``) would leave what the query opened to the collector.
    """

    def __init__(self, batches: Iterator[pa.RecordBatch], release: Callable[[], None]) -> None:
        self._batches = batches
        self._release: Callable[[], None] | None = release

    def __next__(self) -> pa.RecordBatch:
        try:
            return next(self._batches)
        except BaseException:  # the end (StopIteration) or a failure: release now
            self.close()
            raise

    def close(self) -> None:
        release, self._release = self._release, None
        if release is None:
            return
        try:
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()
        finally:
            release()

    def __del__(self) -> None:
        self.close()


def _guarded(
    part: str, batches: Iterator[pa.RecordBatch], allow_partial: bool, plan: QueryPlan
) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    try:
        yield from batches
    except QueryError:
        raise
    except (HypawareError, pa.ArrowException, OSError) as exc:
        if not allow_partial:
            raise SourceUnreadableError(part, f"reading failed: {exc}") from exc
        plan.skipped.append(part)
        warnings.warn(
            f"query is partial: {part} could not be read: {exc}", CacheOnlyWarning, stacklevel=2
        )


def _close_now(objects: list[Any]) -> None:
    if not objects:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_close(objects))
        return
    task = loop.create_task(_close(objects))
    _pending.add(task)
    task.add_done_callback(_pending.discard)


_pending: set[asyncio.Task[None]] = set()
