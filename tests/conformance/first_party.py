"""Building first-party sinks and stores from config, and reading back what they wrote."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow.ipc as ipc
import pyarrow.parquet as pq

import hypaware
from hypaware.blob.sink import BlobSink
from hypaware.core.contracts import BlobStore, Sink
from hypaware.core.paths import encode_segment


def build_sink(
    base: Path, entry: dict[str, Any], env: dict[str, str] | None = None, name: str = "under-test"
) -> Sink:
    """resolve + build with the installed plugins, as the export driver does."""
    config = hypaware.load_config(
        {"state_dir": str(base / "state"), "sinks": {name: entry}}, base_dir=str(base)
    )
    (plan,) = hypaware.resolve(config)
    sink = hypaware.build(plan, config=config, env=env or {})
    assert isinstance(sink, Sink)
    return sink


def blob_store_of(
    base: Path, destination: str, config: dict[str, Any], env: dict[str, str] | None = None
) -> BlobStore:
    """The blob store a destination plugin builds for `config`."""
    entry = {"writer": "@hypaware/format-jsonl", "destination": destination, "config": config}
    sink = build_sink(base, entry, env)
    assert isinstance(sink, BlobSink)
    # Only the store is wanted: the sink's batch index (a sqlite file) is let go now.
    sink.index.close()
    return sink.store


def decode_rows(path: str, data: bytes) -> list[dict[str, Any]]:
    """Rows of one exported object, by its extension."""
    if path.endswith(".parquet"):
        return pq.ParquetFile(io.BytesIO(data)).read().to_pylist()
    if path.endswith(".arrow"):
        return ipc.open_file(io.BytesIO(data)).read_all().to_pylist()
    if path.endswith(".jsonl"):
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line]
    raise AssertionError(f"no reader for exported object {path!r}")


async def rows_in_store(store: BlobStore, dataset: str) -> list[dict[str, Any]]:
    """Every row a blob sink wrote for `dataset` under `store`'s root."""
    rows: list[dict[str, Any]] = []
    async for meta in store.list(encode_segment(dataset)):
        rows.extend(decode_rows(meta.path, await store.get(meta.path)))
    return rows


async def rows_at(
    base: Path, destination: str, config: dict[str, Any], dataset: str,
    env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every row a blob sink on `destination` wrote for `dataset`, through a store of its own."""
    store = blob_store_of(base, destination, config, env)
    try:
        return await rows_in_store(store, dataset)
    finally:
        await store.close()
