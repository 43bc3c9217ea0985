"""`IcebergTableFormat`: a dataset's batches as data files plus one Iceberg snapshot each.

One `write_batch`:

1. loads the dataset's table, registering it on first use (schema from the
   dataset, ``day(<time column>)`` partitions, sorted by lookup key then time);
2. returns at once if a snapshot already carries this batch (its id and the
   digest of its partition set): a crash after commit never commits twice;
   partitions some earlier commit holds (a respool into a new batch after a
   lost or late ack) are acknowledged without being written again;
3. adds new dataset columns to the table (by name; incompatible changes are
   refused);
4. reads the batch's partitions, sorts all rows by day, lookup key and time,
   and writes one Parquet file per day (two for a day of more than half a
   row group, more past the target size) through the blob store, at names
   fixed by sink, dataset and batch;
5. registers every file in one append snapshot (manifests merged once there
   are enough) whose summary carries
   ``hypaware.batch-id``, retrying on commit conflicts with other writers.

If anything fails before the commit lands, the files written are deleted.

`hypaware.iceberg.datafiles` does step 4 (reading the partitions, writing
the files) and `hypaware.iceberg.commit` steps 2 and 5 (recognising and
making the commit). `scan` reads a table back through `hypaware.iceberg.scan`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, ValidationError
from pyiceberg.table import Table

from hypaware.blob.store import location_url
from hypaware.core.contracts import ObstoreBacked
from hypaware.core.errors import ConfigError, SinkClosedError, StoreError
from hypaware.core.filter import Filter
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.iceberg import day_layout
from hypaware.iceberg.catalog import (
    IcebergError,
    RetryWait,
    _brief,
    catalog_properties,
    is_conflict,
    load_or_create,
    open_catalog,
    retrying,
    table_identifier,
)
from hypaware.iceberg.commit import (
    PartitionsLanded,
    already_committed,
    batch_summary,
    check_layout,
    commit_files,
    did_not_land,
    find_commit,
    held_partitions,
)
from hypaware.iceberg.compact import live_files
from hypaware.iceberg.datafiles import DataFileWriter, WrittenFile
from hypaware.iceberg.fileio import ObstoreFileIO, StoreRoot, register_root, unregister_root
from hypaware.iceberg.maintain import TableMaintenance, maintain_table, wanted_properties
from hypaware.iceberg.pipeline import ReadBatch
from hypaware.iceberg.query_source import IcebergSource
from hypaware.iceberg.record import read_record, writer_key
from hypaware.iceberg.scan import scan_table
from hypaware.iceberg.schema import (
    IncompatibleSchemaError,
    dataset_schema,
    evolution_target,
    layout_for,
    write_schema,
)

if TYPE_CHECKING:
    from hypaware.core.contracts import BlobStore
    from hypaware.core.resolver import BuildContext
    from hypaware.encoding.parquet import ParquetEncoder
    from hypaware.iceberg.config import IcebergConfig

__all__ = ["IcebergTableFormat", "location_url", "store_root"]

log = logging.getLogger(__name__)


def store_root(store: BlobStore, sink: str) -> StoreRoot:
    """The obstore store, prefix and location URL behind a blob store (an `ObstoreBacked`)."""
    if not isinstance(store, ObstoreBacked):
        raise ConfigError.single(
            f"sinks.{sink}.destination",
            f"@hypaware/format-iceberg needs a destination built on obstore "
            f"(hypaware.blob.store.ObstoreBlobStore); got {type(store).__name__}",
        )
    prefix = store.prefix
    base = location_url(store.store)
    if base is None:
        # A store kind we cannot name for other engines: the blob store's own root URL.
        base = store.url.rstrip("/")
    elif prefix:
        base = f"{base.rstrip('/')}/{prefix}"
    return StoreRoot(
        store=store.store, prefix=prefix, url=base, label=store.label, guard=store.check_key
    )


class IcebergTableFormat:
    """Writes each dataset to its own Iceberg table. See the module docstring."""

    def __init__(
        self,
        config: IcebergConfig,
        ctx: BuildContext,
        *,
        store: BlobStore,
        encoder: ParquetEncoder,
    ) -> None:
        self.config = config
        self.sink = ctx.sink_name
        self._ctx = ctx
        self._store = store
        self._encoder = encoder
        self._root = store_root(store, ctx.sink_name)
        self._token = register_root(self._root)
        self._files = DataFileWriter(self._root, encoder, ctx.sink_name)
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()
        self._closed = False
        # Writes running in threads: the catalog is released by the last of
        # close() and them, so no write opens connections on a disposed engine.
        self._writes = 0

    def __repr__(self) -> str:
        return f"IcebergTableFormat(sink={self.sink!r}, warehouse={self._root.url!r})"

    # ------------------------------------------------------------------ catalog

    @property
    def catalog(self) -> Catalog:
        """The catalog, opened on first use; `IcebergError` if it cannot be reached."""
        with self._lock:
            if self._closed:
                raise SinkClosedError(f"sink {self.sink!r} is closed")
            if self._catalog is None:
                props = catalog_properties(
                    self.config.catalog, self._ctx, token=self._token, warehouse_url=self._root.url
                )
                self._catalog = open_catalog(self.config.catalog, self._ctx, props)
            return self._catalog

    def identifier(self, dataset: str) -> tuple[str, ...]:
        return table_identifier(self.config.namespace, dataset)

    def _what(self, dataset: str) -> str:
        return (
            f"sink {self.sink!r}, dataset {dataset!r}, table {'.'.join(self.identifier(dataset))}"
        )

    def _table_location(self, dataset: str) -> str:
        return f"{self._root.url}/{'/'.join(self.identifier(dataset))}"

    def query_source(self, name: str, cache_identity: str | None) -> IcebergSource:
        """The tables as a query reads them (`ProvidesQuerySource`)."""
        return IcebergSource(name, self, cache_identity)

    def load_table(
        self, dataset: DatasetInfo, *, create: bool = True, on_wait: RetryWait | None = None
    ) -> Table | None:
        """The dataset's table, registering it if `create` (else None when missing)."""
        ident = self.identifier(dataset.name)
        catalog = self.catalog
        if not create:
            try:
                return catalog.load_table(ident)
            except NoSuchTableError:
                return None

        def register() -> Table:
            schema = dataset_schema(dataset.schema)
            spec, order = layout_for(schema, dataset.time_column, dataset.lookup_key)
            return catalog.create_table(
                ident,
                schema=schema,
                location=self._table_location(dataset.name),
                partition_spec=spec,
                sort_order=order,
                properties=wanted_properties(self.config),
            )

        table, created = retrying(
            lambda: load_or_create(catalog, ident, register),
            retry_on=is_conflict,
            attempts=self.config.commit_retries,
            backoff=self.config.commit_backoff,
            on_wait=on_wait,
        )
        if created:
            log.info("%s: registered table at %s", self._what(dataset.name), table.location())
        return table

    # -------------------------------------------------------------------- write

    async def write_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write and commit `batch` (see `hypaware.core.contracts.TableFormat.write_batch`)."""
        if self._closed:
            raise SinkClosedError(f"sink {self.sink!r} is closed")
        tell = opts.on_retry_wait
        on_wait = None if tell is None else (lambda cause, seconds: tell(seconds, cause))
        return await asyncio.to_thread(self.write_batch_sync, batch, on_wait=on_wait)

    def write_batch_sync(
        self, batch: ExportBatch, *, on_wait: RetryWait | None = None
    ) -> ExportResult:
        """The blocking body of `write_batch`, for callers already off the event loop.

        `on_wait(cause, seconds)` is told of each wait before a retry on a
        commit conflict or a locked catalog (from this thread).
        """
        what = self._what(batch.dataset.name)
        self._write_started()
        try:
            return self._write(batch, what, on_wait)
        except IcebergError as exc:
            return ExportResult.failed(batch, str(exc), retryable=exc.retryable)
        except IncompatibleSchemaError as exc:
            # Most schema errors already say where they happened; say it once.
            text = str(exc) if str(exc).startswith(what) else f"{what}: {exc}"
            return ExportResult.failed(batch, text, retryable=False)
        except (StoreError, ConfigError) as exc:
            return ExportResult.failed(batch, f"{what}: {exc}")
        except Exception as exc:
            if isinstance(exc, SinkClosedError):
                raise
            return ExportResult.failed(batch, f"{what}: {_brief(exc)}")
        finally:
            self._write_ended()

    def _write_started(self) -> None:
        """Count a write (or maintenance run) in; `_write_ended` counts it out."""
        with self._lock:
            if self._closed:
                raise SinkClosedError(f"sink {self.sink!r} is closed")
            self._writes += 1

    def _write_ended(self) -> None:
        with self._lock:
            self._writes -= 1
            last = self._closed and self._writes == 0
            catalog, self._catalog = (self._catalog, None) if last else (None, self._catalog)
        _dispose(catalog)

    def _write(self, batch: ExportBatch, what: str, on_wait: RetryWait | None) -> ExportResult:
        dataset = batch.dataset
        ids = [p.id for p in batch.partitions]
        digest = day_layout.batch_digest(batch.batch_id, ids)
        table = self._table_for(dataset, what, on_wait)
        record = read_record(table, what)
        if record.legacy and _begun_before(batch.batch_id, record.since):
            # Maybe committed before the table had a record: only its batch id can tell.
            done = find_commit(table, batch.batch_id, digest)
            if done is not None:
                return already_committed(batch, done)
        # Idempotent per partition of this cache: one committed under another
        # batch id (a respool after a lost or late ack) is acknowledged, not
        # written again. Another cache's partition with the same id is not this one.
        held = held_partitions(record, batch, batch.partitions)
        if held:
            return self._write_rest(batch, held, what, on_wait)
        table = self._evolve(table, dataset, what, on_wait)
        check_layout(table, dataset, what)
        try:
            return self._write_files(table, batch, digest, what, on_wait)
        except PartitionsLanded as exc:
            # Written again without them: their rows are in this batch's files too.
            log.info("%s: %s; writing the batch again without them", what, exc)
            return self._write(batch, what, on_wait)

    def _table_for(self, dataset: DatasetInfo, what: str, on_wait: RetryWait | None) -> Table:
        """The dataset's table, registered if new; `IcebergError` saying why it cannot be."""
        try:
            table = self.load_table(dataset, on_wait=on_wait)
        except IncompatibleSchemaError as exc:
            raise IcebergError(
                f"{what}: cannot register the table: {exc}", retryable=False
            ) from exc
        except IcebergError as exc:
            raise IcebergError(f"{what}: {exc}", retryable=exc.retryable) from exc
        except Exception as exc:
            raise IcebergError(f"{what}: cannot load or register the table: {_brief(exc)}") from exc
        assert table is not None  # create=True registers a missing table
        return table

    def _write_rest(
        self, batch: ExportBatch, held: Collection[str], what: str, on_wait: RetryWait | None
    ) -> ExportResult:
        """Acknowledge the `held` partitions (already committed) and write the rest."""
        ids = [p.id for p in batch.partitions]
        key = writer_key(batch.cache_identity, self.sink)
        log.info(
            "%s: partitions %s of cache %s are already committed; not written again",
            what,
            ", ".join(sorted(held)),
            key,
            extra={"sink": self.sink, "cache_identity": key, "partitions": sorted(held)},
        )
        rest = tuple(p for p in batch.partitions if p.id not in held)
        if not rest:
            return ExportResult(exported=ids, already_held=sorted(held))
        result = self._write(attrs.evolve(batch, partitions=rest), what, on_wait)
        return attrs.evolve(
            result,
            exported=[*sorted(held), *result.exported],
            already_held=[*sorted(held), *result.already_held],
        )

    def _write_files(
        self,
        table: Table,
        batch: ExportBatch,
        digest: str,
        what: str,
        on_wait: RetryWait | None,
    ) -> ExportResult:
        """Write the batch's data files and commit them; `PartitionsLanded` if some landed
        meanwhile (the files are deleted: the caller writes the batch again without them)."""
        dataset = batch.dataset
        target = write_schema(table.schema(), dataset.schema.names)
        files = self._files_for(table)
        written: list[WrittenFile] = []
        committing = False
        try:
            read, written = files.write_partitions(
                table, dataset, batch.partitions, target, digest, what
            )
            if read.rows == 0:
                # Nothing to write: the readable partitions are done (they were empty).
                return ExportResult(exported=read.ok, retry_partitions=read.failed)
            data_files = [w.data_file or files.data_file(table, w, what) for w in written]
            props = batch_summary(batch, digest, read, written, self.sink)
            ok = set(read.ok)
            parts = [p for p in batch.partitions if p.id in ok]
            committing = True
            outcome = retrying(
                lambda: commit_files(table, batch, parts, data_files, props, what),
                retry_on=is_conflict,
                attempts=self.config.commit_retries,
                backoff=self.config.commit_backoff,
                on_wait=on_wait,
            )
        except PartitionsLanded:
            files.delete(written)
            raise
        except BaseException as exc:
            self._failed_commit(exc, batch, files, written, committing, what)
            raise
        if outcome == "already":
            return self._landed_meanwhile(table, batch, digest, files, written, read)
        return ExportResult(
            exported=read.ok,
            retry_partitions=read.failed,
            rows_written=read.rows,
            bytes_written=sum(w.size for w in written),
            files_written=len(written),
        )

    def _failed_commit(
        self,
        exc: BaseException,
        batch: ExportBatch,
        files: DataFileWriter,
        written: list[WrittenFile],
        committing: bool,
        what: str,
    ) -> None:
        """Clean up after a write or commit that raised `exc`; raise what to report instead."""
        if not committing or did_not_land(exc):
            files.delete(written)
        elif written:
            log.warning(
                "%s: the commit of batch %s may or may not have landed (%s); its data files "
                "are kept and the next attempt will find out",
                what,
                batch.batch_id,
                _brief(exc),
            )
        if isinstance(exc, CommitFailedException) or is_conflict(exc):
            raise IcebergError(
                f"{what}: commit lost to other writers {self.config.commit_retries + 1} "
                f"times: {_brief(exc)}"
            ) from exc
        if isinstance(exc, ValidationError):
            raise IcebergError(f"{what}: commit refused: {exc}", retryable=False) from exc

    def _landed_meanwhile(
        self,
        table: Table,
        batch: ExportBatch,
        digest: str,
        files: DataFileWriter,
        written: list[WrittenFile],
        read: ReadBatch,
    ) -> ExportResult:
        """Every partition landed while this attempt wrote.

        By an earlier attempt of this very batch: its files have the names
        ours have (and the same bytes), so they stay, the snapshot reads them.
        By another batch: ours are leftovers.
        """
        done = find_commit(table, batch.batch_id, digest)
        if done is not None:
            result = already_committed(batch, done)
        else:
            # Maintenance may have expired that snapshot already: a file the
            # table reads is never a leftover, whatever the history says.
            live = {f.file_path for f in live_files(table)}
            files.delete([w for w in written if w.location not in live])
            result = ExportResult(exported=read.ok, retry_partitions=read.failed)
        return attrs.evolve(result, already_held=result.exported)

    def _files_for(self, table: Table) -> DataFileWriter:
        # A REST catalog that vends credentials with the table: data files use them too.
        io = table.io
        if isinstance(io, ObstoreFileIO) and io.root is not self._root:
            return DataFileWriter(io.root, self._encoder, self.sink)
        return self._files

    def _evolve(
        self, table: Table, dataset: DatasetInfo, what: str, on_wait: RetryWait | None
    ) -> Table:
        wanted = dataset_schema(dataset.schema)
        if evolution_target(table.schema(), wanted, what=what) is None:
            return table

        def apply() -> None:
            table.refresh()
            target = evolution_target(table.schema(), wanted, what=what)
            if target is None:
                return
            with table.update_schema() as update:
                update.union_by_name(target)
            log.info("%s: added or widened columns to match the dataset", what)

        try:
            retrying(
                apply,
                retry_on=is_conflict,
                attempts=self.config.commit_retries,
                backoff=self.config.commit_backoff,
                on_wait=on_wait,
            )
        except IncompatibleSchemaError:
            raise
        except (ValidationError, ValueError) as exc:
            raise IncompatibleSchemaError(f"{what}: cannot evolve the table: {exc}") from exc
        return table

    # -------------------------------------------------------------- maintenance

    def maintenance_schedule(self) -> str | None:
        """When the driver maintains this sink's tables (None: `maintenance.enabled` is false)."""
        maint = self.config.maintenance
        return maint.schedule if maint.enabled else None

    def maintain_sync(
        self,
        dataset: DatasetInfo,
        *,
        now: dt.datetime,
        before_commit: Callable[[], None] | None = None,
    ) -> TableMaintenance:
        """Run table maintenance on the dataset's table (`hypaware.iceberg.maintain`).

        Blocking; a table not registered yet is left alone. Failures are in
        the result's `errors`, never raised (but for a closed sink).
        """
        what = self._what(dataset.name)
        self._write_started()
        try:
            try:
                table = self.load_table(dataset, create=False)
            except Exception as exc:
                return TableMaintenance(
                    dataset.name, errors=(f"{what}: cannot load the table: {_brief(exc)}",)
                )
            if table is None:
                return TableMaintenance(dataset.name)
            return maintain_table(
                table,
                dataset,
                config=self.config,
                files=self._files_for(table),
                encoder=self._encoder,
                sink=self.sink,
                what=what,
                now=now,
                before_commit=before_commit,
            )
        finally:
            self._write_ended()

    async def maintain(self, dataset: DatasetInfo, *, now: dt.datetime) -> TableMaintenance:
        """`maintain_sync` off the event loop."""
        return await asyncio.to_thread(self.maintain_sync, dataset, now=now)

    # --------------------------------------------------------------------- scan

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        since: dt.datetime | dt.date | None = None,
        until: dt.datetime | dt.date | None = None,
        keys: Iterable[Any] | None = None,
    ) -> pa.RecordBatchReader:
        """Stream the dataset's rows from its table.

        - `since` / `until`: the time column is ``>= since`` and ``< until``;
          pruned by day partition and file statistics.
        - `keys`: the lookup key is one of these; pruned by file and row-group
          statistics (files are sorted by it).
        - `filter`: a filter tree (``hypaware.col("status") == "ok"`` or
          ``hypaware.parse_filter("status = 'ok'")``), checked against the
          dataset (`FilterError` for an unknown column or a mistyped value)
          and pushed down like the above.
        - `columns`: the columns to return (default all).

        Only `columns` are read. A table not registered yet scans as empty.
        Raises `IcebergError` when the catalog or files cannot be read.
        """
        what = self._what(dataset.name)
        try:
            table = self.load_table(dataset, create=False)
        except IcebergError as exc:
            raise IcebergError(f"{what}: {exc}", retryable=exc.retryable) from exc
        except Exception as exc:
            raise IcebergError(f"{what}: cannot load the table: {_brief(exc)}") from exc
        return scan_table(
            table,
            dataset,
            what,
            columns=columns,
            filter=filter,
            since=since,
            until=until,
            keys=keys,
        )

    # -------------------------------------------------------------------- close

    async def close(self) -> None:
        """Release the catalog connection. A second call is a no-op."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            catalog = None
            if not self._writes:  # else the last write still running releases it
                catalog, self._catalog = self._catalog, None
        unregister_root(self._token)
        if catalog is not None:
            await asyncio.to_thread(_dispose, catalog)


def _begun_before(batch_id: str, since_ms: int | None) -> bool:
    """Whether the batch (its id starts with its UTC start, ``%Y%m%dT%H%M%S``) predates `since_ms`.

    An id of another shape, or a table with no record yet, counts as before.
    """
    if since_ms is None:
        return True
    try:
        begun = dt.datetime.strptime(batch_id[:15], "%Y%m%dT%H%M%S").replace(tzinfo=dt.UTC)
    except ValueError:
        return True
    # A second of slack: the id's time is truncated to the second.
    return begun.timestamp() * 1000 <= since_ms + 1000


def _dispose(catalog: Catalog | None) -> None:
    """Close a SQL catalog's pooled connections (a REST catalog holds none)."""
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        engine.dispose()
