"""A query's restrictions: checked against the dataset, then applied by every source.

`Filters` holds one query's columns, time range, lookup keys and row filter
(`where`, a filter tree bound to the dataset), with the helpers the sources
use to prune (`overlaps`, `days`) and to filter rows: `tree` (everything as
one filter tree, which the Iceberg source and third-party sinks compile for
their engine) and `expression` (the same tree as a pyarrow expression, for
the cache and Parquet files). `_filters` builds it from the arguments of
`hypaware.query`, raising `QueryInputError` for what the dataset cannot
answer (an unknown column, a malformed time or filter, keys of the wrong
type), the same for every sink kind, before any data is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.errors import FilterError
from hypaware.core.filter import Compare, Filter, IsIn, all_of, columns_of, parse_filter, parse_time
from hypaware.core.filter_bind import bind_filter, to_arrow
from hypaware.core.registry import did_you_mean
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.errors import QueryInputError

if TYPE_CHECKING:
    import pyarrow.compute as pc

__all__ = ["Filters", "TimeLike"]

TimeLike = datetime | date | str

# Listing day by day beats listing the whole dataset up to about this many days.
_MAX_LISTED_DAYS = 366


@attrs.frozen
class Filters:
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


def _filters(
    info: DatasetInfo,
    columns: Iterable[str] | str | None,
    since: TimeLike | None,
    until: TimeLike | None,
    keys: Iterable[Any] | Any | None,
    where: Filter | str | None,
) -> Filters:
    import pyarrow as pa

    schema = info.schema
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    wanted = tuple(columns) if columns is not None else tuple(schema.names)
    if not wanted:
        raise QueryInputError("columns: name at least one column")
    for column in wanted:
        if column not in schema.names:
            raise QueryInputError(
                f"columns: dataset {info.name!r} has no column {column!r}"
                f"{did_you_mean(column, schema.names)} (columns: {', '.join(schema.names)})"
            )
    try:
        start = parse_time(since, what="since") if since is not None else None
        end = parse_time(until, what="until") if until is not None else None
    except FilterError as exc:
        raise QueryInputError(str(exc)) from exc
    if start is not None and end is not None and end < start:
        raise QueryInputError(f"until ({end.isoformat()}) is before since ({start.isoformat()})")
    key_values: tuple[Any, ...] | None = None
    if keys is not None:
        if info.lookup_key is None:
            raise QueryInputError(f"keys: dataset {info.name!r} has no lookup key")
        if isinstance(keys, str | bytes | int) or not isinstance(keys, Iterable):
            keys = [keys]
        key_values = tuple(keys)
        field = schema.field(info.lookup_key)
        try:
            key_values = tuple(pa.array(key_values).cast(field.type).to_pylist())
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise QueryInputError(
                f"keys: not values of lookup key {info.lookup_key!r} ({field.type}): {exc}"
            ) from exc
    try:
        bound = _where(where, info)
    except FilterError as exc:
        raise QueryInputError(str(exc)) from exc
    return Filters(wanted, start, end, key_values, bound)


def _where(where: Filter | str | None, info: DatasetInfo) -> Filter | None:
    if where is None:
        return None
    if isinstance(where, str):
        where = parse_filter(where)
    elif not isinstance(where, Filter):
        raise QueryInputError(
            "where: expected a filter (hypaware.col(...)) or its text form "
            f'("tokens > 10"), got {type(where).__name__}'
        )
    return bind_filter(where, info.schema, dataset=info.name)
