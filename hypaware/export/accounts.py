"""The ledger: where each sealed partition of a dataset stands for one sink.

Every partition the cache holds sealed is in exactly one bucket:

- ``in_flight``: in a batch handed to the sink whose outcome is not settled;
- ``parked``: failed for good (or too often), waiting for ``hypaware retry``;
- ``pending``: respooled, or sealed after the sink's high-water (the next pass);
- ``before_start``: sealed before the sink's start point, not exported
  (``--backfill`` sends them);
- ``exported``: acknowledged by the sink.

The buckets add up to ``sealed`` by construction; what makes the ledger worth
reading is that each bucket is derived from the progress store's own record
of the partition, so a partition the store lost track of cannot hide in
"exported" (the tests check the destination holds exactly that bucket).
"""

from __future__ import annotations

from typing import Any

import attrs

from hypaware.cache.protocol import Cache
from hypaware.export.state import ProgressStore

__all__ = ["BUCKETS", "Bucket", "DatasetLedger", "dataset_ledger"]

BUCKETS = ("exported", "pending", "in_flight", "parked", "before_start")


@attrs.define
class Bucket:
    partitions: int = 0
    rows: int = 0

    def add(self, rows: int) -> None:
        self.partitions += 1
        self.rows += rows


@attrs.define
class DatasetLedger:
    """One (sink, dataset): its sealed partitions by bucket, and its start point."""

    sealed: Bucket = attrs.field(factory=Bucket)
    exported: Bucket = attrs.field(factory=Bucket)
    pending: Bucket = attrs.field(factory=Bucket)
    in_flight: Bucket = attrs.field(factory=Bucket)
    parked: Bucket = attrs.field(factory=Bucket)
    before_start: Bucket = attrs.field(factory=Bucket)
    start_seq: int | None = None
    started_at: str | None = None

    @property
    def balanced(self) -> bool:
        buckets: list[Bucket] = [getattr(self, b) for b in BUCKETS]
        partitions = sum(b.partitions for b in buckets)
        rows = sum(b.rows for b in buckets)
        return partitions == self.sealed.partitions and rows == self.sealed.rows

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def describe_start(self) -> str | None:
        """ "started at …; N sealed partitions, R rows, before it, not exported" (or None)."""
        if self.started_at is None:
            return None
        text = f"started at {self.started_at} after seq {self.start_seq}"
        if self.before_start.partitions:
            text += (
                f"; {self.before_start.partitions} sealed partitions, "
                f"{self.before_start.rows:,} rows, before it, not exported (--backfill sends them)"
            )
        return text


def dataset_ledger(
    cache: Cache,
    state: ProgressStore,
    sink: str,
    dataset: str,
    *,
    replaced: bool | None = None,
) -> DatasetLedger:
    """Account for every sealed partition of `dataset` in `cache` for `sink`.

    `replaced`: the store tracks another cache than `cache` (it was wiped or
    replaced and no driver has bound the store to it yet). The store's
    progress names the old cache's partitions, so none of it applies: the
    next export starts this cache from its beginning, and every sealed
    partition is pending. None (the default) compares the store's tracked
    identity with `cache.identity`; a caller that must not make a cache's
    identity file (a read-only `status`) works it out itself and says.
    """
    if replaced is None:
        # A host's cache may have no identity (the driver then binds a stand-in).
        identity = getattr(cache, "identity", None)
        tracked = state.cache_identity()
        replaced = identity is not None and tracked is not None and tracked != identity
    ledger = DatasetLedger()
    if replaced:
        for part in cache.ready_partitions(dataset):
            ledger.sealed.add(part.row_count)
            ledger.pending.add(part.row_count)
        return ledger
    high_water = state.high_water(sink, dataset)
    point = state.start_point(sink, dataset)
    if point is not None:
        ledger.start_seq = point.start_seq
        ledger.started_at = point.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    flying = {pid for f in state.in_flight(sink) if f.dataset == dataset for pid in f.partition_ids}
    parked = {p.partition_id for p in state.parked(sink, dataset)}
    respooled = {e.partition_id for e in state.respooled(sink, dataset)}
    for part in cache.ready_partitions(dataset):
        rows = part.row_count
        ledger.sealed.add(rows)
        if part.id in flying:
            ledger.in_flight.add(rows)
        elif part.id in parked:
            ledger.parked.add(rows)
        elif part.id in respooled or high_water is None or part.seq > high_water:
            ledger.pending.add(rows)
        elif point is not None and point.before(part.seq):
            ledger.before_start.add(rows)
        else:
            ledger.exported.add(rows)
    return ledger
