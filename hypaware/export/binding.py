"""The progress store bound to one cache, and each sink's recorded start point.

Progress (high-waters, respool, batches in flight, parked partitions) names
partitions by id and seq, which are unique only within the cache that made
them. The store therefore records the identity of the cache it tracks
(``meta.cache_identity``) and applies its progress to that cache only.

The rule when the store meets another cache (the directory was wiped,
replaced or restored: its identity differs), documented in docs/export.md:
the store starts the new cache from its own beginning. Every (sink, dataset)
the store knew restarts at seq 0, so each sink exports every partition of
the new cache; what the store held for the old cache (respooled, parked and
in-flight partitions) is moved to ``archived_partitions``, counted, and
reported once as lost with the old cache. The change is recorded in
``cache_changes`` and shown by the report and ``hypaware status``. A store
without an identity (made before identities existed) adopts the first cache
it meets.

Each (sink, dataset) also keeps its start point: ``start_seq`` is where the
sink started the dataset (partitions at or below it were sealed before the
driver first saw the sink and are not exported unless backfilled), and
``backfill_hw`` how far a backfill has come through them. The partitions
``backfill_hw < seq <= start_seq`` are "before the start point".
``backfill_to`` is how far a backfill that has begun means to go (the start
point when it began; 0 when none has): until the backfill has sent them,
retention keeps the partitions ``backfill_hw < seq <= backfill_to``, so a
backfill cut short (a crash, a halt) finds them when it is run again.

``sent_seq`` is the highest seq this store has ever handed to the sink (in
any batch, a backfill's included; `reset-progress` leaves it as it is). A
partition above it that the sink reports as already written was written
under this cache's identity by someone else: another cache with the same
identity (a copied or restored cache directory), or an earlier store of
this cache that was lost. The driver warns (`hypaware.export.passes`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path

import attrs

from hypaware.core.errors import StateError
from hypaware.core.sqlite import immediate_transaction
from hypaware.export.ledger import _now

__all__ = ["BACKFILL_SCHEMA", "BINDING_SCHEMA", "CacheBinding", "CacheChange", "StartPoint"]

BINDING_SCHEMA = """
ALTER TABLE progress ADD COLUMN start_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE progress ADD COLUMN backfill_hw INTEGER NOT NULL DEFAULT 0;
ALTER TABLE progress ADD COLUMN sent_seq INTEGER NOT NULL DEFAULT 0;
UPDATE progress SET sent_seq = high_water;
ALTER TABLE sinks ADD COLUMN first_seen_at TEXT;
UPDATE sinks SET first_seen_at = COALESCE(last_run_at, last_slot);
CREATE TABLE IF NOT EXISTS cache_changes (
    at TEXT NOT NULL, old_identity TEXT NOT NULL, new_identity TEXT NOT NULL,
    respooled INTEGER NOT NULL, in_flight INTEGER NOT NULL, parked INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS archived_partitions (
    cache_identity TEXT NOT NULL, sink TEXT NOT NULL, dataset TEXT NOT NULL,
    partition_id TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL,
    reason TEXT NOT NULL, archived_at TEXT NOT NULL)
"""

BACKFILL_SCHEMA = """
ALTER TABLE progress ADD COLUMN backfill_to INTEGER NOT NULL DEFAULT 0
"""


@attrs.frozen
class CacheChange:
    """The store met a cache other than the one it tracked, and started it from its beginning."""

    old_identity: str
    new_identity: str
    at: datetime
    respooled: int
    in_flight: int
    parked: int

    @property
    def lost(self) -> int:
        """Partitions the store still owed the old cache, archived with it."""
        return self.respooled + self.in_flight + self.parked

    def describe(self) -> str:
        return (
            f"the cache changed at {self.at:%Y-%m-%d %H:%M:%S}Z (identity {self.old_identity} "
            f"-> {self.new_identity}): every sink starts the new cache from its beginning; "
            f"{self.lost} partitions still owed to the old cache ({self.respooled} respooled, "
            f"{self.in_flight} in flight, {self.parked} parked) were archived with it"
        )


@attrs.frozen
class StartPoint:
    """Where a sink started a dataset: partitions ``after < seq <= start_seq`` were left out."""

    start_seq: int
    backfill_hw: int
    started_at: datetime
    # How far a backfill that has begun goes (0: none has begun).
    backfill_to: int = 0

    @property
    def pending_backfill(self) -> bool:
        return self.backfill_hw < self.start_seq

    @property
    def backfilling(self) -> bool:
        """A backfill has begun and has not sent every partition it means to."""
        return self.backfill_hw < self.backfill_to

    def before(self, seq: int) -> bool:
        return self.backfill_hw < seq <= self.start_seq


class CacheBinding:
    """The cache binding and start points of a `ProgressStore` (see the module doc).

    `ProgressStore` owns one and offers its methods under the same names.
    `errors` is the store's error context (a failed sqlite call becomes a
    `StateError` naming the file; a closed store is refused); `path` is the
    file, for the messages this part raises itself.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        errors: Callable[[str], AbstractContextManager[None]],
        path: Path,
    ) -> None:
        self._db = db
        self._errors = errors
        self._path = path

    # ------------------------------------------------------------ identity

    def cache_identity(self) -> str | None:
        """The identity of the cache this store tracks (None until it has met one)."""
        with self._errors("read the cache identity"):
            row = self._db.execute("SELECT value FROM meta WHERE key = 'cache_identity'").fetchone()
        return None if row is None else str(row[0])

    def standin_identity(self, make: Callable[[], str]) -> str:
        """An identity kept in this store for a cache that has none of its own (made once)."""
        with self._errors("record a stand-in cache identity"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('standin_identity', ?)",
                (make(),),
            )
            row = self._db.execute(
                "SELECT value FROM meta WHERE key = 'standin_identity'"
            ).fetchone()
        return str(row[0])

    def bind_cache(self, identity: str, *, may_change: bool = True) -> CacheChange | None:
        """The work of `ProgressStore.bind_cache`, whose docstring says what it promises."""
        now = _now()
        with self._errors("bind the store to its cache"), immediate_transaction(self._db):
            row = self._db.execute("SELECT value FROM meta WHERE key = 'cache_identity'").fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES ('cache_identity', ?)", (identity,)
                )
                return None
            old = str(row[0])
            if old == identity:
                return None
            if not may_change:
                raise StateError(
                    f"state database {self._path}: another driver bound it to "
                    f"the cache {old} meanwhile; a driver of the cache {identity} cannot share "
                    "its state directory"
                )
            counts = self._archive(old, now)
            self._db.execute(
                "UPDATE progress SET high_water = 0, start_seq = 0, backfill_hw = 0, sent_seq = 0,"
                " backfill_to = 0, started_at = ?, updated_at = ?",
                (now, now),
            )
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'cache_identity'", (identity,))
            self._db.execute(
                "INSERT INTO cache_changes (at, old_identity, new_identity, respooled, in_flight,"
                " parked) VALUES (?, ?, ?, ?, ?, ?)",
                (now, old, identity, *counts),
            )
        return CacheChange(old, identity, datetime.fromisoformat(now), *counts)

    def _archive(self, old: str, now: str) -> tuple[int, int, int]:
        db = self._db
        respooled = db.execute(
            "INSERT INTO archived_partitions SELECT ?, sink, dataset, partition_id, seq,"
            " 'respooled', reason, ? FROM respool",
            (old, now),
        ).rowcount
        in_flight = db.execute(
            "INSERT INTO archived_partitions SELECT ?, b.sink, b.dataset, bp.partition_id,"
            " bp.seq, 'in flight', 'batch ' || b.batch_id || ' may or may not have landed', ?"
            " FROM batch_partitions AS bp JOIN batches AS b ON b.batch_id = bp.batch_id",
            (old, now),
        ).rowcount
        parked = db.execute(
            "INSERT INTO archived_partitions SELECT ?, sink, dataset, partition_id, seq,"
            " 'parked', reason, ? FROM parked",
            (old, now),
        ).rowcount
        for table in ("respool", "batch_partitions", "batches", "parked"):
            db.execute(f"DELETE FROM {table}")
        return respooled, in_flight, parked

    def cache_changes(self) -> list[CacheChange]:
        """Every change of cache the store has met, oldest first."""
        with self._errors("read cache changes"):
            rows = self._db.execute(
                "SELECT old_identity, new_identity, at, respooled, in_flight, parked"
                " FROM cache_changes ORDER BY at"
            ).fetchall()
        return [
            CacheChange(o, n, datetime.fromisoformat(a), int(r), int(f), int(p))
            for o, n, a, r, f, p in rows
        ]

    # --------------------------------------------------------- start points

    def see_sink(self, sink: str, at: datetime | None = None) -> bool:
        """Record that a driver has seen `sink` (`at`, by its clock); True the first time."""
        seen = _now() if at is None else at.astimezone(UTC).isoformat()
        with self._errors("record a sink"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT INTO sinks (sink) VALUES (?) ON CONFLICT (sink) DO NOTHING", (sink,)
            )
            changed = self._db.execute(
                "UPDATE sinks SET first_seen_at = ? WHERE sink = ? AND first_seen_at IS NULL",
                (seen, sink),
            ).rowcount
        return bool(changed)

    def seen(self, sink: str) -> bool:
        with self._errors("read a sink"):
            row = self._db.execute(
                "SELECT first_seen_at FROM sinks WHERE sink = ?", (sink,)
            ).fetchone()
        return row is not None and row[0] is not None

    def start_point(self, sink: str, dataset: str) -> StartPoint | None:
        with self._errors("read a start point"):
            row = self._db.execute(
                "SELECT start_seq, backfill_hw, started_at, backfill_to FROM progress"
                " WHERE sink = ? AND dataset = ?",
                (sink, dataset),
            ).fetchone()
        if row is None:
            return None
        return StartPoint(int(row[0]), int(row[1]), datetime.fromisoformat(row[2]), int(row[3]))

    def begin_backfill(self, sink: str, dataset: str) -> None:
        """A backfill of everything before the start point begins: retention keeps it till sent."""
        with self._errors("record a backfill"), immediate_transaction(self._db):
            self._db.execute(
                "UPDATE progress SET backfill_to = MAX(backfill_to, start_seq), updated_at = ?"
                " WHERE sink = ? AND dataset = ?",
                (_now(), sink, dataset),
            )

    def sent_seq(self, sink: str, dataset: str) -> int:
        """The highest seq of `dataset` this store has handed to `sink` (0 when none)."""
        with self._errors("read progress"):
            row = self._db.execute(
                "SELECT sent_seq FROM progress WHERE sink = ? AND dataset = ?", (sink, dataset)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def advance_backfill(self, sink: str, dataset: str, seq: int) -> None:
        """A backfill has sent (exported or respooled) every partition at or below `seq`."""
        with self._errors("record backfill progress"), immediate_transaction(self._db):
            self._db.execute(
                "UPDATE progress SET backfill_hw = MIN(start_seq, MAX(backfill_hw, ?)),"
                " updated_at = ? WHERE sink = ? AND dataset = ?",
                (seq, _now(), sink, dataset),
            )
