"""The writer's layout: rows grouped by UTC day of the time column, sorted by lookup key
then time within a day, and deterministic data file names.

Rows whose time is null form their own group (day ``None``): Iceberg's day
transform maps null to the null partition, so they are written to a
``<column>_day=null`` directory and registered in that partition, never
dropped.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from hypaware.core.paths import encode_segment

__all__ = [
    "DayRows",
    "batch_digest",
    "data_file_stem",
    "day_batches",
    "day_directory",
    "day_label",
    "piece_file_index",
    "plan_days",
    "split_day",
]

# Rows taken at a time when the sorted copy is made: bounds the memory of
# the copy to one chunk while keeping take() efficient.
TAKE_CHUNK_ROWS = 64 * 1024
_EPOCH = dt.date(1970, 1, 1)


@attrs.frozen
class DayRows:
    """The rows of one day, in output order (lookup key, then time).

    Either `spans`: row ranges ``(offset, length)`` of the batch's table that
    are each already in order and follow each other in order (no copy is
    needed), or `order`: row indices of the table, in order (a sorted copy is
    taken). `piece` and `pieces` say which part of its day these rows are
    when the day is written in several (`split_day`).
    """

    day: int | None
    rows: int
    spans: tuple[tuple[int, int], ...] = ()
    order: pa.Array | None = None
    piece: int = 0
    pieces: int = 1


# File indices of one piece of a day: piece p's files are numbered from p * this.
_PIECE_STRIDE = 10_000


def split_day(rows: DayRows, pieces: int) -> list[DayRows]:
    """The day's rows as `pieces` consecutive runs of about equal size, each its own file(s).

    So that two encoders can share one big day. The pieces keep the day's
    output order: piece 0's rows come first. Depends only on the rows and
    `pieces`, never on timing, so file names stay the same on a retry.
    """
    pieces = max(1, min(pieces, rows.rows))
    if pieces == 1:
        return [rows]
    cuts = [rows.rows * i // pieces for i in range(pieces + 1)]
    out = []
    for i, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        order = rows.order.slice(lo, hi - lo) if rows.order is not None else None
        spans = _span_slice(rows.spans, lo, hi) if order is None else ()
        out.append(DayRows(rows.day, hi - lo, spans, order, piece=i, pieces=pieces))
    return out


def _span_slice(spans: Sequence[tuple[int, int]], lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """Rows ``[lo, hi)`` of the day, counted along `spans`, as spans of the table."""
    out = []
    seen = 0
    for offset, length in spans:
        start, end = max(lo, seen), min(hi, seen + length)
        if start < end:
            out.append((offset + start - seen, end - start))
        seen += length
        if seen >= hi:
            break
    return tuple(out)


def piece_file_index(piece: int, index: int) -> int:
    """The file index (see `data_file_name`) of a piece's `index`-th file."""
    if index >= _PIECE_STRIDE:
        raise ValueError(f"a piece of a day cannot have more than {_PIECE_STRIDE} files")
    return piece * _PIECE_STRIDE + index


def day_numbers(column: pa.ChunkedArray | pa.Array) -> pa.Array | pa.ChunkedArray:
    """Days since the epoch (UTC) of a timestamp or date column; nulls stay null."""
    if pa.types.is_timestamp(column.type):
        if column.type.tz is not None:
            # Dropping the zone keeps the UTC instant, which is what Iceberg's day uses.
            column = column.cast(pa.timestamp(column.type.unit))
        column = column.cast(pa.date32())
    elif pa.types.is_date64(column.type):
        column = column.cast(pa.date32())
    return column.cast(pa.int32())


