"""Commits: a batch's data files registered in one Iceberg snapshot, exactly once.

The snapshot's summary names the batch (``hypaware.batch-id`` and the digest
of its partition set) and carries the table's whole exactly-once record,
updated with this batch's partitions (`hypaware.iceberg.record`): which
partitions each cache identity has committed. Before writing, and again
before each commit attempt, the batch's partitions are looked up in the
record under the batch's own cache identity only: a partition with the same
id from another cache is another partition.

A commit that loses a race is rebased onto the newer snapshot, by
pyiceberg's own retry or by the table format's. Before every rebase the
record is read again from the refreshed table, and both the check and the
record the snapshot carries are made again from it: an attempt given up on
(its export timed out) may still be committing while the next attempt, of
the same batch or of its partitions respooled into a new one, lands first;
rebased blindly, the late commit would append the same rows twice, and a
record copied from the old parent would forget what the winner committed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException, ValidationError
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, Transaction
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DateType, TimestampType, TimestamptzType

from hypaware.core.types import (
    DatasetInfo,
    ExportBatch,
    ExportResult,
    PartitionRef,
    RetryPartition,
)
from hypaware.iceberg import day_layout
from hypaware.iceberg.catalog import IcebergError, is_conflict
from hypaware.iceberg.datafiles import WrittenFile
from hypaware.iceberg.pipeline import ReadBatch
from hypaware.iceberg.record import (
    SUMMARY_RECORD,
    SUMMARY_WRITER,
    TableRecord,
    read_record,
    writer_key,
)

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

log = logging.getLogger("hypaware.iceberg.table_format")

__all__ = [
    "SUMMARY_BATCH_ID",
    "SUMMARY_DIGEST",
    "PartitionsLanded",
    "ViewTransaction",
    "already_committed",
    "batch_summary",
    "check_layout",
    "commit_files",
    "did_not_land",
    "drop_unlisted_manifests",
    "find_commit",
    "held_partitions",
]

SUMMARY_BATCH_ID = "hypaware.batch-id"
SUMMARY_DIGEST = "hypaware.batch-digest"
SUMMARY_SINK = "hypaware.sink"
SUMMARY_DATASET = "hypaware.dataset"
SUMMARY_PARTITION_COUNT = "hypaware.partition-count"
SUMMARY_FAILED = "hypaware.failed-partitions"
SUMMARY_DAYS = "hypaware.days"


def check_layout(table: Table, dataset: DatasetInfo, what: str) -> None:
    """Refuse a table no longer partitioned by day of its timestamp time column."""
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


class PartitionsLanded(IcebergError):
    """Some of a batch's partitions were committed by another batch while it was written.

    The batch's files hold their rows too, so they cannot be committed: they
    are deleted and the batch written again without `held`.
    """

    def __init__(self, what: str, held: frozenset[str]) -> None:
        named = sorted(held)
        shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
        super().__init__(
            f"{what}: partitions {shown} were committed by another batch while this one was written"
        )
        self.held = held


class _Landed(CommitFailedException):
    """Stops a rebase: some of the batch's partitions (`held`; `every` one of them) landed.

    A `CommitFailedException`, so that pyiceberg removes the manifests of
    the attempt when it is raised inside pyiceberg's own retry.
    """

    def __init__(self, held: frozenset[str], *, every: bool) -> None:
        super().__init__("the batch, or some of its partitions, was committed meanwhile")
        self.held = held
        self.every = every


def held_partitions(
    record: TableRecord, batch: ExportBatch, parts: Sequence[PartitionRef]
) -> frozenset[str]:
    """The ids of `parts` the record holds for the batch's own cache identity."""
    mine = record.of(writer_key(batch.cache_identity, batch.sink))
    return frozenset(p.id for p in parts if mine.holds(p.seq))


def _record_props(
    table: Table,
    batch: ExportBatch,
    parts: Sequence[PartitionRef],
    base: dict[str, str],
    what: str,
) -> dict[str, str]:
    """`base` plus the record updated with `parts`; `_Landed` if the record holds some already."""
    record = read_record(table, what)
    held = held_partitions(record, batch, parts)
    if held:
        raise _Landed(held, every=len(held) == len(parts))
    key = writer_key(batch.cache_identity, batch.sink)
    now_ms = int(time.time() * 1000)
    updated = record.with_commit(key, batch.sink, (p.seq for p in parts), now_ms)
    return {**base, SUMMARY_WRITER: key, SUMMARY_RECORD: updated.dumps()}


