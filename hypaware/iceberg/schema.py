"""Dataset (Arrow) schemas as Iceberg schemas: registration, evolution, and conforming rows.

Iceberg has fewer types than Arrow, so a dataset's schema is first brought to
the nearest Iceberg-representable Arrow schema (`normalize_schema`):
timestamps and times in microseconds (nanoseconds are truncated), unsigned
integers widened, dictionaries decoded, every field optional. Tables we
register are built from that; the rows of a batch are cast to the table's
own types before they are encoded (`conform_batch`), so data files always
match the table and carry its field ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids, schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    PrimitiveType,
    TimestampType,
    TimestamptzType,
)

__all__ = [
    "IncompatibleSchemaError",
    "conform_batch",
    "conform_table",
    "dataset_schema",
    "evolution_target",
    "layout_for",
    "normalize_schema",
    "write_schema",
]

PARTITION_FIELD_ID = 1000
_TIME_TYPES = (TimestampType, TimestamptzType, DateType)


class IncompatibleSchemaError(ValueError):
    """The dataset's schema and the table's cannot be reconciled by adding columns."""


def _normalize_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _normalize_type(t.value_type)
    if pa.types.is_timestamp(t):
        # Iceberg has one zone, UTC; an aware timestamp is an instant in any zone.
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_uint8(t) or pa.types.is_uint16(t) or pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()
    if pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([_normalize_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(_normalize_field(t.value_field))
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_normalize_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(
            _normalize_field(t.key_field).with_nullable(False), _normalize_field(t.item_field)
        )
    return t


def _normalize_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _normalize_type(f.type), nullable=True)


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with Iceberg-representable types, every field optional, no metadata."""
    return pa.schema([_normalize_field(f) for f in schema])


def dataset_schema(schema: pa.Schema) -> Schema:
    """The Iceberg schema (fresh ids from 1) for a dataset's Arrow schema.

    Raises `IncompatibleSchemaError` for a type Iceberg cannot hold.
    """
    try:
        converted = _pyarrow_to_schema_without_ids(normalize_schema(schema))
    except (ValueError, TypeError) as exc:
        raise IncompatibleSchemaError(f"the dataset's schema has no Iceberg form: {exc}") from exc
    return assign_fresh_schema_ids(converted)


def layout_for(
    schema: Schema, time_column: str, lookup_key: str | None
) -> tuple[PartitionSpec, SortOrder]:
    """``day(time_column)`` and the sort by lookup key then time, for `schema`."""
    time_field = schema.find_field(time_column)
    if not isinstance(time_field.field_type, _TIME_TYPES):
        raise IncompatibleSchemaError(
            f"time column {time_column!r} is {time_field.field_type}, "
            "not a timestamp or date, so it cannot be partitioned by day"
        )
    spec = PartitionSpec(
        PartitionField(
            source_id=time_field.field_id,
            field_id=PARTITION_FIELD_ID,
            transform=DayTransform(),
            name=f"{time_column}_day",
        )
    )
    fields = []
    if lookup_key is not None:
        key_field = schema.find_field(lookup_key)
        fields.append(
            SortField(
                source_id=key_field.field_id,
                transform=IdentityTransform(),
                direction=SortDirection.ASC,
                null_order=NullOrder.NULLS_LAST,
            )
        )
    fields.append(
        SortField(
            source_id=time_field.field_id,
            transform=IdentityTransform(),
            direction=SortDirection.ASC,
            null_order=NullOrder.NULLS_LAST,
        )
    )
    return spec, SortOrder(*fields)


def _widens(narrow: IcebergType, wide: IcebergType) -> bool:
    """Whether values of `narrow` fit `wide` (Iceberg's allowed promotions)."""
    if narrow == wide:
        return True
    if isinstance(narrow, IntegerType) and isinstance(wide, LongType):
        return True
    if isinstance(narrow, FloatType) and isinstance(wide, DoubleType):
        return True
    if isinstance(narrow, DecimalType) and isinstance(wide, DecimalType):
        return narrow.scale == wide.scale and narrow.precision <= wide.precision
    return False


def evolution_target(table: Schema, dataset: Schema, *, what: str) -> Schema | None:
    """The schema to `union_by_name` into `table` so it can hold `dataset`, or None if it can.

    Columns the table lacks are added (optional); a primitive column whose
    dataset type fits the table's is left alone; a table column Iceberg may
    widen (int to long, float to double, decimal precision) is widened.
    Anything else raises `IncompatibleSchemaError` naming the column, with
    `what` (e.g. ``table hypaware.events``) in the message.
    """
    fields: list[NestedField] = []
    changed = False
    for field in dataset.fields:
        existing = _find(table, field.name)
        if existing is None:
            fields.append(field)
            changed = True
            continue
        new_type, old_type = field.field_type, existing.field_type
        if isinstance(new_type, PrimitiveType) or isinstance(old_type, PrimitiveType):
            if _widens(new_type, old_type):
                fields.append(_with_type(field, old_type))
                continue
            if _widens(old_type, new_type):
                fields.append(field)
                changed = True
                continue
            raise IncompatibleSchemaError(
                f"{what}: column {field.name!r} is {old_type} in the table but {new_type} "
                "in the dataset; Iceberg cannot change it in place"
            )
        fields.append(field)
        if str(_without_ids(new_type)) != str(_without_ids(old_type)):
            changed = True
    for field in table.fields:
        if field.required and _find(dataset, field.name) is None:
            raise IncompatibleSchemaError(
                f"{what}: required column {field.name!r} is missing from the dataset"
            )
    if not changed:
        return None
    return Schema(*fields)


