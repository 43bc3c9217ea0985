"""Retention for `LocalCache`: drop sealed partitions every sink is done with, or past a cap."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from hypaware.cache.directory import (
    SEGMENT_NAME,
    CacheDirectory,
    log,
)
from hypaware.cache.index import stale_indexes
from hypaware.cache.protocol import ExportFloor, RetentionReport
from hypaware.cache.reads import CacheReader, Segment
from hypaware.core.errors import CacheError

__all__ = ["CacheRetention"]

# How old (in seconds) a listing retention takes instead of listing again may be.
_RECENT = 1.0

# A segment, its dataset, and whether some sink still needs it (asked only under a byte cap).
_Candidate = tuple[Segment, str, bool]


class CacheRetention:
    """Dropping old sealed partitions (part of `LocalCache`).

    `retention`, `max_bytes` and `max_age` are the rules `LocalCache`
    describes; `clock` says when "now" is, and `reader` what is sealed.
    """

    def __init__(
        self,
        directory: CacheDirectory,
        reader: CacheReader,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self.directory = directory
        self.reader = reader
        # The cache's own, shared through its directory: one settings object, one stats.
        self.settings = directory.settings
        self.stats = directory.stats
        self._clock = clock

    def enforce_retention(
        self, floors: Mapping[str, ExportFloor], *, now: datetime | None = None
    ) -> RetentionReport:
        if (
            self.settings.retention is None
            and self.settings.max_bytes is None
            and self.settings.max_age is None
        ):
            return RetentionReport((), (), 0)
        now = now or self._clock()
        infos = {info.name: info for info in self.directory.datasets()}

        def still_needed(seg: Segment, ds: str) -> bool:
            floor = floors.get(ds)
            return floor is not None and floor.needs(self.reader.ref(infos[ds], seg))

        candidates, parked = self._candidates(infos, floors)
        if self.settings.max_bytes is not None:
            candidates = [(seg, ds, still_needed(seg, ds)) for seg, ds, _ in candidates]
        drop = self._aged_out(candidates, now, still_needed)
        total = 0
        if self.settings.max_bytes is not None:
            total = self._over_cap(candidates, parked, drop, self.settings.max_bytes)
        report = self._drop(drop)
        if parked and self.settings.max_bytes is not None and total > self.settings.max_bytes:
            log.warning(
                "cache is over its max_bytes cap by %d bytes, held by %d parked partitions; "
                "`hypaware retry` them or reset the sinks that parked them",
                total - self.settings.max_bytes,
                len(parked),
                extra={"parked": len(parked)},
            )
        return report

    def _candidates(
        self, infos: Mapping[str, object], floors: Mapping[str, ExportFloor]
    ) -> tuple[list[_Candidate], list[Segment]]:
        """Every segment retention may take (not yet asked whether a sink needs it), and
        the parked ones, which no rule takes: they wait for an operator."""
        candidates: list[_Candidate] = []
        parked: list[Segment] = []
        for ds in infos:
            floor = floors.get(ds)
            for entry in self._all_segments(ds):
                if floor is not None and entry.id in floor.parked:
                    parked.append(entry)
                else:
                    candidates.append((entry, ds, False))
        return candidates, parked

    def _aged_out(
        self,
        candidates: list[_Candidate],
        now: datetime,
        still_needed: Callable[[Segment, str], bool],
    ) -> dict[Path, _Candidate]:
        """The segments past `max_age`, and those past `retention` no sink needs.

        Whether a sink still needs one is asked only of those old enough to go
        (under a byte cap the candidates already say).
        """
        drop: dict[Path, _Candidate] = {}
        for seg, ds, known in candidates:
            age = now - seg.sealed_at
            hard = self.settings.max_age is not None and age > self.settings.max_age
            old = self.settings.retention is not None and age > self.settings.retention
            if not (hard or old):
                continue
            need = known if self.settings.max_bytes is not None else still_needed(seg, ds)
            if hard or not need:
                drop[seg.path] = (seg, ds, need)
        return drop

    @staticmethod
    def _over_cap(
        candidates: list[_Candidate],
        parked: list[Segment],
        drop: dict[Path, _Candidate],
        max_bytes: int,
    ) -> int:
        """Add to `drop` until what is kept fits `max_bytes`; the bytes then kept.

        Unneeded partitions go first, oldest first; needed ones only if that is not enough.
        """
        kept = [c for c in candidates if c[0].path not in drop]
        total = sum(c[0].byte_size for c in kept) + sum(p.byte_size for p in parked)
        for seg, ds, needed in sorted(kept, key=lambda c: (c[2], c[0].sealed_at, c[0].seq)):
            if total <= max_bytes:
                break
            drop[seg.path] = (seg, ds, needed)
            total -= seg.byte_size
        return total

    def _drop(self, drop: dict[Path, _Candidate]) -> RetentionReport:
        """Delete the chosen segments, each under its dataset's lock; what went."""
        dropped: list[str] = []
        forced: list[str] = []
        touched: set[str] = set()
        freed = 0
        for seg, ds, needed in sorted(drop.values(), key=lambda c: (c[1], c[0].seq)):
            try:
                with self.directory.lock(ds):
                    self._raise_counter(ds)
                    seg.path.unlink()
                    self.directory.sync_dir(seg.path.parent)
            except FileNotFoundError:
                pass
            except (OSError, CacheError) as exc:
                self.stats.io_errors += 1
                log.warning(
                    "cache retention could not drop %s: %s",
                    seg.path,
                    exc,
                    extra={"dataset": ds, "cache_path": str(seg.path)},
                )
                continue
            self.reader.forget(seg.path)
            touched.add(ds)
            self.stats.dropped_partitions += 1
            dropped.append(f"{ds}/{seg.id}")
            freed += seg.byte_size
            if needed:
                self.stats.forced_drops += 1
                forced.append(f"{ds}/{seg.id}")
                log.warning(
                    "cache retention dropped partition %s/%s before every sink exported it "
                    "(hard cap reached)",
                    ds,
                    seg.id,
                    extra={"dataset": ds, "partition": seg.id},
                )
        for ds in sorted(touched):
            self._drop_stale_indexes(ds)
        return RetentionReport(tuple(dropped), tuple(forced), freed)

    def _all_segments(self, dataset: str) -> list[Segment]:
        # The listing the read path keeps, taken again unless the pass just took it: one
        # a moment old lacks at most a seal too young to drop, and names a segment gone
        # since only to find it gone.
        listing = self.reader.kept_listing(dataset)
        if listing is None or time.monotonic() - listing.listed_at > _RECENT:
            listing = self.reader.sealed_listing(dataset, self.directory.dataset(dataset), None)
        if listing is None:
            return []
        with listing.lock:
            return list(listing.segments)

    def _drop_stale_indexes(self, dataset: str) -> None:
        """Remove the seal indexes of `dataset` none of whose segments is left."""
        sealed = self.directory.path / dataset / "sealed"
        # Under the lock: a seal renames its segments, then its index, into place, and a
        # listing taken meanwhile could show the index without them.
        try:
            with self.directory.lock(dataset):
                entries = os.listdir(sealed)
                seqs = [int(m.group(1)) for e in entries if (m := SEGMENT_NAME.match(e))]
                for name in stale_indexes(entries, seqs):
                    with contextlib.suppress(FileNotFoundError):
                        (sealed / name).unlink()
        except (OSError, CacheError) as exc:
            # Only a shortcut for readers is left behind; the next drop tries again.
            log.info("cache retention left the seal indexes of %s: %s", dataset, exc)

    def _raise_counter(self, dataset: str) -> None:
        # Seqs are never reused: the counter must cover a segment before the segment goes.
        highest = self.directory.next_seq(dataset) - 1
        if highest > self.directory.counter(dataset):
            self.directory.atomic_write(
                self.directory.path / dataset / "seq", str(highest).encode()
            )
