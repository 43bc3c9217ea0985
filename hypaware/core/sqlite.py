"""The sqlite habits every durable store here shares.

- Write transactions locked up front (`immediate_transaction`).
- A schema version in ``PRAGMA user_version`` and an ordered list of
  `Migration`s (`migrate`): a store written by an older hypaware is brought
  up to date step by step, each step in its own transaction together with
  the version it reaches; a store written by a newer hypaware is refused
  untouched, naming both versions.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence

import attrs

from hypaware.core.errors import StateError

__all__ = ["Migration", "immediate_transaction", "migrate", "schema_version"]


@contextlib.contextmanager
def immediate_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, locked from its start: committed, or rolled back on any error.

    ``BEGIN IMMEDIATE`` takes the write lock before the first read, so two
    writers never both read and then fail to upgrade their locks.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@attrs.frozen
class Migration:
    """One step of a store's schema: what it does, and the statements (or function) that do it.

    The n-th migration of a list (counting from 1) brings a store to schema
    version n. `apply` is SQL (statements separated by ``;``) or a function
    given the connection inside the step's transaction.
    """

    description: str
    apply: str | Callable[[sqlite3.Connection], object]


def schema_version(db: sqlite3.Connection) -> int:
    """The store's schema version (``PRAGMA user_version``; 0 for a store that never set it)."""
    row = db.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(db: sqlite3.Connection, migrations: Sequence[Migration], *, what: str) -> int:
    """Bring the store to ``len(migrations)``; returns the version it was at.

    Raises `StateError` naming `what` when the store's version is newer than
    this hypaware knows (it is left untouched). Each step commits with the
    version it reaches, so a crash between steps resumes from the last one
    done; a step that fails is rolled back whole.
    """
    latest = len(migrations)
    found = schema_version(db)
    if found > latest:
        raise StateError(
            f"{what} has schema version {found}, written by a newer hypaware; this one knows "
            f"versions up to {latest}: upgrade hypaware, or move the file aside to start afresh"
        )
    for version in range(found + 1, latest + 1):
        step = migrations[version - 1]
        with immediate_transaction(db):
            # Read again under the write lock: another process may have migrated meanwhile.
            if schema_version(db) >= version:
                continue
            if isinstance(step.apply, str):
                for statement in step.apply.split(";"):
                    if statement.strip():
                        db.execute(statement)
            else:
                step.apply(db)
            # PRAGMA takes no parameters; version is an int from range().
            db.execute(f"PRAGMA user_version = {version:d}")
    return found
