"""`hypaware.query` and `hypaware.query_async`, and `plan_query` behind them.

The public entry points: they check the arguments (`hypaware.querying.filters`),
make the plan (`hypaware.querying.planner`, which says how rows are split
between the cache and the sink) and return a reader streaming it
(`hypaware.querying.streaming`).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.loops import refuse_running_loop
from hypaware.querying.context import _Context, _context
from hypaware.querying.errors import (
    CacheOnlyWarning,
    NotQueryableError,
    QueryError,
    QueryInputError,
    SourceUnreadableError,
    UnknownDatasetError,
)
from hypaware.querying.filters import Filters, TimeLike, _filters
from hypaware.querying.planner import QueryPlan, _plan
from hypaware.querying.sources.cache import cache_reader
from hypaware.querying.streaming import _close, _close_now, _guarded, _limited, _Releasing

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.core.filter import Filter
    from hypaware.core.query_source import SinkView
    from hypaware.core.types import PartitionRef

__all__ = [
    "CacheOnlyWarning",
    "NotQueryableError",
    "QueryError",
    "QueryInputError",
    "QueryPlan",
    "SourceUnreadableError",
    "UnknownDatasetError",
    "plan_query",
    "query",
    "query_async",
]


async def plan_query(
    source: Any,
    dataset: str,
    *,
    columns: Iterable[str] | str | None = None,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    keys: Iterable[Any] | Any | None = None,
    where: Filter | str | None = None,
    limit: int | None = None,
    sink: str | None = None,
    allow_partial: bool = False,
    env: Mapping[str, str] | None = None,
) -> tuple[QueryPlan, pa.RecordBatchReader]:
    """Like `query_async`, and also the `QueryPlan` it follows (sources, files, partitions)."""
    import pyarrow as pa

    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise QueryInputError(f"limit: expected a non-negative integer, got {limit!r}")
    ctx = _context(source, dataset, sink, env, allow_partial)
    try:
        filters = _filters(ctx.dataset, columns, since, until, keys, where)
        if ctx.sink_name is None and not ctx.partial:
            warnings.warn(
                f"no queryable sink receives dataset {dataset!r}: reading the cache alone, "
                "so rows older than the cache's retention are not included",
                CacheOnlyWarning,
                stacklevel=3,
            )
        plan, view, cache_parts = await _plan(ctx, filters, allow_partial)
        target = pa.schema([ctx.dataset.schema.field(c) for c in filters.columns])
        sink_reader = None
        if view is not None:
            sink_reader = _sink_reader(view, filters, cache_parts, plan, dataset, allow_partial)
            plan.sink_files = list(view.describe().get("files", []))
    except BaseException:
        await _close(ctx.cleanup)
        raise
    finally:
        await _close(ctx.planning)
    read = _PlannedRead(ctx, filters, plan, view, sink_reader, cache_parts, allow_partial)
    # `_Releasing` releases once, whether the reader is read to the end, fails,
    # is closed, or is dropped unread.
    stream = _Releasing(_limited(target, read.batches(), limit), read.release)
    return plan, pa.RecordBatchReader.from_batches(target, stream)


def _sink_reader(
    view: SinkView,
    filters: Filters,
    cache_parts: list[tuple[PartitionRef, pa.RecordBatchReader | None]],
    plan: QueryPlan,
    dataset: str,
    allow_partial: bool,
) -> pa.RecordBatchReader | None:
    """The sink's side of the plan; None when it cannot be read and `allow_partial` says go on."""
    try:
        return view.reader(filters, [p for p, _ in cache_parts])
    except SourceUnreadableError as exc:
        if not allow_partial:
            raise
        plan.skipped.append(exc.part)
        # One frame below plan_query: its stacklevel plus one blames the same frame.
        warnings.warn(f"query of {dataset!r} is partial: {exc}", CacheOnlyWarning, stacklevel=4)
        return None


@attrs.define
class _PlannedRead:
    """The readers a plan streams from, and what they hold open until released."""

    ctx: _Context
    filters: Filters
    plan: QueryPlan
    view: SinkView | None
    sink_reader: pa.RecordBatchReader | None
    cache_parts: list[tuple[PartitionRef, pa.RecordBatchReader | None]]
    allow_partial: bool

    def release(self) -> None:
        # Closed here, not at garbage collection: a scan dropped at interpreter
        # exit can abort the process from arrow's threads.
        if self.sink_reader is not None:
            self.sink_reader.close()
        for _part, reader in self.cache_parts:
            if reader is not None:
                reader.close()
        _close_now(self.ctx.cleanup)

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self.sink_reader is not None:
            assert self.view is not None
            yield from _guarded(
                self.view.part, iter(self.sink_reader), self.allow_partial, self.plan
            )
        cache = cache_reader(self.cache_parts, self.ctx.dataset, self.filters)
        yield from _guarded("cache", cache, self.allow_partial, self.plan)


async def query_async(
    source: Any,
    dataset: str,
    *,
    columns: Iterable[str] | str | None = None,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    keys: Iterable[Any] | Any | None = None,
    where: Filter | str | None = None,
    limit: int | None = None,
    sink: str | None = None,
    allow_partial: bool = False,
    env: Mapping[str, str] | None = None,
) -> pa.RecordBatchReader:
    """`query` for code already on an event loop: plans without blocking it.

    The returned reader does blocking reads; iterate it off the loop (for
    example with `asyncio.to_thread`) for large results.
    """
    _, reader = await plan_query(
        source,
        dataset,
        columns=columns,
        since=since,
        until=until,
        keys=keys,
        where=where,
        limit=limit,
        sink=sink,
        allow_partial=allow_partial,
        env=env,
    )
    return reader


def query(
    source: Any,
    dataset: str,
    *,
    columns: Iterable[str] | str | None = None,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    keys: Iterable[Any] | Any | None = None,
    where: Filter | str | None = None,
    limit: int | None = None,
    sink: str | None = None,
    allow_partial: bool = False,
    env: Mapping[str, str] | None = None,
) -> pa.RecordBatchReader:
    """Rows of `dataset` from the cache and one queryable sink, every row exactly once.

    - `source`: a `HypawareConfig`, a config mapping or JSON file path, or an
      `ExportDriver` (its cache, progress store and sinks).
    - `columns`: the columns to return, in order (default all).
    - `since` / `until`: the time column is ``>= since`` and ``< until``
      (datetime, date or ISO 8601 string; no zone means UTC).
    - `keys`: values of the dataset's lookup key to keep.
    - `where`: a filter built with `hypaware.col` (``col("tokens") > 10``) or
      its text form (``"tokens > 10 and role = 'user'"``, see
      `hypaware.core.filter`); checked against the dataset, then pushed into
      every reader (Parquet row groups, Iceberg scan planning).
    - `limit`: at most this many rows.
    - `sink`: the queryable sink to read (default: the first by name that
      receives the dataset). With none, the cache is read alone and a
      `CacheOnlyWarning` says so.
    - `allow_partial`: when a sink cannot be read, warn and return what the
      cache holds instead of raising.

    Raises `UnknownDatasetError`, `NotQueryableError`, `QueryInputError`
    (malformed time, unknown column, bad filter, with a did-you-mean) and
    `SourceUnreadableError` naming the part that could not be read. Call
    `query_async` from inside an event loop.
    """
    refuse_running_loop("query()", "query_async()", QueryError)
    return asyncio.run(
        query_async(
            source,
            dataset,
            columns=columns,
            since=since,
            until=until,
            keys=keys,
            where=where,
            limit=limit,
            sink=sink,
            allow_partial=allow_partial,
            env=env,
        )
    )
