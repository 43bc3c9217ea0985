"""What each blob-sink batch wrote: a small sqlite database in the sink's state directory.

A `BlobSink` file holds rows of several partitions (every partition of a
batch with rows on that day), named after the batch. The index is what
keeps that exactly-once and readable:

- an *open* batch (begun, not finished) may have left whole or partial
  files behind: the sink deletes them before it writes any other batch, and
  queries never read them;
- a *finished* batch lists its partitions, so a query that answers some
  partition from the cache can leave out the files that hold it too;
- every day directory a batch touched is recorded *before* the first object
  goes there, so a later attempt knows where stale objects can be.

Each batch records the identity of the cache its partitions came from and
the destination (store URL) its files went to: a partition is "already
written" only when a finished batch of the same cache identity wrote it to
the same destination. Records from an index made before they carried both
(NULL) are adopted by the first cache and destination that use it after the
upgrade (`adopt`), as the progress store adopts the first cache it meets:
until identities existed one cache wrote through one index.

Each finished batch also leaves a receipt at the destination
(`hypaware.blob.receipts`); the index records where, and takes in the
receipts other writers of the same cache identity left (another state
directory, or one that was lost), so their partitions count as written too.

Finished records are dropped after `KEEP_DAYS`; a file whose batch is not
in the index is treated as finished and acknowledged long ago.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator
from datetime import date
from pathlib import Path
from typing import Self

import attrs

from hypaware.blob.receipts import Receipt
from hypaware.core.errors import StateError
from hypaware.core.sqlite import Migration, immediate_transaction, migrate

__all__ = ["INDEX_FILE", "KEEP_DAYS", "MIGRATIONS", "BatchIndex", "BatchRecord"]

INDEX_FILE = "blob-batches.sqlite"
KEEP_DAYS = 30

_FIRST_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    stem TEXT PRIMARY KEY, dataset TEXT NOT NULL, batch_id TEXT NOT NULL,
    open INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS batch_days (
    stem TEXT NOT NULL, day_dir TEXT NOT NULL, PRIMARY KEY (stem, day_dir));
CREATE TABLE IF NOT EXISTS batch_partitions (
    stem TEXT NOT NULL, partition_id TEXT NOT NULL, PRIMARY KEY (stem, partition_id));
"""

# The n-th entry brings an index to schema version n (PRAGMA user_version);
# indexes of the first release have version 0. Append; never edit released steps.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("the tables of the first release", _FIRST_SCHEMA),
    Migration(
        # finished_holders looks batches up by partition id, which the primary
        # key (stem first) cannot serve: without this it scans every row.
        "an index of batch partitions by partition id",
        "CREATE INDEX IF NOT EXISTS batch_partitions_by_partition"
        " ON batch_partitions (partition_id, stem)",
    ),
    Migration(
        # A partition id is unique only within its cache, and an index
        # outlives a change of destination: both scope an acknowledgement.
        "the cache identity and destination of each batch",
        "ALTER TABLE batches ADD COLUMN cache_identity TEXT;"
        "ALTER TABLE batches ADD COLUMN destination TEXT",
    ),
    Migration(
        # The destination's own record of each batch (hypaware.blob.receipts),
        # and how far this index has read the receipts other writers left.
        "receipts at the destination",
        "ALTER TABLE batches ADD COLUMN receipt TEXT;"
        "CREATE TABLE IF NOT EXISTS receipts_known ("
        " path TEXT NOT NULL, destination TEXT NOT NULL, recorded_at REAL NOT NULL,"
        " PRIMARY KEY (destination, path));"
        "CREATE TABLE IF NOT EXISTS receipt_sync ("
        " cache_identity TEXT NOT NULL, destination TEXT NOT NULL, dataset TEXT NOT NULL,"
        " day TEXT NOT NULL, PRIMARY KEY (cache_identity, destination, dataset))",
    ),
)
_LOOKUP_CHUNK = 500


