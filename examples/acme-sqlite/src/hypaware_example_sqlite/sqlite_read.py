"""Reading ``@acme/sqlite`` tables back as Arrow, for `SqliteSink.scan`.

Rows carry the partition they came from (``_hyp_partition``), so a scan can
leave out exactly the partitions hypaware's query planner names in
`exclude`: those the cache answers for and those whose acknowledgement is
pending. Every row in a table was committed together with its ledger entry,
so a scan never sees a partition in part.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware import Filter

__all__ = ["scan_table"]

_CHUNK_ROWS = 4096


def _from_sql(value: Any, arrow_type: pa.DataType) -> Any:
    """A value stored by `sqlite_sink._to_sql`, as the Python value Arrow expects."""
    import pyarrow.types as t

    if value is None:
        return None
    if t.is_boolean(arrow_type):
        return bool(value)
    if t.is_timestamp(arrow_type):
        return datetime.fromisoformat(value)
    if t.is_date(arrow_type):
        return date.fromisoformat(value)
    if t.is_time(arrow_type):
        return time.fromisoformat(value)
    if t.is_duration(arrow_type):
        return timedelta(seconds=value)
    if t.is_decimal(arrow_type):
        return Decimal(value)
    if t.is_nested(arrow_type):
        return json.loads(value)
    return value


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def scan_table(
    path: Path,
    table: str,
    schema: pa.Schema,
    *,
    columns: Sequence[str],
    filter: Filter | None,
    exclude: Collection[str],
) -> pa.RecordBatchReader:
    """Stream `table`'s rows as `columns` of `schema`, filtered, without `exclude`'s partitions."""
    import pyarrow as pa

    from hypaware.plugin import to_arrow

    target = pa.schema([schema.field(c) for c in columns])
    if not path.exists():
        return pa.RecordBatchReader.from_batches(target, iter(()))
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({_quote(table)})")}
    except sqlite3.Error:
        conn.close()
        raise
    if not have:  # nothing exported to this dataset yet
        conn.close()
        return pa.RecordBatchReader.from_batches(target, iter(()))
    # Read every column the filter may need; select the asked-for ones after it.
    read = [f for f in schema if f.name in have]
    missing = [f for f in schema if f.name not in have]
    sql = (
        f"SELECT {', '.join(_quote(f.name) for f in read) or 'NULL'} FROM {_quote(table)} "
        "WHERE _hyp_partition NOT IN (SELECT value FROM json_each(?)) ORDER BY rowid"
    )

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            cursor = conn.execute(sql, (json.dumps(sorted(exclude)),))
            while rows := cursor.fetchmany(_CHUNK_ROWS):
                arrays = {
                    f.name: pa.array([_from_sql(r[i], f.type) for r in rows], type=f.type)
                    for i, f in enumerate(read)
                }
                for f in missing:  # columns the dataset gained after these rows
                    arrays[f.name] = pa.nulls(len(rows), type=f.type)
                chunk = pa.table([arrays[f.name] for f in schema], schema=schema)
                if filter is not None:
                    chunk = chunk.filter(to_arrow(filter, schema))
                for out in chunk.select(list(columns)).to_batches():
                    if out.num_rows:
                        yield out
        finally:
            conn.close()

    return pa.RecordBatchReader.from_batches(target, batches())
