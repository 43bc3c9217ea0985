"""The progress store's schema: the first release's tables and the ordered migrations since.

`ProgressStore` brings any store up to ``len(MIGRATIONS)`` when it opens it
(``PRAGMA user_version`` counts the steps applied); docs/export.md lists them.
"""

from __future__ import annotations

import sqlite3

from hypaware.core.errors import StateError
from hypaware.core.sqlite import Migration
from hypaware.export.binding import BACKFILL_SCHEMA, BINDING_SCHEMA
from hypaware.export.halts import HALTS_SCHEMA
from hypaware.export.ledger import LEDGER_SCHEMA

__all__ = ["MIGRATIONS"]

_FIRST_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS progress (
    sink TEXT NOT NULL, dataset TEXT NOT NULL, high_water INTEGER NOT NULL,
    started_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    PRIMARY KEY (sink, dataset));
CREATE TABLE IF NOT EXISTS respool (
    sink TEXT NOT NULL, dataset TEXT NOT NULL, partition_id TEXT NOT NULL,
    seq INTEGER NOT NULL, reason TEXT NOT NULL, retryable INTEGER NOT NULL,
    attempts INTEGER NOT NULL, first_at TEXT NOT NULL, last_at TEXT NOT NULL,
    PRIMARY KEY (sink, dataset, partition_id));
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY, sink TEXT NOT NULL, dataset TEXT NOT NULL,
    attempts INTEGER NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batch_partitions (
    batch_id TEXT NOT NULL, position INTEGER NOT NULL, partition_id TEXT NOT NULL,
    seq INTEGER NOT NULL, PRIMARY KEY (batch_id, position));
CREATE TABLE IF NOT EXISTS sinks (
    sink TEXT PRIMARY KEY, last_slot TEXT, last_run_at TEXT, last_success_at TEXT,
    last_error TEXT, last_error_at TEXT,
    rows_exported INTEGER NOT NULL DEFAULT 0, partitions_exported INTEGER NOT NULL DEFAULT 0);
"""


def _first_schema(db: sqlite3.Connection) -> None:
    # Stores of the first release kept their version in meta ('1'), not in user_version.
    for statement in _FIRST_SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if row is not None and row[0] != "1":
        raise StateError(
            f"the state database has schema {row[0]!r} in its meta table and no "
            "user_version; it was not written by hypaware"
        )


# The n-th entry brings a store to schema version n (PRAGMA user_version).
# Append new steps; never edit or reorder released ones.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("the tables of the first release", _first_schema),
    Migration(
        # Releases that read only the meta row refuse a store marked "2"
        # ("has schema version 2") instead of writing to a schema they do not know.
        "the schema version moves to PRAGMA user_version",
        "INSERT INTO meta (key, value) VALUES ('schema', '2')"
        " ON CONFLICT (key) DO UPDATE SET value = '2'",
    ),
    Migration(
        "parked partitions, each sink's destination fingerprint and current failure",
        LEDGER_SCHEMA,
    ),
    Migration(
        "the cache the store tracks, each sink's start point, archived partitions",
        BINDING_SCHEMA,
    ),
    Migration("halted sinks: the cause, since when, tries, and the next try", HALTS_SCHEMA),
    Migration(
        "how far a begun backfill goes, so retention keeps what it has not sent", BACKFILL_SCHEMA
    ),
)
