"""`LocalCache`: the embedded cache, Arrow chunks and sealed segments under a directory.

Layout of one dataset::

    <root>/cache-id                                 the cache's identity (see
                                                    `hypaware.cache.identity`)
    <root>/<dataset>/dataset.json                   the DatasetInfo (schema as Arrow IPC)
    <root>/<dataset>/seq                            the last seq handed out
    <root>/<dataset>/open/<key>.<n>.arrow           appended rows: per append, one Arrow
                                                    IPC chunk per partition key
    <root>/<dataset>/sealing/<seq>.<key>.<n>.arrow  chunks claimed by a seal in progress
    <root>/<dataset>/sealed/<seq>-<key>.arrow       sealed partitions, immutable: Arrow
                                                    IPC files (or .parquet, by the
                                                    segment_format they were sealed with)

Every file appears by rename after an fsync (but for the seal's index,
``sealed/.index-*.json``, a shortcut readers can do without), so a reader
never sees half a file and a crash never damages a finished one. A seal first renames each
open chunk into ``sealing/`` under its partition's new seq (the commit
point: from then on those rows belong to that seq), then writes the
segments and removes the claimed chunks; a seal cut short by a crash is
finished by the next writer. Readers list no partition at or past a seq that
is still being sealed, so a high-water taken from a listing never skips a
partition.

The code is split by concern; `LocalCache` puts the parts together:
`hypaware.cache.layout` (file names, dataset descriptions, seq counter,
lock, atomic writes), `hypaware.cache.writes` (append, seal, recover),
`hypaware.cache.reads` (listing and opening sealed partitions) and
`hypaware.cache.retention` (dropping old partitions).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hypaware.cache.identity import local_identity
from hypaware.cache.layout import LocalCacheStats
from hypaware.cache.retention import CacheRetention
from hypaware.cache.writes import CacheWrites
from hypaware.core.config import (
    DEFAULT_SEGMENT_CODEC,
    SegmentCompression,
    SegmentFormat,
    segment_codec_problem,
)

if TYPE_CHECKING:
    from hypaware.core.config import HypawareConfig

__all__ = ["LocalCache", "LocalCacheStats"]


class LocalCache(CacheWrites, CacheRetention):
    """A cache in a local directory.

    - `retention`: sealed partitions older than this (by seal time) are
      dropped once every sink that receives them has exported them; None
      keeps them. Default 7 days.
    - `max_bytes`, `max_age`: hard caps. Past them the oldest partitions go
      even if some sink has not exported them; each such drop is logged as a
      warning and counted in ``stats.forced_drops``. Default: no cap.
    - `segment_format`: the file format of sealed segments, ``"arrow"``
      (Arrow IPC, the default) or ``"parquet"``. Arrow segments seal and
      read back at a fraction of Parquet's CPU, since nothing is encoded:
      sealing copies the appended chunks, reading maps the file.
    - `compression`: the codec of sealed segments: ``"lz4"`` (the default
      for Arrow), ``"zstd"`` or ``"none"``, and for Parquet also
      ``"snappy"`` (its default). zstd suits a cache short of disk; none
      suits one short of CPU.
    - `fsync`: make every file durable before it is renamed into place
      (default True; switch off only for throwaway caches).
    - `clock`: the time source for seal times and retention (UTC).

    Segments of either format and any codec stay readable, whatever
    `segment_format` and `compression` say now: they only decide how new
    seals are written.

    Appends and seals of one dataset are serialised with a lock file, so
    several processes may write the same cache.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention: timedelta | None = timedelta(days=7),
        max_bytes: int | None = None,
        max_age: timedelta | None = None,
        segment_format: SegmentFormat = "arrow",
        compression: SegmentCompression | None = None,
        fsync: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = Path(path)
        self.retention = retention
        self.max_bytes = max_bytes
        self.max_age = max_age
        problem = segment_codec_problem(segment_format, compression)
        if problem:
            raise ValueError(problem)
        self.segment_format = segment_format
        self.compression = compression or DEFAULT_SEGMENT_CODEC[segment_format]
        self.fsync = fsync
        self.stats = LocalCacheStats()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._infos = {}
        self._segments = {}
        self._listings = {}
        self._bad = set()
        self._warned_missing = False
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        """This cache's identity, unique across machines (``<root>/cache-id``, made on first use).

        A wiped or replaced directory gets a new identity, so the progress
        and sinks that knew the old one never take its partitions for these.
        """
        if self._identity is None:
            self._identity = local_identity(self.path, fsync=self.fsync)
        return self._identity

    @classmethod
    def from_config(cls, config: HypawareConfig) -> LocalCache:
        """The cache a loaded configuration describes (``cache`` section)."""
        cache = config.cache
        return cls(
            config.cache_path,
            retention=_hours(cache.retention_hours),
            max_bytes=cache.max_bytes,
            max_age=_hours(cache.max_age_hours),
            segment_format=cache.segment_format,
            compression=cache.compression,
        )

    def __repr__(self) -> str:
        return f"LocalCache({str(self.path)!r})"


def _hours(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(hours=value)
