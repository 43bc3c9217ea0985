"""A query's scope built from the arguments of `hypaware.query` and checked against the dataset.

`_filters` makes the `QueryScope` (`hypaware.core.query_scope`: columns,
time range, lookup keys and a row filter bound to the dataset) that every
source is handed, raising `QueryInputError` for what the dataset cannot
answer (an unknown column, a malformed time or filter, keys of the wrong
type), the same for every sink kind, before any data is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from hypaware.core.errors import FilterError
from hypaware.core.filter import Filter, parse_filter, parse_time
from hypaware.core.filter_bind import bind_filter
from hypaware.core.query_scope import QueryScope
from hypaware.core.registry import did_you_mean
from hypaware.core.types import DatasetInfo
from hypaware.querying.errors import QueryInputError

__all__ = ["Filters", "QueryScope", "TimeLike"]

TimeLike = datetime | date | str

# The name queries used before `QueryScope`; it is not a filter but a query's scope.
Filters = QueryScope


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
    return QueryScope(wanted, start, end, key_values, bound)


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
