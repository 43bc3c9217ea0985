"""Commits: a batch's data files registered in one Iceberg snapshot, exactly once.

The snapshot's summary carries ``hypaware.batch-id`` and the digest of the
batch's partition set (`batch_summary`). Before writing, and again before
each commit attempt, `find_commit` looks for a snapshot that already carries
the batch: a crash after a commit never commits twice. `commit_files`
fast-appends the files after checking the table is still laid out as
hypaware writes it (`check_layout`); the table format retries it on commit
conflicts with other writers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyiceberg.exceptions import CommitFailedException, ValidationError
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DateType, TimestampType, TimestamptzType

from hypaware.core.types import DatasetInfo, ExportBatch, ExportResult, RetryPartition
from hypaware.iceberg import layout
from hypaware.iceberg.catalog import IcebergError, is_conflict
from hypaware.iceberg.datafiles import WrittenFile
from hypaware.iceberg.pipeline import ReadBatch

__all__ = [
    "SUMMARY_BATCH_ID",
    "SUMMARY_DIGEST",
    "already_committed",
    "batch_summary",
    "check_layout",
    "commit_files",
    "committed_partitions",
    "did_not_land",
    "find_commit",
]

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


def commit_files(
    table: Table,
    batch: ExportBatch,
    digest: str,
    data_files: Sequence[DataFile],
    props: dict[str, str],
    what: str,
) -> str:
    """Append `data_files` in one snapshot summarised by `props`.

    Returns ``"already"`` when a snapshot of this batch landed meanwhile (no
    new snapshot), else ``"committed"``.
    """
    table.refresh()
    if find_commit(table, batch.batch_id, digest) is not None:
        return "already"
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
    with (
        table.transaction() as tx,
        tx.update_snapshot(snapshot_properties=props).fast_append() as append,
    ):
        for data_file in data_files:
            append.append_data_file(data_file)
    return "committed"


def did_not_land(exc: BaseException) -> bool:
    """Errors that guarantee the commit was not applied, so its files may go."""
    return isinstance(exc, (CommitFailedException, ValidationError, IcebergError)) or is_conflict(
        exc
    )


def find_commit(table: Table, batch_id: str, digest: str) -> dict[str, str] | None:
    """The summary of the snapshot that committed this batch, if there is one."""
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        if summary is None:
            continue
        if summary[SUMMARY_BATCH_ID] == batch_id and summary[SUMMARY_DIGEST] == digest:
            return {k: v for k, v in summary.additional_properties.items() if isinstance(v, str)}
    return None


def committed_partitions(table: Table) -> frozenset[str]:
    """Partition ids some hypaware commit in the current snapshot's history holds.

    A partition respooled into a new batch (its ack was lost or late) is found
    here, whatever batch committed it. Commits too large to list their
    partitions are not counted; those are caught by batch id alone.
    """
    current = table.current_snapshot()
    if current is None:
        return frozenset()
    from pyiceberg.table.snapshots import ancestors_of

    held: set[str] = set()
    for snapshot in ancestors_of(current, table.metadata):
        extra = snapshot.summary.additional_properties if snapshot.summary else {}
        listed = extra.get(SUMMARY_PARTITIONS)
        if SUMMARY_BATCH_ID not in extra or not listed:
            continue
        failed = set(json.loads(extra.get(SUMMARY_FAILED, "[]")))
        held.update(p for p in listed.split(",") if p and p not in failed)
    return frozenset(held)


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
    """The snapshot summary that names the batch (see the module docstring)."""
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
