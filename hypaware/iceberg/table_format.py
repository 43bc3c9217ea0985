"""`IcebergTableFormat`: a dataset's batches as data files plus one Iceberg snapshot each.

One `write_batch`:

1. loads the dataset's table, registering it on first use (schema from the
   dataset, ``day(<time column>)`` partitions, sorted by lookup key then time);
2. returns at once if a snapshot already carries this batch (its id and the
   digest of its partition set): a crash after commit never commits twice;
3. adds new dataset columns to the table (by name; incompatible changes are
   refused);
4. reads the batch's partitions, sorts all rows by day, lookup key and time,
   and writes one Parquet file per day (more past the target size) through
   the blob store, at names fixed by sink, dataset and batch;
5. registers every file in one fast-append snapshot whose summary carries
   ``hypaware.batch-id``, retrying on commit conflicts with other writers.

If anything fails before the commit lands, the files written are deleted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import attrs
import obstore
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, ValidationError
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    LessThan,
)
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, TimestampType, TimestamptzType

from hypaware.core.errors import ConfigError, SinkClosedError, StoreError
from hypaware.blob.errors import translate_error
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult, RetryPartition
from hypaware.iceberg import layout
from hypaware.iceberg.catalog import (
    IcebergError,
    _brief,
    catalog_properties,
    is_conflict,
    load_or_create,
    open_catalog,
    retrying,
    table_identifier,
)
from hypaware.iceberg.fileio import ObstoreInputFile, StoreRoot, register_root, unregister_root
from hypaware.iceberg.schema import (
    IncompatibleSchemaError,
    conform_batch,
    dataset_schema,
    evolution_target,
    layout_for,
    normalize_schema,
    write_schema,
)

if TYPE_CHECKING:
    from hypaware.core.contracts import BlobStore, Encoder
    from hypaware.plugins.format_iceberg import IcebergConfig
    from hypaware.core.resolver import BuildContext

__all__ = ["SUMMARY_BATCH_ID", "SUMMARY_DIGEST", "IcebergTableFormat", "row_filter"]

log = logging.getLogger(__name__)

SUMMARY_BATCH_ID = "hypaware.batch-id"
SUMMARY_DIGEST = "hypaware.batch-digest"
SUMMARY_SINK = "hypaware.sink"
SUMMARY_DATASET = "hypaware.dataset"
SUMMARY_PARTITIONS = "hypaware.partitions"
SUMMARY_PARTITION_COUNT = "hypaware.partition-count"
SUMMARY_FAILED = "hypaware.failed-partitions"
SUMMARY_DAYS = "hypaware.days"
# Snapshot summaries live in every later metadata file: list partition ids
# only while they stay short; the digest identifies the set either way.
PARTITION_LIST_LIMIT = 8 * 1024
# Multipart part size for data files (S3 needs at least 5 MiB per part).
PUT_CHUNK_SIZE = 8 * 1024 * 1024
# Days encoded at once; each holds about one row group in memory.
ENCODE_THREADS = max(1, min(4, os.cpu_count() or 1))


@attrs.frozen
class _Written:
    location: str
    key: str
    day: int | None
    size: int


@attrs.define
class _Batch:
    """A batch's rows, read and conformed, and the partitions that could not be."""

    data: pa.Table | None
    ok: list[str]
    failed: list[RetryPartition]


def location_url(raw: Any) -> str | None:
    """The URL Iceberg engines use for the root of an obstore store.

    Table and file locations are written in the catalog with it, so other
    engines (Spark, Trino, pyiceberg's own FileIO) find the files: ``s3://``,
    ``gs://``, ``abfss://container@account.dfs.core.windows.net``, ``file://``.
    """
    kind = type(raw).__name__
    config = getattr(raw, "config", None) or {}
    if kind == "S3Store" and config.get("bucket"):
        base = f"s3://{config['bucket']}"
    elif kind == "GCSStore" and config.get("bucket"):
        base = f"gs://{config['bucket']}"
    elif kind == "AzureStore" and config.get("container_name") and config.get("account_name"):
        base = f"abfss://{config['container_name']}@{config['account_name']}.dfs.core.windows.net"
    elif kind == "LocalStore":
        local = getattr(raw, "prefix", None)
        return f"file://{local}" if local is not None else "file://"
    else:
        return None
    inner = getattr(raw, "prefix", None)
    return f"{base}/{inner}".rstrip("/") if inner else base


