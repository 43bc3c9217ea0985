"""hypaware's own sinks and blob stores pass the same conformance suite third parties run."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from hypaware.blob.table_sink import TableSink
from hypaware.core.contracts import BlobStore, Sink
from hypaware.core.types import DatasetInfo
from hypaware.testing.conformance import BlobStoreContract, QueryableSinkContract, SinkContract
from hypaware.testing.servers.central import CentralServer, Reply
from hypaware.testing.servers.peers import AZURITE_KEY, AzuritePeer, GCSServer, S3Peer
from hypaware.testing.servers.rest_catalog import RestCatalogServer
from hypaware.testing.servers.webhook import WebhookReceiver, run_webhook_receiver

from .first_party import blob_store_of, build_sink, rows_at

S3_SECRET = "s3-conformance-secret-7d1c9b"
CENTRAL_TOKEN = "central-conformance-token-4e2a"
WEBHOOK_KEY = "webhook-conformance-key-93b1"
REST_TOKEN = "rest-catalog-conformance-token-5c8e"
FAST_REMOTE = {"max_retries": 1, "retry_timeout": 5.0}


@attrs.frozen
class Remote:
    """A target on a shared peer: a local base directory plus a unique prefix."""

    base: Path
    prefix: str
    peer: Any


def unique() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


# ----------------------------------------------------------------- blob sinks


class TestParquetOnLocalFs(QueryableSinkContract):
    def make_sink(self, target: Path) -> Sink:
        return build_sink(
            target,
            {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": "out"},
            },
        )

    async def read_rows(self, target: Path, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return await rows_at(target, "@hypaware/local-fs", {"root": "out"}, dataset.name)

    def local_root(self, target: Path) -> Path:
        return target / "out"


class TestJsonlOnMemory(SinkContract):
    @pytest.fixture
    def target(self, tmp_path: Path) -> Remote:
        return Remote(tmp_path, unique(), None)

    def _config(self, target: Remote) -> dict[str, Any]:
        return {"name": f"conformance-{target.prefix}", "prefix": "export"}

    def make_sink(self, target: Remote) -> Sink:
        return build_sink(
            target.base,
            {
                "writer": "@hypaware/format-jsonl",
                "destination": "@hypaware/memory",
                "config": self._config(target),
            },
        )

    async def read_rows(self, target: Remote, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return await rows_at(target.base, "@hypaware/memory", self._config(target), dataset.name)


def s3_config(target: Remote) -> dict[str, Any]:
    peer: S3Peer = target.peer
    return {
        "bucket": peer.bucket,
        "prefix": target.prefix,
        "endpoint": peer.endpoint,
        "region": peer.region,
        "access_key_id": peer.access_key_id,
        "secret_access_key": "${CONFORMANCE_S3_SECRET}",
        **FAST_REMOTE,
    }


S3_ENV = {"CONFORMANCE_S3_SECRET": S3_SECRET}


@pytest.mark.s3
class TestParquetOnS3(QueryableSinkContract):
    secrets = (S3_SECRET,)

    @pytest.fixture
    def target(self, tmp_path: Path, moto_s3: S3Peer) -> Remote:
        return Remote(tmp_path, unique(), moto_s3)

    def make_sink(self, target: Remote) -> Sink:
        return build_sink(
            target.base,
            {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "config": s3_config(target),
            },
            S3_ENV,
        )

    async def read_rows(self, target: Remote, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return await rows_at(target.base, "@hypaware/s3", s3_config(target), dataset.name, S3_ENV)


# ---------------------------------------------------------------- table format


@pytest.mark.iceberg
class TestIcebergOnLocalFs(QueryableSinkContract):
    def _entry(self) -> dict[str, Any]:
        return {
            "writer": "@hypaware/format-iceberg",
            "destination": "@hypaware/local-fs",
            "config": {"root": "warehouse", "namespace": "conformance"},
        }

    def make_sink(self, target: Path) -> Sink:
        return build_sink(target, self._entry())

    async def read_rows(self, target: Path, dataset: DatasetInfo) -> list[dict[str, Any]]:
        sink = build_sink(target, self._entry())
        assert isinstance(sink, TableSink)
        try:
            scan = getattr(sink.table, "scan")  # noqa: B009 - not on the TableFormat protocol
            rows: list[dict[str, Any]] = scan(dataset).read_all().to_pylist()
            return rows
        finally:
            await sink.close()


@attrs.frozen
class RestTarget:
    base: Path
    server: RestCatalogServer


@pytest.mark.iceberg
class TestIcebergOnRestCatalog(SinkContract):
    """``@hypaware/format-iceberg`` with its tables in a REST catalog (loopback server)."""

    secrets = (REST_TOKEN,)

    @pytest.fixture
    def target(self, tmp_path: Path) -> Iterator[RestTarget]:
        with RestCatalogServer(tmp_path / "rest", token=REST_TOKEN) as server:
            yield RestTarget(tmp_path, server)

    def _entry(self, target: RestTarget) -> dict[str, Any]:
        return {
            "writer": "@hypaware/format-iceberg",
            "destination": "@hypaware/local-fs",
            "config": {
                "root": "warehouse",
                "namespace": "conformance",
                "catalog": {"type": "rest", "uri": target.server.uri, "token": REST_TOKEN},
            },
        }

    def make_sink(self, target: RestTarget) -> Sink:
        return build_sink(target.base, self._entry(target))

    async def read_rows(self, target: RestTarget, dataset: DatasetInfo) -> list[dict[str, Any]]:
        sink = build_sink(target.base, self._entry(target))
        assert isinstance(sink, TableSink)
        try:
            scan = getattr(sink.table, "scan")  # noqa: B009 - not on the TableFormat protocol
            rows: list[dict[str, Any]] = scan(dataset).read_all().to_pylist()
            return rows
        finally:
            await sink.close()


# --------------------------------------------------------------- request sinks


@attrs.frozen
class CentralTarget:
    base: Path
    server: CentralServer


class TestCentral(SinkContract):
    """``@hypaware/central`` against the reference server over loopback HTTP."""

    secrets = (CENTRAL_TOKEN,)

    @pytest.fixture
    def target(self, tmp_path: Path) -> Iterator[CentralTarget]:
        with CentralServer(token=CENTRAL_TOKEN) as server:
            yield CentralTarget(tmp_path, server)

    def make_sink(self, target: CentralTarget) -> Sink:
        return build_sink(
            target.base,
            {
                "plugin": "@hypaware/central",
                "config": {
                    "endpoint": target.server.url,
                    "token": "${CONFORMANCE_CENTRAL_TOKEN}",
                    "gateway_id": "gw-conformance",
                    "max_chunk_rows": 7,
                },
            },
            {"CONFORMANCE_CENTRAL_TOKEN": CENTRAL_TOKEN},
        )

    def read_rows(self, target: CentralTarget, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return target.server.rows(dataset.name)

    def stall(self, target: CentralTarget) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def backpressure() -> AsyncIterator[None]:
            # Every request answered 429 with a long Retry-After: the sink parks in its wait.
            target.server.script(*[Reply(429, retry_after="30")] * 20)
            yield

        return backpressure()


@attrs.frozen
class WebhookTarget:
    base: Path
    receiver: WebhookReceiver


class TestWebhook(SinkContract):
    """``@hypaware/webhook`` against a receiver that dedupes by idempotency key."""

    secrets = (WEBHOOK_KEY,)

    @pytest.fixture
    def target(self, tmp_path: Path) -> Iterator[WebhookTarget]:
        with run_webhook_receiver(WEBHOOK_KEY) as receiver:
            yield WebhookTarget(tmp_path, receiver)

    def make_sink(self, target: WebhookTarget) -> Sink:
        return build_sink(
            target.base,
            {
                "plugin": "@hypaware/webhook",
                "config": {
                    "url": target.receiver.url,
                    "signing_secret": "${CONFORMANCE_HOOK_KEY}",
                    "gateway_id": "gw-conformance",
                    "max_chunk_rows": 6,
                },
            },
            {"CONFORMANCE_HOOK_KEY": WEBHOOK_KEY},
        )

    def read_rows(self, target: WebhookTarget, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return target.receiver.rows_of(dataset.name)

    def stall(self, target: WebhookTarget) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def backpressure() -> AsyncIterator[None]:
            target.receiver.script.extend([(429, "30")] * 20)
            yield

        return backpressure()


# ----------------------------------------------------------------- blob stores


class TestLocalFsStore(BlobStoreContract):
    def make_store(self, target: Path) -> BlobStore:
        return blob_store_of(target, "@hypaware/local-fs", {"root": "root"})

    def local_root(self, target: Path) -> Path:
        return target / "root"


class TestMemoryStore(BlobStoreContract):
    @pytest.fixture
    def target(self, tmp_path: Path) -> Remote:
        return Remote(tmp_path, unique(), None)

    def make_store(self, target: Remote) -> BlobStore:
        config = {"name": f"conformance-{target.prefix}", "prefix": "root"}
        return blob_store_of(target.base, "@hypaware/memory", config)


@pytest.mark.s3
class TestS3Store(BlobStoreContract):
    secrets = (S3_SECRET,)

    @pytest.fixture
    def target(self, tmp_path: Path, moto_s3: S3Peer) -> Remote:
        return Remote(tmp_path, unique(), moto_s3)

    def make_store(self, target: Remote) -> BlobStore:
        return blob_store_of(target.base, "@hypaware/s3", s3_config(target), S3_ENV)


@pytest.mark.gcs
class TestGcsStore(BlobStoreContract):
    @pytest.fixture
    def target(self, tmp_path: Path, gcs_server: GCSServer) -> Remote:
        return Remote(tmp_path, unique(), gcs_server)

    def make_store(self, target: Remote) -> BlobStore:
        server: GCSServer = target.peer
        config = {
            "bucket": server.bucket,
            "endpoint": server.endpoint,
            "bearer_token": "${CONFORMANCE_GCS_TOKEN}",
            "prefix": target.prefix,
            **FAST_REMOTE,
        }
        return blob_store_of(
            target.base, "@hypaware/gcs", config, {"CONFORMANCE_GCS_TOKEN": server.token or ""}
        )


@pytest.mark.azure
class TestAzureStore(BlobStoreContract):
    secrets = (AZURITE_KEY,)

    @pytest.fixture
    def target(self, tmp_path: Path, azurite: AzuritePeer) -> Remote:
        return Remote(tmp_path, unique(), azurite)

    def make_store(self, target: Remote) -> BlobStore:
        peer: AzuritePeer = target.peer
        config = {
            "account": peer.account,
            "container": peer.container,
            "account_key": "${CONFORMANCE_AZURE_KEY}",
            "endpoint": peer.endpoint,
            "prefix": target.prefix,
            **FAST_REMOTE,
        }
        return blob_store_of(
            target.base, "@hypaware/azure", config, {"CONFORMANCE_AZURE_KEY": peer.account_key}
        )
