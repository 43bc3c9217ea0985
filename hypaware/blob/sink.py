"""`BlobSink`: an encoder and a blob store composed into a `Sink`.

Objects are laid out by dataset and UTC day, every object of one batch
named from one stem (see `hypaware.blob.object_names`). The sink makes one pass
over the batch per day (`hypaware.blob.day_passes`) and encodes and streams
each file to the store through the `FileWriter` it owns
(`hypaware.blob.file_writer`); this module holds the sink itself: the
exactly-once bookkeeping, failure reporting and its lifecycle.

Exactly once, with the sink's `BatchIndex` (see `hypaware.blob.batch_index`):

- A batch is recorded *open* before its first object is written, and each
  day directory before the first object goes there. Re-exporting the same
  batch (a crash before the ack) writes the same names; afterwards every
  object of the batch this attempt did not write is deleted from every
  directory any attempt touched, and only then is the batch *finished* and
  acknowledged.
- A batch that failed (the destination failed, the sink was closed, the
  process died) stays open; its partitions come back through the driver in
  some other batch. Before the sink writes any other batch it deletes the
  open batch's objects, so its rows are never in two batches' files.
- A partition that cannot be read or encoded is left out: the batch is
  written again without it (same names; the leftovers are deleted as
  above) and the partition goes to `retry_partitions`.
- A finished batch leaves a receipt at the destination
  (`hypaware.blob.receipts`) before it is acknowledged; before each batch
  the sink reads the receipts of its cache identity it does not know yet,
  so a partition another state directory (or a lost one) wrote is
  acknowledged as already written, not written twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import UTC, datetime

import attrs

from hypaware.blob.batch_index import BatchIndex
from hypaware.blob.day_passes import DayFeed, time_column_problem
from hypaware.blob.file_writer import FileWriter, PartitionFailed, SinkClosing, WrittenFiles
from hypaware.blob.object_names import batch_stem
from hypaware.blob.receipts import Receipt, ReceiptError, day_prefixes, receipt_path
from hypaware.core.contracts import AsyncClosing, BlobStore, Encoder, NamedStore
from hypaware.core.errors import (
    EncodeError,
    NotFoundError,
    PathError,
    SinkClosedError,
    StoreError,
    TransientStoreError,
)
from hypaware.core.paths import encode_segment
from hypaware.core.query_source import QuerySource
from hypaware.core.types import (
    ExportBatch,
    ExportOptions,
    ExportResult,
    PartitionRef,
    RetryPartition,
    writer_key,
)

__all__ = ["BlobSink"]

log = logging.getLogger(__name__)


class BlobSink(AsyncClosing):
    """Writes each batch through `encoder` into `store` (see the module doc).

    - `name`: the sink's name; part of every object name.
    - `store`: where objects go (closed by `close()`).
    - `encoder`: turns rows into file bytes.
    - `index`: what each batch wrote (see `hypaware.blob.batch_index`). Built
      from config, it lives in the sink's state directory; without one it
      is kept in memory, which is exactly-once only within this process.

    Reading and encoding run on worker threads of the sink's own (one per
    day written at once, no more than the cores), never on the event loop;
    `close()` joins them.
    """

    # At most this many day passes at once (None: one per core).
    lanes: int | None = None

    def __init__(
        self, name: str, store: BlobStore, encoder: Encoder, index: BatchIndex | None = None
    ) -> None:
        self.name = name
        self.index = index if index is not None else BatchIndex(None)
        self._files = FileWriter(name, store, encoder, self._record_day_dir)
        self._closed = False
        self._adopted = False
        self._active = 0
        self._writing: set[str] = set()
        self._idle: asyncio.Event | None = None
        self._close_task: asyncio.Future[None] | None = None

    # Held by the writer: a store or encoder set here is the one the next file is written with.
    @property
    def store(self) -> BlobStore:
        """Where objects go (closed by `close()`)."""
        return self._files.store

    @store.setter
    def store(self, store: BlobStore) -> None:
        self._files.store = store

    @property
    def encoder(self) -> Encoder:
        """Turns rows into file bytes."""
        return self._files.encoder

    @encoder.setter
    def encoder(self, encoder: Encoder) -> None:
        self._files.encoder = encoder

    @property
    def destination(self) -> str:
        """The store as named in messages (no credentials)."""
        store = self.store
        return store.label if isinstance(store, NamedStore) and store.label else repr(store)

    @property
    def location(self) -> str:
        """Where the files go, as the batch index scopes acknowledgements (a URL, no secrets)."""
        store = self.store
        return store.url if isinstance(store, NamedStore) and store.url else self.destination

    def query_source(self, name: str, cache_identity: str | None) -> QuerySource | None:
        """The sink's files as a query reads them (`ProvidesQuerySource`).

        Parquet through an obstore-backed store only: the files are read in
        place, by their batch's record in the index. Other encodings cannot
        be read back.
        """
        from hypaware.blob.query_source import ParquetSource
        from hypaware.blob.store import ObstoreBlobStore

        ext = self.encoder.extension
        if ext == "parquet" and isinstance(self.store, ObstoreBlobStore):
            return ParquetSource(name, self.store, ext, self.index)
        return None

    def __repr__(self) -> str:
        return f"BlobSink({self.name!r}, {self.store!r}, {self.encoder!r})"

    # ------------------------------------------------------------------ export

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write the batch; failures come back in `retry_partitions`, never raised."""
        if self._closed:
            raise SinkClosedError(f"sink {self.name!r} is closed")
        self._active += 1
        if self._idle is not None:
            self._idle.clear()
        try:
            return await self._export(batch)
        except Exception as exc:
            # Nothing may raise through the driver; every partition goes back.
            log.exception("sink %s: batch %s failed", self.name, batch.batch_id)
            return ExportResult.failed(batch, f"sink {self.name!r}: {type(exc).__name__}: {exc}")
        finally:
            self._active -= 1
            if self._active == 0 and self._idle is not None:
                self._idle.set()

    async def _export(self, batch: ExportBatch) -> ExportResult:
        dataset = batch.dataset
        try:
            dataset_dir = encode_segment(dataset.name)
        except PathError as exc:
            return ExportResult.failed(batch, f"sink {self.name!r}: {exc}", retryable=False)
        stem = batch_stem(self.name, dataset.name, batch.batch_id)
        if stem in self._writing:
            return ExportResult.failed(
                batch, f"sink {self.name!r}: batch {batch.batch_id} is already being exported"
            )
        self._writing.add(stem)
        try:
            return await self._export_batch(batch, stem, dataset_dir)
        finally:
            self._writing.discard(stem)

    async def _export_batch(self, batch: ExportBatch, stem: str, dataset_dir: str) -> ExportResult:
        problem = time_column_problem(batch.dataset.schema, batch.dataset.time_column, "dataset's")
        if problem is not None:
            # No partition of this dataset can be laid out by day, on any retry.
            reason = f"sink {self.name!r}: dataset {batch.dataset.name!r}: {problem}"
            return self._all_failed(batch, {}, RetryPartition("", reason, retryable=False))
        try:
            await self._sweep()
        except StoreError as exc:
            return self._all_failed(batch, {}, self._store_failure(exc))
        # A partition some finished batch already holds was acknowledged
        # before and sent again (its ack was lost): writing it again would
        # double its rows, so it is acknowledged as it is.
        where = self.location
        writer = writer_key(batch.cache_identity, self.name)
        self._adopt_records(writer, where)
        try:
            await self._read_receipts(writer, batch.dataset.name, where)
        except StoreError as exc:
            return self._all_failed(batch, {}, self._store_failure(exc))
        held = self._already_held(batch, stem, writer, where)
        todo = [p for p in batch.partitions if p.id not in held]
        self.index.begin(
            stem,
            batch.dataset.name,
            batch.batch_id,
            (p.id for p in todo),
            cache_identity=writer,
            destination=where,
        )
        return await self._write_dropping_failed(batch, stem, dataset_dir, writer, todo, held)

    def _adopt_records(self, writer: str, where: str) -> None:
        """Once per sink: batch records made before cache identities become `writer`'s."""
        if self._adopted:
            return
        adopted = self.index.adopt(writer, where)
        if adopted:
            log.info(
                "sink %s: %d batch records made before cache identities are taken as "
                "cache %s's, written to %s",
                self.name,
                adopted,
                writer,
                where,
                extra={"sink": self.name, "cache_identity": writer},
            )
        self._adopted = True

    def _already_held(
        self, batch: ExportBatch, stem: str, writer: str, where: str
    ) -> dict[str, str]:
        """Partition id -> the other finished batch of `writer` at `where` that holds it."""
        held = self.index.finished_holders(
            batch.dataset.name,
            [p.id for p in batch.partitions],
            other_than=stem,
            cache_identity=writer,
            destination=where,
        )
        for pid, other in held.items():
            log.info(
                "sink %s: partition %s of cache %s is already written by batch %s; "
                "not written again",
                self.name,
                pid,
                writer,
                other,
                extra={
                    "sink": self.name,
                    "partition": pid,
                    "cache_identity": writer,
                },
            )
        return held

    async def _write_dropping_failed(
        self,
        batch: ExportBatch,
        stem: str,
        dataset_dir: str,
        writer: str,
        todo: list[PartitionRef],
        held: dict[str, str],
    ) -> ExportResult:
        """Write `todo`, again without each partition that fails, then finish the batch."""
        failed: dict[str, RetryPartition] = {}
        while True:
            live = [p for p in todo if p.id not in failed]
            feed = DayFeed(batch.dataset.time_column, live)
            try:
                written = await self._files.write(batch, stem, dataset_dir, feed, lanes=self.lanes)
                await self._remove_stale(stem, written)
                if live:
                    await self._put_receipt(batch, stem, writer, [p.id for p in live])
                break
            except PartitionFailed as exc:
                cause = exc.__cause__
                assert isinstance(cause, Exception)
                blamed = [exc.part] if exc.part is not None else live
                for part in blamed:
                    failed[part.id] = self._partition_failure(part, cause)
                # Written again without them: the same names, leftovers deleted.
                self.index.drop_partitions(stem, (p.id for p in blamed))
            except SinkClosing:
                why = RetryPartition("", f"sink {self.name!r} was closed")
                return self._all_failed(batch, failed, why, held)
            except StoreError as exc:
                return self._all_failed(batch, failed, self._store_failure(exc), held)
        self.index.finish(stem)
        exported = tuple(p.id for p in live) + tuple(held)
        result = ExportResult(
            exported=exported,
            already_held=tuple(held),
            retry_partitions=tuple(failed.values()),
            rows_written=sum(feed.rows[p.id] for p in live),
            bytes_written=written.size,
            files_written=written.files,
        )
        return result.reconcile(batch)

    def _all_failed(
        self,
        batch: ExportBatch,
        failed: dict[str, RetryPartition],
        why: RetryPartition,
        held: Collection[str] = (),
    ) -> ExportResult:
        """Every partition back for retry (with its own reason, or `why`), but those in `held`."""
        retry = [
            failed.get(p.id) or attrs.evolve(why, partition_id=p.id)
            for p in batch.partitions
            if p.id not in held
        ]
        same = [e.partition_id for e in retry if e.reason == why.reason]
        if same:
            # One line per batch: the driver warns once per reason, with the counts.
            log.info(
                "sink %s: dataset %s: batch %s: %d partitions not written (%s): %s",
                self.name,
                batch.dataset.name,
                batch.batch_id,
                len(same),
                _first_ids(same),
                why.reason,
                extra={
                    "sink": self.name,
                    "dataset": batch.dataset.name,
                    "batch_id": batch.batch_id,
                    "partitions": len(same),
                },
            )
        return ExportResult(exported=tuple(held), retry_partitions=tuple(retry)).reconcile(batch)

    def _store_failure(self, exc: StoreError) -> RetryPartition:
        """The reason every partition of a batch gets when the destination failed."""
        text = str(exc)
        where = "" if self.destination in text else f"{self.destination}: "
        reason = f"sink {self.name!r}: {where}{text}" if where or self.name not in text else text
        # The destination failed as a whole (a missing bucket, credentials,
        # permissions, a full or read-only disk, an outage): the sink's fault,
        # not the rows'. A refused path is the one failure a name from data causes.
        if isinstance(exc, PathError):
            return RetryPartition("", reason, retryable=False)
        return RetryPartition("", reason, isinstance(exc, TransientStoreError), sink_fault=True)

    def _partition_failure(self, part: PartitionRef, exc: Exception) -> RetryPartition:
        # The id is the RetryPartition's own: kept out of the reason, partitions failing
        # for one cause are grouped as one in reports, status and retry.
        reason = f"sink {self.name!r}: {type(exc).__name__}: {exc}"
        log.info(
            "sink %s: partition %s not written: %s",
            self.name,
            part.id,
            reason,
            extra={"sink": self.name, "partition": part.id},
        )
        # Rows the encoder cannot represent will not encode on a retry either.
        return RetryPartition(part.id, reason, retryable=not isinstance(exc, EncodeError))

    async def _read_receipts(self, writer: str, dataset: str, where: str) -> None:
        """Take in the receipts of `writer` for `dataset` other state directories left."""
        today = datetime.now(UTC).date()
        since = self.index.receipts_read(writer, where, dataset)
        paths: list[str] = []
        for prefix in day_prefixes(writer, dataset, since, today):
            try:
                paths += [m.path async for m in self.store.list(prefix) if m.path.endswith(".json")]
            except NotFoundError:
                continue
        found: list[tuple[str, Receipt]] = []
        for path in self.index.unknown_receipts(where, paths):
            try:
                receipt = Receipt.decode(await self.store.get(path), path)
            except NotFoundError:
                continue  # its batch was swept meanwhile
            except ReceiptError as exc:
                log.warning(
                    "sink %s: %s: skipped; the partitions it may name can be written again",
                    self.name,
                    exc,
                    extra={"sink": self.name, "path": path},
                )
                continue
            if receipt.writer == writer and receipt.dataset == dataset:
                found.append((path, receipt))
        added = self.index.read_receipts(writer, where, dataset, found, today)
        if added:
            log.info(
                "sink %s: %d batches of cache %s for dataset %s were written to %s by another "
                "state directory; their partitions are not written again",
                self.name,
                added,
                writer,
                dataset,
                where,
                extra={"sink": self.name, "cache_identity": writer, "batches": added},
            )

    async def _put_receipt(
        self, batch: ExportBatch, stem: str, writer: str, partition_ids: list[str]
    ) -> None:
        now = datetime.now(UTC)
        path = self.index.receipt_of(stem) or receipt_path(writer, batch.dataset.name, stem, now)
        # Recorded first: a sweep of this batch, should it stay open, deletes the receipt.
        self.index.set_receipt(stem, path)
        receipt = Receipt(
            writer=writer,
            dataset=batch.dataset.name,
            stem=stem,
            batch_id=batch.batch_id,
            sink=self.name,
            partitions=tuple(partition_ids),
            written_at=now.isoformat(timespec="seconds"),
        )
        await self.store.put(path, receipt.encode())

    def _record_day_dir(self, stem: str, day_dir: str) -> None:
        self.index.touch(stem, day_dir)

    async def _remove_stale(self, stem: str, written: WrittenFiles) -> None:
        """Delete every object of `stem` this attempt did not write, wherever any attempt wrote."""
        for day_dir in sorted(self.index.day_dirs(stem)):
            keep = written.paths.get(day_dir, set())
            await self._delete_matching(day_dir, stem, keep, "an earlier attempt")

    async def _sweep(self) -> None:
        """Delete the objects of batches that failed; their partitions went back for retry."""
        for record in self.index.open_batches():
            if record.stem in self._writing:
                continue
            if record.receipt is not None:
                # First: no reader may take the batch as written once its files go.
                await self.store.delete(record.receipt)
            for day_dir in sorted(record.day_dirs):
                await self._delete_matching(
                    day_dir, record.stem, set(), f"failed batch {record.batch_id}"
                )
            self.index.forget(record.stem)

    async def _delete_matching(self, day_dir: str, stem: str, keep: set[str], left_by: str) -> None:
        # Whatever the extension: the encoder may have changed between attempts.
        stale: list[str] = []
        async for meta in self.store.list(day_dir):
            name = meta.path.rpartition("/")[2]
            if name not in keep and name.rpartition("-")[0] == stem:
                stale.append(meta.path)
        for path in stale:
            log.info(
                "sink %s: removing %s left by %s",
                self.name,
                path,
                left_by,
                extra={"sink": self.name},
            )
            await self.store.delete(path)

    # -------------------------------------------------------------- lifecycle

    async def close(self) -> None:
        """Stop: in-flight exports end at their next chunk (partitions sent back
        for retry), the encoding threads are joined and the store is closed.
        A second call waits for the first and returns."""
        if self._close_task is not None:
            await asyncio.shield(self._close_task)
            return
        self._closed = True
        self._files.stop()
        self._close_task = asyncio.get_running_loop().create_future()
        try:
            if self._active:
                self._idle = asyncio.Event()
                await self._idle.wait()
            self._files.shutdown()
            await self.store.close()
            self.index.close()
        finally:
            self._close_task.set_result(None)


def _first_ids(ids: list[str], shown: int = 5) -> str:
    more = len(ids) - shown
    return ", ".join(ids[:shown]) + (f" and {more} more" if more > 0 else "")
