"""A query's scope: its columns, time range, lookup keys and row filter, checked and bound.

`QueryScope` is what every query source is handed (`hypaware.core.query_source`):
the helpers prune (`overlaps`, `days`) and filter rows: `tree` (everything
as one filter tree, which the Iceberg source and third-party sinks compile
for their engine) and `expression` (the same tree as a pyarrow expression,
for the cache and Parquet files). `hypaware.query` builds it from its
arguments and checks them against the dataset before any data is read.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.filter import Compare, Filter, IsIn, all_of, columns_of
from hypaware.core.filter_bind import to_arrow
from hypaware.core.types import DatasetInfo, PartitionRef

if TYPE_CHECKING:
    import pyarrow.compute as pc

__all__ = ["QueryScope"]

# Listing day by day beats listing the whole dataset up to about this many days.
_MAX_LISTED_DAYS = 366


@attrs.frozen
class QueryScope:
    """A query's restrictions, checked against the dataset: times are aware UTC datetimes."""

    columns: tuple[str, ...]
    since: datetime | None = None
    until: datetime | None = None
    keys: tuple[Any, ...] | None = None
    where: Filter | None = None

    def overlaps(self, part: PartitionRef) -> bool:
        """Whether `part` may hold rows in [since, until) (from its time range)."""
        if self.since is not None and part.max_time is not None and part.max_time < self.since:
            return False
        return not (
            self.until is not None and part.min_time is not None and part.min_time >= self.until
        )

    def day_range(self) -> tuple[date | None, date | None]:
        """The first and last UTC day of [since, until); None where open-ended."""
        first = self.since.date() if self.since is not None else None
        last = (self.until - timedelta(microseconds=1)).date() if self.until is not None else None
        return first, last

    def days(self) -> list[str] | None:
        """The UTC days [since, until) spans, or None when open-ended or long."""
        first, last = self.day_range()
        if first is None or last is None:
            return None
        if last < first:
            return []
        count = (last - first).days + 1
        if count > _MAX_LISTED_DAYS:
            return None
        return [(first + timedelta(days=i)).isoformat() for i in range(count)]

    def tree(self, info: DatasetInfo) -> Filter | None:
        """Time range, keys and `where` as one bound filter tree over the dataset."""
        return all_of(
            Compare(info.time_column, ">=", self.since) if self.since is not None else None,
            Compare(info.time_column, "<", self.until) if self.until is not None else None,
            IsIn(_key(info), self.keys) if self.keys is not None else None,
            self.where,
        )

    def expression(self, info: DatasetInfo) -> pc.Expression | None:
        """`tree` as a pyarrow expression (for the cache and Parquet files)."""
        tree = self.tree(info)
        return to_arrow(tree, info.schema) if tree is not None else None

    def read_columns(self, info: DatasetInfo) -> list[str]:
        """The query's columns and those its filter reads, in the schema's order."""
        tree = self.tree(info)
        wanted = set(self.columns) | (columns_of(tree) if tree is not None else set())
        return [n for n in info.schema.names if n in wanted]


def _key(info: DatasetInfo) -> str:
    assert info.lookup_key is not None
    return info.lookup_key
