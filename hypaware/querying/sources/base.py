"""What every query source shares: the `SinkView` a sink answers with, rows shaped to the query.

A sink source's `view` returns a `SinkView`: which cache partitions the sink
claims, and a reader of its rows. `_filtered` keeps the rows a query's
filter passes, `_restricted` shapes rows a sink already filtered, both as
the query's columns; `conform` casts them to the dataset's types.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hypaware.cache.protocol import ExportFloor
from hypaware.core.types import PartitionRef
from hypaware.querying.filters import Filters

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = ["SinkView"]

FloorReader = Callable[[], ExportFloor | None]


class SinkView(abc.ABC):
    """One consistent view of a sink's data for one query."""

    part: str

    @abc.abstractmethod
    def claims(self, part: PartitionRef) -> bool:
        """Whether the sink holds every row of cache partition `part`, for this query."""

    @abc.abstractmethod
    def reader(self, filters: Filters, cache_side: Sequence[PartitionRef]) -> pa.RecordBatchReader:
        """The sink's rows matching `filters`, leaving out the partitions in `cache_side`."""

    def describe(self) -> dict[str, Any]:
        """What the view will read, for `QueryPlan`."""
        return {}


def _acked(floor: ExportFloor | None, part: PartitionRef) -> bool:
    return floor is not None and not floor.needs(part)


def _filtered(
    batch: pa.RecordBatch, expr: pc.Expression | None, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of `batch` matching `expr`, as `target`'s columns; nothing when none match.

    Evaluated on the caller's thread (arrow may use its own threads for the
    work, but never holds Python objects there).
    """
    import pyarrow as pa

    if not batch.num_rows:
        return
    if expr is None:
        yield conform(batch.select(columns), target)
        return
    table = pa.Table.from_batches([batch]).filter(expr)
    for out in table.select(columns).to_batches():
        if out.num_rows:
            yield conform(out, target)


def _restricted(reader: pa.RecordBatchReader, target: pa.Schema) -> pa.RecordBatchReader:
    """`reader`'s rows as `target`'s columns and types (the sink already applied the filter)."""
    import pyarrow as pa

    def batches() -> Iterator[pa.RecordBatch]:
        with reader:
            for batch in reader:
                table = pa.Table.from_batches([batch])
                for out in table.select(target.names).to_batches():
                    yield conform(out, target)

    return pa.RecordBatchReader.from_batches(target, batches())


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """`batch` with `target`'s column types (sinks may widen or rename types on the way)."""
    import pyarrow as pa

    if batch.schema.equals(target):
        return batch
    arrays = [
        col if col.type == field.type else col.cast(field.type)
        for col, field in zip(batch.columns, target, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=target)
