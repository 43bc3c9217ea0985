"""Durable export progress: a small sqlite database in the state directory.

Per (sink, dataset) it keeps the high-water (every partition with a seq at
or below it was exported to that sink, or is held in the respool set), the
respool set (partitions to send again, with the reason and attempt count),
and the batches in flight with their exact partition list, recorded before a
sink sees them: a batch re-sent after a crash keeps its id and its
partitions. Every change of progress is one transaction. The database runs
in WAL mode with a busy timeout, so `hypaware status` can read while an
export writes.

The same database holds the operator's ledger (parked partitions, sink
identities and health: `hypaware.export.ledger`), the cache the store is
bound to and each sink's start point (`hypaware.export.binding`), and the
halted sinks (`hypaware.export.halts`). The store owns one part for each,
sharing its connection and error context, and offers their methods as its
own.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import attrs

from hypaware.cache.protocol import ExportFloor
from hypaware.core.errors import StateError
from hypaware.core.sqlite import immediate_transaction, migrate
from hypaware.core.types import RetryPartition
from hypaware.export.binding import CacheBinding, CacheChange, StartPoint
from hypaware.export.halts import Halt, Halts
from hypaware.export.ledger import Ledger, ParkedPartition, SinkHealth, SinkIdentity, _now
from hypaware.export.state_schema import MIGRATIONS

__all__ = [
    "MIGRATIONS",
    "STATE_FILE",
    "InFlightBatch",
    "ProgressStore",
    "RespoolEntry",
    "SinkState",
]

STATE_FILE = "progress.sqlite"


@attrs.frozen
class RespoolEntry:
    """A partition waiting to be sent to a sink again."""

    sink: str
    dataset: str
    partition_id: str
    seq: int
    reason: str
    retryable: bool
    attempts: int


@attrs.frozen
class InFlightBatch:
    """A batch recorded before it was handed to its sink and not yet settled."""

    batch_id: str
    sink: str
    dataset: str
    partitions: tuple[tuple[str, int], ...]
    attempts: int

    @property
    def partition_ids(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.partitions)


@attrs.frozen
class SinkState:
    """What the store knows about one sink, for status displays."""

    sink: str
    high_water: Mapping[str, int]
    respool: int
    in_flight: int
    last_slot: datetime | None
    last_run_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    rows_exported: int
    partitions_exported: int


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class ProgressStore:
    """Export progress in ``<state_dir>/progress.sqlite``.

    Raises `StateError` (naming the file) when the database is locked by
    another writer for longer than `busy_timeout` seconds, is corrupt, or
    cannot be created. A failed change is rolled back whole, so no progress
    already recorded is ever lost; the file is never rewritten or removed.
    Not thread-safe: use it from one thread (the driver's event loop).

    A missing or empty (0-byte) file is not a valid store: with
    ``create=False`` it is refused; with ``create=True`` a new store is made
    and `fresh` is True, so the driver can check that nothing shows the
    sinks ran before (lost progress is refused, not absorbed).
    """

    # Declared on the class: the file is part of the store's public surface.
    path: Path

    def __init__(
        self,
        state_dir: str | Path,
        *,
        busy_timeout: float = 5.0,
        create: bool = True,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / STATE_FILE
        self.busy_timeout = busy_timeout
        if not create and not self.path.exists():
            raise StateError(f"state database {self.path} does not exist (nothing exported yet)")
        empty = self.path.exists() and self.path.stat().st_size == 0
        if empty and not create:
            raise StateError(
                f"state database {self.path} is empty (0 bytes): it is not a valid progress "
                "store; restore it from a backup, or run `hypaware export --backfill` or "
                "`hypaware reset-progress` to start again"
            )
        self.fresh = empty or not self.path.exists()
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create state directory {self.state_dir}: {exc}") from exc
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=True
            )
        except sqlite3.Error as exc:
            raise StateError(f"cannot open state database {self.path}: {exc}") from exc
        self._closed = False
        self._ledger = Ledger(self._db, self._errors)
        self._binding = CacheBinding(self._db, self._errors, self.path)
        self._halts = Halts(self._db, self._errors)
        try:
            with self._errors("open"):
                self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                check = self._db.execute("PRAGMA quick_check").fetchone()
                if check is None or check[0] != "ok":
                    raise sqlite3.DatabaseError(f"integrity check failed: {check}")
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = FULL")
                migrate(self._db, MIGRATIONS, what=f"state database {self.path}")
                if self.fresh:
                    self.note_prior_state(self.state_dir)
        except BaseException:
            self._db.close()
            raise

    # ----------------------------------------------------------- plumbing

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        if self._closed:
            raise StateError(f"state database {self.path} is closed")
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StateError(
                    f"state database {self.path} is locked by another process "
                    f"(waited {self.busy_timeout:g}s to {what}); nothing was changed"
                ) from exc
            if "readonly" in text or "unable to open" in text:
                raise StateError(
                    f"state database {self.path} cannot be written ({text}) to {what}"
                ) from exc
            raise StateError(f"state database {self.path}: cannot {what}: {text}") from exc
        except sqlite3.DatabaseError as exc:
            raise StateError(
                f"state database {self.path} is corrupt ({exc}); it was left untouched: "
                "restore it from a backup, or move it aside and export with --backfill"
            ) from exc

    def close(self) -> None:
        """Close the database. A second call is a no-op."""
        if not self._closed:
            self._closed = True
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------- high-water

    def high_water(self, sink: str, dataset: str) -> int | None:
        """The high-water of `sink` for `dataset`, or None if the pair has never been seen."""
        with self._errors("read progress"):
            row = self._db.execute(
                "SELECT high_water FROM progress WHERE sink = ? AND dataset = ?", (sink, dataset)
            ).fetchone()
        return None if row is None else int(row[0])

    def start(self, sink: str, dataset: str, high_water: int, at: datetime | None = None) -> int:
        """Record where a new (sink, dataset) pair starts; an existing pair keeps its own.

        Partitions at or below `high_water` are before the start point (not
        exported unless backfilled). `at` is when, by the driver's clock
        (default: now). Returns the pair's high-water.
        """
        now = _now() if at is None else at.astimezone(UTC).isoformat()
        with self._errors("start progress"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT OR IGNORE INTO progress"
                " (sink, dataset, high_water, start_seq, started_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (sink, dataset, high_water, high_water, now, now),
            )
            row = self._db.execute(
                "SELECT high_water FROM progress WHERE sink = ? AND dataset = ?", (sink, dataset)
            ).fetchone()
        return int(row[0])

    def high_waters(self) -> dict[tuple[str, str], int]:
        """Every (sink, dataset) high-water."""
        with self._errors("read progress"):
            rows = self._db.execute("SELECT sink, dataset, high_water FROM progress").fetchall()
        return {(s, d): int(h) for s, d, h in rows}

    def export_floor(self, sink: str, dataset: str) -> ExportFloor | None:
        """What `sink` has acknowledged of `dataset`, read in one consistent snapshot.

        A partition is acknowledged when its seq is at or below the returned
        high-water and it is not in `pending` (respooled, parked, or in a
        batch in flight). None when the pair has never been seen. Read-only; used by
        queries to split rows between the cache and the sink.
        """
        with self._errors("read progress"):
            self._db.execute("BEGIN")
            try:
                row = self._db.execute(
                    "SELECT high_water FROM progress WHERE sink = ? AND dataset = ?",
                    (sink, dataset),
                ).fetchone()
                pending = self._db.execute(
                    "SELECT partition_id FROM respool WHERE sink = ? AND dataset = ?"
                    " UNION SELECT partition_id FROM parked WHERE sink = ? AND dataset = ?"
                    " UNION SELECT bp.partition_id FROM batch_partitions AS bp"
                    " JOIN batches AS b ON b.batch_id = bp.batch_id"
                    " WHERE b.sink = ? AND b.dataset = ?",
                    (sink, dataset, sink, dataset, sink, dataset),
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        if row is None:
            return None
        return ExportFloor(int(row[0]), frozenset(str(p) for (p,) in pending))

    # ------------------------------------------------------------- respool

    def respooled(self, sink: str, dataset: str | None = None) -> list[RespoolEntry]:
        """The partitions waiting to be sent to `sink` again, oldest seq first."""
        query = (
            "SELECT sink, dataset, partition_id, seq, reason, retryable, attempts FROM respool "
            "WHERE sink = ?"
        )
        args: tuple[str, ...] = (sink,)
        if dataset is not None:
            query += " AND dataset = ?"
            args = (sink, dataset)
        with self._errors("read the respool set"):
            rows = self._db.execute(query + " ORDER BY dataset, seq", args).fetchall()
        return [RespoolEntry(s, d, p, int(q), r, bool(rt), int(a)) for s, d, p, q, r, rt, a in rows]

    def forget_respooled(self, sink: str, dataset: str, partition_ids: Iterable[str]) -> None:
        """Remove partitions from the respool set (they are gone from the cache)."""
        with self._errors("update the respool set"), immediate_transaction(self._db):
            self._db.executemany(
                "DELETE FROM respool WHERE sink = ? AND dataset = ? AND partition_id = ?",
                [(sink, dataset, p) for p in partition_ids],
            )

    # ------------------------------------------------------------- batches

    def begin_batch(
        self, batch_id: str, sink: str, dataset: str, partitions: Sequence[tuple[str, int]]
    ) -> InFlightBatch:
        """Record a batch and its exact partitions before the sink sees it."""
        with self._errors("record a batch"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT INTO batches (batch_id, sink, dataset, attempts, created_at)"
                " VALUES (?, ?, ?, 0, ?)",
                (batch_id, sink, dataset, _now()),
            )
            self._db.executemany(
                "INSERT INTO batch_partitions (batch_id, position, partition_id, seq)"
                " VALUES (?, ?, ?, ?)",
                [(batch_id, i, pid, seq) for i, (pid, seq) in enumerate(partitions)],
            )
            if partitions:
                self._db.execute(
                    "UPDATE progress SET sent_seq = MAX(sent_seq, ?)"
                    " WHERE sink = ? AND dataset = ?",
                    (max(seq for _, seq in partitions), sink, dataset),
                )
        return InFlightBatch(batch_id, sink, dataset, tuple(partitions), 0)

    def attempt(self, batch_id: str) -> int:
        """Count one more hand-over of `batch_id` to its sink; returns the new count."""
        with self._errors("record a batch attempt"), immediate_transaction(self._db):
            self._db.execute(
                "UPDATE batches SET attempts = attempts + 1 WHERE batch_id = ?", (batch_id,)
            )
            row = self._db.execute(
                "SELECT attempts FROM batches WHERE batch_id = ?", (batch_id,)
            ).fetchone()
        if row is None:
            raise StateError(f"state database {self.path}: batch {batch_id} is not recorded")
        return int(row[0])

    def in_flight(self, sink: str) -> list[InFlightBatch]:
        """Batches of `sink` recorded but not settled (a crash came in between), oldest first."""
        with self._errors("read batches in flight"):
            batches = self._db.execute(
                "SELECT batch_id, dataset, attempts FROM batches WHERE sink = ?"
                " ORDER BY created_at, batch_id",
                (sink,),
            ).fetchall()
            out = []
            for batch_id, dataset, attempts in batches:
                parts = self._db.execute(
                    "SELECT partition_id, seq FROM batch_partitions WHERE batch_id = ?"
                    " ORDER BY position",
                    (batch_id,),
                ).fetchall()
                out.append(
                    InFlightBatch(
                        batch_id, sink, dataset, tuple((p, int(s)) for p, s in parts), int(attempts)
                    )
                )
        return out

    def settle_batch(
        self,
        batch: InFlightBatch,
        exported: Iterable[str],
        retry: Iterable[RetryPartition],
        *,
        rows_exported: int = 0,
        backfill: bool = False,
    ) -> None:
        """In one transaction: forget the batch, advance progress, respool what is to retry.

        Every partition of the batch must be in `exported` or `retry` (or be
        gone from the cache, which the caller reports as exported-or-lost).
        The high-water moves to the batch's highest seq: each partition at
        or below it is now exported or respooled. A `backfill` batch (of
        partitions before the start point, sent in seq order) moves the
        backfill's progress the same way.
        """
        exported = list(exported)
        retry = list(retry)
        seqs = dict(batch.partitions)
        now = _now()
        with self._errors("settle a batch"), immediate_transaction(self._db):
            if batch.partitions:
                self._advance(batch, max(seqs.values()), now, backfill=backfill)
            self._db.executemany(
                "DELETE FROM respool WHERE sink = ? AND dataset = ? AND partition_id = ?",
                [(batch.sink, batch.dataset, p) for p in exported],
            )
            for r in retry:
                self._respool(batch, r, seqs.get(r.partition_id, 0), now)
            self._db.execute("DELETE FROM batch_partitions WHERE batch_id = ?", (batch.batch_id,))
            self._db.execute("DELETE FROM batches WHERE batch_id = ?", (batch.batch_id,))
            if exported:
                self._db.execute(
                    "INSERT INTO sinks (sink) VALUES (?) ON CONFLICT (sink) DO NOTHING",
                    (batch.sink,),
                )
                self._db.execute(
                    "UPDATE sinks SET rows_exported = rows_exported + ?,"
                    " partitions_exported = partitions_exported + ? WHERE sink = ?",
                    (rows_exported, len(exported), batch.sink),
                )

    def _advance(self, batch: InFlightBatch, top: int, now: str, *, backfill: bool) -> None:
        """Move the high-water (and a backfill's progress) to `top` (inside a transaction)."""
        self._db.execute(
            "INSERT OR IGNORE INTO progress"
            " (sink, dataset, high_water, started_at, updated_at) VALUES (?, ?, 0, ?, ?)",
            (batch.sink, batch.dataset, now, now),
        )
        self._db.execute(
            "UPDATE progress SET high_water = MAX(high_water, ?), updated_at = ?"
            " WHERE sink = ? AND dataset = ?",
            (top, now, batch.sink, batch.dataset),
        )
        if backfill:
            self._db.execute(
                "UPDATE progress SET backfill_hw = MIN(start_seq, MAX(backfill_hw, ?))"
                " WHERE sink = ? AND dataset = ?",
                (top, batch.sink, batch.dataset),
            )

    def _respool(self, batch: InFlightBatch, r: RetryPartition, seq: int, now: str) -> None:
        """Put one partition back for the next pass, counting the attempt (in a transaction)."""
        self._db.execute(
            "INSERT INTO respool (sink, dataset, partition_id, seq, reason, retryable,"
            " attempts, first_at, last_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (sink, dataset, partition_id) DO UPDATE SET"
            " reason = excluded.reason, retryable = excluded.retryable,"
            " attempts = respool.attempts + excluded.attempts,"
            " last_at = excluded.last_at",
            (
                batch.sink,
                batch.dataset,
                r.partition_id,
                seq,
                r.reason,
                # The sink's fault is not the partition's: it never parks,
                # and the attempt does not count toward max_partition_attempts.
                int(r.retryable or r.sink_fault),
                0 if r.sink_fault else 1,
                now,
                now,
            ),
        )

    # ---------------------------------------------------------- sink facts

    def _touch_sink(self, sink: str, **values: str | None) -> None:
        cols = ", ".join(f"{k} = ?" for k in values)
        with self._errors("record sink status"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT INTO sinks (sink) VALUES (?) ON CONFLICT (sink) DO NOTHING", (sink,)
            )
            self._db.execute(f"UPDATE sinks SET {cols} WHERE sink = ?", (*values.values(), sink))

    def record_run(self, sink: str, *, error: str | None = None) -> None:
        """Note that a pass of `sink` finished, with the error that stopped it if any."""
        now = _now()
        if error is None:
            self._touch_sink(sink, last_run_at=now, last_success_at=now)
        else:
            self._touch_sink(sink, last_run_at=now, last_error=error, last_error_at=now)

    def last_slot(self, sink: str) -> datetime | None:
        """The last schedule slot `sink` fired for."""
        with self._errors("read the schedule"):
            row = self._db.execute("SELECT last_slot FROM sinks WHERE sink = ?", (sink,)).fetchone()
        return None if row is None else _dt(row[0])

    def claim_slot(self, sink: str, slot: datetime) -> bool:
        """Record that `sink` fires for `slot`; False if it (or a later slot) already fired."""
        with self._errors("record the schedule"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT INTO sinks (sink) VALUES (?) ON CONFLICT (sink) DO NOTHING", (sink,)
            )
            row = self._db.execute("SELECT last_slot FROM sinks WHERE sink = ?", (sink,)).fetchone()
            last = _dt(row[0]) if row is not None else None
            if last is not None and last >= slot:
                return False
            self._db.execute(
                "UPDATE sinks SET last_slot = ? WHERE sink = ?", (slot.isoformat(), sink)
            )
        return True

    def record_maintenance(self, sink: str, at: datetime, report: Mapping[str, Any]) -> None:
        """Note that `sink` was maintained at `at` (the driver's clock), and what it did."""
        body = json.dumps({"at": at.isoformat(), "report": dict(report)}, default=str)
        with self._errors("record maintenance"), immediate_transaction(self._db):
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (f"maintenance:{sink}", body),
            )

    def last_maintenance(self, sink: str) -> tuple[datetime, dict[str, Any]] | None:
        """When `sink` was last maintained and the report of that run, if ever."""
        with self._errors("read maintenance"):
            row = self._db.execute(
                "SELECT value FROM meta WHERE key = ?", (f"maintenance:{sink}",)
            ).fetchone()
        if row is None:
            return None
        try:
            body = json.loads(row[0])
            at = datetime.fromisoformat(body["at"])
            report = body.get("report") or {}
        except (ValueError, KeyError, TypeError):
            return None  # unreadable: maintenance is simply due again
        return at, report if isinstance(report, dict) else {}

    def sinks(self) -> list[str]:
        """Every sink the store has progress or facts for."""
        with self._errors("list sinks"):
            rows = self._db.execute(
                "SELECT sink FROM progress UNION SELECT sink FROM sinks ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

    def sink_state(self, sink: str) -> SinkState:
        """High-waters, respool size, batches in flight and the last run of `sink`."""
        with self._errors("read sink status"):
            hw = dict(
                self._db.execute(
                    "SELECT dataset, high_water FROM progress WHERE sink = ?", (sink,)
                ).fetchall()
            )
            respool = self._db.execute(
                "SELECT COUNT(*) FROM respool WHERE sink = ?", (sink,)
            ).fetchone()[0]
            in_flight = self._db.execute(
                "SELECT COUNT(*) FROM batches WHERE sink = ?", (sink,)
            ).fetchone()[0]
            row = self._db.execute(
                "SELECT last_slot, last_run_at, last_success_at, last_error, last_error_at,"
                " rows_exported, partitions_exported FROM sinks WHERE sink = ?",
                (sink,),
            ).fetchone()
        row = row or (None, None, None, None, None, 0, 0)
        return SinkState(
            sink=sink,
            high_water={str(k): int(v) for k, v in hw.items()},
            respool=int(respool),
            in_flight=int(in_flight),
            last_slot=_dt(row[0]),
            last_run_at=_dt(row[1]),
            last_success_at=_dt(row[2]),
            last_error=row[3],
            last_error_at=_dt(row[4]),
            rows_exported=int(row[5]),
            partitions_exported=int(row[6]),
        )

    # ----------------------------------------------------------- lost state

    def note_prior_state(self, state_dir: Path) -> None:
        """Remember which sinks had state files when this store was created empty.

        Such a sink has no progress here although it exported before: its
        progress was lost, and the driver refuses it until told what to do.
        """
        self._ledger.note_prior_state(state_dir)

    def prior_sinks(self) -> list[str]:
        """Sinks that had state files when this store was created empty (see above)."""
        return self._ledger.prior_sinks()

    # -------------------------------------------------------------- parking

    def park_exhausted(self, sink: str, dataset: str, max_attempts: int) -> list[ParkedPartition]:
        """Move respooled partitions that cannot be helped by another slot into ``parked``.

        A partition parks when its last failure was not retryable or it has
        failed `max_attempts` times. Returns what was parked now.
        """
        return self._ledger.park_exhausted(sink, dataset, max_attempts)

    def parked(self, sink: str | None = None, dataset: str | None = None) -> list[ParkedPartition]:
        """Parked partitions, optionally of one sink and one dataset, by sink, dataset, seq."""
        return self._ledger.parked(sink, dataset)

    def unpark(
        self,
        sink: str | None = None,
        dataset: str | None = None,
        partition_ids: Iterable[str] | None = None,
    ) -> list[ParkedPartition]:
        """Put parked partitions back in line: they are respooled with a fresh attempt count.

        Narrowed by `sink`, `dataset` and `partition_ids` when given. Returns
        what was put back.
        """
        return self._ledger.unpark(sink, dataset, partition_ids)

    def parked_ids(self) -> dict[tuple[str, str], set[str]]:
        """Parked partition ids per (sink, dataset)."""
        return self._ledger.parked_ids()

    # ------------------------------------------------------------- identity

    def identity(self, sink: str) -> SinkIdentity | None:
        """The recorded destination fingerprint of `sink`, or None if none was recorded."""
        return self._ledger.identity(sink)

    def record_identity(self, sink: str, fingerprint: str, description: str) -> None:
        """Record (or replace) the destination fingerprint of `sink`."""
        self._ledger.record_identity(sink, fingerprint, description)

    def has_progress(self, sink: str) -> bool:
        """Whether the store knows `sink` ever started a dataset or recorded its identity."""
        return self._ledger.has_progress(sink)

    def reset_sink(self, sink: str, high_waters: dict[str, int]) -> None:
        """Forget `sink`'s progress, respool, parked set and batches in flight, then start
        each dataset of `high_waters` at the given seq. Touches no cache data."""
        self._ledger.reset_sink(sink, high_waters)

    # --------------------------------------------------------------- health

    def record_health(self, sink: str, error: str | None, partitions: int) -> SinkHealth:
        """Record the outcome of a pass: the failure it ended in (or None) and how many
        partitions that failure holds. A failure keeps its start time while it lasts."""
        return self._ledger.record_health(sink, error, partitions)

    def health(self, sink: str) -> SinkHealth:
        """The failure `sink` is in, since when and over how many partitions."""
        return self._ledger.health(sink)

    # ------------------------------------------------------- cache binding

    def cache_identity(self) -> str | None:
        """The identity of the cache this store tracks (None until it has met one)."""
        return self._binding.cache_identity()

    def standin_identity(self, make: Callable[[], str]) -> str:
        """An identity kept in this store for a cache that has none of its own (made once)."""
        return self._binding.standin_identity(make)

    def bind_cache(self, identity: str, *, may_change: bool = True) -> CacheChange | None:
        """Bind the store to the cache `identity`; the `CacheChange` if it tracked another.

        In one transaction: a store that tracked no cache adopts this one; a
        store that tracked another archives what it still owed that cache
        and restarts every (sink, dataset) it knew at seq 0. Without
        `may_change` (the caller does not hold the store's cache lock
        exclusively) a store found tracking another cache is a `StateError`.
        """
        return self._binding.bind_cache(identity, may_change=may_change)

    def cache_changes(self) -> list[CacheChange]:
        """Every change of cache the store has met, oldest first."""
        return self._binding.cache_changes()

    # --------------------------------------------------------- start points

    def see_sink(self, sink: str, at: datetime | None = None) -> bool:
        """Record that a driver has seen `sink` (`at`, by its clock); True the first time."""
        return self._binding.see_sink(sink, at)

    def seen(self, sink: str) -> bool:
        return self._binding.seen(sink)

    def start_point(self, sink: str, dataset: str) -> StartPoint | None:
        return self._binding.start_point(sink, dataset)

    def begin_backfill(self, sink: str, dataset: str) -> None:
        """A backfill of everything before the start point begins: retention keeps it till sent."""
        self._binding.begin_backfill(sink, dataset)

    def sent_seq(self, sink: str, dataset: str) -> int:
        """The highest seq of `dataset` this store has handed to `sink` (0 when none)."""
        return self._binding.sent_seq(sink, dataset)

    def advance_backfill(self, sink: str, dataset: str, seq: int) -> None:
        """A backfill has sent (exported or respooled) every partition at or below `seq`."""
        self._binding.advance_backfill(sink, dataset, seq)

    # --------------------------------------------------------------- halts

    def halt(self, sink: str, reason: str, now: datetime | None = None) -> Halt:
        """Record one more failed try of `sink` for `reason`; the halt keeps its start."""
        return self._halts.halt(sink, reason, now)

    def halted(self, sink: str) -> Halt | None:
        """The halt `sink` is in, or None."""
        return self._halts.halted(sink)

    def resume(self, sink: str) -> Halt | None:
        """End `sink`'s halt (it exported again); returns the halt that ended, if any."""
        return self._halts.resume(sink)