@attrs.frozen
class BatchRecord:
    """One batch as the index knows it."""

    stem: str
    dataset: str
    batch_id: str
    open: bool
    partitions: frozenset[str] = frozenset()
    day_dirs: frozenset[str] = frozenset()
    receipt: str | None = None


class BatchIndex:
    """The index at `path` (created if missing), or in memory when `path` is None.

    Safe to share between threads; several processes may read one file while
    one writes (WAL). Every change is one durable transaction.
    """

    def __init__(self, path: Path | None, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._closed = False
        # Receipt paths found known, per destination: each pass lists the day's
        # receipts, and asking the database about every one again grew with the day.
        self._known: dict[str, set[str]] = {}
        where = ":memory:" if path is None else str(path)
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                where, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except (sqlite3.Error, OSError) as exc:
            raise StateError(f"blob batch index {where}: cannot open: {exc}") from exc
        try:
            if path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
            migrate(self._db, MIGRATIONS, what=f"blob batch index {where}")
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                raise StateError(f"blob batch index {where}: cannot open: {exc}") from exc
            raise

    def __repr__(self) -> str:
        return f"BatchIndex({str(self.path) if self.path else ':memory:'!r})"

    # ------------------------------------------------------------------ writes

    def begin(
        self,
        stem: str,
        dataset: str,
        batch_id: str,
        partition_ids: Iterable[str],
        *,
        cache_identity: str = "",
        destination: str = "",
    ) -> None:
        """Mark the batch open with these partitions; days touched earlier are kept."""
        now = time.time()
        with self._errors("record a batch"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT INTO batches"
                " (stem, dataset, batch_id, open, updated_at, cache_identity, destination)"
                " VALUES (?, ?, ?, 1, ?, ?, ?) ON CONFLICT (stem) DO UPDATE SET open = 1,"
                " updated_at = excluded.updated_at, cache_identity = excluded.cache_identity,"
                " destination = excluded.destination",
                (stem, dataset, batch_id, now, cache_identity, destination),
            )
            self._db.execute("DELETE FROM batch_partitions WHERE stem = ?", (stem,))
            self._db.executemany(
                "INSERT OR IGNORE INTO batch_partitions (stem, partition_id) VALUES (?, ?)",
                ((stem, pid) for pid in partition_ids),
            )
            # Old finished records: their batches were acknowledged long ago.
            old = now - KEEP_DAYS * 86_400
            for table in ("batch_days", "batch_partitions"):
                self._db.execute(
                    f"DELETE FROM {table} WHERE stem IN"
                    " (SELECT stem FROM batches WHERE open = 0 AND updated_at < ?)",
                    (old,),
                )
            self._db.execute("DELETE FROM batches WHERE open = 0 AND updated_at < ?", (old,))
            self._db.execute("DELETE FROM receipts_known WHERE recorded_at < ?", (old,))

    def touch(self, stem: str, day_dir: str) -> None:
        """Record that the batch is about to write into `day_dir`."""
        with self._errors("record a day directory"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT OR IGNORE INTO batch_days (stem, day_dir) VALUES (?, ?)", (stem, day_dir)
            )

    def drop_partitions(self, stem: str, partition_ids: Iterable[str]) -> None:
        """These partitions are no longer part of the batch's files."""
        with self._errors("update a batch"), immediate_transaction(self._db):
            self._db.executemany(
                "DELETE FROM batch_partitions WHERE stem = ? AND partition_id = ?",
                ((stem, pid) for pid in partition_ids),
            )

    def finish(self, stem: str) -> None:
        """The batch's files are complete, no stale object of it is left, its receipt is put."""
        now = time.time()
        with self._errors("finish a batch"), immediate_transaction(self._db):
            self._db.execute(
                "UPDATE batches SET open = 0, updated_at = ? WHERE stem = ?", (now, stem)
            )
            self._db.execute(
                "INSERT OR IGNORE INTO receipts_known (path, destination, recorded_at)"
                " SELECT receipt, destination, ? FROM batches"
                " WHERE stem = ? AND receipt IS NOT NULL",
                (now, stem),
            )

    # ---------------------------------------------------------------- receipts

    def receipt_of(self, stem: str) -> str | None:
        """Where the batch's receipt goes (recorded before it is put), or None."""
        with self._errors("read a batch"):
            row = self._db.execute("SELECT receipt FROM batches WHERE stem = ?", (stem,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def set_receipt(self, stem: str, path: str) -> None:
        """Record where the batch's receipt goes, before it is put (a sweep deletes it)."""
        with self._errors("record a receipt"), immediate_transaction(self._db):
            self._db.execute("UPDATE batches SET receipt = ? WHERE stem = ?", (path, stem))

    def receipts_read(self, cache_identity: str, destination: str, dataset: str) -> date | None:
        """The day this index last read `cache_identity`'s receipts for `dataset` (None: never)."""
        with self._errors("read receipt progress"):
            row = self._db.execute(
                "SELECT day FROM receipt_sync"
                " WHERE cache_identity = ? AND destination = ? AND dataset = ?",
                (cache_identity, destination, dataset),
            ).fetchone()
        return None if row is None else date.fromisoformat(row[0])

    def unknown_receipts(self, destination: str, paths: Collection[str]) -> list[str]:
        """Those of `paths` this index has neither written nor read, in order."""
        remembered = self._known.setdefault(destination, set())
        asked = [p for p in set(paths) if p not in remembered]
        known: set[str] = set()
        with self._errors("read receipts"):
            for chunk, marks in _in_chunks(asked):
                known.update(
                    p
                    for (p,) in self._db.execute(
                        "SELECT path FROM receipts_known"
                        f" WHERE destination = ? AND path IN ({marks})",
                        (destination, *chunk),
                    )
                )
        remembered |= known
        return sorted(p for p in asked if p not in known)

    def read_receipts(
        self,
        cache_identity: str,
        destination: str,
        dataset: str,
        found: Iterable[tuple[str, Receipt]],
        day: date,
    ) -> int:
        """Take other writers' receipts in as finished batches; how many batches were new.

        A receipt whose batch this index already has (its own) changes nothing.
        """
        now = time.time()
        added = 0
        with self._errors("record receipts"), immediate_transaction(self._db):
            for path, receipt in found:
                added += self._db.execute(
                    "INSERT OR IGNORE INTO batches (stem, dataset, batch_id, open, updated_at,"
                    " cache_identity, destination, receipt) VALUES (?, ?, ?, 0, ?, ?, ?, ?)",
                    (
                        receipt.stem,
                        receipt.dataset,
                        receipt.batch_id,
                        now,
                        receipt.writer,
                        destination,
                        path,
                    ),
                ).rowcount
                self._db.executemany(
                    "INSERT OR IGNORE INTO batch_partitions (stem, partition_id)"
                    " SELECT ?, ? WHERE EXISTS (SELECT 1 FROM batches WHERE stem = ? AND open = 0"
                    " AND receipt = ?)",
                    ((receipt.stem, pid, receipt.stem, path) for pid in receipt.partitions),
                )
                self._db.execute(
                    "INSERT OR IGNORE INTO receipts_known (path, destination, recorded_at)"
                    " VALUES (?, ?, ?)",
                    (path, destination, now),
                )
            self._db.execute(
                "INSERT INTO receipt_sync (cache_identity, destination, dataset, day)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (cache_identity, destination, dataset)"
                " DO UPDATE SET day = excluded.day",
                (cache_identity, destination, dataset, day.isoformat()),
            )
        return added

    def forget(self, stem: str) -> None:
        """Every object of the batch was deleted."""
        with self._errors("forget a batch"), immediate_transaction(self._db):
            for table in ("batches", "batch_days", "batch_partitions"):
                self._db.execute(
                    f"DELETE FROM {table} WHERE stem = ?",
                    (stem,),
                )

    # ------------------------------------------------------------------- reads

    def open_batches(self) -> list[BatchRecord]:
        """Batches begun and not finished, with the day directories they touched."""
        with self._errors("read open batches"):
            rows = self._db.execute(
                "SELECT stem, dataset, batch_id, receipt FROM batches WHERE open = 1"
                " ORDER BY updated_at"
            ).fetchall()
            return [
                BatchRecord(stem, dataset, batch_id, True, day_dirs=self._days(stem), receipt=r)
                for stem, dataset, batch_id, r in rows
            ]

    def day_dirs(self, stem: str) -> frozenset[str]:
        """Every day directory the batch has touched in any attempt."""
        with self._errors("read a batch"):
            return self._days(stem)

    def lookup(self, stems: Collection[str]) -> dict[str, BatchRecord]:
        """The records of those `stems` the index holds, with their partitions."""
        found: dict[str, BatchRecord] = {}
        with self._errors("read batches"):
            for chunk, marks in _in_chunks(stems):
                rows = self._db.execute(
                    f"SELECT stem, dataset, batch_id, open FROM batches WHERE stem IN ({marks})",
                    chunk,
                ).fetchall()
                parts: dict[str, set[str]] = {}
                for stem, pid in self._db.execute(
                    f"SELECT stem, partition_id FROM batch_partitions WHERE stem IN ({marks})",
                    chunk,
                ):
                    parts.setdefault(stem, set()).add(pid)
                for stem, dataset, batch_id, is_open in rows:
                    found[stem] = BatchRecord(
                        stem, dataset, batch_id, bool(is_open), frozenset(parts.get(stem, ()))
                    )
        return found

    def adopt(self, cache_identity: str, destination: str) -> int:
        """Give records made before identities existed this cache and destination; how many."""
        with self._errors("adopt batches"), immediate_transaction(self._db):
            return self._db.execute(
                "UPDATE batches SET cache_identity = ?, destination = ?"
                " WHERE cache_identity IS NULL",
                (cache_identity, destination),
            ).rowcount

    def finished_holders(
        self,
        dataset: str,
        partition_ids: Collection[str],
        *,
        other_than: str,
        cache_identity: str,
        destination: str,
    ) -> dict[str, str]:
        """Partition id -> batch id, for those of `partition_ids` a finished batch holds.

        Only batches of `cache_identity` written to `destination` count (see
        the module doc); an empty identity matches nothing.
        """
        found: dict[str, str] = {}
        if not cache_identity:
            return found
        with self._errors("read batches"):
            for chunk, marks in _in_chunks(partition_ids):
                rows = self._db.execute(
                    "SELECT bp.partition_id, b.batch_id FROM batch_partitions AS bp"
                    " JOIN batches AS b ON b.stem = bp.stem"
                    " WHERE b.open = 0 AND b.dataset = ? AND b.stem != ?"
                    " AND b.cache_identity = ? AND b.destination = ?"
                    f" AND bp.partition_id IN ({marks})",
                    (dataset, other_than, cache_identity, destination, *chunk),
                )
                found.update((pid, batch_id) for pid, batch_id in rows)
        return found

    def _days(self, stem: str) -> frozenset[str]:
        rows = self._db.execute("SELECT day_dir FROM batch_days WHERE stem = ?", (stem,))
        return frozenset(d for (d,) in rows)

    # --------------------------------------------------------------- plumbing

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise StateError(f"blob batch index {self.path} is closed")
            try:
                yield
            except sqlite3.Error as exc:
                raise StateError(f"blob batch index {self.path}: cannot {what}: {exc}") from exc

    def close(self) -> None:
        """Close the database. A second call is a no-op."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _in_chunks(values: Collection[str]) -> Iterator[tuple[list[str], str]]:
    """`values` sorted, in slices small enough for one ``IN (...)``, each with its placeholders."""
    wanted = sorted(values)
    for start in range(0, len(wanted), _LOOKUP_CHUNK):
        chunk = wanted[start : start + _LOOKUP_CHUNK]
        yield chunk, ",".join("?" * len(chunk))
