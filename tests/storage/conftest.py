"""Blob stores built through each destination plugin's factory, against real peers."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hypaware.blob.store import ObstoreBlobStore
from hypaware.core.config_converter import structure_config
from hypaware.core.errors import Problem
from hypaware.core.manifest import PluginManifest
from hypaware.core.resolver import BuildContext
from hypaware.plugins import azure, gcs, local_fs, memory, s3
from hypaware.testing.servers.peers import AzuritePeer, GCSServer, S3Peer

STORES = ["memory", "local", "s3", "azure", "gcs"]
MARKS = {"s3": pytest.mark.s3, "azure": pytest.mark.azure, "gcs": pytest.mark.gcs}
FAST = {"max_retries": 1, "retry_timeout": 5.0}


def make_ctx(tmp_path: Path, env: dict[str, str] | None = None) -> BuildContext:
    return BuildContext(
        sink_name="archive", state_dir=tmp_path / "state", base_dir=tmp_path, env=env or {}
    )


def build_store(
    manifest: PluginManifest, config: dict[str, Any], ctx: BuildContext
) -> ObstoreBlobStore:
    """Structure `config` as the resolver does and call the plugin's factory."""
    problems: list[Problem] = []
    assert manifest.config_class is not None
    structured = structure_config(manifest.config_class, config, "config", problems)
    assert not problems, problems
    store = manifest.load_factory()(structured, ctx)
    assert isinstance(store, ObstoreBlobStore)
    return store


StoreMaker = Callable[..., ObstoreBlobStore]


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, ())) for name in STORES])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreMaker:
    """Build a fresh store of `store_kind` rooted at a unique prefix; extra config via kwargs."""
    ctx = make_ctx(tmp_path)
    unique = f"t-{uuid.uuid4().hex[:12]}"

    def make(**extra: Any) -> ObstoreBlobStore:
        if store_kind == "memory":
            return build_store(memory.MANIFEST, {"prefix": unique, **extra}, ctx)
        if store_kind == "local":
            return build_store(local_fs.MANIFEST, {"root": f"out/{unique}", **extra}, ctx)
        if store_kind == "s3":
            peer: S3Peer = request.getfixturevalue("moto_s3")
            config = {
                "bucket": peer.bucket,
                "prefix": unique,
                "endpoint": peer.endpoint,
                "region": peer.region,
                "access_key_id": peer.access_key_id,
                "secret_access_key": peer.secret_access_key,
                **FAST,
            }
            return build_store(s3.MANIFEST, {**config, **extra}, ctx)
        if store_kind == "azure":
            az: AzuritePeer = request.getfixturevalue("azurite")
            config = {
                "account": az.account,
                "container": az.container,
                "account_key": az.account_key,
                "endpoint": az.endpoint,
                "prefix": unique,
                **FAST,
            }
            return build_store(azure.MANIFEST, {**config, **extra}, ctx)
        server: GCSServer = request.getfixturevalue("gcs_server")
        config = {
            "bucket": server.bucket,
            "endpoint": server.endpoint,
            "bearer_token": server.token,
            "prefix": unique,
            **FAST,
        }
        return build_store(gcs.MANIFEST, {**config, **extra}, ctx)

    return make


@pytest.fixture
async def store(make_store: StoreMaker) -> AsyncIterator[ObstoreBlobStore]:
    blob_store = make_store()
    yield blob_store
    await blob_store.close()
