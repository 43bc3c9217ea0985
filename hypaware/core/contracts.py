"""The typed contracts that plugins implement.

Each Protocol holds one capability. A plugin satisfies a contract by shape
(structural typing); nothing has to inherit from these classes. The
docstrings are the contract: what a method must do, what it raises and what
it must never do.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Collection,
    Iterable,
    Iterator,
    Sequence,
)
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa
    from obstore.store import ObjectStore

    from hypaware.core.filter import Filter
    from hypaware.core.types import (
        DatasetInfo,
        ExportBatch,
        ExportOptions,
        ExportResult,
        MaintenanceReport,
        ObjectMeta,
    )

__all__ = [
    "AsyncClosing",
    "BlobStore",
    "Encoder",
    "Flushable",
    "MaintainedSink",
    "MaintainedTableFormat",
    "ManagedSink",
    "NamedStore",
    "ObstoreBacked",
    "QueryableSink",
    "Sink",
    "TableFormat",
    "TableMaintenanceResult",
]


@runtime_checkable
class BlobStore(Protocol):
    """Puts bytes at paths under one root (a directory, a bucket prefix, a container).

    Paths are ``/``-separated and relative to the root. A path that is empty,
    absolute, or has an empty, ``.`` or ``..`` segment, a backslash or a NUL
    is refused with `PathError` before any I/O. Errors from the backend are
    translated: `NotFoundError`, `AlreadyExistsError`, `PermissionDeniedError`,
    `TransientStoreError`, or `StoreError` for the rest; messages never carry
    credentials.
    """

    async def put(
        self,
        path: str,
        data: bytes | Iterable[bytes] | AsyncIterable[bytes],
        *,
        if_absent: bool = False,
    ) -> ObjectMeta:
        """Write an object whole, replacing any object at `path`.

        The object appears whole or not at all: a reader never sees a
        partial object, even if the writer crashes. With `if_absent=True` an
        existing object is left untouched and `AlreadyExistsError` is raised.
        """
        ...

    async def get(self, path: str) -> bytes:
        """Read a whole object. Raises `NotFoundError` if it does not exist."""
        ...

    async def get_range(self, path: str, start: int, end: int) -> bytes:
        """Read bytes ``[start, end)`` of an object. Raises `NotFoundError`."""
        ...

    def list(self, prefix: str = "") -> AsyncIterator[ObjectMeta]:
        """Yield every object whose path starts with `prefix` (a directory-like prefix).

        Objects still being written are never listed.
        """
        ...

    async def head(self, path: str) -> ObjectMeta:
        """Metadata of one object. Raises `NotFoundError`."""
        ...

    async def delete(self, path: str) -> None:
        """Remove an object. Removing a missing object is not an error."""
        ...

    async def close(self) -> None:
        """Release connections. A second call is a no-op."""
        ...


@runtime_checkable
class NamedStore(Protocol):
    """A store that names its root for messages and scoping: a label and a URL.

    `ObstoreBlobStore` is one. Neither may hold credentials. A `BlobStore`
    without them is named by its ``repr``.
    """

    @property
    def label(self) -> str:
        """Names the store in messages (``sink 'archive' (@hypaware/s3)``)."""
        ...

    @property
    def url(self) -> str:
        """The root as a URL (``s3://bucket/prefix``)."""
        ...


@runtime_checkable
class ObstoreBacked(NamedStore, Protocol):
    """A `BlobStore` over an obstore store, for code that reaches the store directly.

    The Iceberg table format (its FileIO) and dataset readers need the
    obstore store itself and the root inside it. `ObstoreBlobStore`
    implements this; a store of another kind cannot hold an Iceberg table.
    """

    @property
    def store(self) -> ObjectStore:
        """The obstore store (S3, GCS, Azure, local, memory)."""
        ...

    @property
    def prefix(self) -> str:
        """The root inside `store`: ``""`` or a path without a trailing ``/``."""
        ...

    def check_key(self, key: str, op: str = "access") -> None:
        """Raise `PathError` if `key` (a key in `store`) would leave the root through a
        symbolic link; a no-op where the store has none."""
        ...


@runtime_checkable
class Encoder(Protocol):
    """Turns Arrow record batches into the bytes of one or more files.

    `extension` (without a dot, e.g. ``"parquet"``) and `media_type` name the
    files it makes.
    """

    @property
    def extension(self) -> str: ...

    @property
    def media_type(self) -> str: ...

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        """Encode `batches` (all of `schema`) into files.

        Yields one iterator per output file; that iterator yields the file's
        bytes in order. The caller consumes each file's iterator to the end
        before taking the next file. A new file begins when the current one
        reaches the encoder's target size, so one call can make several files;
        an empty input makes no file.

        Streaming is the point: the encoder pulls batches only as it needs
        them and never holds the whole input in memory. Raises `EncodeError`
        for rows it cannot represent.
        """
        ...


@runtime_checkable
class Sink(Protocol):
    """An export target: takes batches of sealed cache partitions and makes them durable.

    Lifecycle, as for OpenTelemetry exporters: `export_batch` any number of
    times, then `close()`. A second `close()` is a no-op; `export_batch`
    after `close()` raises `SinkClosedError`. A sink built by
    `hypaware.build` is also an async context manager that closes it on
    exit (``async with hypaware.build(plan) as sink: ...``).
    """

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write `batch` and acknowledge what became durable.

        Every partition of the batch must come back either in
        `ExportResult.exported` (durable at the destination; the driver then
        advances its high-water past it) or in `retry_partitions` with a reason
        (the driver respools it on the next tick). A failure of one partition,
        or of the destination, is reported in the result: it must never raise
        through the driver.

        Idempotent per (dataset, partition id), not per batch: a partition
        may come back, and not only under the same `batch_id`. The driver
        re-sends a batch left in flight by a crash under its own id, but a
        partition reported for retry, or one whose acknowledgement was lost
        or came after ``export_timeout``, is respooled into a *new* batch
        with a new id, possibly next to other partitions. Exporting a
        partition the destination already holds must not duplicate its rows:
        derive the dedupe key (object names, a ledger row, an idempotency key)
        from the dataset name and the partition id. `batch_id` is only for
        grouping (naming one commit, one request); never dedupe by it alone,
        nor by (batch id, partition).
        """
        ...

    async def close(self) -> None:
        """Release resources and abort any in-flight wait promptly.

        An `export_batch` parked in a backoff wait returns (reporting its
        partitions for retry) soon after `close()` is called. Never blocks
        for longer than a network round trip; leaves no task or thread.
        """
        ...


@runtime_checkable
class ManagedSink(Sink, Protocol):
    """A `Sink` that is also an async context manager closing it on exit.

    What `hypaware.build` returns: ``async with build(plan) as sink:``.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class _Closable(Protocol):
    async def close(self) -> None: ...


class AsyncClosing:
    """Mix-in: ``async with`` for anything with an async `close()`.

    Inherit it in a sink (or any object with ``async def close()``) so
    ``async with sink:`` closes it on the way out, exception or not.
    `hypaware.build` hands back a sink without it wrapped in a thin proxy;
    with it, you get your own class back.
    """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self: _Closable,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


@runtime_checkable
class Flushable(Protocol):
    """A sink that buffers and can be asked to make buffered data durable now.

    When `flush()` is called: by `ExportDriver.flush()` (for every built sink
    that has it; call it between runs), and by `ExportDriver.close()` just
    before it closes the sink, within close's one-second budget (an export
    that close is interrupting may still be returning then: do not wait for
    it). Nothing else calls it; a sink used without the driver is flushed by
    whoever uses it. Acknowledging
    a partition (`ExportResult.exported`) still means it is durable: a
    buffer may only hold what is safe to lose or to write again.
    """

    async def flush(self) -> None:
        """Make everything acknowledged so far durable. Raises `SinkError` on failure."""
        ...


@runtime_checkable
class MaintainedSink(Protocol):
    """A sink whose destination needs upkeep as it grows, run by the driver on a schedule.

    An Iceberg table gains a snapshot, a manifest and a small data file each
    pass; maintenance expires old snapshots, merges manifests and compacts
    closed days so the hundredth thousandth pass costs what the fiftieth did.
    The driver calls `maintain` between passes when `maintenance_schedule`
    says it is due (and ``hypaware maintain`` calls it at once), never while
    one of the sink's own passes runs.
    """

    def maintenance_schedule(self) -> str | None:
        """A 5-field cron expression (UTC), or None when maintenance is off."""
        ...

    async def maintain(
        self, datasets: Sequence[DatasetInfo], *, now: datetime
    ) -> MaintenanceReport:
        """Maintain the destination of each of `datasets`; `now` is the driver's clock.

        Must be safe beside other writers of the same destination (their
        passes and their maintenance): it loses and doubles nothing, and
        leaves nothing a reader would see half done. Report failures in the
        result's `errors`; do not raise.
        """
        ...


@runtime_checkable
class TableFormat(Protocol):
    """Writes batches as a table (data files plus a catalog commit) through a `BlobStore`.

    Built from a blob store and an encoder by the table format's factory.
    A table format whose sink is queryable offers `scan` with the signature
    and promises of `QueryableSink.scan`, `exclude` included; the query
    planner reads a `TableSink` through it (hypaware's Iceberg format is read
    through its snapshots instead).
    """

    async def write_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write the batch's data files and commit them in one transaction.

        Exactly once per partition: a partition already committed (under
        this `batch_id` or another: a respool brings it back in a new batch)
        is reported as exported without writing it again. Data files of a failed
        attempt are never left where a reader would see them. Same error
        rule as `Sink.export_batch`: report, do not raise.
        """
        ...

    async def close(self) -> None:
        """Release the catalog and store. A second call is a no-op."""
        ...


class TableMaintenanceResult(Protocol):
    """What one dataset's maintenance by a `MaintainedTableFormat` did."""

    @property
    def errors(self) -> Sequence[str]:
        """The steps that failed, each a sentence naming the table; empty when all held."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """The counts (JSON-friendly: numbers, strings, lists), `errors` included."""
        ...


@runtime_checkable
class MaintainedTableFormat(TableFormat, Protocol):
    """A `TableFormat` that keeps its tables healthy; its `TableSink` is a `MaintainedSink`.

    `maintenance_schedule` and `maintain` have the meaning of
    `MaintainedSink`'s, per dataset: `maintain` reports failures in the
    result's `errors` and raises only `SinkClosedError`.
    """

    def maintenance_schedule(self) -> str | None:
        """A 5-field cron expression (UTC) for when to maintain; None: never on a schedule."""
        ...

    async def maintain(self, dataset: DatasetInfo, *, now: datetime) -> TableMaintenanceResult:
        """Maintain the table of `dataset` (`now`: the driver's clock)."""
        ...


@runtime_checkable
class QueryableSink(Sink, Protocol):
    """A sink whose data can be scanned in place, so `hypaware.query` reads it.

    A query reads each partition from one side: the sink for the partitions
    it holds and has been acknowledged for, the cache for the rest. The
    planner therefore tells `scan` which partitions to leave out
    (`exclude`), and a sink can honour that only if it knows which partition
    each of its rows came from: keep the partition id with the rows (a
    column, a ledger, an index of which files hold which partitions). A sink
    that cannot must not declare ``supports={"queryable"}``; hypaware refuses
    to read a sink whose `scan` takes no `exclude` keyword.
    """

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        """Stream the dataset's rows held by this sink, restricted to `columns` and `filter`.

        - `columns`: the columns to return, in this order (None: every
          column of `dataset.schema`), each in exactly the type the dataset's
          schema gives it (cast before returning if the engine reads another:
          a type that merely casts, such as a time as epoch seconds, can be
          another value), with every value as exported, nulls included.
        - `filter`: rows to keep, a tree of `hypaware.plugin` filter nodes already
          checked against `dataset` (`hypaware.plugin.bind_filter`);
          compile it with `to_arrow` or for the sink's own engine. Return
          exactly the rows it passes: none it rejects, none missing (a null
          passes no comparison, as in SQL and pyarrow).
        - `exclude`: partition ids whose rows must not be returned, not one
          row of them. The query planner passes the partitions the cache
          answers for and those pending or in flight (a partition committed by
          the sink but whose acknowledgement was lost is read from the cache);
          returning them would read those rows twice.

        Returns only rows of committed exports (never a partition written in
        part). Uses the layout to prune (by day, by lookup key) and reads only
        what the filter needs. Raises `StoreError` when the data cannot be read.
        """
        ...
