"""BlobSink on the network stores: S3 (moto), Azure (azurite), GCS (our XML-API loopback server).

Each test builds the sink from config, exports multi-day batches of two
datasets, then reads every object back with pyarrow.dataset, DuckDB and
fastparquet; a re-export leaves one copy of each row; bad destinations come
back as retry_partitions naming the sink and the destination.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hypaware
from hypaware import ExportOptions, load_config
from hypaware.blob.sink import BlobSink
from hypaware.core.paths import encode_segment
from hypaware.testing.servers.peers import AzuritePeer, GCSServer, S3Peer

from .data import expected_table, registry, rich_batch
from .readback import check_pyarrow, check_store, read_pyarrow

OPTS = ExportOptions()
_prefixes = itertools.count()


def unique_prefix() -> str:
    return f"run-{next(_prefixes)}"


def build(tmp_path: Path, destination: str, config: dict[str, Any]) -> BlobSink:
    doc = {
        "state_dir": str(tmp_path / "state"),
        "sinks": {
            "archive": {
                "writer": "@hypaware/format-parquet",
                "destination": destination,
                "config": {"row_group_size": 32, **config},
            }
        },
    }
    loaded = load_config(doc)
    (plan,) = hypaware.resolve(loaded, registry())
    assert plan.queryable
    sink = hypaware.build(plan, config=loaded)
    assert isinstance(sink, BlobSink)
    return sink


def s3_config(peer: S3Peer, **extra: Any) -> dict[str, Any]:
    return {
        "bucket": peer.bucket,
        "endpoint": peer.endpoint,
        "region": peer.region,
        "access_key_id": peer.access_key_id,
        "secret_access_key": peer.secret_access_key,
        "prefix": unique_prefix(),
        **extra,
    }


def azure_config(peer: AzuritePeer, **extra: Any) -> dict[str, Any]:
    return {
        "account": peer.account,
        "container": peer.container,
        "account_key": peer.account_key,
        "endpoint": peer.endpoint,
        "prefix": unique_prefix(),
        **extra,
    }


def gcs_config(server: GCSServer, **extra: Any) -> dict[str, Any]:
    return {
        "bucket": server.bucket,
        "endpoint": server.endpoint,
        "bearer_token": server.token,
        "prefix": unique_prefix(),
        **extra,
    }


async def export_and_check(sink: BlobSink, tmp_path: Path) -> None:
    batches = [
        rich_batch("b-events", dataset_name="events", parts=3, rows=70),
        rich_batch("b-chat", dataset_name="chat/v2", parts=2, rows=40, first_id=50_000),
    ]
    for i, batch in enumerate(batches):
        result = await sink.export_batch(batch, OPTS)
        assert result.retry_partitions == ()
        assert result.rows_written == batch.row_count
        paths = await check_store(
            sink.store, tmp_path / f"copy-{i}", batch.dataset.name, expected_table(batch)
        )
        assert len(paths) == result.files_written
        # The same batch again (a crash before the ack): one copy of every row.
        again = await sink.export_batch(batch, ExportOptions(attempt=2))
        assert again.exported == result.exported
        mirror_dir = tmp_path / f"again-{i}"
        table = read_pyarrow_after_mirror(await _mirror(sink, mirror_dir), batch.dataset.name)
        assert Counter(table.column("row_id").to_pylist()) == Counter(
            expected_table(batch).column("row_id").to_pylist()
        )


async def _mirror(sink: BlobSink, dest: Path) -> Path:
    from .readback import mirror

    await mirror(sink.store, dest)
    return dest


def read_pyarrow_after_mirror(root: Path, dataset: str) -> pa.Table:
    return read_pyarrow(root, dataset)


@pytest.mark.s3
async def test_s3_round_trip_and_reexport(moto_s3: S3Peer, tmp_path: Path) -> None:
    sink = build(tmp_path, "@hypaware/s3", s3_config(moto_s3))
    await export_and_check(sink, tmp_path)
    await sink.close()


@pytest.mark.s3
async def test_s3_objects_read_in_place_with_pyarrow_dataset(
    moto_s3: S3Peer, tmp_path: Path
) -> None:
    from obstore.fsspec import FsspecStore
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    config = s3_config(moto_s3)
    sink = build(tmp_path, "@hypaware/s3", config)
    batch = rich_batch(parts=2, rows=50)
    assert len((await sink.export_batch(batch, OPTS)).exported) == 2
    # Paths through fsspec start with the bucket.
    fs = PyFileSystem(FSSpecHandler(FsspecStore("s3", **moto_s3.store_kwargs())))  # type: ignore[arg-type]
    table = read_pyarrow(Path(moto_s3.bucket, config["prefix"]), "events", filesystem=fs)
    check_pyarrow(table, expected_table(batch))
    await sink.close()


@pytest.mark.azure
async def test_azure_round_trip_and_reexport(azurite: AzuritePeer, tmp_path: Path) -> None:
    sink = build(tmp_path, "@hypaware/azure", azure_config(azurite))
    await export_and_check(sink, tmp_path)
    await sink.close()


@pytest.mark.gcs
async def test_gcs_round_trip_and_reexport(gcs_server: GCSServer, tmp_path: Path) -> None:
    sink = build(tmp_path, "@hypaware/gcs", gcs_config(gcs_server))
    await export_and_check(sink, tmp_path)
    await sink.close()


@pytest.mark.gcs
async def test_gcs_holds_exactly_the_objects_and_bytes_reported(
    gcs_server: GCSServer, tmp_path: Path
) -> None:
    # Checked on the server's side, not through the store that wrote them.
    config = gcs_config(gcs_server, target_file_size=64 * 1024 * 1024)
    sink = build(tmp_path, "@hypaware/gcs", config)
    batch = rich_batch(parts=1, rows=3_000)
    result = await sink.export_batch(batch, OPTS)
    assert result.exported == ("events-p0",)
    held = gcs_server.objects()
    mine = [k for k in held if k.startswith(f"{config['prefix']}/{encode_segment('events')}/")]
    assert len(mine) == result.files_written
    assert sum(len(held[k]) for k in mine) == result.bytes_written
    await sink.close()


# ------------------------------------------------------------------ bad input


@pytest.mark.s3
async def test_unknown_bucket_is_reported_for_every_partition(
    moto_s3: S3Peer, tmp_path: Path
) -> None:
    sink = build(tmp_path, "@hypaware/s3", s3_config(moto_s3, bucket="no-such-bucket"))
    batch = rich_batch(parts=3, rows=10)
    result = await sink.export_batch(batch, OPTS)
    assert result.exported == ()
    assert len(result.retry_partitions) == 3
    for retry in result.retry_partitions:
        assert "sink 'archive'" in retry.reason and "@hypaware/s3" in retry.reason
        assert "no-such-bucket" in retry.reason
        assert moto_s3.secret_access_key not in retry.reason
        assert not retry.retryable
    await sink.close()


@pytest.mark.s3
async def test_wrong_credentials_are_refused_without_leaking_them(
    moto_s3_auth: S3Peer, tmp_path: Path
) -> None:
    config = s3_config(
        moto_s3_auth, access_key_id="AKIDWRONG", secret_access_key="very-secret-value"
    )
    sink = build(tmp_path, "@hypaware/s3", config)
    result = await sink.export_batch(rich_batch(parts=2, rows=10), OPTS)
    assert result.exported == ()
    for retry in result.retry_partitions:
        assert "sink 'archive'" in retry.reason and "@hypaware/s3" in retry.reason
        assert "very-secret-value" not in retry.reason
        assert not retry.retryable
    await sink.close()


async def test_unreachable_endpoint_is_transient(tmp_path: Path) -> None:
    from hypaware.testing.servers.peers import free_port

    config = {
        "bucket": "b",
        "endpoint": f"http://127.0.0.1:{free_port()}",
        "region": "us-east-1",
        "access_key_id": "k",
        "secret_access_key": "s",
        "max_retries": 0,
        "connect_timeout": 0.5,
        "retry_timeout": 1.0,
    }
    sink = build(tmp_path, "@hypaware/s3", config)
    result = await sink.export_batch(rich_batch(parts=2, rows=10), OPTS)
    assert result.exported == ()
    assert [r.retryable for r in result.retry_partitions] == [True, True]
    assert all("sink 'archive'" in r.reason for r in result.retry_partitions)
    await sink.close()


@pytest.mark.gcs
async def test_a_failing_store_leaves_nothing_visible_and_the_retry_completes(
    gcs_server: GCSServer, tmp_path: Path
) -> None:
    config = gcs_config(gcs_server, max_retries=0, retry_timeout=1.0)
    sink = build(tmp_path, "@hypaware/gcs", config)
    batch = rich_batch(parts=3, rows=40)
    gcs_server.fail_next(503)
    first = await sink.export_batch(batch, OPTS)
    assert first.exported == ()
    assert [r.retryable for r in first.retry_partitions] == [True, True, True]
    # Only whole objects: a later file may have landed while the first failed.
    assert all(
        k.endswith("-0000.parquet") for k in gcs_server.objects() if k.startswith(config["prefix"])
    )
    second = await sink.export_batch(batch, ExportOptions(attempt=2))
    assert len(second.exported) == 3
    table = read_pyarrow_after_mirror(await _mirror(sink, tmp_path / "m"), "events")
    assert Counter(table.column("row_id").to_pylist()) == Counter(range(120))
    await sink.close()
