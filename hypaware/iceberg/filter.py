"""A bound filter tree (`hypaware.core.filter`) as a pyiceberg row filter.

The expression goes to ``Table.scan(row_filter=...)``: pyiceberg prunes
partitions and data files by it (manifest and column statistics) and applies
it to the rows it reads, so nothing is filtered twice.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyiceberg.expressions import (
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    Or,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, TimestamptzType

from hypaware.core import filter as f
from hypaware.core.errors import FilterError

__all__ = ["time_literal", "to_iceberg"]

# pyiceberg's predicates are pydantic models whose generated __init__ mypy misreads;
# their documented call is Predicate(column_name, value).
_OPS: dict[str, Any] = {
    "==": EqualTo,
    "!=": NotEqualTo,
    "<": LessThan,
    "<=": LessThanOrEqual,
    ">": GreaterThan,
    ">=": GreaterThanOrEqual,
}
_In: Any = In
_IsNull: Any = IsNull


def to_iceberg(node: f.Filter, schema: Schema) -> BooleanExpression:
    """A bound filter as a pyiceberg expression over the table schema `schema`."""
    if isinstance(node, f.Compare):
        return _OPS[node.op](node.column, _value(node.value, schema, node.column))  # type: ignore[no-any-return]
    if isinstance(node, f.IsIn):
        values = tuple(_value(v, schema, node.column) for v in node.values)
        return _In(node.column, values)  # type: ignore[no-any-return]
    if isinstance(node, f.IsNull):
        return _IsNull(node.column)  # type: ignore[no-any-return]
    if isinstance(node, f.Not):
        return Not(to_iceberg(node.operand, schema))
    if isinstance(node, f.And | f.Or):
        exprs = [to_iceberg(o, schema) for o in node.operands]
        expr = exprs[0]
        for other in exprs[1:]:
            expr = And(expr, other) if isinstance(node, f.And) else Or(expr, other)
        return expr
    raise FilterError(f"where: unknown filter node {type(node).__name__}")


def _value(value: Any, schema: Schema, column: str) -> Any:
    if isinstance(value, dt.date):
        return time_literal(value, schema.find_field(column).field_type)
    return value


def time_literal(value: dt.datetime | dt.date, column_type: Any) -> str:
    """A time as the ISO text pyiceberg converts to `column_type` (naive times are UTC)."""
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