def store_root(store: BlobStore, sink: str) -> StoreRoot:
    """The obstore store, prefix and location URL behind a blob store (an `ObstoreBlobStore`)."""
    raw = getattr(store, "store", None)
    url = getattr(store, "url", None)
    prefix = getattr(store, "prefix", None)
    if raw is None or not isinstance(url, str) or not isinstance(prefix, str):
        raise ConfigError.single(
            f"sinks.{sink}.destination",
            f"@hypaware/format-iceberg needs a destination built on obstore "
            f"(hypaware.blob.store.ObstoreBlobStore); got {type(store).__name__}",
        )
    label = str(getattr(store, "label", f"sink {sink!r}"))
    base = location_url(raw)
    if base is None:
        # A store kind we cannot name for other engines: the blob store's own root URL.
        base = url.rstrip("/")
    elif prefix:
        base = f"{base.rstrip('/')}/{prefix}"
    return StoreRoot(store=raw, prefix=prefix, url=base, label=label)


class IcebergTableFormat:
    """Writes each dataset to its own Iceberg table. See the module docstring."""

    def __init__(
        self,
        config: IcebergConfig,
        ctx: BuildContext,
        *,
        store: BlobStore,
        encoder: Encoder,
    ) -> None:
        self.config = config
        self.sink = ctx.sink_name
        self._ctx = ctx
        self._store = store
        self._encoder = encoder
        self._root = store_root(store, ctx.sink_name)
        self._token = register_root(self._root)
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()
        self._closed = False

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

    def load_table(self, dataset: DatasetInfo, *, create: bool = True) -> Table | None:
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
                properties={"write.format.default": "parquet"},
            )

        table, created = retrying(
            lambda: load_or_create(catalog, ident, register),
            retry_on=is_conflict,
            attempts=self.config.commit_retries,
            backoff=self.config.commit_backoff,
        )
        if created:
            log.info("%s: registered table at %s", self._what(dataset.name), table.location())
        return table

    # -------------------------------------------------------------------- write

    async def write_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write and commit `batch` (see `hypaware.core.contracts.TableFormat.write_batch`)."""
        if self._closed:
            raise SinkClosedError(f"sink {self.sink!r} is closed")
        return await asyncio.to_thread(self.write_batch_sync, batch)

    def write_batch_sync(self, batch: ExportBatch) -> ExportResult:
        """The blocking body of `write_batch`, for callers already off the event loop."""
        what = self._what(batch.dataset.name)
        try:
            return self._write(batch, what)
        except IcebergError as exc:
            return ExportResult.failed(batch, str(exc), retryable=exc.retryable)
        except IncompatibleSchemaError as exc:
            return ExportResult.failed(batch, f"{what}: {exc}", retryable=False)
        except (StoreError, ConfigError) as exc:
            return ExportResult.failed(batch, f"{what}: {exc}")
        except Exception as exc:
            if isinstance(exc, SinkClosedError):
                raise
            return ExportResult.failed(batch, f"{what}: {_brief(exc)}")

    def _write(self, batch: ExportBatch, what: str) -> ExportResult:
        dataset = batch.dataset
        ids = [p.id for p in batch.partitions]
        digest = layout.batch_digest(batch.batch_id, ids)
        try:
            table = self.load_table(dataset)
        except IncompatibleSchemaError as exc:
            raise IcebergError(
                f"{what}: cannot register the table: {exc}", retryable=False
            ) from exc
        except IcebergError as exc:
            raise IcebergError(f"{what}: {exc}", retryable=exc.retryable) from exc
        except Exception as exc:
            raise IcebergError(f"{what}: cannot load or register the table: {_brief(exc)}") from exc
        assert table is not None

        done = _find_commit(table, batch.batch_id, digest)
        if done is not None:
            return _already_committed(batch, done)

        table = self._evolve(table, dataset, what)
        self._check_layout(table, dataset, what)
        target = write_schema(table.schema(), dataset.schema.names)
        read = self._read(batch, target, what)
        if read.data is None or read.data.num_rows == 0:
            # Nothing to write: the readable partitions are done (they were empty).
            return ExportResult(exported=read.ok, retry_partitions=read.failed)

        written: list[_Written] = []
        committing = False
        try:
            written = self._write_files(table, dataset, read.data, target, digest, what)
            data_files = [self._data_file(table, w, what) for w in written]
            props = _summary(batch, digest, read, written, self.sink)
            committing = True
            outcome = retrying(
                lambda: self._commit(table, batch, digest, data_files, props, what),
                retry_on=is_conflict,
                attempts=self.config.commit_retries,
                backoff=self.config.commit_backoff,
            )
        except BaseException as exc:
            if not committing or _did_not_land(exc):
                self._delete(written)
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
            raise
        if outcome == "already":
            # An earlier attempt of this very batch landed meanwhile. Its files have the
            # names ours have (and the same bytes), so they stay: the snapshot reads them.
            done = _find_commit(table, batch.batch_id, digest)
            assert done is not None
            return _already_committed(batch, done)
        return ExportResult(
            exported=read.ok,
            retry_partitions=read.failed,
            rows_written=read.data.num_rows,
            bytes_written=sum(w.size for w in written),
            files_written=len(written),
        )

    def _evolve(self, table: Table, dataset: DatasetInfo, what: str) -> Table:
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
            )
        except IncompatibleSchemaError:
            raise
        except (ValidationError, ValueError) as exc:
            raise IncompatibleSchemaError(f"{what}: cannot evolve the table: {exc}") from exc
        return table

    def _check_layout(self, table: Table, dataset: DatasetInfo, what: str) -> None:
        schema = table.schema()
        try:
            time_field = schema.find_field(dataset.time_column)
        except ValueError:
            raise IcebergError(
                f"{what}: the table has no column {dataset.time_column!r} (the time column); "
                "it was changed by someone else",
                retryable=False,
            ) from None
        if not isinstance(time_field.field_type, (TimestampType, TimestamptzType, DateType)):
            raise IcebergError(
                f"{what}: the table's time column {dataset.time_column!r} is "
                f"{time_field.field_type}, not a timestamp",
                retryable=False,
            )
        spec = table.spec()
        fields = spec.fields
        if not (
            len(fields) == 1
            and isinstance(fields[0].transform, DayTransform)
            and fields[0].source_id == time_field.field_id
        ):
            raise IcebergError(
                f"{what}: the table is partitioned by {spec}, not by day({dataset.time_column}); "
                "it was changed by someone else, so batches are held back",
                retryable=False,
            )

    def _read(self, batch: ExportBatch, target: pa.Schema, what: str) -> _Batch:
        tables: list[pa.Table] = []
        ok: list[str] = []
        failed: list[RetryPartition] = []
        for part in batch.partitions:
            where = f"{what}, partition {part.id!r}"
            try:
                reader = part.open()
                try:
                    batches = [conform_batch(b, target, what=where) for b in reader]
                finally:
                    reader.close()
            except IncompatibleSchemaError as exc:
                failed.append(RetryPartition(part.id, str(exc), retryable=False))
                continue
            except Exception as exc:
                failed.append(RetryPartition(part.id, f"{where}: cannot read: {_brief(exc)}"))
                continue
            tables.append(pa.Table.from_batches(batches, schema=target))
            ok.append(part.id)
        if not tables:
            return _Batch(None, ok, failed)
        # Chunked, not combined: the layout slices it without copying rows.
        return _Batch(pa.concat_tables(tables), ok, failed)

    def _write_files(
        self,
        table: Table,
        dataset: DatasetInfo,
        data: pa.Table,
        target: pa.Schema,
        digest: str,
        what: str,
    ) -> list[_Written]:
        plan = layout.plan_days(data, dataset.time_column, dataset.lookup_key)
        whole_lock = threading.Lock()
        combined: list[pa.Table] = []

        def whole() -> pa.Table:
            # One contiguous copy of the batch, made on first need and shared by the days.
            with whole_lock:
                if not combined:
                    combined.append(data.combine_chunks())
                return combined[0]

        stem = layout.data_file_stem(self.sink, dataset.name, digest)
        base = table.location().rstrip("/")
        written: list[_Written] = []
        lock = threading.Lock()

        def write_day(rows: layout.DayRows) -> None:
            directory = f"{base}/{layout.day_directory(dataset.time_column, rows.day)}"
            batches = layout.day_batches(data, rows, target, whole=whole)
            mine: set[str] = set()
            for index, chunks in enumerate(self._encoder.encode(target, batches)):
                location = f"{directory}/{layout.data_file_name(stem, index)}"
                key = self._root.key(location)
                size = self._put(key, location, chunks)
                mine.add(key)
                with lock:
                    written.append(_Written(location, key, rows.day, size))
            self._delete_leftovers(directory, stem, mine)

        # Days are independent files: encode them side by side (pyarrow releases the GIL).
        workers = min(len(plan), ENCODE_THREADS)
        try:
            if workers <= 1:
                for rows in plan:
                    write_day(rows)
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="hypaware-iceberg") as pool:
                    futures = [pool.submit(write_day, rows) for rows in plan]
                    try:
                        for future in futures:
                            future.result()
                    except BaseException:
                        # Days not started are not worth writing; the pool waits for the rest.
                        pool.shutdown(cancel_futures=True)
                        raise
        except BaseException:
            self._delete(written)
            raise
        written.sort(key=lambda w: w.location)
        return written

    def _put(self, key: str, location: str, chunks: Iterable[bytes]) -> int:
        size = 0
        producer_error: BaseException | None = None

        def counted() -> Iterator[bytes]:
            nonlocal size, producer_error
            try:
                for chunk in chunks:
                    size += len(chunk)
                    yield chunk
            except BaseException as exc:
                producer_error = exc
                raise

        try:
            obstore.put(self._root.store, key, counted(), chunk_size=PUT_CHUNK_SIZE)
        except Exception as exc:
            if producer_error is not None:
                # The encoder failed, not the store: its own error says more.
                raise producer_error from None
            raise translate_error(exc, label=self._root.label, op="write", path=location) from exc
        return size

    def _delete_leftovers(self, directory: str, stem: str, keep: set[str]) -> None:
        """Remove files an earlier, interrupted attempt of this batch left in `directory`."""
        prefix = self._root.key(directory) + "/"
        try:
            for chunk in obstore.list(self._root.store, prefix=prefix):
                for meta in chunk:
                    key = meta["path"]
                    if key not in keep and layout.owned_by(key.rsplit("/", 1)[-1], stem):
                        obstore.delete(self._root.store, key)
        except FileNotFoundError:
            return

    def _delete(self, written: Sequence[_Written]) -> None:
        for w in written:
            try:
                obstore.delete(self._root.store, w.key)
            except FileNotFoundError:
                pass
            except Exception as exc:
                log.warning(
                    "sink %s: cannot remove unused data file %s: %s", self.sink, w.location, exc
                )

    def _data_file(self, table: Table, written: _Written, what: str) -> DataFile:
        # The size is known from the write: only the footer is fetched.
        footer = ObstoreInputFile(self._root, written.location, size=written.size)
        with footer.open() as stream:
            metadata = pq.read_metadata(stream)
        schema = table.schema()
        arrow = metadata.schema.to_arrow_schema()
        if any(f.metadata is None or b"PARQUET:field_id" not in f.metadata for f in arrow):
            raise IcebergError(
                f"{what}: the encoder wrote {written.location} without Iceberg field ids",
                retryable=False,
            )
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=metadata,
            stats_columns=compute_statistics_plan(schema, table.metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(schema),
        )
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=written.location,
            file_format=FileFormat.PARQUET,
            partition=Record(written.day),
            file_size_in_bytes=written.size,
            sort_order_id=table.sort_order().order_id,
            spec_id=table.spec().spec_id,
            equality_ids=None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )

    def _commit(
        self,
        table: Table,
        batch: ExportBatch,
        digest: str,
        data_files: Sequence[DataFile],
        props: dict[str, str],
        what: str,
    ) -> str:
        table.refresh()
        if _find_commit(table, batch.batch_id, digest) is not None:
            return "already"
        self._check_layout(table, batch.dataset, what)
        current = table.schema()
        for name in batch.dataset.schema.names:
            try:
                current.find_field(name)
            except ValueError:
                raise IcebergError(
                    f"{what}: column {name!r} was removed from the table while writing",
                    retryable=True,
                ) from None
        with (
            table.transaction() as tx,
            tx.update_snapshot(snapshot_properties=props).fast_append() as append,
        ):
            for data_file in data_files:
                append.append_data_file(data_file)
        return "committed"

    # --------------------------------------------------------------------- scan

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Any = None,
        since: dt.datetime | dt.date | None = None,
        until: dt.datetime | dt.date | None = None,
        keys: Iterable[Any] | None = None,
    ) -> pa.RecordBatchReader:
        """Stream the dataset's rows from its table.

        - `since` / `until`: the time column is ``>= since`` and ``< until``;
          pruned by day partition and file statistics.
        - `keys`: the lookup key is one of these; pruned by file and row-group
          statistics (files are sorted by it).
        - `filter`: a pyiceberg expression or its string form
          (``"status = 'ok'"``), pushed down like the above; or a
          ``pyarrow.compute.Expression``, applied to the rows read (no pruning).
        - `columns`: the columns to return (default all).

        A table not registered yet scans as empty. Raises `IcebergError` when
        the catalog or files cannot be read.
        """
        what = self._what(dataset.name)
        try:
            table = self.load_table(dataset, create=False)
        except IcebergError as exc:
            raise IcebergError(f"{what}: {exc}", retryable=exc.retryable) from exc
        except Exception as exc:
            raise IcebergError(f"{what}: cannot load the table: {_brief(exc)}") from exc
        wanted = list(columns) if columns is not None else None
        if table is None:
            schema = normalize_schema(dataset.schema)
            if wanted is not None:
                schema = pa.schema([schema.field(c) for c in wanted])
            return pa.RecordBatchReader.from_batches(schema, [])

        expr = row_filter(table, dataset, since, until, keys)
        residual: pc.Expression | None = None
        if isinstance(filter, pc.Expression):
            residual = filter
        elif isinstance(filter, (BooleanExpression, str)):
            expr = And(expr, filter) if not isinstance(filter, str) else And(expr, _parse(filter))
        elif filter is not None:
            raise TypeError(
                "filter must be a pyiceberg expression, its string form, or a "
                f"pyarrow.compute.Expression; got {type(filter).__name__}"
            )
        selected = ("*",) if residual is not None or wanted is None else tuple(wanted)
        try:
            reader = table.scan(row_filter=expr, selected_fields=selected).to_arrow_batch_reader()
        except Exception as exc:
            raise IcebergError(f"{what}: cannot scan the table: {_brief(exc)}") from exc
        if residual is None:
            return reader
        return _filtered(reader, residual, wanted)

    # -------------------------------------------------------------------- close

    async def close(self) -> None:
        """Release the catalog connection. A second call is a no-op."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            catalog, self._catalog = self._catalog, None
        unregister_root(self._token)
        engine = getattr(catalog, "engine", None)
        if engine is not None:
            await asyncio.to_thread(engine.dispose)