def _combined(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _key_ranks(key: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Ranks standing in for the key values in a sort: integers sort much faster than strings."""
    encoded = pc.dictionary_encode(_combined(key))
    ranks = pc.rank(encoded.dictionary, sort_keys="ascending", tiebreaker="first")
    return ranks.take(encoded.indices)


def _sort_order(
    days: pa.Array | None, key: pa.Array | pa.ChunkedArray | None, micros: pa.Array
) -> pa.Array:
    columns: dict[str, pa.Array] = {}
    if days is not None:
        columns["day"] = days
    if key is not None:
        columns["key"] = _key_ranks(key)
    columns["time"] = micros
    keyed = pa.table(columns)
    return pc.sort_indices(keyed, sort_keys=[(name, "ascending", "at_end") for name in columns])


# The fast path compares pieces in Python; these key types order the same way there.
def _orderable_in_python(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_integer(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
    )


_NULL_DAY = 2**31 - 1
_NULL_TIME = 2**63 - 1


def plan_days(table: pa.Table, time_column: str, lookup_key: str | None) -> list[DayRows]:
    """Group the rows of `table` by UTC day (null last) and order each day by key then time.

    Rows usually arrive as runs that are already in order: a cache partition
    holds one conversation, in time order. Those runs are found with a few
    vectorised comparisons, and when a day's runs do not overlap they are
    written in run order without copying a row. Otherwise (or for rows with a
    null lookup key) the day is sorted.
    """
    n = table.num_rows
    if n == 0:
        return []
    time_col = table.column(time_column)
    days = _combined(day_numbers(time_col)).fill_null(_NULL_DAY)
    micros = _combined(
        time_col.cast(pa.int64())
        if pa.types.is_timestamp(time_col.type)
        else day_numbers(time_col).cast(pa.int64())
    ).fill_null(_NULL_TIME)
    key = table.column(lookup_key) if lookup_key is not None else None
    fast = key is None or (key.null_count == 0 and _orderable_in_python(key.type))
    if fast:
        plan = _plan_runs(days, _combined(key) if key is not None else None, micros)
        if plan is not None:
            return plan
    order = _grouped_order(days, key, micros)
    if order is None:
        order = _sort_order(days, key, micros)
    return _split_sorted(days.take(order), order)


# Below this many rows the grouping's fixed cost loses to a sort (20k keys: 0.46 ms
# against 0.28 for 1.4k rows, 24 against 21 for 150k; 81 against 133 for 1M).
_GROUPED_MIN_ROWS = 500_000


def _grouped_order(
    days: pa.Array,
    key: pa.ChunkedArray | pa.Array | None,
    micros: pa.Array,
    *,
    min_rows: int | None = None,
) -> pa.Array | None:
    """The order by day, key and time, found by grouping rows that arrive in time order.

    A cache's partitions are read in time order, so a (day, key) group's
    rows, kept in arrival order, are already in time order: a hash grouping
    and a sort of the distinct (day, key) pairs give the same order as
    sorting every row, at 0.6 of the cost for 1M rows and 20k keys. None
    for fewer than `_GROUPED_MIN_ROWS` rows, rows not in time order, or a
    key type the grouping is not used for.
    """
    n = len(micros)
    if n < max(2, _GROUPED_MIN_ROWS if min_rows is None else min_rows) or (
        key is not None and not _orderable_in_python(key.type)
    ):
        return None
    if not pc.all(pc.greater_equal(micros.slice(1), micros.slice(0, n - 1))).as_py():
        return None
    columns: dict[str, Any] = {"day": days}
    if key is not None:
        columns["key"] = key
    columns["row"] = _iota(n)
    names = [name for name in columns if name != "row"]
    # Without threads the grouping is one ordered pass over the rows, so each
    # group lists its rows in input order: what makes this a stable sort (the
    # property test holds it to the sort's order).
    groups = pa.table(columns).group_by(names, use_threads=False).aggregate([("row", "list")])
    order = pc.sort_indices(groups, sort_keys=[(name, "ascending", "at_end") for name in names])
    flat = pc.list_flatten(groups.column("row_list").take(order))
    return flat.combine_chunks() if isinstance(flat, pa.ChunkedArray) else flat


def _split_sorted(sorted_days: pa.Array, order: pa.Array) -> list[DayRows]:
    counts = pc.value_counts(sorted_days)
    out: list[DayRows] = []
    start = 0
    for value, count in sorted(
        zip(counts.field(0).to_pylist(), counts.field(1).to_pylist(), strict=True)
    ):
        out.append(
            DayRows(
                day=None if value == _NULL_DAY else value,
                rows=count,
                order=order.slice(start, count),
            )
        )
        start += count
    return out


def _iota(n: int) -> pa.Array:
    """0, 1, ..., n - 1, made natively (from a Python range it costs 80 ns a row)."""
    return pc.indices_nonzero(pa.repeat(pa.scalar(True), n)).cast(pa.int64())


def _plan_runs(days: pa.Array, key: pa.Array | None, micros: pa.Array) -> list[DayRows] | None:
    n = len(days)
    same_day = pc.equal(days.slice(1), days.slice(0, n - 1))
    later = pc.greater_equal(micros.slice(1), micros.slice(0, n - 1))
    if key is not None:
        k1, k0 = key.slice(1), key.slice(0, n - 1)
        in_order = pc.or_(pc.greater(k1, k0), pc.and_(pc.equal(k1, k0), later))
    else:
        in_order = later
    breaks = pc.indices_nonzero(pc.invert(pc.and_(same_day, in_order))).cast(pa.int64())
    # Not run-shaped: a sort is cheaper than comparing this many runs. Runs are
    # handled in Python (about 1.3 us each), a sort costs about 0.2 us a row.
    if len(breaks) > n // 8:
        return None
    starts = pa.concat_arrays([pa.array([0], pa.int64()), pc.add(breaks, 1)])
    ends = pa.concat_arrays([starts.slice(1), pa.array([n], pa.int64())])
    last = pc.subtract(ends, 1)
    run_days = days.take(starts).to_pylist()
    first_time, last_time = micros.take(starts).to_pylist(), micros.take(last).to_pylist()
    if key is not None:
        first_key, last_key = key.take(starts).to_pylist(), key.take(last).to_pylist()
    else:
        first_key = last_key = [0] * len(run_days)
    by_day: dict[int, list[tuple[Any, int, Any, int, int, int]]] = {}
    for i, (day, start, end) in enumerate(
        zip(run_days, starts.to_pylist(), ends.to_pylist(), strict=True)
    ):
        by_day.setdefault(day, []).append(
            (first_key[i], first_time[i], last_key[i], last_time[i], start, end - start)
        )
    out: list[DayRows] = []
    for day in sorted(by_day):
        runs = sorted(by_day[day], key=lambda r: (r[0], r[1]))
        label = None if day == _NULL_DAY else day
        rows = sum(r[5] for r in runs)
        disjoint = all(
            (prev[2], prev[3]) <= (nxt[0], nxt[1]) for prev, nxt in itertools.pairwise(runs)
        )
        if disjoint:
            out.append(DayRows(label, rows, spans=tuple((r[4], r[5]) for r in runs)))
            continue
        # Runs that overlap (two partitions of one conversation in the same hours): sort the
        # day. Its rows are found by one comparison, not gathered run by run: a pass of 10k
        # rows can hold a thousand runs, and a slice each cost more than the sort.
        if len(by_day) == 1:
            indices = _iota(n)
        else:
            indices = pc.indices_nonzero(pc.equal(days, day)).cast(pa.int64())
        sub_key = key.take(indices) if key is not None else None
        sub_order = _sort_order(None, sub_key, micros.take(indices))
        out.append(DayRows(label, rows, order=indices.take(sub_order)))
    return out


def day_batches(
    table: pa.Table,
    rows: DayRows,
    schema: pa.Schema,
    *,
    whole: Callable[[], pa.Table] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The day's rows in output order, as batches of `schema` of about `TAKE_CHUNK_ROWS` rows.

    Spans are sliced from the table's batches without copying; runs of small
    spans (a few rows of one conversation each) are gathered into one batch,
    so the encoder gets batches worth encoding. A sort order is taken in
    chunks, so the sorted copy never holds more than one chunk.
    """
    if rows.order is not None:
        source, order = _gather_source(table, rows.order, whole, piece=rows.pieces > 1)
        for offset in range(0, len(order), TAKE_CHUNK_ROWS):
            chunk = source.take(order.slice(offset, TAKE_CHUNK_ROWS))
            for batch in chunk.to_batches():
                yield _with_schema(batch, schema)
        return
    batches = table.to_batches()
    starts = list(itertools.accumulate((b.num_rows for b in batches), initial=0))
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for offset, length in rows.spans:
        for piece in _slices(batches, starts, offset, length):
            if piece.num_rows >= TAKE_CHUNK_ROWS and not pending:
                yield _with_schema(piece, schema)
                continue
            pending.append(piece)
            pending_rows += piece.num_rows
            if pending_rows >= TAKE_CHUNK_ROWS:
                yield _gather(pending, schema)
                pending, pending_rows = [], 0
    if pending:
        yield _gather(pending, schema)


def _gather_source(
    table: pa.Table,
    order: pa.Array,
    whole: Callable[[], pa.Table] | None,
    *,
    piece: bool = False,
) -> tuple[pa.Table, pa.Array]:
    """A contiguous table to take the day's rows from, and the order rebased onto it.

    A take from a table of many chunks concatenates them on every call, so
    the rows are taken from one contiguous copy: of the day's own stretch of
    the table when its rows lie close together (time-ordered input), else of
    the whole table, made once and shared by the days (`whole`). A `piece`
    of a split day uses the shared copy: the piece's rows, in key order,
    stretch over the whole day, which each of its pieces would copy again.
    """
    if len(order) == 0:
        return table, order
    lo, hi = (v.as_py() for v in pc.min_max(order).values())
    stretch = hi - lo + 1
    if whole is None or (stretch <= 2 * len(order) and not piece):
        region = table.slice(lo, stretch)
        if region.num_columns and region.column(0).num_chunks > 1:
            region = region.combine_chunks()
        return region, pc.subtract(order, pa.scalar(lo, order.type))
    return whole(), order


def _slices(
    batches: Sequence[pa.RecordBatch], starts: Sequence[int], offset: int, length: int
) -> Iterator[pa.RecordBatch]:
    """Rows ``[offset, offset + length)`` of the table made of `batches`, as batch slices."""
    index = bisect.bisect_right(starts, offset) - 1
    while length > 0:
        batch = batches[index]
        local = offset - starts[index]
        take = min(length, batch.num_rows - local)
        if take > 0:
            yield batch.slice(local, take)
        offset += take
        length -= take
        index += 1


def _gather(pieces: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    if len(pieces) == 1:
        return _with_schema(pieces[0], schema)
    # Through a Table: far faster than pa.concat_batches for many small pieces.
    table = pa.Table.from_batches(pieces).combine_chunks()
    return _with_schema(table.to_batches()[0], schema)


def _with_schema(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema is schema or batch.schema.equals(schema, check_metadata=True):
        return batch
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def day_label(day: int | None) -> str:
    """``2026-03-01`` for a day number, ``null`` for the null partition.

    Days outside the calendar Python knows (years 1-9999) are written as
    their number, so no row is refused for an extreme time.
    """
    if day is None:
        return "null"
    try:
        return (_EPOCH + dt.timedelta(days=day)).isoformat()
    except OverflowError:
        return str(day)


def day_directory(time_column: str, day: int | None) -> str:
    """``data/<column>_day=<label>``, Hive-style, as Iceberg writers lay out day partitions."""
    return f"data/{encode_segment(f'{time_column}_day')}={day_label(day)}"


def batch_digest(batch_id: str, partition_ids: Iterable[str]) -> str:
    """The identity of a batch: its id and the exact set of partitions it holds (sha256 hex)."""
    h = hashlib.sha256()
    h.update(batch_id.encode())
    for pid in sorted(partition_ids):
        h.update(b"\0")
        h.update(pid.encode())
    return h.hexdigest()


def data_file_stem(sink: str, dataset: str, digest: str) -> str:
    """The start of every data file name of one batch: the same on every retry of it.

    From the sink, the dataset and the batch's digest, so two writers (or two
    sinks) never pick the same name, and a retry of a batch overwrites its
    own leftovers instead of adding files.
    """
    h = hashlib.sha256(f"{sink}\0{dataset}\0{digest}".encode()).hexdigest()[:20]
    return f"{safe_sink(sink)}-{h}"


def safe_sink(sink: str) -> str:
    """The sink's name as data file names start with: letters, digits, ``-`` and ``_``."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in sink)[:40]


def data_file_name(stem: str, index: int) -> str:
    return f"{stem}-{index:05d}.parquet"


def owned_by(name: str, stem: str) -> bool:
    """Whether `name` (a file name) is one of the files of the batch with `stem`."""
    return name.startswith(stem + "-") and name.endswith(".parquet")


def partition_summary(partition_ids: Sequence[str], limit: int) -> str | None:
    """The partition ids joined by commas, or None if that would pass `limit` characters."""
    text = ",".join(partition_ids)
    return text if len(text) <= limit else None
