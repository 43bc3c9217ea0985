"""Scans: a dataset's rows read back from its Iceberg table.

`row_filter` turns a time range and lookup keys into the pyiceberg filter
that prunes by day partition and by file and row-group statistics;
`scan_table` streams a table's rows with it and a filter tree compiled by
`hypaware.iceberg.filter` (see `IcebergTableFormat.scan`). The query
sources use `row_filter` too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    LessThan,
)
from pyiceberg.table import Table

from hypaware.core.filter import Filter
from hypaware.core.filter_bind import bind_filter
from hypaware.core.types import DatasetInfo
from hypaware.iceberg.catalog import IcebergError, _brief
from hypaware.iceberg.filter import time_literal, to_iceberg
from hypaware.iceberg.schema import normalize_schema

__all__ = ["row_filter", "scan_table"]


def scan_table(
    table: Table | None,
    dataset: DatasetInfo,
    what: str,
    *,
    columns: Iterable[str] | None = None,
    filter: Filter | None = None,
    since: dt.datetime | dt.date | None = None,
    until: dt.datetime | dt.date | None = None,
    keys: Iterable[Any] | None = None,
) -> pa.RecordBatchReader:
    """Stream `table`'s rows (None: a table not registered yet, scanned as empty).

    The arguments are those of `IcebergTableFormat.scan`; `what` names the
    table in errors. `filter` is bound to the dataset's schema (a
    `FilterError` for an unknown column or a mistyped value) and pushed into
    the scan with the time range and keys.
    """
    if filter is not None and not isinstance(filter, Filter):
        raise TypeError(
            "filter must be a hypaware filter (hypaware.col(...) or "
            f"hypaware.parse_filter(text)); got {type(filter).__name__}"
        )
    bound = bind_filter(filter, dataset.schema, dataset=dataset.name) if filter else None
    wanted = list(columns) if columns is not None else None
    if table is None:
        schema = normalize_schema(dataset.schema)
        if wanted is not None:
            schema = pa.schema([schema.field(c) for c in wanted])
        return pa.RecordBatchReader.from_batches(schema, [])

    expr = row_filter(table, dataset, since, until, keys)
    if bound is not None:
        expr = And(expr, to_iceberg(bound, table.schema()))
    selected = ("*",) if wanted is None else tuple(wanted)
    try:
        return table.scan(row_filter=expr, selected_fields=selected).to_arrow_batch_reader()
    except Exception as exc:
        raise IcebergError(f"{what}: cannot scan the table: {_brief(exc)}") from exc


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
        expr = And(expr, _AtLeast(dataset.time_column, time_literal(since, time_type)))
    if until is not None:
        expr = And(expr, _Below(dataset.time_column, time_literal(until, time_type)))
    if keys is not None:
        if dataset.lookup_key is None:
            raise ValueError(f"dataset {dataset.name!r} has no lookup key to filter by")
        expr = And(expr, _OneOf(dataset.lookup_key, tuple(keys)))
    return expr
