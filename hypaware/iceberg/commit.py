"""Commits: a batch's data files registered in one Iceberg snapshot, exactly once.

The snapshot's summary carries ``hypaware.batch-id`` and the digest of the
batch's partition set (`batch_summary`). Before writing, and again before
each commit attempt, `find_commit` looks for a snapshot that already carries
the batch: a crash after a commit never commits twice. `commit_files`
fast-appends the files after checking the table is still laid out as
hypaware writes it (`check_layout`); the table format retries it on commit
conflicts with other writers.

A commit that loses a race is rebased onto the newer snapshot, by
pyiceberg's own retry or by the table format's. Before every rebase the
batch is looked for again, and so are its partitions (`committed_partitions`):
an attempt given up on (its export timed out) may still be committing while
the next attempt, of the same batch or of its partitions respooled into a
new one, lands first. Rebased blindly, the late commit would append the
same rows twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException, ValidationError
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, Transaction
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DateType, TimestampType, TimestamptzType

from hypaware.core.types import DatasetInfo, ExportBatch, ExportResult, RetryPartition
from hypaware.iceberg import layout
from hypaware.iceberg.catalog import IcebergError, is_conflict
from hypaware.iceberg.datafiles import WrittenFile
from hypaware.iceberg.pipeline import ReadBatch

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

__all__ = [
    "SUMMARY_BATCH_ID",
    "SUMMARY_DIGEST",
    "PartitionsLanded",
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
    """Stops a rebase: the batch (`summary`) or some of its partitions (`held`) landed.

    A `CommitFailedException`, so that pyiceberg removes the manifests of
    the attempt when it is raised inside pyiceberg's own retry.
    """

    def __init__(self, summary: dict[str, str] | None, held: frozenset[str]) -> None:
        super().__init__("the batch, or some of its partitions, was committed meanwhile")
        self.summary = summary
        self.held = held


def _not_landed(table: Table, batch: ExportBatch, digest: str) -> None:
    """`_Landed` if a snapshot of `table` holds the batch or any of its partitions."""
    summary = find_commit(table, batch.batch_id, digest)
    held = frozenset() if summary else committed_partitions(table)
    held &= {p.id for p in batch.partitions}
    if summary is not None or held:
        raise _Landed(summary, held)


class _BatchTransaction(Transaction):
    """pyiceberg's `Transaction` for a batch's append, with two changes.

    - `recheck` runs before pyiceberg rebases the append after a conflict
      (its own retry, `commit.retry.num-retries`), on the refreshed table.
    - The metadata the transaction would have is made once per change
      staged, not on every read: `Transaction.table_metadata` deep-copies
      the table's whole metadata each time, and a fast append reads it about
      fourteen times. That was half of a commit's time on a table of six
      snapshots, and grows with the table's history.
    """

    def __init__(self, table: Table, recheck: Callable[[], None]) -> None:
        super().__init__(table)
        self._recheck = recheck
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

    def _rebuild_snapshot_updates(self) -> None:
        self._recheck()
        super()._rebuild_snapshot_updates()


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
    new snapshot), else ``"committed"``. Raises `PartitionsLanded` when some
    of the batch's partitions landed in another batch meanwhile.
    """
    table.refresh()
    try:
        _not_landed(table, batch, digest)
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
            _BatchTransaction(table, lambda: _not_landed(table, batch, digest)) as tx,
            tx.update_snapshot(snapshot_properties=props).fast_append() as append,
        ):
            for data_file in data_files:
                append.append_data_file(data_file)
    except _Landed as landed:
        if landed.summary is not None:
            return "already"
        raise PartitionsLanded(what, landed.held) from None
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
