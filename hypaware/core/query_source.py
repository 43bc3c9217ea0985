"""The query-source contract: how a sink answers a query in place, beside the cache.

A query reads each cache partition from one side. A sink that can be read
back provides a `QuerySource` (`ProvidesQuerySource.query_source`); for one
query the source takes a consistent view of what the sink holds, a
`SinkView`, which answers per cache partition whether the sink vouches for
every row of it (`SinkView.claims`). The query reads claimed partitions from
the sink and the rest from the cache, and tells the view which partitions
the cache answers for, so the sink never returns them too
(`SinkView.reader`).

First-party sinks provide their sources through this contract: the Parquet
blob sink (`hypaware.blob.query_source`) and the Iceberg table format
(`hypaware.iceberg.query_source`). A sink that only implements
`QueryableSink.scan` is read through `GenericSource`: partitions are claimed
when the progress store says the sink acknowledged them, and every other
partition is passed to `scan` as `exclude`.

The helpers (`filtered`, `restricted`, `conform`) shape a sink's rows as the
query's columns and types; `acked` reads the progress store's floor.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hypaware.core.errors import SourceUnreadableError
from hypaware.core.query_scope import QueryScope
from hypaware.core.types import DatasetInfo, ExportFloor, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = [
    "FloorReader",
    "GenericSource",
    "ProvidesQuerySource",
    "QuerySource",
    "SinkView",
    "acked",
    "conform",
    "filtered",
    "restricted",
    "scan_takes_exclude",
]

# Reads the progress store's floor of the sink for the query's dataset, when
# the source needs it (None: the store knows nothing of the sink yet).
FloorReader = Callable[[], ExportFloor | None]


class SinkView(abc.ABC):
    """One consistent view of a sink's data for one query."""

    part: str

    @abc.abstractmethod
    def claims(self, part: PartitionRef) -> bool:
        """Whether the sink holds every row of cache partition `part`, for this query."""

    @abc.abstractmethod
    def reader(self, scope: QueryScope, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        """The sink's rows in `scope`, leaving out the partitions in `cache_side`.

        The rows come as `scope.columns`, in the dataset schema's types
        (`conform`), and only those the scope's filter passes.
        """

    def describe(self) -> dict[str, Any]:
        """What the view will read, for `QueryPlan`."""
        return {}


class QuerySource(Protocol):
    """A sink's data as a query reads it; `part` names it in errors (``sink 'lake'``)."""

    part: str

    async def view(self, info: DatasetInfo, scope: QueryScope, read_floor: FloorReader) -> SinkView:
        """A consistent view of what the sink holds of `info` for one query.

        `read_floor` reads the progress store: call it only if claims depend
        on acknowledgements, and at the point that makes the view consistent
        (before listing what the sink holds: anything acknowledged was
        completely written by then). Raise `SourceUnreadableError` when the
        sink cannot be read.
        """
        ...


@runtime_checkable
class ProvidesQuerySource(Protocol):
    """A sink (or a table format) that answers queries through its own `QuerySource`."""

    def query_source(self, name: str, cache_identity: str | None) -> QuerySource | None:
        """The source reading this sink, configured as `name`; None if it cannot be read back.

        `cache_identity` is the identity of the cache the query reads beside
        the sink (None for a cache without one): a table shared by several
        caches says which partitions are this cache's by it.
        """
        ...


@runtime_checkable
class _Scannable(Protocol):
    def scan(self, dataset: DatasetInfo, **kwargs: Any) -> pa.RecordBatchReader: ...


def acked(floor: ExportFloor | None, part: PartitionRef) -> bool:
    """Whether the progress store's `floor` says the sink acknowledged `part`."""
    return floor is not None and not floor.needs(part)


def filtered(
    batch: pa.RecordBatch, expr: pc.Expression | None, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of `batch` matching `expr`, as `target`'s columns; nothing when none match.

    Evaluated on the caller's thread (arrow may use its own threads for the
    work, but never holds Python objects there).
    """
    import pyarrow as pa

    if not batch.num_rows:
        return
    if expr is None:
        yield conform(batch.select(columns), target)
        return
    table = pa.Table.from_batches([batch]).filter(expr)
    for out in table.select(columns).to_batches():
        if out.num_rows:
            yield conform(out, target)


def restricted(reader: pa.RecordBatchReader, target: pa.Schema) -> pa.RecordBatchReader:
    """`reader`'s rows as `target`'s columns and types (the sink already applied the filter)."""
    import pyarrow as pa

    def batches() -> Iterator[pa.RecordBatch]:
        with reader:
            for batch in reader:
                table = pa.Table.from_batches([batch])
                for out in table.select(target.names).to_batches():
                    yield conform(out, target)

    return pa.RecordBatchReader.from_batches(target, batches())


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """`batch` with `target`'s column types (sinks may widen or rename types on the way)."""
    import pyarrow as pa

    if batch.schema.equals(target):
        return batch
    arrays = [
        col if col.type == field.type else col.cast(field.type)
        for col, field in zip(batch.columns, target, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def scan_takes_exclude(scan: Any) -> bool:
    """Whether `scan` accepts the `exclude` keyword of `QueryableSink.scan`."""
    try:
        params = inspect.signature(scan).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (p.name == "exclude" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        or p.kind is p.VAR_KEYWORD
        for p in params
    )


class GenericSource:
    """A `QueryableSink`'s `scan` as a source, claims from the progress store.

    A partition is claimed when the progress store says the sink
    acknowledged it. Every other partition the sink may hold (pending, in
    flight after a crash between the sink's commit and the driver's ack, or
    answered by the cache) is passed to `scan` as `exclude`, so no row is
    read twice. A sink whose `scan` takes no `exclude` keyword cannot keep
    that promise and is not read (`exact`).
    """

    def __init__(self, sink_name: str, sink: Any) -> None:
        self.sink_name = sink_name
        self.sink = sink
        self.part = f"sink {sink_name!r}"

    @staticmethod
    def exact(sink: object) -> bool:
        """Whether `sink` has a `scan` that takes `exclude`, so it can be read exactly."""
        return isinstance(sink, _Scannable) and scan_takes_exclude(sink.scan)

    async def view(self, info: DatasetInfo, scope: QueryScope, read_floor: FloorReader) -> SinkView:
        return _GenericView(self, info, read_floor())


class _GenericView(SinkView):
    def __init__(self, source: GenericSource, info: DatasetInfo, floor: ExportFloor | None) -> None:
        self.source = source
        self.part = source.part
        self.info = info
        self.floor = floor

    def claims(self, part: PartitionRef) -> bool:
        return acked(self.floor, part)

    def reader(self, scope: QueryScope, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        import pyarrow as pa

        target = pa.schema([self.info.schema.field(c) for c in scope.columns])
        # Not acknowledged yet (the sink may have committed them: a lost ack)
        # or answered by the cache: rows of these must come from the cache alone.
        pending = self.floor.pending if self.floor is not None else frozenset()
        exclude = frozenset(pending | {p.id for p in cache_side})
        try:
            reader = self.source.sink.scan(
                self.info, columns=None, filter=scope.tree(self.info), exclude=exclude
            )
        except Exception as exc:
            raise SourceUnreadableError(self.part, f"cannot scan: {exc}") from exc
        return restricted(reader, target)