class ViewTransaction(Transaction):
    """pyiceberg's `Transaction`, making the metadata it would have once per change staged.

    `Transaction.table_metadata` deep-copies the table's whole metadata on
    every read. A fast append reads it about fourteen times (half of a
    commit's time on a table of six snapshots, growing with its history),
    and expiring snapshots by id twice per snapshot (41 snapshots: 150 ms of
    a 270 ms maintenance run).
    """

    def __init__(self, table: Table, autocommit: bool = False) -> None:
        super().__init__(table, autocommit=autocommit)
        self._view: tuple[Any, Any, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        # The view stands while neither the table's metadata (a refresh
        # replaces it) nor the staged changes (a new tuple each) change.
        base, updates, view = self._table.metadata, self._updates, self._view
        if view is None or view[0] is not base or view[1] is not updates:
            view = (base, updates, super().table_metadata)
            self._view = view
        return view[2]


class _BatchTransaction(ViewTransaction):
    """A `ViewTransaction` for a batch's append that checks the record again on a rebase.

    `recheck` runs before pyiceberg rebases the append after a conflict (its
    own retry, `commit.retry.num-retries`), on the refreshed table, and
    returns the summary the rebased snapshot carries (its record is made
    again from the new parent's).
    """

    def __init__(self, table: Table, recheck: Callable[[], dict[str, str]]) -> None:
        super().__init__(table)
        self._recheck = recheck

    def _rebuild_snapshot_updates(self) -> None:
        props = self._recheck()
        for producer in self._snapshot_producers:
            # Read by the producer's _commit(), which the rebuild runs again.
            producer.snapshot_properties = props
        super()._rebuild_snapshot_updates()


def commit_files(
    table: Table,
    batch: ExportBatch,
    parts: Sequence[PartitionRef],
    data_files: Sequence[DataFile],
    props: dict[str, str],
    what: str,
) -> str:
    """Append `data_files` (the rows of `parts`) in one snapshot summarised by `props`.

    The record is added to `props` here, from the table as it is at each
    attempt. Returns ``"already"`` when every one of `parts` landed
    meanwhile (no new snapshot), else ``"committed"``. Raises
    `PartitionsLanded` when some of them did.
    """
    table.refresh()
    try:
        summary = _record_props(table, batch, parts, props, what)
        check_layout(table, batch.dataset, what)
        current = table.schema()
        for name in batch.dataset.schema.names:
            try:
                current.find_field(name)
            except ValueError:
                raise IcebergError(
                    f"{what}: column {name!r} was removed from the table while writing",
                    retryable=True,
                ) from None

        def recheck() -> dict[str, str]:
            return _record_props(table, batch, parts, props, what)

        with (
            _BatchTransaction(table, recheck) as tx,
            tx.update_snapshot(snapshot_properties=summary).merge_append() as append,
        ):
            for data_file in data_files:
                append.append_data_file(data_file)
        drop_unlisted_manifests(table, append)
    except _Landed as landed:
        if landed.every:
            return "already"
        raise PartitionsLanded(what, landed.held) from None
    return "committed"


def drop_unlisted_manifests(table: Table, producer: Any) -> None:
    """Delete the manifests a committed snapshot producer wrote but its snapshot does not list.

    A merge-append writes the new files' manifest, then merges it with
    others into one: pyiceberg keeps the first on disk, read by nothing (one
    more file every merge, for ever). Failures are logged: it is only space.
    """
    written = list(getattr(producer, "_written_manifests", ()))
    snapshot = table.current_snapshot()
    if len(written) < 2 or snapshot is None:
        return  # nothing was merged: the one manifest written is the snapshot's
    if snapshot.snapshot_id != getattr(producer, "_snapshot_id", None):
        return
    listed = {m.manifest_path for m in snapshot.manifests(table.io)}
    for path in written:
        if path in listed:
            continue
        try:
            table.io.delete(path)
        except FileNotFoundError:
            pass
        except Exception as exc:
            log.warning("cannot delete %s, a manifest no snapshot lists: %s", path, exc)


def did_not_land(exc: BaseException) -> bool:
    """Errors that guarantee the commit was not applied, so its files may go."""
    return isinstance(exc, (CommitFailedException, ValidationError, IcebergError)) or is_conflict(
        exc
    )


def find_commit(table: Table, batch_id: str, digest: str) -> dict[str, str] | None:
    """The summary of the snapshot that committed this batch, if there is one.

    Looks through every snapshot the table still has: for the rare cases the
    record cannot answer (a batch begun before the table had a record, and
    telling whether partitions found committed were committed by this very
    batch, whose files then are the snapshot's).
    """
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        if summary is None:
            continue
        if summary[SUMMARY_BATCH_ID] == batch_id and summary[SUMMARY_DIGEST] == digest:
            return {k: v for k, v in summary.additional_properties.items() if isinstance(v, str)}
    return None


def already_committed(batch: ExportBatch, summary: dict[str, str]) -> ExportResult:
    """The result of a batch found committed: its partitions but those it left out."""
    failed_ids = json.loads(summary.get(SUMMARY_FAILED, "[]"))
    failed = [
        RetryPartition(pid, f"batch {batch.batch_id!r} was committed without this partition")
        for pid in failed_ids
    ]
    exported = [p.id for p in batch.partitions if p.id not in set(failed_ids)]
    return ExportResult(exported=exported, retry_partitions=failed)


def batch_summary(
    batch: ExportBatch, digest: str, read: ReadBatch, written: Sequence[WrittenFile], sink: str
) -> dict[str, str]:
    """The snapshot summary that names the batch, but for the record `commit_files` adds."""
    props = {
        SUMMARY_BATCH_ID: batch.batch_id,
        SUMMARY_DIGEST: digest,
        SUMMARY_SINK: sink,
        SUMMARY_DATASET: batch.dataset.name,
        SUMMARY_PARTITION_COUNT: str(len(batch.partitions)),
        SUMMARY_DAYS: ",".join(dict.fromkeys(day_layout.day_label(w.day) for w in written)),
    }
    if read.failed:
        props[SUMMARY_FAILED] = json.dumps([r.partition_id for r in read.failed])
    return props
