"""The passes a `BlobSink` makes over a batch: one per UTC day, each fed its rows.

See `DayFeed`. The day of a row is that of the dataset's time column, as
`hypaware.blob.object_names` names the day directories.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hypaware.blob.object_names import day_number, day_order
from hypaware.core.errors import EncodeError
from hypaware.core.types import PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DayFeed", "PassCursor", "time_column_problem"]

# A partition whose min/max times span more days than this is read as if
# it had no hint: its days are learned from its rows.
_MAX_HINT_DAYS = 400


class PassCursor:
    """Which partition one pass is reading (to blame it if reading fails)."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: PartitionRef | None = None


class DayFeed:
    """Plans the passes over a batch and feeds each pass its rows (on the worker thread).

    One pass writes one day: it reads, in batch order, every partition that
    has (or may have) rows on that day and keeps only those rows. A partition
    is read fully each time, so after its first read its exact days are
    known; before that, its min/max times (when the cache gives them) say
    which passes need it. A partition without them is read in the first
    pass, whose day is that of the first row. Partitions that cover one day,
    the common case, are read once and their batches passed through whole.

    Passes of different days may run at once (each on its own thread, see
    `parallel_days`); the feed's bookkeeping is shared under a lock.
    """

    def __init__(self, column: str, parts: Sequence[PartitionRef]) -> None:
        self.column = column
        self.parts = list(parts)
        self.hints: dict[str, set[int] | None] = {p.id: _hint(p) for p in parts}
        self.seen: dict[str, set[int | None]] = {}
        self.done: dict[str, set[int | None]] = {p.id: set() for p in parts}
        self.rows: dict[str, int] = dict.fromkeys(self.hints, 0)
        self.current: PartitionRef | None = None
        self._lock = threading.Lock()

    @property
    def parallel_days(self) -> bool:
        """Whether passes may run side by side: every partition's days are known
        up front, so each pass has its day before it reads a row."""
        return all(hint is not None for hint in self.hints.values())

    def next_pass(
        self, busy: Collection[int | None] = ()
    ) -> tuple[list[int | None], list[PartitionRef]] | None:
        """The next pass's day (an empty list: the first row's) and partitions, or None.

        Days in `busy` (passes still running) are not handed out again until
        those passes end, so one day is never written by two passes at once.
        """
        with self._lock:
            return self._next_pass(busy)

    def _next_pass(
        self, busy: Collection[int | None]
    ) -> tuple[list[int | None], list[PartitionRef]] | None:
        unknown = {p.id for p in self.parts if p.id not in self.seen and self.hints[p.id] is None}
        todo = {p.id: self._todo(p) for p in self.parts}
        days = set().union(*todo.values()) - set(busy)
        if days:
            day = min(days, key=day_order)
            parts = [p for p in self.parts if day in todo[p.id] or p.id in unknown]
            return [day], parts
        if unknown:
            return [], [p for p in self.parts if p.id in unknown]
        return None

    def _todo(self, part: PartitionRef) -> set[int | None]:
        known = self.seen.get(part.id)
        days: set[int | None] = set(known if known is not None else self.hints[part.id] or ())
        return days - self.done[part.id]

    def rows_of(
        self,
        parts: Sequence[PartitionRef],
        target: list[int | None],
        cursor: PassCursor | None = None,
    ) -> Iterator[Any]:
        """The rows of day ``target[0]`` (set from the first row if empty) in `parts`."""
        import pyarrow.compute as pc

        for part in parts:
            self.current = part
            if cursor is not None:
                cursor.current = part
            seen: set[int | None] = set()
            reader = part.open()
            try:
                for batch in reader:
                    if not batch.num_rows:
                        continue
                    keys = self.day_keys(batch)
                    present = set(pc.unique(keys).to_pylist())
                    seen |= present
                    if not target:
                        target.append(keys[0].as_py())
                    day = target[0]
                    if present == {day}:
                        out = batch
                    elif day not in present:
                        continue
                    elif day is None:
                        out = batch.filter(pc.is_null(keys))
                    else:
                        out = batch.filter(pc.equal(keys, day))
                    with self._lock:
                        self.rows[part.id] += out.num_rows
                    yield out
                    # Not kept while the reader makes the next batch: the
                    # encoder holds what it still needs.
                    del batch, out, keys
            finally:
                reader.close()
            with self._lock:
                self.seen[part.id] = seen
                if target:
                    self.done[part.id].add(target[0])
        self.current = None
        if cursor is not None:
            cursor.current = None

    def day_keys(self, batch: pa.RecordBatch) -> pa.Array:
        """Each row's UTC day number (null where the time is null)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        problem = time_column_problem(batch.schema, self.column, "partition's")
        if problem is not None:
            raise EncodeError(problem)
        col = batch.column(self.column)
        typ = col.type
        if pa.types.is_timestamp(typ):
            # Zoned timestamps hold UTC instants; dropping the zone keeps those
            # values, so the date below is the UTC day, not the zone's.
            if typ.tz is not None:
                col = col.cast(pa.timestamp(typ.unit))
            col = pc.cast(col, pa.date32())
        elif pa.types.is_date64(typ):
            col = pc.cast(col, pa.date32())
        return col.cast(pa.int32())


def time_column_problem(schema: pa.Schema, column: str, whose: str) -> str | None:
    """Why rows of `schema` cannot be laid out by day (None if they can)."""
    import pyarrow as pa

    if column not in schema.names:
        return f"time column {column!r} is not in the {whose} columns"
    typ = schema.field(column).type
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        return None
    return f"time column {column!r} has type {typ}; a timestamp or date is needed"


def _hint(part: PartitionRef) -> set[int] | None:
    """The days a partition's min/max times span; None if unknown or too many."""
    if part.min_time is None or part.max_time is None:
        return None
    first, last = day_number(part.min_time), day_number(part.max_time)
    if last < first or last - first > _MAX_HINT_DAYS:
        return None
    return set(range(first, last + 1))
