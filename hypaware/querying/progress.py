"""What a sink has acknowledged of a dataset, read from the export progress store.

A sink claims a cache partition for a query only once it has acknowledged
it (`acknowledged`). Without a progress store nothing was ever exported, so
nothing is acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypaware.cache.protocol import ExportFloor
from hypaware.core.config import HypawareConfig
from hypaware.core.errors import StateError
from hypaware.querying.errors import SourceUnreadableError

if TYPE_CHECKING:
    from hypaware.export.state import ProgressStore

__all__ = ["acknowledged"]


def acknowledged(store: ProgressStore, sink: str, dataset: str) -> ExportFloor | None:
    """What `sink` has acknowledged of `dataset`: None if it never started on it.

    Without the store's one-snapshot read, the high-water is read before the
    respool set and the batches in flight: progress only moves forward, so a
    partition at or below that high-water is either acknowledged or still
    listed in one of the later reads.
    """
    snapshot = getattr(store, "export_floor", None)
    if snapshot is not None:
        floor: ExportFloor | None = snapshot(sink, dataset)
        return floor
    high_water = store.high_water(sink, dataset)
    if high_water is None:
        return None
    pending = {e.partition_id for e in store.respooled(sink, dataset)}
    for flight in store.in_flight(sink):
        if flight.dataset == dataset:
            pending.update(flight.partition_ids)
    return ExportFloor(high_water, frozenset(pending))


def _open_state(config: HypawareConfig) -> ProgressStore | None:
    from hypaware.export.state import STATE_FILE, ProgressStore

    if not (config.state_path / STATE_FILE).exists():
        return None  # nothing was ever exported: no partition is acknowledged
    try:
        return ProgressStore(config.state_path, create=False)
    except StateError as exc:
        raise SourceUnreadableError("state", f"export progress cannot be read: {exc}") from exc
