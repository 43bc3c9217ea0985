"""ProgressStore: high-waters, respool, batches in flight, locked and corrupt databases."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from hypaware.core.errors import StateError
from hypaware.core.types import RetryPartition
from hypaware.export.state import STATE_FILE, InFlightBatch, ProgressStore
from tests.driver.helpers import T0


def test_fresh_start_keeps_an_existing_high_water(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    assert store.high_water("a", "events") is None
    assert store.start("a", "events", 7) == 7
    assert store.start("a", "events", 0) == 7
    assert store.start("b", "events", 0) == 0
    store.close()
    store.close()
    with ProgressStore(tmp_path) as again:
        assert again.high_waters() == {("a", "events"): 7, ("b", "events"): 0}


def test_batch_keeps_its_id_and_partitions_until_settled(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    store.start("a", "events", 0)
    flight = store.begin_batch("b-1", "a", "events", [("p3", 3), ("p1", 1), ("p2", 2)])
    assert store.attempt("b-1") == 1
    store.close()
    with ProgressStore(tmp_path) as reopened:
        check_reopened(reopened, flight)


def check_reopened(reopened: ProgressStore, flight: InFlightBatch) -> None:
    (again,) = reopened.in_flight("a")
    assert again.batch_id == "b-1"
    assert again.partitions == (("p3", 3), ("p1", 1), ("p2", 2))
    assert again.attempts == 1
    assert reopened.attempt("b-1") == 2
    reopened.settle_batch(flight, ["p1", "p3"], [RetryPartition("p2", "busy")], rows_exported=10)
    assert reopened.in_flight("a") == []
    assert reopened.high_water("a", "events") == 3
    (entry,) = reopened.respooled("a")
    assert (entry.partition_id, entry.seq, entry.reason, entry.attempts) == ("p2", 2, "busy", 1)
    state = reopened.sink_state("a")
    assert state.rows_exported == 10
    assert state.partitions_exported == 2
    # Retried again, then exported: the respool entry counts attempts, then goes.
    f2 = reopened.begin_batch("b-2", "a", "events", [("p2", 2)])
    reopened.settle_batch(f2, [], [RetryPartition("p2", "still busy", retryable=False)])
    (entry,) = reopened.respooled("a")
    assert (entry.attempts, entry.retryable, entry.reason) == (2, False, "still busy")
    f3 = reopened.begin_batch("b-3", "a", "events", [("p2", 2)])
    reopened.settle_batch(f3, ["p2"], [])
    assert reopened.respooled("a") == []
    assert reopened.high_water("a", "events") == 3


def test_removing_a_sink_leaves_others_alone(tmp_path: Path) -> None:
    with ProgressStore(tmp_path) as store:
        check_two_sinks(store)


def check_two_sinks(store: ProgressStore) -> None:
    store.start("a", "events", 4)
    store.start("b", "events", 9)
    f = store.begin_batch("x", "b", "events", [("p10", 10)])
    store.settle_batch(f, ["p10"], [])
    assert store.sinks() == ["a", "b"]
    assert store.high_water("a", "events") == 4
    assert store.high_water("b", "events") == 10


def test_slots_are_claimed_once(tmp_path: Path) -> None:
    with ProgressStore(tmp_path) as store:
        assert store.last_slot("a") is None
        assert store.claim_slot("a", T0)
        assert not store.claim_slot("a", T0)
        assert not store.claim_slot("a", T0 - timedelta(minutes=5))
        assert store.claim_slot("a", T0 + timedelta(minutes=5))
    with ProgressStore(tmp_path) as again:
        assert again.last_slot("a") == T0 + timedelta(minutes=5)


def test_corrupt_database_is_a_clear_error_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    garbage = b"this is not a sqlite database at all" * 100
    path.write_bytes(garbage)
    with pytest.raises(StateError, match=r"progress\.sqlite is corrupt"):
        ProgressStore(tmp_path)
    assert path.read_bytes() == garbage


def test_locked_database_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path, busy_timeout=0.1)
    store.start("a", "events", 5)
    f = store.begin_batch("b-1", "a", "events", [("p6", 6)])
    blocker = sqlite3.connect(tmp_path / STATE_FILE, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StateError, match="locked by another process"):
            store.settle_batch(f, ["p6"], [])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    # Nothing was half-applied: the batch is still in flight and can be settled now.
    assert store.high_water("a", "events") == 5
    assert [b.batch_id for b in store.in_flight("a")] == ["b-1"]
    store.settle_batch(f, ["p6"], [])
    assert store.high_water("a", "events") == 6
    store.close()


def test_unwritable_state_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StateError, match="cannot create state directory"):
        ProgressStore(blocker / "state")


def test_closed_store_refuses(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    store.close()
    with pytest.raises(StateError, match="closed"):
        store.high_water("a", "events")
