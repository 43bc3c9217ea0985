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
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.cache.protocol import Cache, ExportFloor
from hypaware.core.config import HypawareConfig, load_config
from hypaware.core.errors import CacheError, ConfigError, HypawareError, StateError
from hypaware.querying.errors import (
    CacheOnlyWarning,
    NotQueryableError,
    QueryError,
    QueryInputError,
    SourceUnreadableError,
    UnknownDatasetError,
)
from hypaware.querying.expr import parse_time, parse_where
from hypaware.querying.sources import Filters, SinkView, cache_reader, sink_source
from hypaware.core.registry import did_you_mean
from hypaware.core.types import DatasetInfo, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

    from hypaware.export.state import ProgressStore

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

log = logging.getLogger(__name__)

_REPLANS = 8

TimeLike = datetime | date | str


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


# ------------------------------------------------------------------ sources


@attrs.define
class _Context:
    cache: Cache
    dataset: DatasetInfo
    sink_name: str | None
    sink: Any
    read_floor: Any
    cleanup: list[Any]
    # Closed as soon as the plan is made (sqlite connections stay in their thread).
    planning: list[Any] = attrs.field(factory=list)
    partial: bool = False


def _driver_sink(driver: Any, name: str) -> Any:
    """The driver's live sink `name`, built on first use as the driver itself would."""
    return driver.sink(name)


def _as_config(source: Any) -> HypawareConfig:
    if isinstance(source, HypawareConfig):
        return source
    if isinstance(source, Mapping | str | os.PathLike):
        return load_config(source)
    raise TypeError(
        "query takes a HypawareConfig, a config mapping or file path, or an ExportDriver; "
        f"got {type(source).__name__}"
    )


def _pick(
    candidates: Sequence[tuple[str, bool, tuple[str, ...] | None]],
    dataset: str,
    wanted: str | None,
) -> str | None:
    """The sink to read: `wanted` (checked), else the first queryable one receiving `dataset`."""
    names = [n for n, _, _ in candidates]
    if wanted is not None:
        for name, queryable, datasets in candidates:
            if name != wanted:
                continue
            if not queryable:
                raise NotQueryableError(
                    f"sink {wanted!r} is not queryable: its writer/destination pair cannot be "
                    "read back (JSONL files and request sinks never are)"
                )
            if datasets is not None and dataset not in datasets:
                raise NotQueryableError(
                    f"sink {wanted!r} does not receive dataset {dataset!r} "
                    f"(it takes {', '.join(datasets) or 'none'})"
                )
            return name
        raise NotQueryableError(f"no sink named {wanted!r}{did_you_mean(wanted, names)}")
    for name, queryable, datasets in sorted(candidates):
        if queryable and (datasets is None or dataset in datasets):
            return name
    return None


def _dataset(cache: Cache, name: str) -> DatasetInfo:
    try:
        infos = list(cache.datasets())
    except (CacheError, OSError) as exc:
        raise SourceUnreadableError("cache", f"cannot list datasets: {exc}") from exc
    for info in infos:
        if info.name == name:
            return info
    known = [i.name for i in infos]
    raise UnknownDatasetError(
        f"no dataset {name!r} in the cache{did_you_mean(name, known)} "
        f"(datasets: {', '.join(known) or 'none'})"
    )


