"""Compaction: a closed day's small data files rewritten as files of the target size.

A pass every five minutes leaves a day with 288 small files. Once a day is
closed (it ended `compact_after` seconds ago by the driver's clock), its
files below the target size are packed into bins of about the target size;
each bin's rows are read, sorted by lookup key and time as every data file
is, and written again, and the new files replace the bin's in one commit.

Exactly once beside other writers:

- The commit deletes the bin's files *by name*, never by a predicate such
  as "the day": a late row appended to the same day meanwhile is in a file
  the compaction never read, and that file stays.
- Rebased onto a newer snapshot (pyiceberg's retry after a lost race), the
  commit keeps every file the newer snapshot added, and checks that each
  file it replaces is still there: if another compaction replaced one
  first, this one fails (`ValidationException`) and its files are deleted,
  so no row is doubled.
- The rows read must number what the manifests say the bin holds, or
  nothing is committed.
- New files are named ``<sink>-compact-<uuid>-<n>.parquet``. If the
  process dies between writing them and the commit, they are left behind,
  referenced by no snapshot; a later run deletes such files once they are
  older than `keep_for` and an hour (a compaction still writing is never that old).

A compaction snapshot carries no exactly-once record: the record is read
from the newest snapshot that has one (`hypaware.iceberg.record`), which
snapshot expiry keeps.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask

from hypaware.iceberg import day_layout
from hypaware.iceberg.catalog import IcebergError
from hypaware.iceberg.commit import (
    SUMMARY_DAYS,
    SUMMARY_SINK,
    ViewTransaction,
    drop_unlisted_manifests,
)
from hypaware.iceberg.datafiles import DataFileWriter, WrittenFile
from hypaware.iceberg.schema import write_schema

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from hypaware.core.contracts import Encoder
    from hypaware.core.types import DatasetInfo

__all__ = [
    "COMPACT_MARK",
    "SUMMARY_MAINTENANCE",
    "Bin",
    "compact_bin",
    "is_compaction_output",
    "plan_compaction",
]

log = logging.getLogger("hypaware.iceberg.table_format")

SUMMARY_MAINTENANCE = "hypaware.maintenance"
COMPACT_MARK = "-compact-"


@attrs.frozen
class Bin:
    """Small files of one day to be rewritten together (at least two)."""

    day: int | None
    files: tuple[DataFile, ...] = attrs.field(eq=False)

    @property
    def rows(self) -> int:
        return sum(f.record_count for f in self.files)


def live_files(table: Table) -> list[DataFile]:
    """The data files the current snapshot reads."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    io = table.io
    return [
        entry.data_file
        for manifest in snapshot.manifests(io)
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
    ]


def plan_compaction(
    files: Sequence[DataFile], *, target_size: int, closed_before: int
) -> list[Bin]:
    """Bins of the small files of days before day number `closed_before`.

    Files below `target_size` are taken smallest first into bins of about
    `target_size` bytes; a bin of one file is left alone (rewriting it
    would change nothing), so a day ends with at most one small file.
    """
    by_day: dict[int | None, list[DataFile]] = defaultdict(list)
    for f in files:
        day = f.partition[0] if len(f.partition) else None
        if day is None or day >= closed_before or f.file_size_in_bytes >= target_size:
            continue
        by_day[day].append(f)
    bins: list[Bin] = []
    for day, small in sorted(by_day.items(), key=lambda kv: kv[0] or 0):
        small.sort(key=lambda f: (f.file_size_in_bytes, f.file_path))
        current: list[DataFile] = []
        size = 0
        for f in small:
            if current and size + f.file_size_in_bytes > target_size:
                if len(current) > 1:
                    bins.append(Bin(day, tuple(current)))
                current, size = [], 0
            current.append(f)
            size += f.file_size_in_bytes
        if len(current) > 1:
            bins.append(Bin(day, tuple(current)))
    return bins


def is_compaction_output(path: str, sink: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith(day_layout.safe_sink(sink) + COMPACT_MARK) and name.endswith(".parquet")


def compact_bin(
    table: Table,
    dataset: DatasetInfo,
    bin: Bin,
    *,
    files: DataFileWriter,
    encoder: Encoder,
    sink: str,
    what: str,
    before_commit: Callable[[], None] | None = None,
) -> list[WrittenFile]:
    """Rewrite `bin` and commit the new files in its place; returns the files written.

    `before_commit` runs between the write and the commit (tests make a
    concurrent writer commit there). Raises pyiceberg's `CommitFailedException`
    or `ValidationException` when the commit lost (the new files are deleted).
    """
    schema = table.schema()
    target = write_schema(schema, [f.name for f in schema.fields])
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    data = scan.to_table([FileScanTask(f) for f in bin.files])
    if data.num_rows != bin.rows:
        raise IcebergError(
            f"{what}: compacting day {day_layout.day_label(bin.day)}: read {data.num_rows} rows "
            f"from {len(bin.files)} files whose manifests say {bin.rows}; nothing replaced",
            retryable=False,
        )
    data = data.select(target.names).cast(target)
    written: list[WrittenFile] = []
    try:
        written = _write(table, dataset, bin, data, target, files, encoder, sink, what)
        data_files = [w.data_file or files.data_file(table, w, what) for w in written]
        if before_commit is not None:
            before_commit()
        table.refresh()
        _commit(table, bin, data_files, sink)
    except BaseException:
        files.delete(written)
        raise
    return written


def _write(
    table: Table,
    dataset: DatasetInfo,
    bin: Bin,
    data: pa.Table,
    target: pa.Schema,
    files: DataFileWriter,
    encoder: Encoder,
    sink: str,
    what: str,
) -> list[WrittenFile]:
    base = table.location().rstrip("/")
    directory = f"{base}/{day_layout.day_directory(dataset.time_column, bin.day)}"
    stem = f"{day_layout.safe_sink(sink)}{COMPACT_MARK}{uuid.uuid4().hex}"
    written: list[WrittenFile] = []
    try:
        for rows in day_layout.plan_days(data, dataset.time_column, dataset.lookup_key):
            batches = day_layout.day_batches(data, rows, target)
            for index, chunks in enumerate(encoder.encode(target, batches)):
                location = f"{directory}/{day_layout.data_file_name(stem, len(written) + index)}"
                key = files.root.key(location, "write")
                size, tail = files.put(key, location, chunks)
                done = WrittenFile(location, key, rows.day, size, tail)
                written.append(attrs.evolve(done, data_file=files.data_file(table, done, what)))
    except BaseException:
        files.delete(written)
        raise
    return written


def _commit(table: Table, bin: Bin, data_files: Sequence[DataFile], sink: str) -> None:
    props: dict[str, Any] = {
        SUMMARY_MAINTENANCE: "compact",
        SUMMARY_SINK: sink,
        SUMMARY_DAYS: day_layout.day_label(bin.day),
        "hypaware.replaced-files": str(len(bin.files)),
    }
    # An overwrite that names the files it deletes: pyiceberg checks, on every
    # attempt, that each is still live in the parent (ValidationException if
    # not), and a rebase keeps whatever the newer parent added.
    with (
        ViewTransaction(table) as tx,
        tx.update_snapshot(snapshot_properties=props).overwrite() as rewrite,
    ):
        for f in bin.files:
            rewrite.delete_data_file(f)
        for f in data_files:
            rewrite.append_data_file(f)
    drop_unlisted_manifests(table, rewrite)
