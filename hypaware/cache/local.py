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

The code is split by concern, one part of `LocalCache` each, which it
makes and holds: `hypaware.cache.directory` (`CacheDirectory`: file names,
dataset descriptions, seq counter, lock, atomic writes),
`hypaware.cache.reads` (`CacheReader`: listing and opening sealed
partitions), `hypaware.cache.writes` (`CacheWriter`: append, seal, recover)
and `hypaware.cache.retention` (`CacheRetention`: dropping old partitions).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypaware.cache.directory import CacheDirectory, CacheSettings, LocalCacheStats
from hypaware.cache.identity import local_identity
from hypaware.cache.reads import CacheReader
from hypaware.cache.retention import CacheRetention
from hypaware.cache.writes import CacheWriter
from hypaware.core.config import (
    DEFAULT_SEGMENT_CODEC,
    SegmentCompression,
    SegmentFormat,
    segment_codec_problem,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.cache.protocol import ExportFloor, RetentionReport
    from hypaware.core.config import HypawareConfig
    from hypaware.core.types import DatasetInfo, PartitionRef

__all__ = ["LocalCache", "LocalCacheStats"]


class LocalCache:
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

    path: Path
    stats: LocalCacheStats

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
        self._check_codec(segment_format, compression)
        self._settings = CacheSettings(
            fsync=fsync,
            segment_format=segment_format,
            compression=compression or DEFAULT_SEGMENT_CODEC[segment_format],
            retention=retention,
            max_bytes=max_bytes,
            max_age=max_age,
        )
        self.stats = LocalCacheStats()
        utc_clock = clock or (lambda: datetime.now(UTC))
        self._identity: str | None = None
        self._directory = CacheDirectory(self.path, settings=self._settings, stats=self.stats)
        self._reader = CacheReader(self._directory)
        self._writer = CacheWriter(self._directory, self._reader, clock=utc_clock)
        self._retainer = CacheRetention(self._directory, self._reader, clock=utc_clock)

    # Settings read by the parts at each use: one changed here holds at once.

    @property
    def fsync(self) -> bool:
        """Whether files are made durable (fsync) before they are renamed into place."""
        return self._settings.fsync

    @fsync.setter
    def fsync(self, value: bool) -> None:
        self._settings.fsync = value

    @property
    def segment_format(self) -> str:
        """The format sealed segments are written in (``arrow`` or ``parquet``)."""
        return self._settings.segment_format

    @segment_format.setter
    def segment_format(self, value: SegmentFormat) -> None:
        self._check_codec(value, self._settings.compression)
        self._settings.segment_format = value

    @property
    def compression(self) -> str:
        """The codec of sealed segments."""
        return self._settings.compression

    @compression.setter
    def compression(self, value: SegmentCompression) -> None:
        self._check_codec(self._settings.segment_format, value)
        self._settings.compression = value

    @staticmethod
    def _check_codec(segment_format: str, compression: str | None) -> None:
        problem = segment_codec_problem(segment_format, compression)
        if problem:
            raise ValueError(problem)

    @property
    def retention(self) -> timedelta | None:
        """Sealed partitions older than this, and not needed by a sink, are dropped."""
        return self._settings.retention

    @retention.setter
    def retention(self, value: timedelta | None) -> None:
        self._settings.retention = value

    @property
    def max_bytes(self) -> int | None:
        """A hard cap on sealed bytes (oldest dropped first, even if a sink still needs them)."""
        return self._settings.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        self._settings.max_bytes = value

    @property
    def max_age(self) -> timedelta | None:
        """A hard cap on a sealed partition's age."""
        return self._settings.max_age

    @max_age.setter
    def max_age(self, value: timedelta | None) -> None:
        self._settings.max_age = value

    # ------------------------------------------------------------ datasets

    def define_dataset(self, info: DatasetInfo) -> DatasetInfo:
        """Create `info.name`, or check that it already exists with the same description.

        Raises `CacheError` when the dataset exists with a different schema or
        partitioning, or when the directory cannot be written.
        """
        return self._directory.define_dataset(info)

    def has_dataset(self, name: str) -> bool:
        """Whether `name` is defined (quietly False when the cache directory is missing).

        A name no dataset could have (``../x``, ``a/b``) is a `CacheError`.
        """
        return self._directory.has_dataset(name)

    def datasets(self) -> Sequence[DatasetInfo]:
        return self._directory.datasets()

    def dataset(self, name: str) -> DatasetInfo:
        """The description of dataset `name`; `CacheError` if there is none."""
        return self._directory.dataset(name)

    # --------------------------------------------------------------- reads

    def ready_partitions(self, dataset: str, *, after: int = 0) -> Sequence[PartitionRef]:
        return self._reader.ready_partitions(dataset, after=after)

    def partition(self, dataset: str, partition_id: str) -> PartitionRef | None:
        return self._reader.partition(dataset, partition_id)

    # -------------------------------------------------------------- writes

    def append(
        self,
        dataset: str,
        data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch] | Iterable[Mapping[str, Any]],
    ) -> int:
        """Add rows to `dataset`; they become exportable when sealed. Returns the row count.

        `data` is an Arrow table, a record batch, record batches, or dicts
        (one per row). Columns are matched by name and cast to the dataset's
        schema. Rows are durable when this returns. Raises `CacheError` for
        rows that do not fit the schema (naming the column) or a cache that
        cannot be written.
        """
        return self._writer.append(dataset, data)

    def seal(
        self, dataset: str | None = None, *, before: datetime | None = None
    ) -> list[PartitionRef]:
        """Seal the open partitions of `dataset` (default: every dataset).

        With `before`, only partitions whose time bucket ends at or before it
        are sealed (partitions without a time grain are always sealed). Each
        sealed partition gets the next seq of its dataset. Returns them.
        """
        return self._writer.seal(dataset, before=before)

    def recover(self) -> None:
        """Finish interrupted seals of every dataset now (writers also do it on their own)."""
        self._writer.recover()

    # ----------------------------------------------------------- retention

    def enforce_retention(
        self, floors: Mapping[str, ExportFloor], *, now: datetime | None = None
    ) -> RetentionReport:
        return self._retainer.enforce_retention(floors, now=now)

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
