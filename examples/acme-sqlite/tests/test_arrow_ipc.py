"""``@acme/arrow-ipc`` on its own: files read back, roll over, stream, and config is checked."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypaware_example_sqlite.arrow_ipc import ArrowIpcEncoder

from hypaware import ConfigError, Registry, resolve

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def batches(count: int, rows: int = 100) -> list[pa.RecordBatch]:
    return [
        pa.record_batch(
            [
                pa.array(range(n * rows, (n + 1) * rows), pa.int64()),
                pa.array([f"name-{i}" for i in range(n * rows, (n + 1) * rows)]),
            ],
            schema=SCHEMA,
        )
        for n in range(count)
    ]


def encode_files(encoder: ArrowIpcEncoder, data: list[pa.RecordBatch]) -> list[bytes]:
    return [b"".join(chunks) for chunks in encoder.encode(SCHEMA, iter(data))]


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_one_file_reads_back(compression: str | None) -> None:
    (data,) = encode_files(ArrowIpcEncoder(compression), batches(5))
    table = ipc.open_file(pa.py_buffer(data)).read_all()
    assert table.equals(pa.Table.from_batches(batches(5)))


def test_rolls_over_at_max_file_bytes_and_keeps_every_row_in_order() -> None:
    files = encode_files(ArrowIpcEncoder(max_file_bytes=4096), batches(20))
    assert len(files) > 2
    tables = [ipc.open_file(pa.py_buffer(f)).read_all() for f in files]
    assert pa.concat_tables(tables).equals(pa.Table.from_batches(batches(20)))


def test_empty_input_makes_no_file() -> None:
    assert encode_files(ArrowIpcEncoder(), []) == []


def test_pulls_one_batch_at_a_time() -> None:
    pulled: list[int] = []

    def source() -> Iterator[pa.RecordBatch]:
        for n, batch in enumerate(batches(10)):
            pulled.append(n)
            yield batch

    files = ArrowIpcEncoder().encode(SCHEMA, source())
    first_file = next(files)
    next(first_file)
    assert pulled == [0]


def test_a_file_must_be_consumed_before_the_next() -> None:
    files = ArrowIpcEncoder(max_file_bytes=1).encode(SCHEMA, iter(batches(3)))
    next(files)
    with pytest.raises(RuntimeError, match="consumed before the next file"):
        next(files)


def test_unknown_compression_is_a_config_error_naming_the_key() -> None:
    config = {
        "sinks": {
            "arrow": {
                "writer": "@acme/arrow-ipc",
                "destination": "@hypaware/local-fs",
                "config": {"root": "out", "compression": "gzip"},
            }
        }
    }
    with pytest.raises(ConfigError) as info:
        resolve(config, Registry.from_entry_points())
    (problem,) = info.value.problems
    assert problem.path == "sinks.arrow.config.compression"
    assert "'lz4' or 'zstd'" in problem.message


def test_a_writer_for_any_destination_but_not_a_request_endpoint() -> None:
    config = {
        "sinks": {
            "bad": {"writer": "@acme/arrow-ipc", "destination": "@hypaware/webhook"},
        }
    }
    with pytest.raises(ConfigError, match=r"requires hypaware\.blob-store"):
        resolve(config, Registry.from_entry_points())
