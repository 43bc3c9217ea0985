"""A dataset's sealed directory as last listed, brought up to date by what changed.

Every pass of every sink lists a dataset's sealed partitions (for new ones,
and again for its ledger), and a cache keeps a week of them by default:
thousands of names at a ``*/5`` schedule. Matching every name and finding
its segment again on each listing made a pass cost grow with the cache. A
`SealedListing` keeps the segments it has described, sorted by seq, with the
`PartitionRef` made for each; a new directory listing is compared with the
names it has handled (two set differences), only the names that came or
went are worked on, and a listing past a seq is a slice found by bisection.

The directory stays the truth: it is listed on every call, and a name is
only taken as handled once its segment was described (or found corrupt),
so a segment that could not be read yet is tried again on the next call.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

import attrs

from hypaware.core.types import DatasetInfo, PartitionRef

__all__ = ["SealedListing", "Segment"]


@attrs.frozen
class Segment:
    """One sealed segment file, as its name, size and footer describe it."""

    seq: int
    id: str
    path: Path
    row_count: int
    byte_size: int
    min_time: datetime | None
    max_time: datetime | None
    sealed_at: datetime


@attrs.define(eq=False)
class SealedListing:
    """One dataset's described segments, by seq, and the directory names already handled."""

    # Names taken care of: described segments, corrupt ones, seal indexes, strays.
    names: set[str] = attrs.field(factory=set)
    indexes: set[str] = attrs.field(factory=set)
    segments: list[Segment] = attrs.field(factory=list)
    seqs: list[int] = attrs.field(factory=list)
    refs: list[PartitionRef] = attrs.field(factory=list)
    info: DatasetInfo | None = None
    # When (time.monotonic()) the directory was last listed into it.
    listed_at: float = float("-inf")
    # A host may list from several threads (a query beside the driver).
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def changes(self, entries: Iterable[str]) -> tuple[set[str], set[str]]:
        """The names in `entries` not handled yet, and the handled names no longer there."""
        now = set(entries)
        return now - self.names, self.names - now

    def forget(self, removed: set[str]) -> list[Segment]:
        """Drop the `removed` names; the segments that went with them."""
        self.names -= removed
        self.indexes -= removed
        gone = [s for s in self.segments if s.path.name in removed]
        if gone:
            pairs = zip(self.segments, self.refs, strict=True)
            self._set([(s, r) for s, r in pairs if s.path.name not in removed])
        return gone

    def add(
        self,
        segments: list[Segment],
        info: DatasetInfo,
        make_ref: Callable[[DatasetInfo, Segment], PartitionRef],
    ) -> None:
        """Take in newly described `segments`; remake every ref if `info` changed."""
        if self.info is not info:
            self.refs = [make_ref(info, s) for s in self.segments]
            self.info = info
        if not segments:
            return
        segments.sort(key=_seq)
        made = [(s, make_ref(info, s)) for s in segments]
        if not self.seqs or segments[0].seq >= self.seqs[-1]:
            # The usual case: a seal's segments come after every one listed before.
            self.segments.extend(segments)
            self.seqs.extend(s.seq for s in segments)
            self.refs.extend(r for _s, r in made)
            return
        pairs = list(zip(self.segments, self.refs, strict=True)) + made
        pairs.sort(key=lambda pair: pair[0].seq)
        self._set(pairs)

    def between(self, after: int, before: int | None) -> list[PartitionRef]:
        """The refs with ``after < seq`` (and ``seq < before``, if given), by seq."""
        lo = bisect.bisect_right(self.seqs, after)
        hi = len(self.seqs) if before is None else bisect.bisect_left(self.seqs, before)
        return self.refs[lo:hi]

    def _set(self, pairs: list[tuple[Segment, PartitionRef]]) -> None:
        self.segments = [s for s, _r in pairs]
        self.seqs = [s.seq for s in self.segments]
        self.refs = [r for _s, r in pairs]


def _seq(segment: Segment) -> int:
    return segment.seq
