"""The typed contracts that plugins implement.

Each Protocol holds one capability. A plugin satisfies a contract by shape
(structural typing); nothing has to inherit from these classes. The
docstrings are the contract: what a method must do, what it raises and what
it must never do.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.core.filter import Filter
    from hypaware.core.types import (
        DatasetInfo,
        ExportBatch,
        ExportOptions,
        ExportResult,
        ObjectMeta,
    )

__all__ = [
    "BlobStore",
    "Encoder",
    "Flushable",
    "QueryableSink",
    "Sink",
    "TableFormat",
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
    after `close()` raises `SinkClosedError`.
    """

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write `batch` and acknowledge what became durable.

        Every partition of the batch must come back either in
        `ExportResult.exported` (durable at the destination; the driver then
        advances its high-water past it) or in `retry_partitions` with a reason
        (the driver respools it on the next tick). A failure of one partition,
        or of the destination, is reported in the result: it must never raise
        through the driver. Exporting the same `batch_id` again (after a
        crash before the ack, or a respool) must not duplicate rows at the
        destination.
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
class Flushable(Protocol):
    """A sink that buffers and can be asked to make buffered data durable now."""

    async def flush(self) -> None:
        """Make everything acknowledged so far durable. Raises `SinkError` on failure."""
        ...


@runtime_checkable
class TableFormat(Protocol):
    """Writes batches as a table (data files plus a catalog commit) through a `BlobStore`.

    Built from a blob store and an encoder by the table format's factory.
    """

    async def write_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write the batch's data files and commit them in one transaction.

        Exactly once: if a commit for `batch.batch_id` already exists, report
        the batch as exported without writing again. Data files of a failed
        attempt are never left where a reader would see them. Same error
        rule as `Sink.export_batch`: report, do not raise.
        """
        ...

    async def close(self) -> None:
        """Release the catalog and store. A second call is a no-op."""
        ...


@runtime_checkable
class QueryableSink(Sink, Protocol):
    """A sink whose data can be scanned in place."""

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
    ) -> pa.RecordBatchReader:
        """Stream the dataset's rows held by this sink, restricted to `columns` and `filter`.

        `filter` is a tree of `hypaware.core.filter` nodes, already checked
        against `dataset` (`hypaware.core.filter_bind.bind_filter`); compile it
        with `to_arrow` or for the sink's own engine. Uses the layout to
        prune (by day, by lookup key) and reads only what the filter needs.
        Raises `StoreError` when the data cannot be read.
        """
        ...
