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
    """What `sink` has acknowledged of `dataset` (one snapshot); None if it never started on it."""
    return store.export_floor(sink, dataset)


def _open_state(config: HypawareConfig) -> ProgressStore | None:
    from hypaware.export.state import STATE_FILE, ProgressStore

    if not (config.state_path / STATE_FILE).exists():
        return None  # nothing was ever exported: no partition is acknowledged
    try:
        return ProgressStore(config.state_path, create=False)
    except StateError as exc:
        raise SourceUnreadableError("state", f"export progress cannot be read: {exc}") from exc
