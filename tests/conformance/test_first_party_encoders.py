"""The first-party encoders through the whole `EncoderContract`, each read by an independent reader."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hypaware.encoding.config import JsonlConfig, ParquetConfig
from hypaware.encoding.jsonl import JsonlEncoder
from hypaware.encoding.parquet import ParquetEncoder
from hypaware.testing.conformance import EncoderContract


def null_in_required_field() -> tuple[pa.Schema, list[pa.RecordBatch]]:
    schema = pa.schema([pa.field("row_id", pa.string(), nullable=False)])
    loose = pa.record_batch([pa.array(["a", None])], names=["row_id"])
    return schema, [loose]


class TestParquetEncoder(EncoderContract):
    reader = "pyarrow.parquet.read_table"

    def make_encoder(self, target_size: int) -> ParquetEncoder:
        return ParquetEncoder(ParquetConfig(target_file_size=target_size, row_group_size=1000))

    def read_file(self, data: bytes) -> pa.Table:
        return pq.read_table(pa.BufferReader(data))

    def unrepresentable(self) -> tuple[pa.Schema, list[pa.RecordBatch]]:
        return null_in_required_field()


class TestJsonlEncoder(EncoderContract):
    reader = "json.loads per line"

    def make_encoder(self, target_size: int) -> JsonlEncoder:
        return JsonlEncoder(JsonlConfig(target_file_size=target_size, lines_per_chunk=250))

    def read_file(self, data: bytes) -> Iterable[dict[str, Any]]:
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line]

    def unrepresentable(self) -> tuple[pa.Schema, list[pa.RecordBatch]]:
        # JSON object keys must differ.
        schema = pa.schema([pa.field("a", pa.int64()), pa.field("a", pa.int64())])
        return schema, [pa.record_batch([pa.array([1]), pa.array([2])], schema=schema)]


class TestGzipJsonlEncoder(TestJsonlEncoder):
    reader = "gzip + json.loads per line"

    def make_encoder(self, target_size: int) -> JsonlEncoder:
        return JsonlEncoder(
            JsonlConfig(compression="gzip", target_file_size=target_size, lines_per_chunk=250)
        )

    def read_file(self, data: bytes) -> Iterable[dict[str, Any]]:
        with gzip.open(io.BytesIO(data), "rt", encoding="utf-8") as text:
            return [json.loads(line) for line in text if line.strip()]