def _context(
    source: Any,
    dataset: str,
    sink: str | None,
    env: Mapping[str, str] | None,
    allow_partial: bool,
) -> _Context:
    from hypaware.export.driver import ExportDriver

    if isinstance(source, ExportDriver):
        info = _dataset(source.cache, dataset)
        built: dict[str, Any] = {}
        candidates = []
        for name in source.sink_names:
            try:
                built[name] = _driver_sink(source, name)
                readable = sink_source(name, built[name]) is not None
            except Exception as exc:  # a sink that cannot be built is no source
                log.warning("sink %s cannot be built for a query: %s", name, exc)
                readable = False
            candidates.append((name, readable, source.sink_spec(name).datasets))
        chosen = _pick(candidates, dataset, sink)
        state = source.state
        built_sink = built[chosen] if chosen is not None else None
        return _Context(
            source.cache,
            info,
            chosen,
            built_sink,
            (lambda: acknowledged(state, chosen, dataset)) if chosen else None,
            [],
        )

    from hypaware.cache.local import LocalCache
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import build, resolve

    config = _as_config(source)
    cache = LocalCache.from_config(config)
    info = _dataset(cache, dataset)
    plans = {p.name: p for p in resolve(config, Registry.from_entry_points())}
    candidates = [(p.name, p.queryable, p.spec.datasets) for p in plans.values()]
    chosen = _pick(candidates, dataset, sink)
    if chosen is None:
        return _Context(cache, info, None, None, None, [])
    try:
        built_sink = build(plans[chosen], config=config, env=env)
    except (ConfigError, HypawareError) as exc:
        error = SourceUnreadableError(f"sink {chosen!r}", f"cannot be built: {exc}")
        if not allow_partial:
            raise error from exc
        warnings.warn(
            f"query of {dataset!r} is partial: {error}; reading the cache alone",
            CacheOnlyWarning,
            stacklevel=4,
        )
        return _Context(cache, info, None, None, None, [], partial=True)
    store = _open_state(config)

    def read_floor() -> ExportFloor | None:
        if store is None:
            return None
        return acknowledged(store, chosen, dataset)

    planning = [store] if store is not None else []
    return _Context(cache, info, chosen, built_sink, read_floor, [built_sink], planning)


def acknowledged(store: ProgressStore, sink: str, dataset: str) -> ExportFloor | None:
    """What `sink` has acknowledged of `dataset`: None if it never started on it.

    Without the store's one-snapshot read, the high-water is read before the
    respool set and the batches in flight: progress only moves forward, so a
    partition at or below that high-water is either acknowledged or still
    listed in one of the later reads.
    """
    snapshot = getattr(store, "export_floor", None)
    if snapshot is not None:
        floor: ExportFloor | None = snapshot(sink, dataset)
        return floor
    high_water = store.high_water(sink, dataset)
    if high_water is None:
        return None
    pending = {e.partition_id for e in store.respooled(sink, dataset)}
    for flight in store.in_flight(sink):
        if flight.dataset == dataset:
            pending.update(flight.partition_ids)
    return ExportFloor(high_water, frozenset(pending))


def _open_state(config: HypawareConfig) -> ProgressStore | None:
    from hypaware.export.state import STATE_FILE, ProgressStore

    if not (config.state_path / STATE_FILE).exists():
        return None  # nothing was ever exported: no partition is acknowledged
    try:
        return ProgressStore(config.state_path, create=False)
    except StateError as exc:
        raise SourceUnreadableError("state", f"export progress cannot be read: {exc}") from exc


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


# ------------------------------------------------------------------ inputs


def _filters(
    info: DatasetInfo,
    columns: Iterable[str] | str | None,
    since: TimeLike | None,
    until: TimeLike | None,
    keys: Iterable[Any] | Any | None,
    where: pc.Expression | str | None,
) -> Filters:
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = info.schema
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    wanted = tuple(columns) if columns is not None else tuple(schema.names)
    if not wanted:
        raise QueryInputError("columns: name at least one column")
    for column in wanted:
        if column not in schema.names:
            raise QueryInputError(
                f"columns: dataset {info.name!r} has no column {column!r}"
                f"{did_you_mean(column, schema.names)} (columns: {', '.join(schema.names)})"
            )
    start = parse_time(since, what="since") if since is not None else None
    end = parse_time(until, what="until") if until is not None else None
    if start is not None and end is not None and end < start:
        raise QueryInputError(f"until ({end.isoformat()}) is before since ({start.isoformat()})")
    key_values: tuple[Any, ...] | None = None
    if keys is not None:
        if info.lookup_key is None:
            raise QueryInputError(f"keys: dataset {info.name!r} has no lookup key")
        if isinstance(keys, str | bytes | int) or not isinstance(keys, Iterable):
            keys = [keys]
        key_values = tuple(keys)
        field = schema.field(info.lookup_key)
        try:
            key_values = tuple(pa.array(key_values).cast(field.type).to_pylist())
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise QueryInputError(
                f"keys: not values of lookup key {info.lookup_key!r} ({field.type}): {exc}"
            ) from exc
    if isinstance(where, str):
        where = parse_where(where, schema)
    elif where is not None:
        if not isinstance(where, pc.Expression):
            raise QueryInputError(
                f"where: expected a pyarrow.compute.Expression or a string, "
                f"got {type(where).__name__}"
            )
        _check_expression(where, info)
    return Filters(wanted, start, end, key_values, where)


