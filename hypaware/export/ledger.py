"""The operator's side of the progress store: parked partitions, sink identity, sink health.

These tables sit next to the progress tables in ``progress.sqlite`` and are
created with ``CREATE TABLE IF NOT EXISTS``, so an older store gains them on
open without losing anything.

- ``parked``: partitions that failed in a way retrying every slot cannot fix
  (a non-retryable failure, or more attempts than the sink's
  ``max_partition_attempts``). They stay in the cache and out of every pass
  until an operator calls ``hypaware retry``.
- ``sink_identity``: a fingerprint of each sink's destination (never its
  secrets), so a sink pointed somewhere else under the same name is noticed.
- ``sink_health``: the failure a sink is in, since when, and how many
  partitions it holds, so a pass with failures never reads as a clean one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path

import attrs

from hypaware.core.sqlite import immediate_transaction

__all__ = [
    "LEDGER_SCHEMA",
    "Ledger",
    "ParkedPartition",
    "SinkHealth",
    "SinkIdentity",
    "prior_state",
]

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS parked (
    sink TEXT NOT NULL, dataset TEXT NOT NULL, partition_id TEXT NOT NULL,
    seq INTEGER NOT NULL, reason TEXT NOT NULL, retryable INTEGER NOT NULL,
    attempts INTEGER NOT NULL, parked_at TEXT NOT NULL,
    PRIMARY KEY (sink, dataset, partition_id));
CREATE TABLE IF NOT EXISTS sink_identity (
    sink TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, description TEXT NOT NULL,
    recorded_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sink_health (
    sink TEXT PRIMARY KEY, error TEXT, error_since TEXT,
    error_partitions INTEGER NOT NULL DEFAULT 0,
    parked INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL);
"""


@attrs.frozen
class ParkedPartition:
    """A partition taken out of the retry loop until an operator puts it back."""

    sink: str
    dataset: str
    partition_id: str
    seq: int
    reason: str
    retryable: bool
    attempts: int
    parked_at: datetime


@attrs.frozen
class SinkIdentity:
    """The recorded fingerprint of a sink's destination and its readable description."""

    fingerprint: str
    description: str
    recorded_at: datetime


@attrs.frozen
class SinkHealth:
    """The failure a sink is in (None when its last pass was clean)."""

    error: str | None
    error_since: datetime | None
    error_partitions: int


