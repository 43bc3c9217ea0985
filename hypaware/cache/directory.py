"""Where a `LocalCache` keeps its files, and the part of it the other parts build on.

The file names below spell out the layout drawn in `hypaware.cache.local`.
`CacheDirectory` holds what the read path, the write path and retention
share: the dataset descriptions (``dataset.json``), the seq counter, the
per-dataset lock, and atomic writes (write a temp file, fsync, rename).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs

from hypaware.cache.durable import fsync_all
from hypaware.cache.identity import local_identity
from hypaware.cache.partitioning import GRAINS, dump_info, load_info
from hypaware.core.errors import CacheError
from hypaware.core.types import DatasetInfo

__all__ = [
    "CHUNK_NAME",
    "SEALING_NAME",
    "SEGMENT_META",
    "SEGMENT_NAME",
    "SEGMENT_SUFFIXES",
    "CacheDirectory",
    "LocalCacheStats",
]

# Every part of LocalCache logs under the module users import it from
# (docs/export.md names that logger), wherever the code lives.
log = logging.getLogger("hypaware.cache.local")

_DATASET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# Sealed segments: Arrow IPC files (".arrow") or Parquet files (".parquet"), by the
# cache's segment_format when they were sealed; readers take either.
SEGMENT_NAME = re.compile(r"^(\d{12})-([A-Za-z0-9_-]+)\.(arrow|parquet)$")
SEGMENT_SUFFIXES = (".arrow", ".parquet")
# Chunk names: "<key dir>.<time>-<pid>-<n>.arrow"; claimed ones get "<seq>." in front.
CHUNK_NAME = re.compile(r"^([A-Za-z0-9_-]+)\.(\d{20}-\d+-\d+)\.arrow$")
SEALING_NAME = re.compile(r"^(\d{12})\.([A-Za-z0-9_-]+)\.(\d{20}-\d+-\d+)\.arrow$")
SEGMENT_META = "hypaware.segment"


@attrs.define
class LocalCacheStats:
    """Counters of things the cache skipped or was forced to do; never reset."""

    corrupt_segments: int = 0
    unreadable_datasets: int = 0
    missing_root: int = 0
    io_errors: int = 0
    dropped_partitions: int = 0
    forced_drops: int = 0
    recovered_seals: int = 0


@attrs.define
class CacheSettings:
    """The settings of a `LocalCache`, one object shared by all its parts.

    Shared rather than copied: a setting changed on the cache after it is
    made (fsync switched off, `max_bytes` tightened) holds for every part at
    once. See `LocalCache` for what each means.
    """

    fsync: bool
    segment_format: str
    compression: str
    retention: timedelta | None
    max_bytes: int | None
    max_age: timedelta | None


class CacheDirectory:
    """The directory of a `LocalCache`: its datasets, seq counters, lock and atomic writes.

    `settings.fsync` says whether files are made durable before they are
    renamed into place; `stats` is the cache's, shared with its other parts.
    """

    def __init__(self, path: Path, *, settings: CacheSettings, stats: LocalCacheStats) -> None:
        self.path = path
        self.settings = settings
        self.stats = stats
        self._infos: dict[str, DatasetInfo] = {}
        self._warned_missing = False

    # ------------------------------------------------------------ datasets

    def define_dataset(self, info: DatasetInfo) -> DatasetInfo:
        """The work of `LocalCache.define_dataset`, whose docstring says what it promises."""
        _check_dataset_name(info.name)
        if info.time_grain is not None and info.time_grain not in GRAINS:
            raise CacheError(
                f"dataset {info.name!r}: time_grain {info.time_grain!r} is not one of "
                f"{', '.join(GRAINS)} or None"
            )
        existing = self._load_info(info.name, quiet=True)
        if existing is not None:
            if existing != info:
                raise CacheError(
                    f"dataset {info.name!r} already exists in {self.path} with a different "
                    "schema or partitioning"
                )
            return existing
        directory = self.path / info.name
        try:
            for sub in ("open", "sealing", "sealed"):
                (directory / sub).mkdir(parents=True, exist_ok=True)
            # The identity is born with the first dataset, before any partition.
            local_identity(self.path, fsync=self.settings.fsync)
            self.atomic_write(directory / "dataset.json", dump_info(info))
        except OSError as exc:
            raise CacheError(f"cannot create dataset {info.name!r} in {self.path}: {exc}") from exc
        self._infos[info.name] = info
        return info

    def has_dataset(self, name: str) -> bool:
        """The work of `LocalCache.has_dataset`, whose docstring says what it promises."""
        return self._load_info(name, quiet=True) is not None

    def datasets(self) -> Sequence[DatasetInfo]:
        if not self.path.is_dir():
            if not self._warned_missing:
                self._warned_missing = True
                self.stats.missing_root += 1
                log.warning(
                    "cache directory %s does not exist; no datasets to export",
                    self.path,
                    extra={"cache_path": str(self.path)},
                )
            return []
        out = []
        try:
            names = sorted(p.name for p in self.path.iterdir() if p.is_dir())
        except OSError as exc:
            raise CacheError(f"cannot list cache directory {self.path}: {exc}") from exc
        for name in names:
            info = self._load_info(name)
            if info is not None:
                out.append(info)
        return out

    def dataset(self, name: str) -> DatasetInfo:
        """The description of dataset `name`; `CacheError` if there is none."""
        info = self._load_info(name, quiet=True)
        if info is None:
            raise CacheError(f"the cache at {self.path} has no dataset {name!r}")
        return info

    def _load_info(self, name: str, *, quiet: bool = False) -> DatasetInfo | None:
        # Every entry point that takes a dataset name comes through here (or
        # `lock`), so a name that would leave the cache directory is refused
        # before any path is built from it.
        _check_dataset_name(name)
        if name in self._infos:
            return self._infos[name]
        path = self.path / name / "dataset.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._unreadable(name, path, exc, quiet)
            return None
        try:
            info = load_info(text)
        except (ValueError, KeyError, TypeError) as exc:
            self._unreadable(name, path, exc, quiet)
            return None
        self._infos[name] = info
        return info

    def _unreadable(self, name: str, path: Path, exc: BaseException, quiet: bool) -> None:
        if quiet:
            return
        self.stats.unreadable_datasets += 1
        log.warning(
            "cache dataset %r skipped: cannot read %s: %s",
            name,
            path,
            exc,
            extra={"dataset": name, "cache_path": str(path)},
        )

    # ----------------------------------------------------------- seq counter

    def next_seq(self, dataset: str) -> int:
        """The seq after every one `dataset` has handed out or has a segment or claim of."""
        _check_dataset_name(dataset)
        directory = self.path / dataset
        seqs = [self.counter(dataset)]
        for sub, pattern in (("sealed", SEGMENT_NAME), ("sealing", SEALING_NAME)):
            with contextlib.suppress(FileNotFoundError):
                for entry in os.listdir(directory / sub):
                    m = pattern.match(entry)
                    if m:
                        seqs.append(int(m.group(1)))
        return max(seqs) + 1

    def counter(self, dataset: str) -> int:
        """The last seq written to the counter of `dataset` (0 before the first seal)."""
        _check_dataset_name(dataset)
        try:
            return int((self.path / dataset / "seq").read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError as exc:
            raise CacheError(f"seq counter of dataset {dataset!r} is corrupt: {exc}") from exc

    # ------------------------------------------------------------- helpers

    @contextlib.contextmanager
    def lock(self, dataset: str) -> Iterator[None]:
        """Hold the lock file of `dataset`, which serialises its writers across processes."""
        _check_dataset_name(dataset)
        path = self.path / dataset / ".lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CacheError(f"cannot write to dataset {dataset!r} in {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def atomic_write(self, path: Path, data: bytes, *, sync_dir: bool = True) -> None:
        """Put `data` at `path` by rename, made durable first (when `fsync` says so)."""
        self._atomic_write_with(path, lambda f: f.write(data), sync_dir=sync_dir)

    def _atomic_write_with(
        self, path: Path, write: Callable[[Any], object], *, sync_dir: bool = True
    ) -> None:
        tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
        with open(tmp, "wb") as f:
            write(f)
            if self.settings.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.rename(tmp, path)
        if sync_dir:
            self.sync_dir(path.parent)

    def publish(self, written: list[tuple[Path, Path]]) -> None:
        """Fsync the temp files (all at once), then rename each to its final name."""
        if self.settings.fsync:
            fsync_all([tmp for tmp, _final in written])
        for tmp, final in written:
            os.rename(tmp, final)

    def sync_dir(self, path: Path) -> None:
        """Make the entries of directory `path` durable (when `fsync` says so)."""
        if not self.settings.fsync:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _check_dataset_name(name: str) -> None:
    if not isinstance(name, str) or not _DATASET_NAME.fullmatch(name):
        raise CacheError(
            f"dataset name {name!r} is not usable as a directory: use letters, digits, "
            "'_', '-' and '.', not starting with '.' or '-'"
        )
