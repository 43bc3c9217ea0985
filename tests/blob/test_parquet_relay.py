"""Pages leave the Parquet encoder while a row group is written; dictionaries stay bounded."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware import EncodeError
from hypaware.encoding import parquet as parquet_module
from hypaware.encoding._relay import relayed
from hypaware.encoding._stream import ChunkSink
from hypaware.encoding.parquet import ParquetConfig, ParquetEncoder

WRITER_THREAD = "hypaware-parquet-writer"
ROWS = 160_000


def random_table(rows: int = ROWS, width: int = 100) -> pa.Table:
    """Incompressible payloads: the row group encodes to about `rows * width` bytes."""
    offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int32)
    payload = pa.Array.from_buffers(
        pa.binary(),
        rows,
        [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(os.urandom(rows * width))],
    )
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "payload": payload})


class RecordingSink(ChunkSink):
    """A ChunkSink that remembers the most it ever held at once."""

    most_pending = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        n = super().write(data)
        RecordingSink.most_pending = max(RecordingSink.most_pending, len(self))
        return n


def encode(schema: pa.Schema, batches: list[pa.RecordBatch]) -> list[bytes]:
    return [b"".join(chunks) for chunks in ParquetEncoder().encode(schema, batches)]


def writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER_THREAD]


def test_a_row_group_is_handed_out_while_it_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hypaware.encoding.parquet.ChunkSink", RecordingSink)
    RecordingSink.most_pending = 0
    table = random_table()
    config = ParquetConfig(compression="none", dictionary=False, row_group_size=ROWS)
    files = [
        b"".join(chunks)
        for chunks in ParquetEncoder(config).encode(table.schema, table.to_batches())
    ]

    meta = pq.ParquetFile(io.BytesIO(files[0])).metadata
    assert meta.num_row_groups == 1
    row_group = meta.row_group(0).total_byte_size
    assert row_group > 8 * ChunkSink.RELAY_BYTES
    # Never more than one hand-off plus a page was held, not the row group.
    assert RecordingSink.most_pending <= ChunkSink.RELAY_BYTES + 1024 * 1024
    assert pq.read_table(io.BytesIO(files[0])).equals(table)
    assert not writer_threads()


def test_a_reader_that_stops_mid_row_group_leaves_no_thread_and_no_error() -> None:
    table = random_table()
    config = ParquetConfig(compression="none", dictionary=False, row_group_size=ROWS)
    files = ParquetEncoder(config).encode(table.schema, table.to_batches())
    chunks = next(files)
    assert next(chunks)
    assert writer_threads()  # the row group is still being written
    chunks.close()  # type: ignore[attr-defined]
    assert not writer_threads()


def test_relayed_yields_what_was_written_before_an_error_then_raises_it() -> None:
    sink = ChunkSink()
    sink.RELAY_BYTES = 10

    def write() -> None:
        for i in range(5):
            sink.write(bytes([i]) * 4)
        raise ValueError("disk on fire")

    out = bytearray()

    def read_all() -> None:
        for chunk in relayed(sink, write, name=WRITER_THREAD):
            out.extend(chunk)

    with pytest.raises(ValueError, match="disk on fire"):
        read_all()
    # Hand-offs happened at 12 and then 8 pending bytes; the rest was lost
    # with the failed write, which the reader sees as the error.
    assert bytes(out).startswith(bytes([0]) * 4 + bytes([1]) * 4 + bytes([2]) * 4)
    assert not writer_threads()


def test_a_row_group_the_writer_refuses_is_an_encode_error_on_the_reader() -> None:
    # Declared non-nullable, holding a null: only the native writer notices,
    # on its own thread, and the reader gets the error.
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    batch = pa.RecordBatch.from_arrays([pa.array([1, None], pa.int64())], schema=schema)
    with pytest.raises(EncodeError, match="non-nullable"):
        encode(schema, [batch])
    assert not writer_threads()


def test_nulls_for_a_non_nullable_column_are_an_encode_error_naming_it() -> None:
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    batch = pa.record_batch([pa.array([1, None], pa.int64())], names=["x"])
    with pytest.raises(EncodeError, match=r"x \(int64 not null vs int64\)"):
        encode(schema, [batch])


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.binary(min_size=0, max_size=40), max_size=40),
    relay_at=st.integers(min_value=1, max_value=100),
    stop_after=st.one_of(st.none(), st.integers(min_value=0, max_value=10)),
)
def test_relayed_hands_out_every_byte_in_order_and_holds_at_most_one_hand_off(
    pieces: list[bytes], relay_at: int, stop_after: int | None
) -> None:
    sink = ChunkSink()
    sink.RELAY_BYTES = relay_at
    sink.CHUNK_BYTES = relay_at
    most = 0

    def write() -> None:
        nonlocal most
        for piece in pieces:
            sink.write(piece)
            most = max(most, len(sink))

    out = bytearray()
    stream: Iterator[bytes] = relayed(sink, write, name=WRITER_THREAD)
    for n, chunk in enumerate(stream):
        out += chunk
        if stop_after is not None and n >= stop_after:
            stream.close()  # type: ignore[attr-defined]
            break
    assert not writer_threads()
    whole = b"".join(pieces)
    if stop_after is None:
        assert bytes(out) == whole
    else:
        assert whole.startswith(bytes(out))
    assert most <= relay_at + max((len(p) for p in pieces), default=0)


def dictionary_page_bytes(data: bytes, column: int) -> int:
    meta = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(column)
    assert meta.has_dictionary_page
    return meta.data_page_offset - meta.dictionary_page_offset


def test_a_dictionary_stops_growing_at_dictionary_page_size() -> None:
    # 131072 distinct int64 values are a 1 MiB dictionary: over the default
    # limit, so the column falls back to plain; under a 4 MiB limit it is kept.
    table = pa.table(
        {
            "id": pa.array(np.arange(131_072, dtype=np.int64)),
            "few": pa.array(np.arange(131_072) % 7),
        }
    )

    def encode(config: ParquetConfig) -> bytes:
        return b"".join(
            b"".join(chunks)
            for chunks in ParquetEncoder(config).encode(table.schema, table.to_batches())
        )

    default = encode(ParquetConfig(compression="none"))
    roomy = encode(ParquetConfig(compression="none", dictionary_page_size=4 * 1024 * 1024))
    assert ParquetConfig().dictionary_page_size == 512 * 1024
    # The writer checks the size after each mini-batch of values, so a few
    # KiB over is the limit working.
    assert dictionary_page_bytes(default, 0) <= 512 * 1024 + 16 * 1024
    assert dictionary_page_bytes(roomy, 0) >= 1024 * 1024
    # A column with a few values keeps its small dictionary either way.
    assert dictionary_page_bytes(default, 1) < 1024
    for data in (default, roomy):
        assert pq.read_table(io.BytesIO(data)).equals(table)


def test_a_small_row_group_is_written_on_the_callers_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    relays: list[str] = []
    real = parquet_module.relayed

    def counting(*args: object, **kwargs: object) -> Iterator[bytes]:
        relays.append("relayed")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parquet_module, "relayed", counting)
    config = ParquetConfig(compression="none", dictionary=False, row_group_size=ROWS)
    encoder = ParquetEncoder(config)
    small = random_table(rows=1_000)
    assert small.nbytes <= ChunkSink.RELAY_BYTES
    files = [b"".join(chunks) for chunks in encoder.encode(small.schema, small.to_batches())]
    assert relays == []
    assert pq.read_table(io.BytesIO(files[0])).equals(small)
    # A row group past one hand-off still goes through the relay.
    big = random_table()
    [b"".join(chunks) for chunks in encoder.encode(big.schema, big.to_batches())]
    assert relays == ["relayed"]
    assert not writer_threads()