def _find(schema: Schema, name: str) -> NestedField | None:
    for field in schema.fields:
        if field.name == name:
            return field
    return None


def _with_type(field: NestedField, field_type: IcebergType) -> NestedField:
    return NestedField(
        field_id=field.field_id,
        name=field.name,
        field_type=field_type,
        required=field.required,
        doc=field.doc,
    )


def _without_ids(t: IcebergType) -> pa.DataType:
    return schema_to_pyarrow(t, include_field_ids=False)


def write_schema(table: Schema, columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema data files are written with: the table's types and field ids,
    restricted to the dataset's `columns` (in table order).

    Strings, binaries and lists use 32-bit offsets, as datasets usually do, so
    rows need no cast: the Parquet file is the same either way.
    """
    wanted = set(columns)
    names = [f.name for f in table.fields if f.name in wanted]
    arrow = schema_to_pyarrow(table.select(*names), include_field_ids=True)
    return pa.schema([_small_offsets(f) for f in arrow], metadata=arrow.metadata)


def _small_offsets(f: pa.Field) -> pa.Field:
    t = f.type
    if pa.types.is_large_string(t):
        t = pa.string()
    elif pa.types.is_large_binary(t):
        t = pa.binary()
    elif pa.types.is_large_list(t) or pa.types.is_list(t):
        t = pa.list_(_small_offsets(t.value_field))
    elif pa.types.is_struct(t):
        t = pa.struct([_small_offsets(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_map(t):
        t = pa.map_(_small_offsets(t.key_field), _small_offsets(t.item_field))
    return pa.field(f.name, t, nullable=f.nullable, metadata=f.metadata)


def conform_batch(batch: pa.RecordBatch, target: pa.Schema, *, what: str) -> pa.RecordBatch:
    """`batch` cast to `target` column by column (by name); `IncompatibleSchemaError` if it cannot.

    Casts are safe: a value that does not fit (an unsigned value past the
    signed range, a timestamp out of range) is an error, never truncated,
    except sub-microsecond precision, which Iceberg cannot hold.
    """
    if _same_columns(batch.schema, target):
        # The usual case: the cache's types already are the table's.
        if batch.schema.equals(target, check_metadata=True):
            return batch
        _check_required(batch, target, what)
        return pa.RecordBatch.from_arrays(batch.columns, schema=target)
    arrays = []
    for field in target:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            raise IncompatibleSchemaError(f"{what}: column {field.name!r} is missing from the rows")
        column = batch.column(index)
        try:
            if pa.types.is_dictionary(column.type):
                column = column.dictionary_decode()
            if pa.types.is_timestamp(column.type) and column.type.unit == "ns":
                column = column.cast(pa.timestamp("us", tz=column.type.tz), safe=False)
            if not column.type.equals(field.type):
                column = column.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise IncompatibleSchemaError(
                f"{what}: column {field.name!r} ({column.type}) cannot be written as "
                f"{field.type}: {exc}"
            ) from exc
        if not field.nullable and column.null_count:
            raise IncompatibleSchemaError(
                f"{what}: column {field.name!r} is required in the table but has nulls"
            )
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def conform_table(table: pa.Table, target: pa.Schema, *, what: str) -> pa.Table:
    """`table` as `target`, by the rules of `conform_batch` (one check for the usual case)."""
    if _same_columns(table.schema, target):
        if table.schema.equals(target, check_metadata=True):
            return table
        _check_required(table, target, what)
        return pa.Table.from_arrays(table.columns, schema=target)
    batches = [conform_batch(b, target, what=what) for b in table.to_batches()]
    return pa.Table.from_batches(batches, schema=target)


def _same_columns(schema: pa.Schema, target: pa.Schema) -> bool:
    """Same names and types in the same order: only nullability or metadata may differ."""
    return schema.names == target.names and [f.type for f in schema] == [f.type for f in target]


def _check_required(batch: pa.RecordBatch | pa.Table, target: pa.Schema, what: str) -> None:
    for field, column in zip(target, batch.columns, strict=True):
        if not field.nullable and column.null_count:
            raise IncompatibleSchemaError(
                f"{what}: column {field.name!r} is required in the table but has nulls"
            )
