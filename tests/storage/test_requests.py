"""What goes over the wire: small streams in one request, large ones as a multipart upload.

Observed on the loopback GCS server, which records every request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hypaware.blob.store import ObstoreBlobStore
from hypaware.plugins import gcs
from hypaware.testing.servers.peers import GCSServer

from .conftest import build_store, make_ctx

pytestmark = pytest.mark.gcs
MiB = 1024 * 1024


def _store(server: GCSServer, tmp_path: Path, prefix: str) -> ObstoreBlobStore:
    config = {
        "bucket": server.bucket,
        "endpoint": server.endpoint,
        "bearer_token": server.token,
        "prefix": prefix,
        "max_retries": 0,
    }
    return build_store(gcs.MANIFEST, config, make_ctx(tmp_path))


async def test_small_streams_are_one_put(gcs_server: GCSServer, tmp_path: Path) -> None:
    store = _store(gcs_server, tmp_path, "small")

    async def achunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"a" * 1000

    before = len(gcs_server.requests)
    await store.put("sync", iter([b"x" * 1000] * 4))
    await store.put("async", achunks())
    await store.put("bytes", b"b" * (3 * MiB))
    methods = [m for m, _ in gcs_server.requests[before:]]
    assert methods == ["PUT", "PUT", "PUT"]
    assert gcs_server.objects()["small/sync"] == b"x" * 4000


async def test_large_streams_are_multipart(gcs_server: GCSServer, tmp_path: Path) -> None:
    store = _store(gcs_server, tmp_path, "large")
    before = len(gcs_server.requests)
    await store.put("sync", iter([b"y" * MiB] * 20))
    requests = gcs_server.requests[before:]
    assert requests[0][0] == "POST" and "uploads" in requests[0][1]
    parts = [path for method, path in requests if method == "PUT" and "partNumber" in path]
    assert len(parts) == 3  # 20 MiB in 8 MiB parts
    assert requests[-1][0] == "POST" and "uploadId" in requests[-1][1]
    assert gcs_server.objects()["large/sync"] == b"y" * (20 * MiB)
