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

import bisect
from collections.abc import Sequence
from typing import Any

import attrs

from hypaware.cache.protocol import Cache, declared_identity
from hypaware.core.types import PartitionRef
from hypaware.export.binding import StartPoint
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

    def merge(self, other: Bucket) -> None:
        self.partitions += other.partitions
        self.rows += other.rows


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
        buckets = (self.exported, self.pending, self.in_flight, self.parked, self.before_start)
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
    sealed: Sequence[PartitionRef] | None = None,
) -> DatasetLedger:
    """Account for every sealed partition of `dataset` in `cache` for `sink`.

    `replaced`: the store tracks another cache than `cache` (it was wiped or
    replaced and no driver has bound the store to it yet). The store's
    progress names the old cache's partitions, so none of it applies: the
    next export starts this cache from its beginning, and every sealed
    partition is pending. None (the default) compares the store's tracked
    identity with `cache.identity`; a caller that must not make a cache's
    identity file (a read-only `status`) works it out itself and says.

    `sealed`: the partitions to account for, as `cache.ready_partitions`
    listed them (by seq), when the caller has that listing already; by
    default the cache is listed.
    """
    if replaced is None:
        # A host's cache may have no identity (the driver then binds a stand-in).
        identity = declared_identity(cache)
        tracked = state.cache_identity()
        replaced = identity is not None and tracked is not None and tracked != identity
    if sealed is None:
        sealed = cache.ready_partitions(dataset)
    ledger = DatasetLedger(sealed=_bucket(sealed))
    if replaced:
        ledger.pending = _bucket(sealed)
        return ledger
    high_water = state.high_water(sink, dataset)
    point = state.start_point(sink, dataset)
    if point is not None:
        ledger.start_seq = point.start_seq
        ledger.started_at = point.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    flying = {pid for f in state.in_flight(sink) if f.dataset == dataset for pid in f.partition_ids}
    parked = {p.partition_id for p in state.parked(sink, dataset)}
    respooled = {e.partition_id for e in state.respooled(sink, dataset)}
    # The few partitions the store names are bucketed one by one; the rest by seq
    # ranges of the listing (a week of partitions is thousands).
    named = flying | parked | respooled
    if named:
        for part in sealed:
            if part.id in flying:
                ledger.in_flight.add(part.row_count)
            elif part.id in parked:
                ledger.parked.add(part.row_count)
            elif part.id in respooled:
                ledger.pending.add(part.row_count)
        sealed = [p for p in sealed if p.id not in named]
    _by_seq(ledger, sealed, high_water, point)
    return ledger


def _by_seq(
    ledger: DatasetLedger,
    plain: Sequence[PartitionRef],
    high_water: int | None,
    point: StartPoint | None,
) -> None:
    """Bucket partitions the store does not name, by where their seq falls."""
    if high_water is None:
        ledger.pending.merge(_bucket(plain))
        return
    done = bisect.bisect_right(plain, high_water, key=_seq)
    ledger.pending.merge(_bucket(plain[done:]))
    if point is None:
        ledger.exported.merge(_bucket(plain[:done]))
        return
    lo = bisect.bisect_right(plain, point.backfill_hw, key=_seq, hi=done)
    hi = max(lo, bisect.bisect_right(plain, point.start_seq, key=_seq, hi=done))
    ledger.before_start.merge(_bucket(plain[lo:hi]))
    ledger.exported.merge(_bucket(plain[:lo]))
    ledger.exported.merge(_bucket(plain[hi:done]))


def _bucket(parts: Sequence[PartitionRef]) -> Bucket:
    return Bucket(len(parts), sum(p.row_count for p in parts))


def _seq(part: PartitionRef) -> int:
    return part.seq
