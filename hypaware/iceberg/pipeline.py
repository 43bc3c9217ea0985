"""A batch's partitions read and laid out by day in one pipeline, so reading overlaps encoding.

Partitions are grouped into day clusters: partitions whose UTC days
(`PartitionRef.min_time` to `max_time`) overlap share a cluster, so no day
has rows in two clusters. As soon as every partition of a cluster is read,
its rows are planned (`day_layout.plan_days`) and each of its days handed to
`write_day` (a big day as two pieces, see `run_pipeline`), while the other
threads go on reading: a thread that comes free encodes a ready day before
it reads another partition. Each day is written exactly once, from the same
rows in the same order as if the whole batch had been read first, so file
names and contents do not depend on the timing.

Rows whose time is null belong to no day a partition's time range names;
they are gathered from every cluster (in cluster order) and written last as
the null day. Partitions without a time range make one cluster of the batch.
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
from collections.abc import Callable, Iterable, Sequence

import attrs
import pyarrow as pa

from hypaware.core.types import PartitionRef, RetryPartition
from hypaware.core.workers import Task, cores, run_tasks
from hypaware.iceberg import day_layout
from hypaware.iceberg.catalog import _brief
from hypaware.iceberg.schema import IncompatibleSchemaError, conform_table

__all__ = ["ReadBatch", "WriteDay", "day_clusters", "read_partition", "run_pipeline"]

_EPOCH = dt.date(1970, 1, 1)

# Most urgent first: finishing a day frees its rows; planning makes days ready.
_WRITE, _PLAN, _READ = 0, 1, 2

# Pieces a big day is written in: two encoders can share it, and a day makes
# at most twice the files it would whole.
_DAY_PIECES = 2

# A contiguous copy of a cluster's rows, made on first call.
Copy = Callable[[], pa.Table]
# write_day(the cluster's rows, the day's rows among them, their contiguous copy)
WriteDay = Callable[[pa.Table, day_layout.DayRows, Copy], None]


@attrs.define
class ReadBatch:
    """What was read of a batch: partitions read (in batch order), those set aside, rows."""

    ok: list[str]
    failed: list[RetryPartition]
    rows: int


def read_partition(part: PartitionRef, target: pa.Schema, what: str) -> pa.Table | RetryPartition:
    """The partition's rows conformed to `target`, or why it cannot be read."""
    where = f"{what}, partition {part.id!r}"
    try:
        # Whole, in one call where the cache can: a partition is held whole here
        # anyway, and batch-by-batch reading holds the interpreter lock for longer.
        return conform_table(part.read_all(), target, what=where)
    except IncompatibleSchemaError as exc:
        return RetryPartition(part.id, str(exc), retryable=False)
    except Exception as exc:  # unreadable, or out of memory in a cast: worth another try
        return RetryPartition(part.id, f"{where}: cannot read: {_brief(exc)}")


def _day(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value.astimezone(dt.UTC).date() - _EPOCH).days


def day_clusters(partitions: Sequence[PartitionRef]) -> list[list[int]]:
    """Indices of `partitions` grouped so that no UTC day spans two groups.

    Groups come in day order, members in batch order. Without a time range
    on every partition, the whole batch is one group.
    """
    spans: list[tuple[int, int, int]] = []
    for index, part in enumerate(partitions):
        if part.min_time is None or part.max_time is None:
            return [list(range(len(partitions)))] if partitions else []
        spans.append((_day(part.min_time), _day(part.max_time), index))
    spans.sort()
    clusters: list[list[int]] = []
    end = 0
    for lo, hi, index in spans:
        if clusters and lo <= end:
            clusters[-1].append(index)
            end = max(end, hi)
        else:
            clusters.append([index])
            end = hi
    return [sorted(c) for c in clusters]


def run_pipeline(
    partitions: Sequence[PartitionRef],
    target: pa.Schema,
    what: str,
    *,
    time_column: str,
    lookup_key: str | None,
    write_day: WriteDay,
    workers: int | None = None,
    split_rows: int | None = None,
) -> ReadBatch:
    """Read `partitions`, and hand every day of their rows to `write_day` (see the module).

    A day of more than `split_rows` rows is handed over as two pieces
    (`day_layout.split_day`), each a task of its own: seven equal days on two
    encoders would otherwise end with one core idle while the last day is
    encoded alone. The null day is never split.

    Unreadable partitions are set aside in the result, never raised. An
    error from `write_day` stops the pipeline and is raised once every
    thread has stopped.
    """
    pipeline = _Pipeline(
        partitions,
        target,
        what,
        time_column=time_column,
        lookup_key=lookup_key,
        write_day=write_day,
        split_rows=split_rows,
    )
    return pipeline.run(workers)


