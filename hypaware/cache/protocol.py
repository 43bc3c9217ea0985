"""The cache as the export driver sees it: datasets and their sealed partitions.

The cache is written by sources and read by the driver. The driver depends
only on the read side below, so a host application can hand it any cache that
has this shape. `hypaware.LocalCache` is the embedded default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

# ExportFloor lives in core, where query sources below the cache use it too.
from hypaware.core.types import DatasetInfo, ExportFloor, PartitionRef

__all__ = ["Cache", "ExportFloor", "RetentionAware", "RetentionReport", "declared_identity"]


@runtime_checkable
class Cache(Protocol):
    """The read side of a cache.

    Methods are synchronous and cheap (they list and read metadata, not
    rows); rows are streamed through `PartitionRef.open()`.

    `identity` names the cache, uniquely across machines and for as long as
    its partitions live: a partition id is unique only within its cache, so
    the driver and sinks name a partition by (identity, dataset, id). A new
    or wiped cache must get a new identity; the same cache keeps its own
    across restarts. A cache without this attribute still exports: the
    driver then makes one and keeps it in its progress store, and says so
    (docs/embedding.md).
    """

    @property
    def identity(self) -> str:
        """The cache's stable identity (8 to 128 characters of ``[A-Za-z0-9._:-]``)."""
        ...

    def datasets(self) -> Sequence[DatasetInfo]:
        """Every dataset the cache holds, in a stable order.

        Raises `CacheError` only when the cache as a whole cannot be read;
        a dataset whose description is unreadable is reported and left out.
        """
        ...

    def ready_partitions(self, dataset: str, *, after: int = 0) -> Sequence[PartitionRef]:
        """The sealed partitions of `dataset` whose `seq` is greater than `after`, by `seq`.

        Only partitions that are completely written are listed, and never a
        partition with a higher `seq` while one with a lower `seq` of the
        same dataset is still being sealed: a high-water taken from this list
        never skips a partition that appears later. A segment that cannot be
        read is reported, counted and left out. Raises `CacheError` for an
        unknown dataset.
        """
        ...

    def partition(self, dataset: str, partition_id: str) -> PartitionRef | None:
        """The sealed partition `partition_id` of `dataset`, or None if it is gone."""
        ...


@attrs.frozen
class RetentionReport:
    """What one retention pass dropped.

    `forced` counts partitions dropped by a hard cap although some sink had
    not exported them yet (each also logged as a warning).
    """

    dropped: tuple[str, ...] = ()
    forced: tuple[str, ...] = ()
    bytes_freed: int = 0


@runtime_checkable
class RetentionAware(Protocol):
    """A cache whose retention the driver can steer with what sinks still need."""

    def enforce_retention(
        self, floors: Mapping[str, ExportFloor], *, now: datetime | None = None
    ) -> RetentionReport:
        """Drop sealed partitions past the retention horizon.

        A partition some sink still needs (per `floors`; a dataset missing
        from `floors` is needed by no sink) is kept unless a hard cap forces
        it out. A partition in a floor's `parked` set is never dropped.
        """
        ...


def declared_identity(cache: object) -> object:
    """The `Cache.identity` that `cache` declares, unchecked; None if it has none.

    A host's cache may predate the attribute: the driver then binds a
    stand-in, and queries fall back on progress. The one place the attribute
    is looked for, so every caller treats its absence the same way; reading
    it may raise `CacheError` (a read-only cache that never made one).
    """
    return getattr(cache, "identity", None)
