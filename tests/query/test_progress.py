"""What a sink acknowledged, read from the progress store (one snapshot, or composed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypaware.cache.protocol import ExportFloor
from hypaware.core.types import RetryPartition
from hypaware.export.state import ProgressStore
from hypaware.querying.progress import acknowledged


class WithoutSnapshot:
    """The store's public reads only, as an older store offers them."""

    def __init__(self, store: ProgressStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name == "export_floor":
            raise AttributeError(name)
        return getattr(self.store, name)


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
        assert acknowledged(WithoutSnapshot(store), "s", "events") == expected  # type: ignore[arg-type]
        assert acknowledged(store, "t", "events") is None
    finally:
        store.close()
