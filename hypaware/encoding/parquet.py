"""The Parquet encoder behind ``@hypaware/format-parquet``.

Usable on its own (table formats reuse it)::

    from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder
    encoder = ParquetEncoder(ParquetConfig(compression="zstd", row_group_size=65536))
    for file_chunks in encoder.encode(schema, batches):
        data = b"".join(file_chunks)

Row groups are gathered from the incoming batches (sliced, never copied) up
to `row_group_size` rows or `row_group_bytes`, then written; the bytes the
writer produced are handed out as they come, a MiB or so at a time. So
memory holds one row group of Arrow data plus a few MiB of encoded pages,
whatever the input's length.

Field metadata is kept: a field's ``PARQUET:field_id`` becomes the Parquet
field id, and the Arrow schema (with all metadata) is stored in the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from hypaware.core.errors import EncodeError
from hypaware.encoding._relay import relayed
from hypaware.encoding._stream import BatchSource, ChunkSink, files, row_groups
from hypaware.encoding.config import ParquetConfig

__all__ = ["ParquetConfig", "ParquetEncoder"]

# The writer's many small writes (page headers, small pages) are gathered
# natively up to this size before they reach the Python `ChunkSink`: each
# write into it takes the interpreter lock, which other threads may hold
# for milliseconds at a time. So Python sees about one write per MiB (and
# one per row group), not one per page.
_BUFFER_BYTES = ChunkSink.CHUNK_BYTES


def _hand_back_freed_memory() -> None:
    # Freed is not yet returned: Arrow's allocator (mimalloc) keeps a written
    # row group's pages in the process for a while, so the next group came on
    # top of it. Handed back as the next group starts, resident memory stays
    # about one row group per encoder (export_memory, 2 encoders: 2.16-2.25x
    # one group before, 1.89-2.09x after; about 2 ms a call). Only between
    # groups of one file: a file of one group (an Iceberg day piece) has the
    # next allocation soon after, and paid for the pages twice.
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


class ParquetEncoder:
    """Encodes record batches as Parquet files. See `ParquetConfig` for the settings."""

    extension = "parquet"
    media_type = "application/vnd.apache.parquet"

    def __init__(self, config: ParquetConfig | None = None) -> None:
        self.config = config or ParquetConfig()

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        source = BatchSource(schema, batches)
        return files(source, self._write_file)

    def _open_writer(self, sink: pa.NativeFile, schema: pa.Schema) -> pq.ParquetWriter:
        cfg = self.config
        try:
            return pq.ParquetWriter(
                sink,
                schema,
                compression=cfg.compression,
                compression_level=cfg.compression_level,
                use_dictionary=cfg.dictionary,
                dictionary_pagesize_limit=cfg.dictionary_page_size,
                write_statistics=cfg.statistics,
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise EncodeError(f"Parquet cannot hold this schema: {exc}") from exc

    def _write_file(self, source: BatchSource) -> Iterator[bytes]:
        cfg = self.config
        sink = ChunkSink()
        stream = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), _BUFFER_BYTES)
        writer = self._open_writer(stream, source.schema)
        groups = row_groups(
            source,
            max_rows=cfg.row_group_size,
            max_bytes=cfg.row_group_bytes,
            between=_hand_back_freed_memory,
        )
        try:
            for group in groups:
                yield from self._write_group(writer, stream, sink, source.schema, group)
                # Not kept while the next group is gathered: two row groups
                # alive at once would double the peak.
                del group
                if sink.size >= cfg.target_file_size:
                    groups.close()  # the rest goes back to the source for the next file
                    break
            writer.close()
            stream.close()  # the footer, still in the buffer
            yield from sink.take()
        finally:
            # A consumer that stops early (or an error) must not leave the
            # native writer open; what it wrote is discarded with the sink.
            try:
                if writer.is_open:
                    writer.close()
            finally:
                if not stream.closed:
                    stream.close()

    @staticmethod
    def _write_group(
        writer: pq.ParquetWriter,
        stream: pa.NativeFile,
        sink: ChunkSink,
        schema: pa.Schema,
        group: list[pa.RecordBatch],
    ) -> Iterator[bytes]:
        table = pa.Table.from_batches(group, schema)

        def write() -> None:
            writer.write_table(table, row_group_size=table.num_rows)
            # Out of the buffer with its row group, so the sink's size (which
            # ends a file at `target_file_size`) counts the whole group.
            stream.flush()

        try:
            if table.nbytes <= ChunkSink.RELAY_BYTES:
                # Its pages are no more than one hand-off: written here, without
                # the thread a relay starts (most of a small file's cost).
                write()
                yield from sink.take()
                return
            # pyarrow writes a row group in one call; relayed, its pages go
            # out as they are made instead of piling up until it returns.
            yield from relayed(
                sink,
                write,
                name="hypaware-parquet-writer",
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise EncodeError(f"Parquet cannot write these rows: {exc}") from exc

    def __repr__(self) -> str:
        cfg = self.config
        return f"ParquetEncoder(engine={cfg.engine!r}, compression={cfg.compression!r})"
