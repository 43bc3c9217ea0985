"""A filter tree checked against a dataset's schema, and compiled to a pyarrow expression.

`bind_filter` is the one place a filter meets a schema: every column must
exist (an unknown one is a `FilterError` with a did-you-mean) and every
literal becomes a Python value of its column's type (times are aware UTC
datetimes), so every reader compiles the same checked tree. `to_arrow` turns
a bound tree into the ``pyarrow.compute.Expression`` the cache and Parquet
readers filter with. pyarrow is imported only when these are called.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hypaware.core.errors import FilterError
from hypaware.core.filter import And, Compare, Filter, IsIn, IsNull, Not, Or, parse_time
from hypaware.core.registry import did_you_mean

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = ["bind_filter", "to_arrow"]


def bind_filter(node: Filter, schema: pa.Schema, *, dataset: str | None = None) -> Filter:
    """`node` with its columns checked and its literals converted to their columns' types.

    Raises `FilterError` naming the column or value at fault; `dataset`
    names the dataset in the message. Binding a bound tree changes nothing.
    """
    if not isinstance(node, Filter):
        raise FilterError(
            f"where: expected a filter (hypaware.col(...) or text), got {type(node).__name__}"
        )
    if isinstance(node, Compare):
        field = _field(node.column, schema, dataset)
        if node.value is None:
            raise FilterError(
                f"where: compare {node.column!r} with null using 'is null' / 'is not null'"
            )
        return Compare(node.column, node.op, convert_literal(node.value, field))
    if isinstance(node, IsIn):
        field = _field(node.column, schema, dataset)
        if not node.values:
            raise FilterError(f"where: 'in' for {node.column!r} needs at least one value")
        return IsIn(node.column, tuple(convert_literal(v, field) for v in node.values))
    if isinstance(node, IsNull):
        _field(node.column, schema, dataset)
        return node
    if isinstance(node, Not):
        return Not(bind_filter(node.operand, schema, dataset=dataset))
    if isinstance(node, And | Or):
        if not node.operands:
            raise FilterError("where: 'and' / 'or' needs at least one operand")
        bound = tuple(bind_filter(o, schema, dataset=dataset) for o in node.operands)
        return And(bound) if isinstance(node, And) else Or(bound)
    raise FilterError(f"where: unknown filter node {type(node).__name__}")


def _field(name: str, schema: pa.Schema, dataset: str | None) -> pa.Field:
    index = schema.get_field_index(name)
    if index < 0:
        of = f"dataset {dataset!r} has " if dataset else ""
        raise FilterError(
            f"where: {of}no column {name!r}{did_you_mean(name, schema.names)} "
            f"(columns: {', '.join(schema.names)})"
        )
    return schema.field(index)


def convert_literal(raw: Any, field: pa.Field) -> Any:
    """`raw` as a Python value of `field`'s type; else a `FilterError` naming the column."""
    import pyarrow as pa

    typ = field.type
    try:
        if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
            if not isinstance(raw, str | datetime) and not _is_date(raw):
                raise ValueError("expected an ISO date or time in quotes")
            when = parse_time(raw, what=f"value for {field.name!r}")
            return when.date() if pa.types.is_date(typ) else when
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            if not isinstance(raw, str):
                raise ValueError("expected text in quotes")
            return raw
        if pa.types.is_boolean(typ):
            if not isinstance(raw, bool):
                raise ValueError("expected true or false")
            return raw
        if isinstance(raw, bool) or (
            isinstance(raw, str) and (pa.types.is_integer(typ) or pa.types.is_floating(typ))
        ):
            raise ValueError("expected a number")
        return pa.scalar(raw).cast(typ).as_py()
    except FilterError:
        raise
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise FilterError(
            f"where: {raw!r} is not a value of column {field.name!r} ({typ}): {exc}"
        ) from exc


def _is_date(value: Any) -> bool:
    from datetime import date

    return isinstance(value, date)


def to_arrow(node: Filter, schema: pa.Schema) -> pc.Expression:
    """A bound filter as a pyarrow expression over `schema`."""
    import pyarrow.compute as pc

    if isinstance(node, Compare):
        ref = pc.field(node.column)
        value = arrow_scalar(node.value, schema.field(node.column).type)
        ops = {
            "==": ref.__eq__,
            "!=": ref.__ne__,
            "<": ref.__lt__,
            "<=": ref.__le__,
            ">": ref.__gt__,
            ">=": ref.__ge__,
        }
        result: pc.Expression = ops[node.op](value)
        return result
    if isinstance(node, IsIn):
        import pyarrow as pa

        typ = schema.field(node.column).type
        values = [arrow_scalar(v, typ).as_py() for v in node.values]
        return pc.field(node.column).isin(pa.array(values, type=typ))
    if isinstance(node, IsNull):
        return pc.field(node.column).is_null()
    if isinstance(node, Not):
        return ~to_arrow(node.operand, schema)
    if isinstance(node, And | Or):
        exprs = [to_arrow(o, schema) for o in node.operands]
        expr = exprs[0]
        for other in exprs[1:]:
            expr = (expr & other) if isinstance(node, And) else (expr | other)
        return expr
    raise FilterError(f"where: unknown filter node {type(node).__name__}")


def arrow_scalar(value: Any, typ: pa.DataType) -> pa.Scalar:
    """A bound literal as a scalar of `typ` (a zone-less timestamp column holds UTC)."""
    import pyarrow as pa

    if isinstance(value, datetime):
        if pa.types.is_date(typ):
            return pa.scalar(value.date(), type=typ)
        if pa.types.is_timestamp(typ) and typ.tz is None:
            return pa.scalar(value.astimezone(UTC).replace(tzinfo=None), type=typ)
    return pa.scalar(value, type=typ)