def _did_not_land(exc: BaseException) -> bool:
    """Errors that guarantee the commit was not applied, so its files may go."""
    return isinstance(exc, (CommitFailedException, ValidationError, IcebergError)) or is_conflict(
        exc
    )


def _find_commit(table: Table, batch_id: str, digest: str) -> dict[str, str] | None:
    """The summary of the snapshot that committed this batch, if there is one."""
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        if summary is None:
            continue
        if summary[SUMMARY_BATCH_ID] == batch_id and summary[SUMMARY_DIGEST] == digest:
            return {k: v for k, v in summary.additional_properties.items() if isinstance(v, str)}
    return None


def _already_committed(batch: ExportBatch, summary: dict[str, str]) -> ExportResult:
    failed_ids = json.loads(summary.get(SUMMARY_FAILED, "[]"))
    failed = [
        RetryPartition(pid, f"batch {batch.batch_id!r} was committed without this partition")
        for pid in failed_ids
    ]
    exported = [p.id for p in batch.partitions if p.id not in set(failed_ids)]
    return ExportResult(exported=exported, retry_partitions=failed)


def _summary(
    batch: ExportBatch, digest: str, read: _Batch, written: Sequence[_Written], sink: str
) -> dict[str, str]:
    props = {
        SUMMARY_BATCH_ID: batch.batch_id,
        SUMMARY_DIGEST: digest,
        SUMMARY_SINK: sink,
        SUMMARY_DATASET: batch.dataset.name,
        SUMMARY_PARTITION_COUNT: str(len(batch.partitions)),
        SUMMARY_DAYS: ",".join(dict.fromkeys(layout.day_label(w.day) for w in written)),
    }
    listed = layout.partition_summary(read.ok, PARTITION_LIST_LIMIT)
    if listed is not None:
        props[SUMMARY_PARTITIONS] = listed
    if read.failed:
        props[SUMMARY_FAILED] = json.dumps([r.partition_id for r in read.failed])
    return props


