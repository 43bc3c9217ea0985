"""The write path of `LocalCache`: append rows as chunks, seal chunks into segments.

A seal first renames each open chunk into ``sealing/`` under its
partition's new seq (the commit point: from then on those rows belong to
that seq), then writes the segments and removes the claimed chunks; a seal
cut short by a crash is finished by the next writer (`recover`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypaware.cache.directory import (
    CHUNK_NAME,
    SEALING_NAME,
    SEGMENT_META,
    CacheDirectory,
    log,
)
from hypaware.cache.durable import IO_WORKERS
from hypaware.cache.index import dump_index, index_name
from hypaware.cache.partitioning import bucket_closed, conform, key_dir, split_by_key, to_table
from hypaware.cache.reads import CacheReader, Segment, open_ipc
from hypaware.core.errors import CacheError
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.core.workers import cores, map_bounded

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CacheWriter"]

_KEY_META = b"hypaware.key"
_chunk_counter = itertools.count()


class CacheWriter:
    """Appending rows, sealing them, finishing interrupted seals (part of `LocalCache`).

    New segments are written in `segment_format` with `compression`, stamped
    with `clock`'s time; `reader` describes them once they are in place.
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

    def append(
        self,
        dataset: str,
        data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch] | Iterable[Mapping[str, Any]],
    ) -> int:
        """The work of `LocalCache.append`, whose docstring says what it promises."""
        import pyarrow as pa

        info = self.directory.dataset(dataset)
        table = conform(info, to_table(info, data, pa))
        if table.num_rows == 0:
            return 0
        directory = self.directory.path / dataset
        with self.directory.lock(dataset):
            try:
                written = [
                    _write_chunk(directory / "open", key, rows)
                    for key, rows in split_by_key(info, table)
                ]
                # All the chunks of this append made durable together, then renamed into
                # place, then one directory fsync: an append of many keys costs about one
                # journal commit, not one per key. A crash leaves only temp files (removed
                # by the next writer), never a chunk that is not durable.
                self.directory.publish(written)
                self.directory.sync_dir(directory / "open")
            except OSError as exc:
                raise CacheError(
                    f"cannot append to dataset {dataset!r} in {self.directory.path}: {exc}"
                ) from exc
        return int(table.num_rows)

    def seal(
        self, dataset: str | None = None, *, before: datetime | None = None
    ) -> list[PartitionRef]:
        """The work of `LocalCache.seal`, whose docstring says what it promises."""
        names = [dataset] if dataset is not None else [d.name for d in self.directory.datasets()]
        sealed: list[PartitionRef] = []
        for name in names:
            info = self.directory.dataset(name)
            with self.directory.lock(name):
                self._recover(name)
                sealed.extend(self._seal_locked(info, before))
        return sealed

    def _seal_locked(self, info: DatasetInfo, before: datetime | None) -> list[PartitionRef]:
        directory = self.directory.path / info.name
        try:
            entries = sorted(os.listdir(directory / "open"))
        except FileNotFoundError:
            return []
        by_key: dict[str, list[str]] = {}
        for entry in entries:
            m = CHUNK_NAME.match(entry)
            if m:
                by_key.setdefault(m.group(1), []).append(entry)
        claimed: list[int] = []
        try:
            # Claim every partition first (one directory fsync for all of them), then
            # write the segments. A chunk is claimed by renaming it under its seq: the
            # commit point. Should a crash interrupt the claims of one key, the chunks
            # claimed so far make that seq's partition and the rest a later one.
            seq = self.directory.next_seq(info.name)
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
            self.directory.sync_dir(directory / "sealing")
            self.directory.sync_dir(directory / "open")
            self.directory.atomic_write(directory / "seq", str(seq - 1).encode())
            segments = self._finish_seals(info, self._claims(info.name))
            wanted = set(claimed)
            return [self.reader.ref(info, s) for s in segments if s.seq in wanted]
        except OSError as exc:
            raise CacheError(
                f"cannot seal dataset {info.name!r} in {self.directory.path}: {exc}"
            ) from exc

    def _claims(self, dataset: str) -> dict[int, tuple[str, list[Path]]]:
        """Chunks claimed by seals, by seq: (key directory name, chunk paths)."""
        claims: dict[int, tuple[str, list[Path]]] = {}
        sealing = self.directory.path / dataset / "sealing"
        with contextlib.suppress(FileNotFoundError):
            for entry in sorted(os.listdir(sealing)):
                m = SEALING_NAME.match(entry)
                if m:
                    claims.setdefault(int(m.group(1)), (m.group(2), []))[1].append(sealing / entry)
        return claims

    def _finish_seals(
        self, info: DatasetInfo, claims: Mapping[int, tuple[str, list[Path]]]
    ) -> list[Segment]:
        """Write the segments of claimed partitions, then release the claims in seq order."""
        if not claims:
            return []
        order = sorted(claims)
        # Segments encode on every core (pyarrow releases the GIL), then become
        # durable together; each is renamed into place only after its fsync.
        written = map_bounded(
            lambda seq: self._write_segment(info, seq, *claims[seq]), order, workers=cores()
        )
        self.directory.publish([(tmp, final) for tmp, final, _doc in written if tmp is not None])
        sealed = written[0][1].parent
        self.directory.sync_dir(sealed)
        entries = {final.name: doc for _tmp, final, doc in written if doc is not None}
        if entries:
            self._write_index(sealed, entries)
        # Released together: each unlink right after the fsyncs waits for the journal,
        # and waiting side by side the filesystem folds those waits into a few commits.
        map_bounded(_unlink, [c for seq in order for c in claims[seq][1]], workers=IO_WORKERS)
        segments = []
        for _tmp, final, doc in written:
            segment = self.reader.segment(final, hint=doc)
            if segment is None:
                raise CacheError(f"segment {final} was written but cannot be read back")
            segments.append(segment)
        self.directory.sync_dir(self.directory.path / info.name / "sealing")
        return segments

    def _write_index(self, sealed: Path, entries: dict[str, dict[str, Any]]) -> None:
        """Write the seal's index (`hypaware.cache.index`); a failure only costs readers time."""
        name = index_name(int(doc["seq"]) for doc in entries.values())
        tmp = sealed / f".tmp-{name}-{os.getpid()}"
        try:
            # Not fsynced: an index lost or left empty by a crash is skipped by readers.
            tmp.write_bytes(dump_index(entries))
            os.rename(tmp, sealed / name)
        except OSError as exc:
            _unlink(tmp)
            log.warning(
                "cache index %s not written (%s); readers open the segments instead",
                sealed / name,
                exc,
                extra={"cache_path": str(sealed / name)},
            )

    def _write_segment(
        self, info: DatasetInfo, seq: int, keydir: str, chunks: list[Path]
    ) -> tuple[Path | None, Path, dict[str, Any] | None]:
        """Write one segment into a temp file: (temp path, final path, its index entry),
        or (None, final, None) when it is already in place (a seal finished by recovery)."""
        # Whatever format an interrupted seal used, its segment stands.
        done = self.reader.sealed_path(info.name, f"{seq:012d}-{keydir}")
        if done is not None:
            return None, done, None
        sealed = self.directory.path / info.name / "sealed"
        final = sealed / f"{seq:012d}-{keydir}.{self.settings.segment_format}"
        tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
        sealed_at = self._clock()
        tables, key = _read_chunks(info, chunks)
        doc = {
            "seq": seq,
            "key": key,
            "rows": sum(t.num_rows for t in tables),
            "sealed_at": sealed_at.isoformat(),
            **_time_range(tables, info.time_column),
        }
        import pyarrow as pa

        try:
            if self.settings.segment_format == "arrow":
                _write_arrow(tmp, info.schema, tables, doc, self.settings.compression)
            else:
                _write_parquet(tmp, info.schema, tables, doc, self.settings.compression)
        except pa.ArrowException as exc:
            _unlink(tmp)
            raise CacheError(
                f"cannot seal dataset {info.name!r}: segment {final.name} cannot be written "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        return tmp, final, {**doc, "size": tmp.stat().st_size}

    def _recover(self, dataset: str) -> None:
        """Finish seals cut short by a crash and remove half-written temp files."""
        directory = self.directory.path / dataset
        info = self.directory.dataset(dataset)
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
        for info in self.directory.datasets():
            with self.directory.lock(info.name):
                self._recover(info.name)


def _write_chunk(directory: Path, key: Mapping[str, Any], rows: pa.Table) -> tuple[Path, Path]:
    """Write one key's appended rows into a temp file: (temp path, final path)."""
    name = f"{key_dir(key)}.{time.time_ns():020d}-{os.getpid()}-{next(_chunk_counter):06d}.arrow"
    final = directory / name
    tmp = final.with_name(f".tmp-{name}-{os.getpid()}")
    with open(tmp, "wb") as f:
        _write_ipc(f, rows, key)
    return tmp, final


def _write_ipc(f: Any, table: pa.Table, key: Mapping[str, Any]) -> None:
    import pyarrow as pa

    # The partition key travels in the chunk itself, so a chunk needs no side file.
    schema = table.schema.with_metadata(
        {**(table.schema.metadata or {}), _KEY_META: json.dumps(key)}
    )
    with pa.ipc.new_file(f, schema) as writer:
        writer.write_table(table.replace_schema_metadata(schema.metadata))


def _read_chunks(info: DatasetInfo, chunks: list[Path]) -> tuple[list[pa.Table], Any]:
    """The rows of a segment's claimed chunks (memory-mapped, in order), and its key."""
    import pyarrow as pa

    tables = []
    key: Any = {}
    for chunk in sorted(chunks):
        try:
            table = open_ipc(chunk).read_all()
        except (pa.ArrowException, ValueError) as exc:
            raise CacheError(
                f"cannot seal dataset {info.name!r}: chunk {chunk} is unreadable ({exc}); "
                "move it aside to seal the rest"
            ) from exc
        key = _key_of(table.schema) or key
        if table.num_rows:
            tables.append(table.replace_schema_metadata(info.schema.metadata))
    return tables, key


def _time_range(tables: list[pa.Table], column: str) -> dict[str, str | None]:
    import pyarrow.compute as pc

    lo: Any = None
    hi: Any = None
    for table in tables:
        mm = pc.min_max(table.column(column))
        lo = _min(lo, mm["min"].as_py())
        hi = _max(hi, mm["max"].as_py())
    return {"min_time": _iso(lo), "max_time": _iso(hi)}


# Appends of a few rows make small chunks; a segment's batches are gathered up to
# this many rows, so reading it back does not pay per tiny batch.
_SEGMENT_BATCH_ROWS = 65536


def _write_arrow(
    path: Path, schema: pa.Schema, tables: list[pa.Table], doc: Mapping[str, Any], codec: str
) -> None:
    import pyarrow as pa

    if tables and any(pa.types.is_dictionary(f.type) for f in schema):
        # An IPC file holds one dictionary per column: chunks appended with
        # different ones share a unified one.
        tables = [pa.concat_tables(tables).unify_dictionaries()]
    meta = {**(schema.metadata or {}), SEGMENT_META.encode(): json.dumps(doc).encode()}
    options = pa.ipc.IpcWriteOptions(compression=None if codec == "none" else codec)
    with pa.ipc.new_file(str(path), schema.with_metadata(meta), options=options) as writer:
        for group in _gathered(tables, _SEGMENT_BATCH_ROWS):
            writer.write_table(group, max_chunksize=_SEGMENT_BATCH_ROWS)


def _gathered(tables: list[pa.Table], rows: int) -> Iterator[pa.Table]:
    """`tables` in order, runs of small ones joined into one of up to about `rows` rows."""
    import pyarrow as pa

    def joined(run: list[pa.Table]) -> pa.Table:
        return pa.concat_tables(run).combine_chunks() if len(run) > 1 else run[0]

    run: list[pa.Table] = []
    count = 0
    for table in tables:
        if table.num_rows >= rows:
            if run:
                yield joined(run)
                run, count = [], 0
            yield table
            continue
        if count + table.num_rows > rows and run:
            yield joined(run)
            run, count = [], 0
        run.append(table)
        count += table.num_rows
    if run:
        yield joined(run)


def _write_parquet(
    path: Path, schema: pa.Schema, tables: list[pa.Table], doc: Mapping[str, Any], codec: str
) -> None:
    import pyarrow.parquet as pq

    with pq.ParquetWriter(path, schema, compression=codec) as writer:
        for table in tables:
            writer.write_table(table)
        writer.add_key_value_metadata({SEGMENT_META: json.dumps(doc)})


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _key_of(schema: pa.Schema) -> Any:
    raw = (schema.metadata or {}).get(_KEY_META)
    return None if raw is None else json.loads(raw)


def _chunk_key(path: Path) -> Any:
    return _key_of(open_ipc(path).schema) or {}


def _walk_temps(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if name.startswith(".tmp-"):
                yield Path(root) / name


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
