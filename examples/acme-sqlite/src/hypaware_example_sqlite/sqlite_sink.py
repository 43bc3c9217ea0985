"""``@acme/sqlite``: a `Sink` that appends exported rows to a SQLite database.

One table per dataset (``<table_prefix><dataset name>``), with the
dataset's columns plus ``_hyp_partition``. Queryable: `scan` reads a table
back and leaves out the partitions hypaware's query planner names. Exactly once per partition: a
partition's rows and its entry in the ``_hypaware_exports`` ledger are
committed in one transaction, and a partition already in the ledger is
acknowledged without writing again. The ledger is keyed by (cache identity,
dataset, partition id): a partition id is unique only within the cache that
made it, so two gateways exporting into one database both land. So re-exporting a batch (a retry, a
respool, a restart after a crash before the ack) never doubles a row, and a
failure half-way through a partition leaves nothing of it behind.

SQLite work runs in a worker thread so the event loop never blocks on disk;
`close()` asks the worker to stop between record batches, waits for it to
roll back, and closes the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import threading
from collections.abc import Collection, Iterable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypaware import (
    BuildContext,
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    ExportResult,
    PartitionRef,
    RetryPartition,
    SinkClosedError,
)

from .manifests import SqliteConfig

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware import Filter

__all__ = ["LEDGER", "SqliteSink", "make_sink", "quote_identifier", "read_table"]

log = logging.getLogger(__name__)

LEDGER = "_hypaware_exports"
PARTITION_COLUMN = "_hyp_partition"


def quote_identifier(name: str) -> str:
    """`name` as a SQLite identifier: any text is safe inside double quotes, doubled."""
    if "\x00" in name:
        raise ValueError(f"identifier {name!r} contains NUL")
    return '"' + name.replace('"', '""') + '"'


def _sql_type(arrow_type: pa.DataType) -> str:
    import pyarrow.types as t

    if t.is_boolean(arrow_type) or t.is_integer(arrow_type):
        return "INTEGER"
    if t.is_floating(arrow_type):
        return "REAL"
    if (
        t.is_binary(arrow_type)
        or t.is_large_binary(arrow_type)
        or t.is_fixed_size_binary(arrow_type)
    ):
        return "BLOB"
    return "TEXT"


def _to_sql(value: Any) -> Any:
    """A Python value from Arrow as something sqlite3 stores without adapters."""
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, default=str, sort_keys=True)


class _Closing(Exception):
    """The sink is closing: stop this partition and roll it back."""


class SqliteSink:
    """Appends rows to the SQLite database at `path`; see the module docstring."""

    def __init__(
        self, name: str, path: Path, *, table_prefix: str = "", busy_timeout: float = 5.0
    ) -> None:
        self.name = name
        self.path = path
        self.table_prefix = table_prefix
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()  # one worker at a time on the connection
        self._closing = threading.Event()
        self._closed = False

    def __repr__(self) -> str:
        return f"SqliteSink({self.name!r}, {str(self.path)!r})"

    def table_name(self, dataset: str) -> str:
        return f"{self.table_prefix}{dataset}"

    # ---------------------------------------------------------------- contract

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """Write each partition in its own transaction; report failures, never raise them."""
        if self._closed:
            raise SinkClosedError(f"sink {self.name!r} (@acme/sqlite) is closed")
        exported: list[str] = []
        retry: list[RetryPartition] = []
        rows = 0
        for part in batch.partitions:
            if self._closing.is_set():
                retry.append(RetryPartition(part.id, f"sink {self.name!r} is closing"))
                continue
            try:
                rows += await asyncio.to_thread(self._write_partition, batch.dataset, part, batch)
            except _Closing:
                retry.append(RetryPartition(part.id, f"sink {self.name!r} is closing"))
            except sqlite3.Error as exc:
                retry.append(RetryPartition(part.id, f"sqlite {self.path.name}: {exc}"))
                log.warning("sink %s: partition %s: sqlite error: %s", self.name, part.id, exc)
            except Exception as exc:  # the partition's reader failed: report, do not raise
                retry.append(
                    RetryPartition(part.id, f"cannot read partition: {type(exc).__name__}: {exc}")
                )
            else:
                exported.append(part.id)
        return ExportResult(exported=exported, retry_partitions=retry, rows_written=rows)

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Iterable[str] | None = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        """The dataset's rows in the database, as `hypaware.QueryableSink.scan` promises.

        Rows of a partition in `exclude` are left out by their ``_hyp_partition``;
        `filter` is applied to the rows read, `columns` picks and orders them.
        """
        from .sqlite_read import scan_table

        wanted = list(columns) if columns is not None else dataset.schema.names
        return scan_table(
            self.path,
            self.table_name(dataset.name),
            dataset.schema,
            columns=wanted,
            filter=filter,
            exclude=exclude,
        )

    async def close(self) -> None:
        """Stop the worker between record batches, roll back, close the database."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        await asyncio.to_thread(self._close_db)

    # ------------------------------------------------------------ worker side

    def _close_db(self) -> None:
        with self._db_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,  # transactions are begun and ended explicitly
                check_same_thread=False,  # used from worker threads, one at a time
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {LEDGER} ("
                "dataset TEXT NOT NULL, partition_id TEXT NOT NULL, batch_id TEXT NOT NULL, "
                "row_count INTEGER NOT NULL, exported_at TEXT NOT NULL, "
                "cache_identity TEXT NOT NULL, "
                "PRIMARY KEY (cache_identity, dataset, partition_id))"
            )
            self._conn = conn
        return self._conn

    def _ensure_table(self, conn: sqlite3.Connection, dataset: DatasetInfo) -> str:
        table = quote_identifier(self.table_name(dataset.name))
        columns = [(f.name, _sql_type(f.type)) for f in dataset.schema]
        defs = ", ".join(f"{quote_identifier(n)} {t}" for n, t in columns)
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ({PARTITION_COLUMN} TEXT NOT NULL, {defs})"
        )
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for name, sql_type in columns:
            if name not in have:  # the dataset gained a column since the table was made
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {quote_identifier(name)} {sql_type}")
        return table

    def _write_partition(self, dataset: DatasetInfo, part: PartitionRef, batch: ExportBatch) -> int:
        with self._db_lock:
            if self._closing.is_set():
                raise _Closing
            conn = self._connect()
            table = self._ensure_table(conn, dataset)
            conn.execute("BEGIN IMMEDIATE")  # take the write lock before reading the ledger
            try:
                done = conn.execute(
                    f"SELECT 1 FROM {LEDGER}"
                    " WHERE cache_identity = ? AND dataset = ? AND partition_id = ?",
                    (batch.cache_identity, dataset.name, part.id),
                ).fetchone()
                written = 0 if done else self._insert_rows(conn, table, dataset, part)
                if not done:
                    conn.execute(
                        f"INSERT INTO {LEDGER} VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            dataset.name,
                            part.id,
                            batch.batch_id,
                            written,
                            datetime.now(UTC).isoformat(),
                            batch.cache_identity,
                        ),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return written

    def _insert_rows(
        self, conn: sqlite3.Connection, table: str, dataset: DatasetInfo, part: PartitionRef
    ) -> int:
        names = [quote_identifier(f.name) for f in dataset.schema]
        marks = ", ".join("?" for _ in range(len(names) + 1))
        sql = f"INSERT INTO {table} ({PARTITION_COLUMN}, {', '.join(names)}) VALUES ({marks})"
        written = 0
        reader = part.open()
        try:
            for record_batch in reader:
                if self._closing.is_set():
                    raise _Closing
                columns: list[Iterable[Any]] = [
                    [_to_sql(v) for v in record_batch.column(f.name).to_pylist()]
                    for f in dataset.schema
                ]
                conn.executemany(sql, ((part.id, *row) for row in zip(*columns, strict=True)))
                written += record_batch.num_rows
        finally:
            with contextlib.suppress(Exception):
                reader.close()
        return written


def read_table(path: Path, table: str) -> list[dict[str, Any]]:
    """Every row of `table` in the database at `path`, as dicts (for tests and tools)."""
    conn = sqlite3.connect(path)
    try:
        conn.row_factory = sqlite3.Row
        try:
            cursor = conn.execute(f"SELECT * FROM {quote_identifier(table)}")
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        return [dict(row) for row in cursor]
    finally:
        conn.close()


def make_sink(config: SqliteConfig, ctx: BuildContext) -> SqliteSink:
    """The factory named by the ``@acme/sqlite`` manifest."""
    return SqliteSink(
        ctx.sink_name,
        ctx.resolve_path(config.path),
        table_prefix=config.table_prefix,
        busy_timeout=config.busy_timeout,
    )
