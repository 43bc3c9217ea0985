"""The JSON Lines encoder: one object per row, stable keys, UTC timestamps, compression, rollover."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
import zstandard

from hypaware import BlobPlan, ConfigError, resolve
from hypaware.encoding.jsonl import JsonlConfig, JsonlEncoder
from hypaware.encoding.jsonrows import encode_ndjson
from hypaware.plugins import format_jsonl

from .data import RICH_SCHEMA, registry, rich_rows


def decompress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.decompress(data)
    if compression == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def lines(files: list[bytes], compression: str = "none") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for data in files:
        text = decompress(data, compression).decode("utf-8")
        assert text.endswith("\n")
        rows.extend(json.loads(line) for line in text.splitlines())
    return rows


def encode_all(encoder: JsonlEncoder, batches: list[pa.RecordBatch]) -> list[bytes]:
    return [b"".join(chunks) for chunks in encoder.encode(RICH_SCHEMA, batches)]


def test_one_object_per_row_keys_in_schema_order_utc_timestamps() -> None:
    batches = [rich_rows(0, 30), rich_rows(30, 30)]
    files = encode_all(JsonlEncoder(), batches)
    assert len(files) == 1
    rows = lines(files)
    assert [r["row_id"] for r in rows] == list(range(60))
    assert all(list(r) == RICH_SCHEMA.names for r in rows)
    table = pa.Table.from_batches(batches)
    for row, ts, local in zip(
        rows, table.column("ts").to_pylist(), table.column("local_ts").to_pylist(), strict=True
    ):
        if ts is None:
            assert row["ts"] is None
        else:
            assert row["ts"] == ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        # A zoned timestamp is written as its UTC instant.
        assert datetime.fromisoformat(row["local_ts"]) == local
    first = rows[1]
    assert (
        first["name"] == "név-1-x"
        and first["tags"] == ["t0"]
        and first["meta"] == {"k": "k1", "n": 1}
    )


def test_bytes_are_deterministic_and_match_jsonrows() -> None:
    batches = [rich_rows(0, 40)]
    a = encode_all(JsonlEncoder(), batches)
    b = encode_all(JsonlEncoder(), batches)
    assert a == b == [encode_ndjson(batches[0])]
    assert "név".encode() in a[0]  # UTF-8, not \\u escapes


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_files_decompress_to_the_same_lines(compression: str) -> None:
    batches = [rich_rows(i, 50) for i in range(0, 500, 50)]
    plain = lines(encode_all(JsonlEncoder(), batches))
    encoder = JsonlEncoder(JsonlConfig(compression=compression))  # type: ignore[arg-type]
    files = encode_all(encoder, batches)
    assert lines(files, compression) == plain
    assert encoder.extension == {"gzip": "jsonl.gz", "zstd": "jsonl.zst"}[compression]
    assert sum(map(len, files)) < len(b"".join(encode_ndjson(b) for b in batches)) / 2


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_files_roll_over_at_the_target_size(compression: str) -> None:
    config = JsonlConfig(compression=compression, target_file_size=4_000, lines_per_chunk=16)  # type: ignore[arg-type]
    batches = [rich_rows(i, 100) for i in range(0, 1000, 100)]
    files = encode_all(JsonlEncoder(config), batches)
    assert len(files) > 2
    assert all(len(f) >= 4_000 for f in files[:-1])
    assert [r["row_id"] for r in lines(files, compression)] == list(range(1000))


def test_empty_input_makes_no_file() -> None:
    assert encode_all(JsonlEncoder(), []) == []
    assert encode_all(JsonlEncoder(JsonlConfig(compression="gzip")), [rich_rows(0, 0)]) == []


def test_encoder_streams_chunk_by_chunk() -> None:
    pulled = 0

    def source() -> Any:
        nonlocal pulled
        for i in range(100):
            pulled += 1
            yield rich_rows(i * 10, 10)

    seen = []
    for chunks in JsonlEncoder().encode(RICH_SCHEMA, source()):
        for _ in chunks:
            seen.append(pulled)
    assert seen[0] == 1 and len(seen) == 100


def test_bad_level_and_missing_zstd_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="compression_level"):
        JsonlEncoder(JsonlConfig(compression="gzip", compression_level=42))
    import sys

    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ConfigError, match=r"pip install 'hypaware\[zstd\]'"):
        JsonlEncoder(JsonlConfig(compression="zstd"))


def test_manifest_is_not_queryable_and_resolves() -> None:
    assert format_jsonl.MANIFEST.kind == "encoder"
    assert not format_jsonl.MANIFEST.queryable
    config = {
        "sinks": {
            "lines": {
                "writer": "@hypaware/format-jsonl",
                "destination": "@hypaware/memory",
                "config": {"compression": "gzip", "target_file_size": 1024},
            }
        }
    }
    (plan,) = resolve(config, registry())
    assert not plan.queryable
    assert isinstance(plan, BlobPlan)
    assert plan.encoder.config == JsonlConfig(compression="gzip", target_file_size=1024)
    config["sinks"]["lines"]["config"] = {"compression": "bz2"}
    with pytest.raises(ConfigError, match=r"sinks\.lines\.config\.compression"):
        resolve(config, registry())
