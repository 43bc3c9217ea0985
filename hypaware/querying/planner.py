"""`hypaware.query`: one question over the cache and a queryable sink, every row once.

The split rule. A dataset's rows live in sealed cache partitions, in a sink,
or in both. For each query:

1. the cache's sealed partitions are listed (C1);
2. the sink is looked at once (`hypaware.querying.sources`): it *claims* a
   partition when it holds every row of it, judged from its own durable
   record (the progress store's acknowledgement plus the partition's object
   names for Parquet; the snapshot's partition list for Iceberg);
3. the cache is listed again (C2);
4. every partition of C2 the sink does not claim is read from the cache, and
   the sink leaves exactly those partitions out; everything else the sink
   holds comes from the sink.

A partition is therefore read from one side only. If a partition of C1 that
the sink does not claim is gone from C2 (exported and dropped by retention
during steps 1-3), or cannot be opened, the plan is made again. Cache
partitions read from the cache are opened before the first row is returned,
so retention deleting them mid-query does not cut them short (an open file
stays readable). Rows sealed after the query started may or may not appear,
but never twice and never in part.

`hypaware.querying.api` holds the entry points that follow the plan made
here; `hypaware.querying.streaming` streams its rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.cache.protocol import Cache, declared_identity
from hypaware.core.errors import CacheError
from hypaware.core.query_source import SinkView
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.context import _Context
from hypaware.querying.errors import CacheOnlyWarning, NotQueryableError, SourceUnreadableError
from hypaware.querying.filters import Filters
from hypaware.querying.sources import sink_source

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["QueryPlan"]

_REPLANS = 8


@attrs.define
class QueryPlan:
    """What a query reads: the sink (if any), and the cache partitions on each side."""

    dataset: DatasetInfo
    filters: Filters
    sink: str | None
    cache_partitions: list[str] = attrs.field(factory=list)
    sink_partitions: list[str] = attrs.field(factory=list)
    sink_files: list[str] = attrs.field(factory=list)
    skipped: list[str] = attrs.field(factory=list)


def _cache_parts(cache: Cache, info: DatasetInfo, filters: Filters) -> list[PartitionRef]:
    try:
        parts = cache.ready_partitions(info.name)
    except (CacheError, OSError) as exc:
        raise SourceUnreadableError(
            "cache", f"cannot list partitions of {info.name!r}: {exc}"
        ) from exc
    return [p for p in parts if filters.overlaps(p)]


def _open_all(
    parts: Sequence[PartitionRef],
) -> tuple[list[tuple[PartitionRef, pa.RecordBatchReader]], list[PartitionRef]]:
    opened: list[tuple[PartitionRef, pa.RecordBatchReader]] = []
    gone: list[PartitionRef] = []
    for part in parts:
        try:
            opened.append((part, part.open()))
        except (CacheError, FileNotFoundError):
            gone.append(part)
    return opened, gone


def _identity(cache: Any) -> str | None:
    """The cache's identity, or None for a host cache without one (see docs/embedding.md)."""
    try:
        value = declared_identity(cache)
    except CacheError:
        return None  # e.g. a read-only cache that never had one: claims fall back on progress
    return value if isinstance(value, str) else None


async def _plan(
    ctx: _Context, filters: Filters, allow_partial: bool
) -> tuple[QueryPlan, SinkView | None, list[tuple[PartitionRef, pa.RecordBatchReader | None]]]:
    info = ctx.dataset
    plan = QueryPlan(info, filters, ctx.sink_name)
    source = (
        sink_source(ctx.sink_name, ctx.sink, _identity(ctx.cache))
        if ctx.sink_name is not None
        else None
    )
    if source is None and ctx.sink_name is not None:
        # Its plugin says queryable, but reading it could return rows twice.
        raise NotQueryableError(
            f"sink {ctx.sink_name!r} cannot be queried exactly: its scan() takes no "
            "'exclude' keyword (QueryableSink.scan), so it cannot leave out the "
            "partitions the cache answers for"
        )
    if source is None:
        parts = _cache_parts(ctx.cache, info, filters)
        plan.cache_partitions = [p.id for p in parts]
        return plan, None, [(p, None) for p in parts]

    for _attempt in range(_REPLANS):
        first = _cache_parts(ctx.cache, info, filters)
        try:
            view = await source.view(info, filters, ctx.read_floor)
        except SourceUnreadableError as exc:
            if not allow_partial:
                raise
            warnings.warn(
                f"query of {info.name!r} is partial: {exc}; reading the cache alone",
                CacheOnlyWarning,
                stacklevel=3,
            )
            plan.skipped.append(exc.part)
            parts = _cache_parts(ctx.cache, info, filters)
            plan.cache_partitions = [p.id for p in parts]
            return plan, None, [(p, None) for p in parts]
        second = _cache_parts(ctx.cache, info, filters)
        present = {p.id for p in second}
        if any(p.id not in present and not view.claims(p) for p in first):
            continue  # exported and dropped while we looked: look again
        cache_side = [p for p in second if not view.claims(p)]
        opened, gone = _open_all(cache_side)
        if gone:
            for _part, reader in opened:
                reader.close()
            continue
        plan.cache_partitions = [p.id for p in cache_side]
        plan.sink_partitions = [p.id for p in second if view.claims(p)]
        return plan, view, [(p, r) for p, r in opened]
    raise SourceUnreadableError(
        "cache",
        f"partitions of {info.name!r} kept leaving the cache while the query was planned "
        f"({_REPLANS} attempts); try again",
    )