def _now() -> str:
    """The current time as every table of the progress store records it (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat()


def prior_state(state_dir: Path, sink: str | None = None) -> dict[str, list[Path]]:
    """Files that show sinks were exported before, by sink: lock files and sinks' own state.

    With `sink`, only that sink's.
    """
    found: dict[str, list[Path]] = {}
    locks = state_dir / "locks"
    if locks.is_dir():
        for lock in sorted(locks.glob("*.lock")):
            found.setdefault(lock.stem, []).append(lock)
    own = state_dir / "sinks"
    if own.is_dir():
        for d in sorted(own.iterdir()):
            if d.is_dir() and ".replaced-" not in d.name:
                files = sorted(p for p in d.rglob("*") if p.is_file())
                if files:
                    found.setdefault(d.name, []).extend(files)
    if sink is not None:
        return {sink: found[sink]} if sink in found else {}
    return found


class Ledger:
    """The parked partitions, sink identities and sink health of a `ProgressStore`.

    `ProgressStore` owns one and offers its methods under the same names
    (see the module docstring). `errors` is the store's error context: it
    turns a failed sqlite call into a `StateError` naming the file, and
    refuses a closed store.
    """

    def __init__(
        self, db: sqlite3.Connection, errors: Callable[[str], AbstractContextManager[None]]
    ) -> None:
        self._db = db
        self._errors = errors

    # ----------------------------------------------------------- lost state

    def note_prior_state(self, state_dir: Path) -> None:
        """The work of `ProgressStore.note_prior_state`, whose docstring says what it promises."""
        sinks = sorted(prior_state(state_dir))
        with self._errors("record prior state"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('prior_sinks', ?)",
                (json.dumps(sinks),),
            )

    def prior_sinks(self) -> list[str]:
        """Sinks that had state files when this store was created empty (see above)."""
        with self._errors("read prior state"):
            row = self._db.execute("SELECT value FROM meta WHERE key = 'prior_sinks'").fetchone()
        return [] if row is None else [str(s) for s in json.loads(row[0])]

    # -------------------------------------------------------------- parking

    def park_exhausted(self, sink: str, dataset: str, max_attempts: int) -> list[ParkedPartition]:
        """The work of `ProgressStore.park_exhausted`, whose docstring says what it promises."""
        now = _now()
        with self._errors("park partitions"), immediate_transaction(self._db):
            rows = self._db.execute(
                "SELECT partition_id, seq, reason, retryable, attempts FROM respool"
                " WHERE sink = ? AND dataset = ? AND (retryable = 0 OR attempts >= ?)"
                " ORDER BY seq",
                (sink, dataset, max_attempts),
            ).fetchall()
            self._db.executemany(
                "INSERT OR REPLACE INTO parked (sink, dataset, partition_id, seq, reason,"
                " retryable, attempts, parked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(sink, dataset, p, s, r, rt, a, now) for p, s, r, rt, a in rows],
            )
            self._db.executemany(
                "DELETE FROM respool WHERE sink = ? AND dataset = ? AND partition_id = ?",
                [(sink, dataset, p) for p, *_ in rows],
            )
        at = datetime.fromisoformat(now)
        return [
            ParkedPartition(sink, dataset, p, int(s), r, bool(rt), int(a), at)
            for p, s, r, rt, a in rows
        ]

    def parked(self, sink: str | None = None, dataset: str | None = None) -> list[ParkedPartition]:
        """Parked partitions, optionally of one sink and one dataset, by sink, dataset, seq."""
        query = (
            "SELECT sink, dataset, partition_id, seq, reason, retryable, attempts, parked_at"
            " FROM parked WHERE 1 = 1"
        )
        args: list[str] = []
        if sink is not None:
            query += " AND sink = ?"
            args.append(sink)
        if dataset is not None:
            query += " AND dataset = ?"
            args.append(dataset)
        with self._errors("read parked partitions"):
            rows = self._db.execute(query + " ORDER BY sink, dataset, seq", args).fetchall()
        return [
            ParkedPartition(s, d, p, int(q), r, bool(rt), int(a), datetime.fromisoformat(at))
            for s, d, p, q, r, rt, a, at in rows
        ]

    def unpark(
        self,
        sink: str | None = None,
        dataset: str | None = None,
        partition_ids: Iterable[str] | None = None,
    ) -> list[ParkedPartition]:
        """The work of `ProgressStore.unpark`, whose docstring says what it promises."""
        wanted = None if partition_ids is None else set(partition_ids)
        chosen = [
            p for p in self.parked(sink, dataset) if wanted is None or p.partition_id in wanted
        ]
        now = _now()
        with self._errors("put parked partitions back"), immediate_transaction(self._db):
            for p in chosen:
                self._db.execute(
                    "INSERT INTO respool (sink, dataset, partition_id, seq, reason, retryable,"
                    " attempts, first_at, last_at) VALUES (?, ?, ?, ?, ?, 1, 0, ?, ?)"
                    " ON CONFLICT (sink, dataset, partition_id) DO UPDATE SET attempts = 0",
                    (
                        p.sink,
                        p.dataset,
                        p.partition_id,
                        p.seq,
                        f"retry asked: {p.reason}",
                        now,
                        now,
                    ),
                )
                self._db.execute(
                    "DELETE FROM parked WHERE sink = ? AND dataset = ? AND partition_id = ?",
                    (p.sink, p.dataset, p.partition_id),
                )
        return chosen

    def parked_ids(self) -> dict[tuple[str, str], set[str]]:
        """Parked partition ids per (sink, dataset)."""
        out: dict[tuple[str, str], set[str]] = {}
        for p in self.parked():
            out.setdefault((p.sink, p.dataset), set()).add(p.partition_id)
        return out

    # ------------------------------------------------------------- identity

    def identity(self, sink: str) -> SinkIdentity | None:
        """The recorded destination fingerprint of `sink`, or None if none was recorded."""
        with self._errors("read the sink identity"):
            row = self._db.execute(
                "SELECT fingerprint, description, recorded_at FROM sink_identity WHERE sink = ?",
                (sink,),
            ).fetchone()
        if row is None:
            return None
        return SinkIdentity(row[0], row[1], datetime.fromisoformat(row[2]))

    def record_identity(self, sink: str, fingerprint: str, description: str) -> None:
        """Record (or replace) the destination fingerprint of `sink`."""
        with self._errors("record the sink identity"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT OR REPLACE INTO sink_identity (sink, fingerprint, description,"
                " recorded_at) VALUES (?, ?, ?, ?)",
                (sink, fingerprint, description, _now()),
            )

    def has_progress(self, sink: str) -> bool:
        """Whether the store knows `sink` ever started a dataset or recorded its identity."""
        with self._errors("read progress"):
            row = self._db.execute(
                "SELECT 1 FROM progress WHERE sink = ? UNION SELECT 1 FROM sink_identity"
                " WHERE sink = ? LIMIT 1",
                (sink, sink),
            ).fetchone()
        return row is not None

    def reset_sink(self, sink: str, high_waters: dict[str, int]) -> None:
        """Forget `sink`'s progress, respool, parked set and batches in flight, then start
        each dataset of `high_waters` at the given seq. Touches no cache data."""
        now = _now()
        with self._errors("reset progress"), immediate_transaction(self._db):
            # What was handed to the sink stays known: a reset does not unsend it.
            sent = dict(
                self._db.execute(
                    "SELECT dataset, sent_seq FROM progress WHERE sink = ?", (sink,)
                ).fetchall()
            )
            for table in ("progress", "respool", "parked"):
                self._db.execute(f"DELETE FROM {table} WHERE sink = ?", (sink,))
            self._db.execute(
                "DELETE FROM batch_partitions WHERE batch_id IN"
                " (SELECT batch_id FROM batches WHERE sink = ?)",
                (sink,),
            )
            self._db.execute("DELETE FROM batches WHERE sink = ?", (sink,))
            self._db.execute("DELETE FROM sink_health WHERE sink = ?", (sink,))
            # Partitions below a reset's new start are before the start point.
            self._db.executemany(
                "INSERT INTO progress"
                " (sink, dataset, high_water, start_seq, sent_seq, started_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(sink, ds, hw, hw, sent.get(ds, 0), now, now) for ds, hw in high_waters.items()],
            )

    # --------------------------------------------------------------- health

    def record_health(self, sink: str, error: str | None, partitions: int) -> SinkHealth:
        """Record the outcome of a pass: the failure it ended in (or None) and how many
        partitions that failure holds. A failure keeps its start time while it lasts."""
        now = _now()
        with self._errors("record sink health"), immediate_transaction(self._db):
            row = self._db.execute(
                "SELECT error, error_since FROM sink_health WHERE sink = ?", (sink,)
            ).fetchone()
            since = None
            if error is not None:
                since = row[1] if row is not None and row[0] is not None and row[1] else now
            parked = self._db.execute(
                "SELECT COUNT(*) FROM parked WHERE sink = ?", (sink,)
            ).fetchone()[0]
            self._db.execute(
                "INSERT OR REPLACE INTO sink_health (sink, error, error_since, error_partitions,"
                " parked, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (sink, error, since, partitions if error is not None else 0, parked, now),
            )
        return SinkHealth(
            error, None if since is None else datetime.fromisoformat(since), partitions
        )

    def health(self, sink: str) -> SinkHealth:
        """The failure `sink` is in, since when and over how many partitions."""
        with self._errors("read sink health"):
            row = self._db.execute(
                "SELECT error, error_since, error_partitions FROM sink_health WHERE sink = ?",
                (sink,),
            ).fetchone()
        if row is None or row[0] is None:
            return SinkHealth(None, None, 0)
        return SinkHealth(
            row[0], None if row[1] is None else datetime.fromisoformat(row[1]), int(row[2])
        )
