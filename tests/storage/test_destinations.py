"""Destination plugins: config mapping through hypaware.resolve, and building live stores."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hypaware.blob.store import ObstoreBlobStore
from hypaware.core.config_loader import load_config
from hypaware.core.contracts import Sink
from hypaware.core.errors import ConfigError
from hypaware.core.manifest import BLOB_STORE, ENCODER, QUERYABLE, PluginManifest
from hypaware.core.registry import Registry
from hypaware.core.resolver import BlobPlan, BuildContext, resolve
from hypaware.core.secrets import Secret
from hypaware.destinations import memory as memory_destination
from hypaware.export.build import build
from hypaware.plugins import azure, gcs, local_fs, memory, s3
from hypaware.testing.servers.peers import AzuritePeer, GCSServer, S3Peer

from .conftest import make_ctx

DESTINATIONS = [local_fs.MANIFEST, memory.MANIFEST, s3.MANIFEST, gcs.MANIFEST, azure.MANIFEST]
QUERYABLE_ENCODER = PluginManifest(
    name="@test/columnar",
    kind="encoder",
    factory="tests.storage.test_destinations:make_encoder",
    requires={BLOB_STORE},
    supports={QUERYABLE},
)
PLAIN_ENCODER = PluginManifest(
    name="@test/lines",
    kind="encoder",
    factory="tests.storage.test_destinations:make_encoder",
    requires={BLOB_STORE},
)
REGISTRY = Registry([*DESTINATIONS, QUERYABLE_ENCODER, PLAIN_ENCODER])


class _LinesEncoder:
    """Just enough of an Encoder for `build` to compose a sink."""

    extension = "txt"
    media_type = "text/plain"

    def encode(self, schema: Any, batches: Iterable[Any]) -> Iterator[Iterator[bytes]]:
        for batch in batches:
            yield iter([str(batch.to_pylist()).encode()])


def make_encoder(config: object, ctx: BuildContext) -> _LinesEncoder:
    return _LinesEncoder()


def plan_for(destination: str, config: dict[str, Any], writer: str = "@test/columnar") -> BlobPlan:
    doc = {"sinks": {"archive": {"writer": writer, "destination": destination, "config": config}}}
    (plan,) = resolve(doc, REGISTRY)
    assert isinstance(plan, BlobPlan)
    return plan


def problems_for(destination: str, config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        plan_for(destination, config)
    return {p.path: p.message for p in info.value.problems}


def build_destination(plan: BlobPlan, ctx: BuildContext) -> ObstoreBlobStore:
    store = plan.destination.manifest.load_factory()(plan.destination.config, ctx)
    assert isinstance(store, ObstoreBlobStore)
    return store


# ------------------------------------------------------------------ manifests


def test_entry_points_register_every_destination() -> None:
    registry = Registry.from_entry_points()
    for manifest in DESTINATIONS:
        found = registry[manifest.name]
        assert found is manifest
        assert found.kind == "destination"
        assert BLOB_STORE in found.provides
        assert ENCODER not in found.provides
        assert found.queryable


def test_queryability_comes_from_the_pair() -> None:
    for manifest in DESTINATIONS:
        config = {"root": "x"} if manifest is local_fs.MANIFEST else {}
        if manifest in (s3.MANIFEST, gcs.MANIFEST):
            config = {"bucket": "b"}
        if manifest is azure.MANIFEST:
            config = {"account": "a", "container": "c"}
        assert plan_for(manifest.name, config).queryable
        assert not plan_for(manifest.name, config, writer="@test/lines").queryable


def test_importing_the_plugins_stays_light() -> None:
    code = (
        "import sys, hypaware.plugins.s3, hypaware.plugins.gcs, hypaware.plugins.azure, "
        "hypaware.plugins.local_fs, hypaware.plugins.memory, hypaware.core.registry;"
        "hypaware.core.registry.Registry.from_entry_points();"
        "heavy = [m for m in ('obstore', 'pyarrow', 'boto3') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("destination", "config"),
    [
        ("@hypaware/local-fs", {"root": "exports"}),
        ("@hypaware/memory", {"prefix": "p"}),
        ("@hypaware/s3", {"bucket": "b", "access_key_id": "k", "secret_access_key": "${S}"}),
        ("@hypaware/gcs", {"bucket": "b", "bearer_token": "${S}"}),
        ("@hypaware/azure", {"account": "a", "container": "c", "account_key": "${S}"}),
    ],
)
async def test_build_composes_a_sink_on_each_destination(
    destination: str, config: dict[str, Any], tmp_path: Path
) -> None:
    doc = {
        "sinks": {
            "archive": {"writer": "@test/lines", "destination": destination, "config": config}
        }
    }
    loaded = load_config(doc, base_dir=str(tmp_path))
    (plan,) = resolve(loaded, REGISTRY)
    sink = build(plan, config=loaded, env={"S": "c2VjcmV0"})
    assert isinstance(sink, Sink)
    assert isinstance(sink.store, ObstoreBlobStore)
    assert destination in sink.store.label
    assert "c2VjcmV0" not in sink.store.label + repr(sink.store)
    await sink.close()


# ------------------------------------------------------------------ local-fs


def test_local_fs_root_is_relative_to_the_config_and_created(tmp_path: Path) -> None:
    plan = plan_for("@hypaware/local-fs", {"root": "exports/archive"})
    assert plan.destination.config == local_fs.LocalFsConfig(root="exports/archive")
    store = build_destination(plan, make_ctx(tmp_path))
    assert (tmp_path / "exports" / "archive").is_dir()
    assert store.url == (tmp_path / "exports" / "archive").as_uri()
    assert "@hypaware/local-fs" in store.label


async def test_local_fs_writes_files(tmp_path: Path) -> None:
    store = build_destination(plan_for("@hypaware/local-fs", {"root": "out"}), make_ctx(tmp_path))
    await store.put("ds/date=2024-05-01/a.parquet", b"PAR1")
    assert (tmp_path / "out" / "ds" / "date=2024-05-01" / "a.parquet").read_bytes() == b"PAR1"


def test_local_fs_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("x")
    plan = plan_for("@hypaware/local-fs", {"root": "taken"})
    with pytest.raises(ConfigError) as info:
        build_destination(plan, make_ctx(tmp_path))
    assert info.value.problems[0].path == "sinks.archive.config.root"


def test_local_fs_needs_a_root() -> None:
    problems = problems_for("@hypaware/local-fs", {})
    assert any("root" in p or "root" in m for p, m in problems.items()), problems
    problems = problems_for("@hypaware/local-fs", {"root": ""})
    assert "sinks.archive.config.root" in problems
    problems = problems_for("@hypaware/local-fs", {"rot": "x"})
    assert "did you mean 'root'" in problems["sinks.archive.config.rot"]


# -------------------------------------------------------------------- memory


async def test_memory_named_stores_are_shared(tmp_path: Path) -> None:
    plan = plan_for("@hypaware/memory", {"name": "shared-test", "prefix": "p"})
    one = build_destination(plan, make_ctx(tmp_path))
    two = build_destination(plan, make_ctx(tmp_path))
    await one.put("k", b"v")
    assert await two.get("k") == b"v"
    assert one.store is memory_destination.shared_store("shared-test")
    private = build_destination(plan_for("@hypaware/memory", {}), make_ctx(tmp_path))
    assert [m async for m in private.list()] == []


# ------------------------------------------------------------------------ S3


def test_s3_config_mapping() -> None:
    plan = plan_for(
        "@hypaware/s3",
        {
            "bucket": "acme-archive",
            "prefix": "hyp/",
            "region": "eu-west-1",
            "access_key_id": "${AWS_KEY}",
            "secret_access_key": "${AWS_SECRET}",
            "max_retries": 3,
            "timeout": 12,
        },
    )
    config = plan.destination.config
    assert isinstance(config, s3.S3Config)
    assert config.bucket == "acme-archive"
    assert config.prefix == "hyp/"
    assert config.secret_access_key == Secret("${AWS_SECRET}")
    assert config.timeout == 12.0
    assert "AWS_SECRET" in repr(config)


def test_s3_literal_secrets_never_show() -> None:
    plan = plan_for(
        "@hypaware/s3",
        {"bucket": "b", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "hunter2-secret"},
    )
    assert "hunter2-secret" not in repr(plan.destination.config)
    assert "hunter2-secret" not in repr(plan)


def test_s3_bad_values_are_reported_at_their_field() -> None:
    problems = problems_for("@hypaware/s3", {"bucket": "b", "access_key_id": "AKIA"})
    assert "sinks.archive.config.secret_access_key" in problems
    problems = problems_for("@hypaware/s3", {"bucket": "b", "prefix": "../elsewhere"})
    assert "'..'" in problems["sinks.archive.config.prefix"]
    problems = problems_for("@hypaware/s3", {"bucket": "b", "max_retries": -1})
    assert "sinks.archive.config.max_retries" in problems
    problems = problems_for("@hypaware/s3", {"bucket": 5})
    assert "sinks.archive.config.bucket" in problems
    problems = problems_for("@hypaware/s3", {"bucket": "b", "regoin": "x"})
    assert "did you mean 'region'" in problems["sinks.archive.config.regoin"]


@pytest.mark.s3
async def test_s3_through_resolve_with_env_secrets(moto_s3: S3Peer, tmp_path: Path) -> None:
    plan = plan_for(
        "@hypaware/s3",
        {
            "bucket": moto_s3.bucket,
            "prefix": "via-config",
            "endpoint": moto_s3.endpoint,
            "region": moto_s3.region,
            "access_key_id": "${TEST_AWS_KEY}",
            "secret_access_key": "${TEST_AWS_SECRET}",
        },
    )
    env = {"TEST_AWS_KEY": moto_s3.access_key_id, "TEST_AWS_SECRET": moto_s3.secret_access_key}
    store = build_destination(plan, make_ctx(tmp_path, env))
    assert store.prefix == "via-config"
    assert store.url == f"s3://{moto_s3.bucket}/via-config"
    assert moto_s3.endpoint in store.label
    await store.put("a/b", b"through config")
    assert await store.get("a/b") == b"through config"
    assert [m.path async for m in store.list("a")] == ["a/b"]


def test_s3_missing_env_secret_names_the_field(tmp_path: Path) -> None:
    plan = plan_for(
        "@hypaware/s3",
        {"bucket": "b", "access_key_id": "${NOPE_KEY}", "secret_access_key": "${NOPE_SECRET}"},
    )
    with pytest.raises(ConfigError) as info:
        build_destination(plan, make_ctx(tmp_path, {}))
    assert info.value.problems[0].path == "sinks.archive.config.access_key_id"
    assert "NOPE_KEY" in str(info.value)


# ------------------------------------------------------------ the HTTP rule


@pytest.mark.parametrize(
    ("endpoint", "allow_http", "ok"),
    [
        ("https://s3.example.com", False, True),
        ("http://127.0.0.1:9000", False, True),
        ("http://127.9.8.7:9000", False, True),
        ("http://localhost:9000", False, True),
        ("http://LOCALHOST", False, True),
        ("http://[::1]:9000", False, True),
        ("http://minio.internal:9000", False, False),
        ("http://10.0.0.5:9000", False, False),
        ("http://128.0.0.1", False, False),
        ("http://localhost.example.com", False, False),
        ("http://minio.internal:9000", True, True),
        ("ftp://127.0.0.1", True, False),
        ("not a url", True, False),
        ("http://user:pw@127.0.0.1", True, False),
    ],
)
@pytest.mark.parametrize("plugin", ["@hypaware/s3", "@hypaware/gcs", "@hypaware/azure"])
def test_plain_http_only_to_loopback_unless_allowed(
    plugin: str, endpoint: str, allow_http: bool, ok: bool
) -> None:
    config: dict[str, Any] = {"endpoint": endpoint, "allow_http": allow_http}
    if plugin == "@hypaware/azure":
        config |= {"account": "acct", "container": "c"}
    else:
        config |= {"bucket": "b"}
    if ok:
        plan_for(plugin, config)
        return
    problems = problems_for(plugin, config)
    assert list(problems) == ["sinks.archive.config.endpoint"]
    message = problems["sinks.archive.config.endpoint"]
    if endpoint.startswith("http://") and "@" not in endpoint:
        assert "allow_http" in message
    assert "pw" not in message


# ----------------------------------------------------------------------- GCS


def test_gcs_config_mapping(tmp_path: Path) -> None:
    plan = plan_for(
        "@hypaware/gcs",
        {"bucket": "acme", "prefix": "p", "service_account_path": "keys/sa.json"},
    )
    with pytest.raises(ConfigError) as info:
        build_destination(plan, make_ctx(tmp_path))
    assert info.value.problems[0].path == "sinks.archive.config.service_account_path"
    (tmp_path / "keys").mkdir()
    key = {"disable_oauth": True, "client_email": "", "private_key": "", "private_key_id": ""}
    (tmp_path / "keys" / "sa.json").write_text(json.dumps(key))
    store = build_destination(plan, make_ctx(tmp_path))
    config: Any = store.store.config  # type: ignore[union-attr]
    assert config["bucket"] == "acme"
    assert config["service_account"] == str(tmp_path / "keys" / "sa.json")
    assert store.url == "gs://acme/p"


def test_gcs_malformed_key_is_a_config_error_without_the_key(tmp_path: Path) -> None:
    plan = plan_for("@hypaware/gcs", {"bucket": "b", "service_account_key": "${KEY}"})
    with pytest.raises(ConfigError) as info:
        build_destination(plan, make_ctx(tmp_path, {"KEY": "not-json-hunter2"}))
    assert info.value.problems[0].path == "sinks.archive.config"
    assert "@hypaware/gcs" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_gcs_one_credential_at_a_time() -> None:
    problems = problems_for(
        "@hypaware/gcs", {"bucket": "b", "bearer_token": "t", "service_account_key": "{}"}
    )
    assert "must not be set together" in next(iter(problems.values()))


@pytest.mark.gcs
async def test_gcs_through_resolve(gcs_server: GCSServer, tmp_path: Path) -> None:
    plan = plan_for(
        "@hypaware/gcs",
        {
            "bucket": gcs_server.bucket,
            "endpoint": gcs_server.endpoint,
            "bearer_token": "${GCS_TOKEN}",
            "prefix": "via-config",
        },
    )
    store = build_destination(plan, make_ctx(tmp_path, {"GCS_TOKEN": str(gcs_server.token)}))
    await store.put("x", b"gcs bytes")
    assert gcs_server.objects()["via-config/x"] == b"gcs bytes"
    assert await store.get("x") == b"gcs bytes"


# --------------------------------------------------------------------- Azure


def test_azure_config_mapping(tmp_path: Path) -> None:
    plan = plan_for(
        "@hypaware/azure",
        {"account": "acme", "container": "exports", "sas_token": "?sv=1&sig=abc"},
    )
    store = build_destination(plan, make_ctx(tmp_path))
    assert store.url == "az://exports"
    assert "acme.blob.core.windows.net" in store.label
    assert "sig=abc" not in store.label
    problems = problems_for(
        "@hypaware/azure",
        {"account": "a", "container": "c", "sas_token": "s", "account_key": "k"},
    )
    assert "sinks.archive.config.sas_token" in problems
    problems = problems_for("@hypaware/azure", {"account": "a"})
    assert problems


@pytest.mark.azure
async def test_azure_through_resolve(azurite: AzuritePeer, tmp_path: Path) -> None:
    plan = plan_for(
        "@hypaware/azure",
        {
            "account": azurite.account,
            "container": azurite.container,
            "account_key": "${AZ_KEY}",
            "endpoint": azurite.endpoint,
            "prefix": "via-config",
        },
    )
    store = build_destination(plan, make_ctx(tmp_path, {"AZ_KEY": azurite.account_key}))
    await store.put("x", b"azure bytes")
    assert await store.get("x") == b"azure bytes"