def _check_expression(expr: pc.Expression, info: DatasetInfo) -> None:
    import re

    import pyarrow as pa

    try:
        info.schema.empty_table().filter(expr)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        text = str(exc)
        m = re.search(r"FieldRef\.Name\(([^)]*)\)", text)
        if m:
            name = m.group(1)
            raise QueryInputError(
                f"where: dataset {info.name!r} has no column {name!r}"
                f"{did_you_mean(name, info.schema.names)} "
                f"(columns: {', '.join(info.schema.names)})"
            ) from exc
        raise QueryInputError(f"where: {text.splitlines()[0] if text else exc!r}") from exc


# ------------------------------------------------------------------ planning


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


async def _plan(
    ctx: _Context, filters: Filters, allow_partial: bool
) -> tuple[QueryPlan, SinkView | None, list[tuple[PartitionRef, pa.RecordBatchReader | None]]]:
    info = ctx.dataset
    plan = QueryPlan(info, filters, ctx.sink_name)
    source = sink_source(ctx.sink_name, ctx.sink) if ctx.sink_name is not None else None
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


# ------------------------------------------------------------------ running


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


async def plan_query(
    source: Any,
    dataset: str,
    *,
    columns: Iterable[str] | str | None = None,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    keys: Iterable[Any] | Any | None = None,
    where: pc.Expression | str | None = None,
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
            try:
                sink_reader = view.reader(filters, [p for p, _ in cache_parts])
            except SourceUnreadableError as exc:
                if not allow_partial:
                    raise
                plan.skipped.append(exc.part)
                warnings.warn(
                    f"query of {dataset!r} is partial: {exc}", CacheOnlyWarning, stacklevel=3
                )
            plan.sink_files = list(view.describe().get("files", []))
    except BaseException:
        await _close(ctx.cleanup)
        raise
    finally:
        await _close(ctx.planning)
    cleanup = ctx.cleanup

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            if sink_reader is not None:
                assert view is not None
                yield from _guarded(view.part, iter(sink_reader), allow_partial, plan)
            yield from _guarded(
                "cache", cache_reader(cache_parts, ctx.dataset, filters), allow_partial, plan
            )
        finally:
            # Closed here, not at garbage collection: a scan dropped at
            # interpreter exit can abort the process from arrow's threads.
            if sink_reader is not None:
                sink_reader.close()
            for _part, reader in cache_parts:
                if reader is not None:
                    reader.close()
            _close_now(cleanup)

    return plan, pa.RecordBatchReader.from_batches(target, _limited(target, batches(), limit))


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


async def query_async(
    source: Any,
    dataset: str,
    *,
    columns: Iterable[str] | str | None = None,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    keys: Iterable[Any] | Any | None = None,
    where: pc.Expression | str | None = None,
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
    where: pc.Expression | str | None = None,
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
    - `where`: a ``pyarrow.compute`` expression, or a string in the filter
      language of `hypaware.querying.expr`.
    - `limit`: at most this many rows.
    - `sink`: the queryable sink to read (default: the first by name that
      receives the dataset). With none, the cache is read alone and a
      `CacheOnlyWarning` says so.
    - `allow_partial`: when a sink cannot be read, warn and return what the
      cache holds instead of raising.

    Raises `UnknownDatasetError`, `NotQueryableError`, `QueryInputError`
    (malformed time, unknown column, bad expression) and
    `SourceUnreadableError` naming the part that could not be read. Call
    `query_async` from inside an event loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise QueryError("query() cannot run inside an event loop: await query_async() instead")
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
