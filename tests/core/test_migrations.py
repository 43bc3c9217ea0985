"""Versioned sqlite stores: PRAGMA user_version, ordered migrations, stores of earlier releases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.blob.batch_index import MIGRATIONS as INDEX_MIGRATIONS
from hypaware.blob.batch_index import BatchIndex
from hypaware.core.errors import StateError
from hypaware.core.sqlite import Migration, migrate, schema_version
from hypaware.core.types import RetryPartition
from hypaware.export.state import MIGRATIONS as STATE_MIGRATIONS
from hypaware.export.state import STATE_FILE, ProgressStore

FIXTURES = Path(__file__).parent.parent / "fixtures" / "state"


def _from_dump(dump: str, target: Path) -> Path:
    # The dumps were taken from stores written by the release before user_version.
    db = sqlite3.connect(target)
    try:
        db.executescript((FIXTURES / dump).read_text())
    finally:
        db.close()
    return target


def _version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return schema_version(db)
    finally:
        db.close()


def _set_version(path: Path, version: int) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(f"PRAGMA user_version = {version}")
        db.commit()
    finally:
        db.close()


# ---------------------------------------------------------------- progress store


def test_a_new_progress_store_is_at_the_latest_version(tmp_path: Path) -> None:
    ProgressStore(tmp_path).close()
    assert _version(tmp_path / STATE_FILE) == len(STATE_MIGRATIONS) == 6


def test_a_progress_store_of_the_first_release_is_migrated_and_keeps_its_progress(
    tmp_path: Path,
) -> None:
    path = _from_dump("progress-v1.sql", tmp_path / STATE_FILE)
    assert _version(path) == 0
    store = ProgressStore(tmp_path)
    try:
        assert store.high_waters() == {("archive", "events"): 12}
        (entry,) = store.respooled("archive")
        assert (entry.partition_id, entry.reason, entry.attempts) == ("p-12", "store down", 1)
        (flight,) = store.in_flight("archive")
        assert flight.batch_id == "b-2" and flight.partitions == (("p-13", 13),)
        assert store.sink_state("archive").rows_exported == 5
        # It keeps working: settle the batch that was in flight when it was written.
        store.settle_batch(flight, ["p-13"], [], rows_exported=3)
        assert store.in_flight("archive") == []
        assert store.sink_state("archive").rows_exported == 8
    finally:
        store.close()
    assert _version(path) == len(STATE_MIGRATIONS)
    db = sqlite3.connect(path)
    try:
        # Releases that only read the meta row now refuse the store instead of misreading it.
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("2",)
    finally:
        db.close()
    ProgressStore(tmp_path).close()  # opening a migrated store again changes nothing
    assert _version(path) == len(STATE_MIGRATIONS)


def test_a_progress_store_from_a_newer_hypaware_is_refused_untouched(tmp_path: Path) -> None:
    ProgressStore(tmp_path).close()
    path = tmp_path / STATE_FILE
    _set_version(path, 7)
    before = path.read_bytes()
    with pytest.raises(StateError) as info:
        ProgressStore(tmp_path)
    text = str(info.value)
    assert str(path) in text
    assert (
        "schema version 7" in text
        and "newer hypaware" in text
        and f"up to {len(STATE_MIGRATIONS)}" in text
    )
    assert path.read_bytes() == before


def test_a_foreign_meta_schema_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / STATE_FILE)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', 'banana')")
    db.commit()
    db.close()
    with pytest.raises(StateError, match=r"'banana'.*not written by hypaware"):
        ProgressStore(tmp_path)
    assert _version(tmp_path / STATE_FILE) == 0


# ------------------------------------------------------------------ batch index


def test_a_batch_index_of_the_first_release_is_migrated_and_keeps_its_batches(
    tmp_path: Path,
) -> None:
    path = _from_dump("blob-batches-v0.sql", tmp_path / "blob-batches.sqlite")
    index = BatchIndex(path)
    try:
        (open_batch,) = index.open_batches()
        assert open_batch.stem == "events-b2"
        assert open_batch.day_dirs == frozenset({"events/2026-03-02"})
        # Records made before identities are adopted by the first cache that uses the index.
        assert index.adopt("cache-one", "file:///out") == 2
        where = {"cache_identity": "cache-one", "destination": "file:///out"}
        assert index.finished_holders("events", ["p-1", "p-2", "p-3"], other_than="x", **where) == {
            "p-1": "b1",
            "p-2": "b1",
        }
        elsewhere = {"cache_identity": "cache-one", "destination": "file:///elsewhere"}
        assert index.finished_holders("events", ["p-1"], other_than="x", **elsewhere) == {}
        assert index.adopt("cache-two", "file:///out") == 0
        plan = index._db.execute(
            "EXPLAIN QUERY PLAN SELECT stem FROM batch_partitions WHERE partition_id = 'p-1'"
        ).fetchall()
        assert "batch_partitions_by_partition" in str(plan)
        # The migrated index reads receipts: an old batch has none, a new one is taken in.
        assert open_batch.receipt is None and index.receipt_of("events-b2") is None
        assert index.receipts_read("cache-one", "file:///out", "events") is None
    finally:
        index.close()
    assert _version(path) == len(INDEX_MIGRATIONS) == 4


def test_a_batch_index_from_a_newer_hypaware_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blob-batches.sqlite"
    BatchIndex(path).close()
    _set_version(path, 5)
    with pytest.raises(StateError, match=r"blob batch index .*schema version 5.*up to 4"):
        BatchIndex(path)


def test_the_first_progress_store_write_after_migration_is_durable(tmp_path: Path) -> None:
    _from_dump("progress-v1.sql", tmp_path / STATE_FILE)
    store = ProgressStore(tmp_path)
    (entry,) = store.respooled("archive")
    flight = store.begin_batch("b-3", "archive", "events", [("p-12", 12)])
    store.settle_batch(flight, [], [RetryPartition("p-12", "still down")])
    store.close()
    again = ProgressStore(tmp_path)
    try:
        (entry,) = again.respooled("archive")
        assert (entry.reason, entry.attempts) == ("still down", 2)
    finally:
        again.close()


# ------------------------------------------------------------ migrate() itself

STEPS = (
    Migration("a", "CREATE TABLE t (x INTEGER)"),
    Migration("b", "ALTER TABLE t ADD COLUMN y TEXT; CREATE INDEX t_y ON t (y)"),
    Migration("c", lambda db: db.execute("INSERT INTO t (x, y) VALUES (1, 'one')")),
)


def _schema(db: sqlite3.Connection) -> list[tuple[str, str]]:
    rows = db.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    return [(str(a), str(b)) for a, b in rows]


@given(st.lists(st.integers(0, len(STEPS)), max_size=4))
def test_migrating_in_any_number_of_stages_gives_the_same_store(stops: list[int]) -> None:
    whole = sqlite3.connect(":memory:", isolation_level=None)
    staged = sqlite3.connect(":memory:", isolation_level=None)
    try:
        assert migrate(whole, STEPS, what="whole") == 0
        for stop in sorted(stops):
            before = schema_version(staged)
            assert migrate(staged, STEPS[:stop], what="staged") == before
            assert schema_version(staged) == max(stop, before)
        migrate(staged, STEPS, what="staged")
        assert schema_version(staged) == schema_version(whole) == 3
        assert _schema(staged) == _schema(whole)
        assert staged.execute("SELECT * FROM t").fetchall() == [(1, "one")]
    finally:
        whole.close()
        staged.close()


def test_a_failing_step_is_rolled_back_and_the_version_stays() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        broken = (*STEPS[:1], Migration("bad", "CREATE TABLE u (a); CREATE TABLE t (x)"))
        with pytest.raises(sqlite3.OperationalError, match="already exists"):
            migrate(db, broken, what="db")
        assert schema_version(db) == 1
        assert "u" not in {name for name, _ in _schema(db)}
    finally:
        db.close()
