"""Halted sinks: a sink whose destination or configuration is at fault stops, and is retried.

A partition a sink sends back with ``sink_fault=True`` (credentials, a
missing bucket, permissions, a wrong endpoint, a full or read-only disk, an
endpoint that cannot be reached) is not the rows' fault, so it is never
parked: it stays pending, and the sink is *halted*. A halted sink is tried
again after `halt_delay(attempts)`, a ladder that starts at
`HALT_BASE_SECONDS` and doubles up to `HALT_CAP_SECONDS`, so it never spins
and never waits longer than the cap once the cause is fixed. The first
batch it exports ends the halt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

import attrs

from hypaware.core.sqlite import immediate_transaction

__all__ = [
    "HALTS_SCHEMA",
    "HALT_BASE_SECONDS",
    "HALT_CAP_SECONDS",
    "Halt",
    "Halts",
    "halt_delay",
]

HALTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS sink_halts (
    sink TEXT PRIMARY KEY, reason TEXT NOT NULL, since TEXT NOT NULL,
    attempts INTEGER NOT NULL, next_try TEXT NOT NULL);
"""

HALT_BASE_SECONDS = 30.0
HALT_CAP_SECONDS = 900.0


def halt_delay(attempts: int) -> float:
    """Seconds before the next try of a sink that has failed `attempts` (>= 1) tries in a row."""
    step = max(attempts, 1) - 1
    # 2**step overflows float long before the cap matters; stop doubling at the cap.
    if step >= 10:
        return HALT_CAP_SECONDS
    return min(HALT_CAP_SECONDS, HALT_BASE_SECONDS * float(2**step))


@attrs.frozen
class Halt:
    """Why a sink is halted, since when, after how many tries, and when it is tried next."""

    sink: str
    reason: str
    since: datetime
    attempts: int
    next_try: datetime

    def as_dict(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "since": self.since.isoformat(),
            "attempts": self.attempts,
            "next_try": self.next_try.isoformat(),
        }


class Halts:
    """The halted sinks of a `ProgressStore`, which owns one and offers its methods by name.

    `errors` is the store's error context (a failed sqlite call becomes a
    `StateError` naming the file; a closed store is refused).
    """

    def __init__(
        self, db: sqlite3.Connection, errors: Callable[[str], AbstractContextManager[None]]
    ) -> None:
        self._db = db
        self._errors = errors

    def halt(self, sink: str, reason: str, now: datetime | None = None) -> Halt:
        """Record one more failed try of `sink` for `reason`; the halt keeps its start."""
        now = now or datetime.now(UTC)
        with self._errors("record a halted sink"), immediate_transaction(self._db):
            row = self._db.execute(
                "SELECT since, attempts FROM sink_halts WHERE sink = ?", (sink,)
            ).fetchone()
            since = now if row is None else datetime.fromisoformat(row[0])
            attempts = 1 if row is None else int(row[1]) + 1
            next_try = now + timedelta(seconds=halt_delay(attempts))
            self._db.execute(
                "INSERT OR REPLACE INTO sink_halts (sink, reason, since, attempts, next_try)"
                " VALUES (?, ?, ?, ?, ?)",
                (sink, reason, since.isoformat(), attempts, next_try.isoformat()),
            )
        return Halt(sink, reason, since, attempts, next_try)

    def halted(self, sink: str) -> Halt | None:
        """The halt `sink` is in, or None."""
        with self._errors("read halted sinks"):
            row = self._db.execute(
                "SELECT reason, since, attempts, next_try FROM sink_halts WHERE sink = ?", (sink,)
            ).fetchone()
        if row is None:
            return None
        return Halt(
            sink,
            str(row[0]),
            datetime.fromisoformat(row[1]),
            int(row[2]),
            datetime.fromisoformat(row[3]),
        )

    def resume(self, sink: str) -> Halt | None:
        """End `sink`'s halt (it exported again); returns the halt that ended, if any."""
        ended = self.halted(sink)
        if ended is not None:
            with self._errors("end a halt"), immediate_transaction(self._db):
                self._db.execute("DELETE FROM sink_halts WHERE sink = ?", (sink,))
        return ended
