"""The sqlite habit every durable store here shares: write transactions locked up front."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

__all__ = ["immediate_transaction"]


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
