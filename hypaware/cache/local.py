"""`LocalCache`: the embedded cache, Arrow chunks and Parquet segments under a directory.

Layout of one dataset::

    <root>/<dataset>/dataset.json                   the DatasetInfo (schema as Arrow IPC)
    <root>/<dataset>/seq                            the last seq handed out
    <root>/<dataset>/open/<key>.<n>.arrow           appended rows: per append, one Arrow
                                                    IPC chunk per partition key
    <root>/<dataset>/sealing/<seq>.<key>.<n>.arrow  chunks claimed by a seal in progress
    <root>/<dataset>/sealed/<seq>-<key>.parquet     sealed partitions, immutable

Every file appears by rename after an fsync, so a reader never sees half a
file and a crash never damages a finished one. A seal first renames each
open chunk into ``sealing/`` under its partition's new seq (the commit
point: from then on those rows belong to that seq), then writes the
segments and removes the claimed chunks; a seal cut short by a crash is
finished by the next writer. Readers list no partition at or past a seq that
is still being sealed, so a high-water taken from a listing never skips a
partition.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.cache.protocol import ExportFloor, RetentionReport
from hypaware.cache.partitioning import (
    GRAINS,
    bucket_closed,
    conform,
    dump_info,
    key_dir,
    load_info,
    split_by_key,
    to_table,
)
from hypaware.core.errors import CacheError
from hypaware.core.types import DatasetInfo, PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.core.config import HypawareConfig

__all__ = ["LocalCache", "LocalCacheStats"]

log = logging.getLogger(__name__)

_DATASET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_SEGMENT = re.compile(r"^(\d{12})-([A-Za-z0-9_-]+)\.parquet$")
# Chunk names: "<key dir>.<time>-<pid>-<n>.arrow"; claimed ones get "<seq>." in front.
_CHUNK = re.compile(r"^([A-Za-z0-9_-]+)\.(\d{20}-\d+-\d+)\.arrow$")
_SEALING = re.compile(r"^(\d{12})\.([A-Za-z0-9_-]+)\.(\d{20}-\d+-\d+)\.arrow$")
_KEY_META = b"hypaware.key"
_META = "hypaware.segment"
_chunk_counter = itertools.count()


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


@attrs.frozen
class _Segment:
    seq: int
    id: str
    path: Path
    row_count: int
    byte_size: int
    min_time: datetime | None
    max_time: datetime | None
    sealed_at: datetime


class LocalCache:
    """A cache in a local directory.

    - `retention`: sealed partitions older than this (by seal time) are
      dropped once every sink that receives them has exported them; None
      keeps them. Default 7 days.
    - `max_bytes`, `max_age`: hard caps. Past them the oldest partitions go
      even if some sink has not exported them; each such drop is logged as a
      warning and counted in ``stats.forced_drops``. Default: no cap.
    - `fsync`: make every file durable before it is renamed into place
      (default True; switch off only for throwaway caches).
    - `clock`: the time source for seal times and retention (UTC).

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
        fsync: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = Path(path)
        self.retention = retention
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.fsync = fsync
        self.stats = LocalCacheStats()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._infos: dict[str, DatasetInfo] = {}
        self._segments: dict[Path, _Segment] = {}
        self._bad: set[Path] = set()
        self._warned_missing = False

    @classmethod
    def from_config(cls, config: HypawareConfig) -> LocalCache:
        """The cache a loaded configuration describes (``cache`` section)."""
        cache = config.cache
        return cls(
            config.cache_path,
            retention=_hours(cache.retention_hours),
            max_bytes=cache.max_bytes,
            max_age=_hours(cache.max_age_hours),
        )

    def __repr__(self) -> str:
        return f"LocalCache({str(self.path)!r})"

    # ------------------------------------------------------------ datasets

    def define_dataset(self, info: DatasetInfo) -> DatasetInfo:
        """Create `info.name`, or check that it already exists with the same description.

        Raises `CacheError` when the dataset exists with a different schema or
        partitioning, or when the directory cannot be written.
        """
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
            self._atomic_write(directory / "dataset.json", dump_info(info))
        except OSError as exc:
            raise CacheError(f"cannot create dataset {info.name!r} in {self.path}: {exc}") from exc
        self._infos[info.name] = info
        return info

    def has_dataset(self, name: str) -> bool:
        """Whether `name` is defined (quietly False when the cache directory is missing)."""
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
        import pyarrow as pa

        info = self.dataset(dataset)
        table = conform(info, to_table(info, data, pa))
        if table.num_rows == 0:
            return 0
        directory = self.path / dataset
        with self._lock(dataset):
            try:
                for key, part in split_by_key(info, table):
                    name = (
                        f"{key_dir(key)}.{time.time_ns():020d}-{os.getpid()}-"
                        f"{next(_chunk_counter):06d}.arrow"
                    )
                    write = functools.partial(_write_ipc, table=part, key=key)
                    self._atomic_write_with(directory / "open" / name, write, sync_dir=False)
                # One directory fsync for all the chunks of this append.
                self._sync_dir(directory / "open")
            except OSError as exc:
                raise CacheError(
                    f"cannot append to dataset {dataset!r} in {self.path}: {exc}"
                ) from exc
        return int(table.num_rows)

    def seal(
        self, dataset: str | None = None, *, before: datetime | None = None
    ) -> list[PartitionRef]:
        """Seal the open partitions of `dataset` (default: every dataset).

        With `before`, only partitions whose time bucket ends at or before it
        are sealed (partitions without a time grain are always sealed). Each
        sealed partition gets the next seq of its dataset. Returns them.
        """
        names = [dataset] if dataset is not None else [d.name for d in self.datasets()]
        sealed: list[PartitionRef] = []
        for name in names:
            info = self.dataset(name)
            with self._lock(name):
                self._recover(name)
                sealed.extend(self._seal_locked(info, before))
        return sealed

    def _seal_locked(self, info: DatasetInfo, before: datetime | None) -> list[PartitionRef]:
        directory = self.path / info.name
        try:
            entries = sorted(os.listdir(directory / "open"))
        except FileNotFoundError:
            return []
        by_key: dict[str, list[str]] = {}
        for entry in entries:
            m = _CHUNK.match(entry)
            if m:
                by_key.setdefault(m.group(1), []).append(entry)
        claimed: list[int] = []
        try:
            # Claim every partition first (one directory fsync for all of them), then
            # write the segments. A chunk is claimed by renaming it under its seq: the
            # commit point. Should a crash interrupt the claims of one key, the chunks
            # claimed so far make that seq's partition and the rest a later one.
            seq = self._next_seq(info.name)
            for chunks in by_key.values():
                if before is not None:
                    key = _chunk_key(directory / "open" / chunks[0])
                    if not bucket_closed(key, info, before):
                        continue
                for chunk in chunks:
                    os.rename(
                        directory / "open" / chunk, directory / "sealing" / f"{seq:012d}.{chunk}"
                    )
                claimed.append(seq)
                seq += 1
            if not claimed:
                return []
            self._sync_dir(directory / "sealing")
            self._sync_dir(directory / "open")
            self._atomic_write(directory / "seq", str(seq - 1).encode())
            segments = self._finish_seals(info, self._claims(info.name))
            wanted = set(claimed)
            return [self._ref(info, s) for s in segments if s.seq in wanted]
        except OSError as exc:
            raise CacheError(f"cannot seal dataset {info.name!r} in {self.path}: {exc}") from exc

    def _claims(self, dataset: str) -> dict[int, tuple[str, list[Path]]]:
        """Chunks claimed by seals, by seq: (key directory name, chunk paths)."""
        claims: dict[int, tuple[str, list[Path]]] = {}
        sealing = self.path / dataset / "sealing"
        with contextlib.suppress(FileNotFoundError):
            for entry in sorted(os.listdir(sealing)):
                m = _SEALING.match(entry)
                if m:
                    claims.setdefault(int(m.group(1)), (m.group(2), []))[1].append(sealing / entry)
        return claims

    def _finish_seals(
        self, info: DatasetInfo, claims: Mapping[int, tuple[str, list[Path]]]
    ) -> list[_Segment]:
        """Write the segments of claimed partitions, then release the claims in seq order."""
        if not claims:
            return []
        order = sorted(claims)
        finals = [self._write_segment(info, seq, *claims[seq]) for seq in order]
        self._sync_dir(finals[0].parent)
        segments = []
        for seq, final in zip(order, finals, strict=True):
            for chunk in claims[seq][1]:
                with contextlib.suppress(FileNotFoundError):
                    chunk.unlink()
            segment = self._segment(final)
            if segment is None:
                raise CacheError(f"segment {final} was written but cannot be read back")
            segments.append(segment)
        self._sync_dir(self.path / info.name / "sealing")
        return segments

    def _write_segment(self, info: DatasetInfo, seq: int, keydir: str, chunks: list[Path]) -> Path:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        final = self.path / info.name / "sealed" / f"{seq:012d}-{keydir}.parquet"
        if final.exists():
            return final
        sealed_at = self._clock()
        rows = 0
        lo: Any = None
        hi: Any = None
        key: Any = {}
        tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
        with pq.ParquetWriter(tmp, info.schema, compression="zstd") as writer:
            for chunk in sorted(chunks):
                try:
                    with pa.memory_map(str(chunk)) as source:
                        table = pa.ipc.open_file(source).read_all()
                except pa.ArrowException as exc:
                    raise CacheError(
                        f"cannot seal dataset {info.name!r}: chunk {chunk} is unreadable ({exc}); "
                        "move it aside to seal the rest"
                    ) from exc
                key = _key_of(table.schema) or key
                table = table.replace_schema_metadata(info.schema.metadata)
                if table.num_rows == 0:
                    continue
                writer.write_table(table)
                rows += table.num_rows
                mm = pc.min_max(table.column(info.time_column))
                lo = _min(lo, mm["min"].as_py())
                hi = _max(hi, mm["max"].as_py())
            doc = {
                "seq": seq,
                "key": key,
                "rows": rows,
                "sealed_at": sealed_at.isoformat(),
                "min_time": _iso(lo),
                "max_time": _iso(hi),
            }
            writer.add_key_value_metadata({_META: json.dumps(doc)})
        if self.fsync:
            _fsync_file(tmp)
        os.rename(tmp, final)
        return final

    def _next_seq(self, dataset: str) -> int:
        directory = self.path / dataset
        seqs = [self._counter(dataset)]
        for sub, pattern in (("sealed", _SEGMENT), ("sealing", _SEALING)):
            with contextlib.suppress(FileNotFoundError):
                for entry in os.listdir(directory / sub):
                    m = pattern.match(entry)
                    if m:
                        seqs.append(int(m.group(1)))
        return max(seqs) + 1

    def _counter(self, dataset: str) -> int:
        try:
            return int((self.path / dataset / "seq").read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError as exc:
            raise CacheError(f"seq counter of dataset {dataset!r} is corrupt: {exc}") from exc

    def _recover(self, dataset: str) -> None:
        """Finish seals cut short by a crash and remove half-written temp files."""
        directory = self.path / dataset
        info = self.dataset(dataset)
        for sub in ("sealed", "open"):
            for tmp in _walk_temps(directory / sub):
                with contextlib.suppress(OSError):
                    tmp.unlink()
        claims = self._claims(dataset)
        if claims:
            self._finish_seals(info, claims)
            self.stats.recovered_seals += len(claims)
            log.info(
                "cache dataset %r: finished %d interrupted seals",
                dataset,
                len(claims),
                extra={"dataset": dataset},
            )

    def recover(self) -> None:
        """Finish interrupted seals of every dataset now (writers also do it on their own)."""
        for info in self.datasets():
            with self._lock(info.name):
                self._recover(info.name)

    # --------------------------------------------------------------- reads

    def ready_partitions(self, dataset: str, *, after: int = 0) -> Sequence[PartitionRef]:
        info = self.dataset(dataset)
        directory = self.path / dataset
        pending: int | None = None
        with contextlib.suppress(FileNotFoundError):
            for entry in os.listdir(directory / "sealing"):
                m = _SEALING.match(entry)
                if m:
                    seq = int(m.group(1))
                    pending = seq if pending is None else min(pending, seq)
        try:
            entries = os.listdir(directory / "sealed")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CacheError(f"cannot list sealed partitions of {dataset!r}: {exc}") from exc
        found: list[tuple[int, str]] = []
        for entry in entries:
            m = _SEGMENT.match(entry)
            if m is None:
                continue
            seq = int(m.group(1))
            if seq > after and (pending is None or seq < pending):
                found.append((seq, entry))
        out = []
        for _seq, entry in sorted(found):
            segment = self._segment(directory / "sealed" / entry)
            if segment is not None:
                out.append(self._ref(info, segment))
        return out

    def partition(self, dataset: str, partition_id: str) -> PartitionRef | None:
        info = self.dataset(dataset)
        path = self.path / dataset / "sealed" / f"{partition_id}.parquet"
        if not _SEGMENT.match(path.name) or not path.exists():
            return None
        segment = self._segment(path)
        return None if segment is None else self._ref(info, segment)

    def _segment(self, path: Path) -> _Segment | None:
        cached = self._segments.get(path)
        if cached is not None:
            return cached
        if path in self._bad:
            return None
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(path)
            raw = (meta.metadata or {}).get(_META.encode())
            if raw is None:
                raise ValueError("no hypaware segment metadata")
            doc = json.loads(raw)
            size = path.stat().st_size
            segment = _Segment(
                seq=int(doc["seq"]),
                id=path.name.removesuffix(".parquet"),
                path=path,
                row_count=int(meta.num_rows),
                byte_size=size,
                min_time=_parse_iso(doc.get("min_time")),
                max_time=_parse_iso(doc.get("max_time")),
                sealed_at=_parse_iso(doc["sealed_at"]) or datetime.fromtimestamp(0, UTC),
            )
        except FileNotFoundError:
            return None
        except Exception as exc:  # any unreadable footer is the same fault: a corrupt segment
            self._bad.add(path)
            self.stats.corrupt_segments += 1
            log.warning(
                "cache segment %s skipped: it is corrupt (%s: %s)",
                path,
                type(exc).__name__,
                exc,
                extra={"cache_path": str(path), "dataset": path.parent.parent.name},
            )
            return None
        self._segments[path] = segment
        return segment

    def _ref(self, info: DatasetInfo, segment: _Segment) -> PartitionRef:
        path = segment.path
        schema = info.schema

        def opener() -> pa.RecordBatchReader:
            return _open_segment(path, schema)

        return PartitionRef(
            id=segment.id,
            dataset=info.name,
            seq=segment.seq,
            row_count=segment.row_count,
            min_time=segment.min_time,
            max_time=segment.max_time,
            byte_size=segment.byte_size,
            opener=opener,
        )

    # ----------------------------------------------------------- retention

    def enforce_retention(
        self, floors: Mapping[str, ExportFloor], *, now: datetime | None = None
    ) -> RetentionReport:
        now = now or self._clock()
        candidates: list[tuple[_Segment, str, bool]] = []
        for info in self.datasets():
            floor = floors.get(info.name)
            for entry in self._all_segments(info.name):
                needed = floor is not None and floor.needs(self._ref(info, entry))
                candidates.append((entry, info.name, needed))
        drop: dict[Path, tuple[_Segment, str, bool]] = {}
        for seg, ds, needed in candidates:
            age = now - seg.sealed_at
            hard = self.max_age is not None and age > self.max_age
            soft = self.retention is not None and age > self.retention and not needed
            if hard or soft:
                drop[seg.path] = (seg, ds, needed)
        if self.max_bytes is not None:
            kept = [c for c in candidates if c[0].path not in drop]
            total = sum(c[0].byte_size for c in kept)
            # Unneeded partitions go first, oldest first; needed ones only if that is not enough.
            for seg, ds, needed in sorted(kept, key=lambda c: (c[2], c[0].sealed_at, c[0].seq)):
                if total <= self.max_bytes:
                    break
                drop[seg.path] = (seg, ds, needed)
                total -= seg.byte_size
        dropped: list[str] = []
        forced: list[str] = []
        freed = 0
        for seg, ds, needed in sorted(drop.values(), key=lambda c: (c[1], c[0].seq)):
            try:
                with self._lock(ds):
                    self._raise_counter(ds)
                    seg.path.unlink()
                    self._sync_dir(seg.path.parent)
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
            self._segments.pop(seg.path, None)
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
        return RetentionReport(tuple(dropped), tuple(forced), freed)

    def _all_segments(self, dataset: str) -> list[_Segment]:
        try:
            entries = sorted(os.listdir(self.path / dataset / "sealed"))
        except OSError:
            return []
        out = []
        for entry in entries:
            if _SEGMENT.match(entry):
                seg = self._segment(self.path / dataset / "sealed" / entry)
                if seg is not None:
                    out.append(seg)
        return out

    def _raise_counter(self, dataset: str) -> None:
        # Seqs are never reused: the counter must cover a segment before the segment goes.
        highest = self._next_seq(dataset) - 1
        if highest > self._counter(dataset):
            self._atomic_write(self.path / dataset / "seq", str(highest).encode())

    # ------------------------------------------------------------- helpers

    @contextlib.contextmanager
    def _lock(self, dataset: str) -> Iterator[None]:
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

    def _atomic_write(self, path: Path, data: bytes, *, sync_dir: bool = True) -> None:
        self._atomic_write_with(path, lambda f: f.write(data), sync_dir=sync_dir)

    def _atomic_write_with(
        self, path: Path, write: Callable[[Any], object], *, sync_dir: bool = True
    ) -> None:
        tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
        with open(tmp, "wb") as f:
            write(f)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.rename(tmp, path)
        if sync_dir:
            self._sync_dir(path.parent)

    def _sync_dir(self, path: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ------------------------------------------------------------------ helpers


def _hours(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(hours=value)


def _check_dataset_name(name: str) -> None:
    if not _DATASET_NAME.match(name):
        raise CacheError(
            f"dataset name {name!r} is not usable as a directory: use letters, digits, "
            "'_', '-' and '.', not starting with '.' or '-'"
        )


def _write_ipc(f: Any, table: pa.Table, key: Mapping[str, Any]) -> None:
    import pyarrow as pa

    # The partition key travels in the chunk itself, so a chunk needs no side file.
    schema = table.schema.with_metadata(
        {**(table.schema.metadata or {}), _KEY_META: json.dumps(key)}
    )
    with pa.ipc.new_file(f, schema) as writer:
        writer.write_table(table.replace_schema_metadata(schema.metadata))


def _key_of(schema: pa.Schema) -> Any:
    raw = (schema.metadata or {}).get(_KEY_META)
    return None if raw is None else json.loads(raw)


def _chunk_key(path: Path) -> Any:
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        return _key_of(pa.ipc.open_file(source).schema) or {}


def _open_segment(path: Path, schema: pa.Schema) -> pa.RecordBatchReader:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except FileNotFoundError as exc:
        raise CacheError(f"cache segment {path} is gone (dropped by retention?)") from exc
    except (pa.ArrowException, OSError) as exc:
        raise CacheError(f"cache segment {path} cannot be read: {exc}") from exc

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in pf.iter_batches(batch_size=65536):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        finally:
            pf.close()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _walk_temps(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if name.startswith(".tmp-"):
                yield Path(root) / name


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _min(a: Any, b: Any) -> Any:
    return b if a is None else (a if b is None else min(a, b))


def _max(a: Any, b: Any) -> Any:
    return b if a is None else (a if b is None else max(a, b))


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return str(value.isoformat())
    return str(value)


def _parse_iso(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
