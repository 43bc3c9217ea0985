"""The read path of `LocalCache`: sealed segments, listed and opened as `PartitionRef`s.

A segment's footer (`SEGMENT_META`) says its seq, row count and time range,
so listing partitions reads metadata only; rows are read when a partition is
opened.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.cache.layout import (
    SEALING_NAME,
    SEGMENT_META,
    SEGMENT_NAME,
    CacheDirectory,
    log,
)
from hypaware.core.errors import CacheError
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.core.workers import cores, map_bounded

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CacheReads", "Segment"]


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


class CacheReads(CacheDirectory):
    """Listing sealed partitions and opening them (part of `LocalCache`)."""

    # Set by `LocalCache.__init__`: segments read so far, and those found corrupt.
    _segments: dict[Path, Segment]
    _bad: set[Path]

    def ready_partitions(self, dataset: str, *, after: int = 0) -> Sequence[PartitionRef]:
        info = self.dataset(dataset)
        directory = self.path / dataset
        pending: int | None = None
        with contextlib.suppress(FileNotFoundError):
            for entry in os.listdir(directory / "sealing"):
                m = SEALING_NAME.match(entry)
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
            m = SEGMENT_NAME.match(entry)
            if m is None:
                continue
            seq = int(m.group(1))
            if seq > after and (pending is None or seq < pending):
                found.append((seq, entry))
        out = []
        sealed = directory / "sealed"
        found.sort()
        # Footers not read yet (new segments) are read on every core at once.
        fresh = [sealed / e for _s, e in found if sealed / e not in self._segments]
        map_bounded(self._segment, fresh, workers=cores())
        for _seq, entry in found:
            segment = self._segment(sealed / entry)
            if segment is not None:
                out.append(self._ref(info, segment))
        return out

    def partition(self, dataset: str, partition_id: str) -> PartitionRef | None:
        info = self.dataset(dataset)
        if not isinstance(partition_id, str) or not SEGMENT_NAME.fullmatch(
            f"{partition_id}.parquet"
        ):
            raise CacheError(
                f"partition id {partition_id!r} of dataset {dataset!r} is not a partition "
                "id of this cache (<12-digit seq>-<key>, letters, digits, '_' and '-')"
            )
        path = self.path / dataset / "sealed" / f"{partition_id}.parquet"
        if not path.exists():
            return None
        segment = self._segment(path)
        return None if segment is None else self._ref(info, segment)

    def _segment(self, path: Path) -> Segment | None:
        cached = self._segments.get(path)
        if cached is not None:
            return cached
        if path in self._bad:
            return None
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(path)
            raw = (meta.metadata or {}).get(SEGMENT_META.encode())
            if raw is None:
                raise ValueError("no hypaware segment metadata")
            doc = json.loads(raw)
            size = path.stat().st_size
            segment = Segment(
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

    def _ref(self, info: DatasetInfo, segment: Segment) -> PartitionRef:
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


_READ_BATCH = 65536
_THREADED_ROWS = 65536


def _open_segment(path: Path, schema: pa.Schema) -> pa.RecordBatchReader:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except FileNotFoundError as exc:
        raise CacheError(f"cache segment {path} is gone (dropped by retention?)") from exc
    except (pa.ArrowException, OSError) as exc:
        raise CacheError(f"cache segment {path} cannot be read: {exc}") from exc

    # A small segment (most are: one per partition key and hour) decodes faster on
    # this thread than through Arrow's pool, and callers already read several at once.
    threads = pf.metadata.num_rows >= _THREADED_ROWS

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in pf.iter_batches(batch_size=_READ_BATCH, use_threads=threads):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        finally:
            pf.close()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _parse_iso(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
