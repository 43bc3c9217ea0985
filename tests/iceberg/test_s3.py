"""Iceberg on S3 (moto's server) end to end, and a warehouse the credentials cannot write."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs
from pyiceberg.catalog.sql import SqlCatalog

from hypaware.core.types import ExportOptions
from hypaware.testing.servers.peers import S3Peer

from .helpers import DATASET, batch, build_sink, partition, rows_for, sink_config

pytestmark = [pytest.mark.iceberg, pytest.mark.s3]


def _s3(peer: S3Peer, prefix: str, **extra: Any) -> dict[str, Any]:
    return peer.destination_config(prefix, **extra)


async def test_iceberg_on_s3_end_to_end(tmp_path: Path, moto_s3: S3Peer) -> None:
    prefix = f"lake-{uuid.uuid4().hex[:8]}"
    sink = build_sink(sink_config(tmp_path, destination="@hypaware/s3", **_s3(moto_s3, prefix)))
    parts = [
        partition(f"p{i}", rows_for(f"c{i % 4}", i % 3, 25, start=i * 25), seq=i) for i in range(9)
    ]

    first = await sink.export_batch(batch("s3-1", parts), ExportOptions())
    again = await sink.export_batch(batch("s3-1", parts), ExportOptions(attempt=2))

    assert len(first.exported) == 9
    assert first.files_written == 3
    assert len(again.exported) == 9
    assert again.rows_written == 0
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.location() == f"s3://{moto_s3.bucket}/{prefix}/hyp/messages"
    assert table.scan().to_arrow().num_rows == 225
    assert len(table.metadata.snapshots) == 1

    # Through hypaware's own scan, pruned to one day and two conversations.
    day1 = [r for p in parts for r in p.open().read_all().to_pylist() if (r["ts"].day - 1) == 1]
    reader = sink.table.scan(  # type: ignore[attr-defined]
        DATASET,
        since=day1[0]["ts"].replace(hour=0, minute=0, second=0),
        until=day1[0]["ts"].replace(hour=23, minute=59, second=59),
        keys=["c1", "c2"],
    )
    got = reader.read_all().to_pylist()
    assert sorted(r["tokens"] for r in got) == sorted(
        r["tokens"] for r in day1 if r["conversation_id"] in ("c1", "c2")
    )

    # A plain pyiceberg catalog with its own S3 FileIO reads the same table.
    plain = SqlCatalog(
        "hypaware",
        uri=f"sqlite:///{tmp_path / 'state' / 'sinks' / 'archive' / 'iceberg-catalog.db'}",
        **{
            "s3.endpoint": moto_s3.endpoint,
            "s3.access-key-id": moto_s3.access_key_id,
            "s3.secret-access-key": moto_s3.secret_access_key,
            "s3.region": moto_s3.region,
        },
    )
    other = plain.load_table("hyp.messages")
    assert other.scan().to_arrow().num_rows == 225
    plain.engine.dispose()

    # And the data files are plain Parquet to pyarrow's own S3 filesystem.
    s3fs = pafs.S3FileSystem(
        endpoint_override=moto_s3.endpoint,
        access_key=moto_s3.access_key_id,
        secret_key=moto_s3.secret_access_key,
        region=moto_s3.region,
        scheme="http",
    )
    total = 0
    for task in table.scan().plan_files():
        path = task.file.file_path.removeprefix("s3://")
        data = pq.read_table(path, filesystem=s3fs)
        assert len({ts.date() for ts in data.column("ts").to_pylist()}) == 1
        keys = data.column("conversation_id").to_pylist()
        assert keys == sorted(keys)
        total += data.num_rows
    assert total == 225
    await sink.close()


async def test_warehouse_without_permission_is_a_clear_error(
    tmp_path: Path, moto_s3_auth: S3Peer
) -> None:
    cfg = _s3(moto_s3_auth, "denied", access_key_id="AKIAWRONG", secret_access_key="wrong")
    cfg["max_retries"] = 0
    sink = build_sink(sink_config(tmp_path, destination="@hypaware/s3", **cfg))

    result = await sink.export_batch(
        batch("b", [partition("p", rows_for("a", 0, 2))]), ExportOptions()
    )

    (retry,) = result.retry_partitions
    for part in ("sink 'archive'", "dataset 'messages'", "table hyp.messages"):
        assert part in retry.reason
    assert "permission denied" in retry.reason.lower()
    assert "wrong" not in retry.reason
    # Nothing was registered half-way.
    catalog = SqlCatalog(
        "hypaware",
        uri=f"sqlite:///{tmp_path / 'state' / 'sinks' / 'archive' / 'iceberg-catalog.db'}",
    )
    assert catalog.list_tables("hyp") == []
    catalog.engine.dispose()
    await sink.close()