def _time_literal(value: dt.datetime | dt.date, column_type: Any) -> str:
    if isinstance(column_type, DateType):
        day = value.date() if isinstance(value, dt.datetime) else value
        return day.isoformat()
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    value = value.astimezone(dt.UTC)
    if isinstance(column_type, TimestamptzType):
        return value.isoformat()
    return value.replace(tzinfo=None).isoformat()


# pyiceberg's predicates are pydantic models whose generated __init__ mypy misreads;
# their documented call is Predicate(column_name, value).
_AtLeast: Any = GreaterThanOrEqual
_Below: Any = LessThan
_OneOf: Any = In


def row_filter(
    table: Table,
    dataset: DatasetInfo,
    since: dt.datetime | dt.date | None,
    until: dt.datetime | dt.date | None,
    keys: Iterable[Any] | None,
) -> BooleanExpression:
    """The pyiceberg filter for a time range (``since <= t < until``) and lookup keys."""
    expr: BooleanExpression = AlwaysTrue()
    time_type = table.schema().find_field(dataset.time_column).field_type
    if since is not None:
        expr = And(expr, _AtLeast(dataset.time_column, _time_literal(since, time_type)))
    if until is not None:
        expr = And(expr, _Below(dataset.time_column, _time_literal(until, time_type)))
    if keys is not None:
        if dataset.lookup_key is None:
            raise ValueError(f"dataset {dataset.name!r} has no lookup key to filter by")
        expr = And(expr, _OneOf(dataset.lookup_key, tuple(keys)))
    return expr


# The name the query sources imported first.
_row_filter = row_filter


def _parse(text: str) -> BooleanExpression:
    from pyiceberg.expressions.parser import parse

    return parse(text)


def _filtered(
    reader: pa.RecordBatchReader, residual: pc.Expression, columns: list[str] | None
) -> pa.RecordBatchReader:
    schema = reader.schema
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])

    def batches() -> Iterator[pa.RecordBatch]:
        with reader:
            for batch in reader:
                kept = pa.Table.from_batches([batch]).filter(residual)
                if columns is not None:
                    kept = kept.select(columns)
                yield from kept.to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())
