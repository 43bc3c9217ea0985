"""A query's restrictions: checked against the dataset, then applied by every source.

`Filters` holds one query's columns, time range, lookup keys and row filter
(`where`), with the helpers the sources use to prune (`overlaps`, `days`) and
to filter rows (`expression`). `_filters` builds it from the arguments of
`hypaware.query`, raising `QueryInputError` for what the dataset cannot
answer (an unknown column, a malformed time, keys of the wrong type).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.registry import did_you_mean
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.errors import QueryInputError
from hypaware.querying.expr import parse_time, parse_where

if TYPE_CHECKING:
    import pyarrow as pa
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
    where: pc.Expression | None = None

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

    def expression(self, info: DatasetInfo) -> pc.Expression | None:
        """Time range, keys and `where` as one pyarrow expression over the dataset."""
        import pyarrow as pa
        import pyarrow.compute as pc

        parts: list[pc.Expression] = []
        field = info.schema.field(info.time_column)
        column = pc.field(info.time_column)
        if self.since is not None:
            parts.append(column >= _time_scalar(self.since, field.type))
        if self.until is not None:
            parts.append(column < _time_scalar(self.until, field.type))
        if self.keys is not None:
            assert info.lookup_key is not None
            key_type = info.schema.field(info.lookup_key).type
            parts.append(pc.field(info.lookup_key).isin(pa.array(self.keys, type=key_type)))
        if self.where is not None:
            parts.append(self.where)
        if not parts:
            return None
        expr = parts[0]
        for p in parts[1:]:
            expr = expr & p
        return expr


def _time_scalar(when: datetime, typ: pa.DataType) -> pa.Scalar:
    import pyarrow as pa

    if pa.types.is_date(typ):
        return pa.scalar(when.date(), type=typ)
    if pa.types.is_timestamp(typ) and typ.tz is None:
        return pa.scalar(when.astimezone(UTC).replace(tzinfo=None), type=typ)
    return pa.scalar(when, type=typ)


def _filters(
    info: DatasetInfo,
    columns: Iterable[str] | str | None,
    since: TimeLike | None,
    until: TimeLike | None,
    keys: Iterable[Any] | Any | None,
    where: pc.Expression | str | None,
) -> Filters:
    import pyarrow as pa
    import pyarrow.compute as pc

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
    start = parse_time(since, what="since") if since is not None else None
    end = parse_time(until, what="until") if until is not None else None
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
    if isinstance(where, str):
        where = parse_where(where, schema)
    elif where is not None:
        if not isinstance(where, pc.Expression):
            raise QueryInputError(
                f"where: expected a pyarrow.compute.Expression or a string, "
                f"got {type(where).__name__}"
            )
        _check_expression(where, info)
    return Filters(wanted, start, end, key_values, where)


def _check_expression(expr: pc.Expression, info: DatasetInfo) -> None:
    import re

    import pyarrow as pa

    try:
        info.schema.empty_table().filter(expr)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        text = str(exc)
        m = re.search(r"FieldRef\.Name\(([^)]*)\)", text)
        if m:
            name = m.group(1)
            raise QueryInputError(
                f"where: dataset {info.name!r} has no column {name!r}"
                f"{did_you_mean(name, info.schema.names)} "
                f"(columns: {', '.join(info.schema.names)})"
            ) from exc
        raise QueryInputError(f"where: {text.splitlines()[0] if text else exc!r}") from exc