class _Pipeline:
    """One batch through `run_pipeline`: its day clusters, their rows as read, its null days.

    The read, plan and write steps run as tasks on several threads; the
    state they share is only touched under `_lock`.
    """

    def __init__(
        self,
        partitions: Sequence[PartitionRef],
        target: pa.Schema,
        what: str,
        *,
        time_column: str,
        lookup_key: str | None,
        write_day: WriteDay,
        split_rows: int | None,
    ) -> None:
        self._partitions = partitions
        self._target = target
        self._what = what
        self._time_column = time_column
        self._lookup_key = lookup_key
        self._write_day = write_day
        self._split_rows = split_rows
        self._clusters = day_clusters(partitions)
        # Rows read and waiting for the rest of their cluster; a cluster's are taken
        # out when it is planned, so a written day's rows are not kept to the end.
        self._waiting: dict[int, pa.Table] = {}
        self._rows_of: list[int | None] = [None] * len(partitions)
        self._failed: dict[int, RetryPartition] = {}
        self._unread = [len(c) for c in self._clusters]
        self._null_days: dict[int, tuple[pa.Table, day_layout.DayRows]] = {}
        self._lock = threading.Lock()

    def run(self, workers: int | None) -> ReadBatch:
        """Read and write the whole batch on up to `workers` threads (None: one a core)."""
        first = [
            Task(_READ, functools.partial(self._read, c, i))
            for c, members in enumerate(self._clusters)
            for i in members
        ]
        run_tasks(first, workers=cores() if workers is None else workers)
        self._write_null_day()
        return self._result()

    def _read(self, ci: int, index: int) -> Iterable[Task]:
        """Read one partition of cluster `ci`; the cluster's plan once it is the last."""
        result = read_partition(self._partitions[index], self._target, self._what)
        with self._lock:
            if isinstance(result, RetryPartition):
                self._failed[index] = result
            else:
                self._waiting[index] = result
                self._rows_of[index] = result.num_rows
            self._unread[ci] -= 1
            done = self._unread[ci] == 0
        return [Task(_PLAN, functools.partial(self._plan, ci))] if done else []

    def _plan(self, ci: int) -> Iterable[Task]:
        """Lay out cluster `ci`'s rows by day; a write for each day or piece of one."""
        with self._lock:
            taken = [self._waiting.pop(i) for i in self._clusters[ci] if i in self._waiting]
        tables = [t for t in taken if t.num_rows]
        if not tables:
            return []
        data = pa.concat_tables(tables)
        whole = _shared_copy(data)
        several = len(self._clusters) > 1
        tasks = []
        for rows in day_layout.plan_days(data, self._time_column, self._lookup_key):
            if rows.day is None and several:
                with self._lock:
                    self._null_days[ci] = (data, rows)
                continue
            split = self._split_rows
            big = split is not None and rows.rows > split and rows.day is not None
            for piece in day_layout.split_day(rows, _DAY_PIECES if big else 1):
                tasks.append(Task(_WRITE, functools.partial(self._write, data, piece, whole)))
        return tasks

    def _write(self, data: pa.Table, rows: day_layout.DayRows, whole: Copy) -> Iterable[Task]:
        """Hand one day (or piece of one) to `write_day`."""
        self._write_day(data, rows, whole)
        return []

    def _write_null_day(self) -> None:
        """Write the null days the clusters set aside, gathered, as the batch's one null day."""
        if not self._null_days:
            return
        # One null day for the whole batch, its rows gathered in cluster order.
        pieces = [
            pa.Table.from_batches(
                list(day_layout.day_batches(d, r, self._target)), schema=self._target
            )
            for _ci, (d, r) in sorted(self._null_days.items())
        ]
        nulls = pa.concat_tables(pieces)
        for rows in day_layout.plan_days(nulls, self._time_column, self._lookup_key):
            self._write_day(nulls, rows, _shared_copy(nulls))

    def _result(self) -> ReadBatch:
        """What was read: partitions read in batch order, those set aside, rows."""
        parts, rows_of = self._partitions, self._rows_of
        ok = [p.id for p, n in zip(parts, rows_of, strict=True) if n is not None]
        failed = [self._failed[i] for i in sorted(self._failed)]
        return ReadBatch(ok, failed, sum(n or 0 for n in rows_of))


def _shared_copy(data: pa.Table) -> Copy:
    """One contiguous copy of `data`, made on first need and shared by its days."""
    lock = threading.Lock()
    made: list[pa.Table] = []

    def whole() -> pa.Table:
        with lock:
            if not made:
                made.append(data.combine_chunks())
            return made[0]

    return whole
