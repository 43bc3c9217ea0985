"""What a sink acknowledged, read from the progress store in one snapshot, is what the rule says."""

from __future__ import annotations

from pathlib import Path

from hypaware.cache.protocol import ExportFloor
from hypaware.core.types import RetryPartition
from hypaware.export.state import ProgressStore
from hypaware.querying.progress import acknowledged


def composed(store: ProgressStore, sink: str, dataset: str) -> ExportFloor | None:
    """The rule read piece by piece: the high-water, then what is respooled, parked or in flight."""
    high_water = store.high_water(sink, dataset)
    if high_water is None:
        return None
    pending = {e.partition_id for e in store.respooled(sink, dataset)}
    pending |= {p.partition_id for p in store.parked(sink, dataset)}
    for flight in store.in_flight(sink):
        if flight.dataset == dataset:
            pending.update(flight.partition_ids)
    return ExportFloor(high_water, frozenset(pending))


def test_acknowledged_both_ways(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    try:
        assert acknowledged(store, "s", "events") is None
        store.start("s", "events", 0)
        first = store.begin_batch("b1", "s", "events", [("p1", 1), ("p2", 2), ("p3", 3)])
        store.settle_batch(first, ["p1", "p3"], [RetryPartition("p2", "busy")])
        store.begin_batch("b2", "s", "events", [("p4", 4)])
        store.start("s", "other", 0)
        store.begin_batch("b3", "s", "other", [("q1", 1)])
        expected = ExportFloor(3, frozenset({"p2", "p4"}))
        assert acknowledged(store, "s", "events") == expected
        assert composed(store, "s", "events") == expected
        assert acknowledged(store, "t", "events") is None
    finally:
        store.close()
