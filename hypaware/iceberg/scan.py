"""Scans: a dataset's rows read back from its Iceberg table.

`row_filter` turns a time range and lookup keys into the pyiceberg filter
that prunes by day partition and by file and row-group statistics;
`scan_table` streams a table's rows with it (see
`IcebergTableFormat.scan`). The query sources use `row_filter` too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    LessThan,
)
from pyiceberg.table import Table
from pyiceberg.types import DateType, TimestamptzType

from hypaware.core.types import DatasetInfo
from hypaware.iceberg.catalog import IcebergError, _brief
from hypaware.iceberg.schema import normalize_schema

__all__ = ["row_filter", "scan_table"]


def scan_table(
    table: Table | None,
    dataset: DatasetInfo,
    what: str,
    *,
    columns: Iterable[str] | None = None,
    filter: Any = None,
    since: dt.datetime | dt.date | None = None,
    until: dt.datetime | dt.date | None = None,
    keys: Iterable[Any] | None = None,
) -> pa.RecordBatchReader:
    """Stream `table`'s rows (None: a table not registered yet, scanned as empty).

    The arguments are those of `IcebergTableFormat.scan`; `what` names the
    table in errors.
    """
    wanted = list(columns) if columns is not None else None
    if table is None:
        schema = normalize_schema(dataset.schema)
        if wanted is not None:
            schema = pa.schema([schema.field(c) for c in wanted])
        return pa.RecordBatchReader.from_batches(schema, [])

    expr = row_filter(table, dataset, since, until, keys)
    residual: pc.Expression | None = None
    if isinstance(filter, pc.Expression):
        residual = filter
    elif isinstance(filter, (BooleanExpression, str)):
        expr = And(expr, filter) if not isinstance(filter, str) else And(expr, _parse(filter))
    elif filter is not None:
        raise TypeError(
            "filter must be a pyiceberg expression, its string form, or a "
            f"pyarrow.compute.Expression; got {type(filter).__name__}"
        )
    selected = ("*",) if residual is not None or wanted is None else tuple(wanted)
    try:
        reader = table.scan(row_filter=expr, selected_fields=selected).to_arrow_batch_reader()
    except Exception as exc:
        raise IcebergError(f"{what}: cannot scan the table: {_brief(exc)}") from exc
    if residual is None:
        return reader
    return _filtered(reader, residual, wanted)


def _time_literal(value: dt.datetime | dt.date, column_type: Any) -> str:
    if isinstance(column_type, DateType):
        day = value.date() if isinstance(value, dt.datetime) else value
        return day.isoformat()
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    value = value.astimezone(dt.UTC)
    if isinstance(column_type, TimestamptzType):
        return value.isoformat()
    return value.replace(tzinfo=None).isoformat()


# pyiceberg's predicates are pydantic models whose generated __init__ mypy misreads;
# their documented call is Predicate(column_name, value).
_AtLeast: Any = GreaterThanOrEqual
_Below: Any = LessThan
_OneOf: Any = In


def row_filter(
    table: Table,
    dataset: DatasetInfo,
    since: dt.datetime | dt.date | None,
    until: dt.datetime | dt.date | None,
    keys: Iterable[Any] | None,
) -> BooleanExpression:
    """The pyiceberg filter for a time range (``since <= t < until``) and lookup keys."""
    expr: BooleanExpression = AlwaysTrue()
    time_type = table.schema().find_field(dataset.time_column).field_type
    if since is not None:
        expr = And(expr, _AtLeast(dataset.time_column, _time_literal(since, time_type)))
    if until is not None:
        expr = And(expr, _Below(dataset.time_column, _time_literal(until, time_type)))
    if keys is not None:
        if dataset.lookup_key is None:
            raise ValueError(f"dataset {dataset.name!r} has no lookup key to filter by")
        expr = And(expr, _OneOf(dataset.lookup_key, tuple(keys)))
    return expr


# The name the query sources imported first.
_row_filter = row_filter


def _parse(text: str) -> BooleanExpression:
    from pyiceberg.expressions.parser import parse

    return parse(text)


def _filtered(
    reader: pa.RecordBatchReader, residual: pc.Expression, columns: list[str] | None
) -> pa.RecordBatchReader:
    schema = reader.schema
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])

    def batches() -> Iterator[pa.RecordBatch]:
        with reader:
            for batch in reader:
                kept = pa.Table.from_batches([batch]).filter(residual)
                if columns is not None:
                    kept = kept.select(columns)
                yield from kept.to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())
