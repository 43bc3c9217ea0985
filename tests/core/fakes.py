"""Hand-built manifests shaped like the first-party ones, for resolver tests.

Their factories point here, so `build()` can be exercised without any real
destination.
"""

from __future__ import annotations

from typing import Any

import attrs

from hypaware import ExportBatch, ExportOptions, ExportResult, Registry, Secret
from hypaware.core.manifest import (
    BLOB_STORE,
    ENCODER,
    HTTP_ENDPOINT,
    QUERYABLE,
    PluginManifest,
)


@attrs.frozen
class BucketConfig:
    bucket: str
    region: str = "us-east-1"
    prefix: str = ""


@attrs.frozen
class RootConfig:
    root: str = "export"


@attrs.frozen
class ParquetConfig:
    compression: str = "zstd"
    row_group_size: int = 65536


@attrs.frozen
class JsonlConfig:
    compression: str | None = None


@attrs.frozen
class IcebergConfig:
    namespace: str = "hypaware"


@attrs.frozen
class EndpointConfig:
    endpoint: str
    token: Secret | None = None
    timeout: float = 30.0


class RecordingSink:
    """A request sink that keeps what it was given."""

    def __init__(self, config: EndpointConfig, token: str | None) -> None:
        self.config = config
        self.token = token
        self.batches: list[ExportBatch] = []
        self.closed = False

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        self.batches.append(batch)
        return ExportResult(exported=[p.id for p in batch.partitions])

    async def close(self) -> None:
        self.closed = True


def make_endpoint(config: EndpointConfig, ctx: Any) -> RecordingSink:
    return RecordingSink(config, ctx.reveal(config.token, "token"))


def make_not_a_sink(config: Any, ctx: Any) -> object:
    return object()


def make_exploding(config: Any, ctx: Any) -> object:
    raise RuntimeError("cannot reach the control plane")


def make_anything(config: Any, ctx: Any) -> object:
    return object()


def _m(name: str, kind: Any, **kw: Any) -> PluginManifest:
    endpoint = kw.get("config_class") is EndpointConfig
    kw.setdefault("factory", f"tests.core.fakes:{'make_endpoint' if endpoint else 'make_anything'}")
    return PluginManifest(name=name, kind=kind, **kw)


S3 = _m("@hypaware/s3", "destination", config_class=BucketConfig, supports={QUERYABLE})
LOCAL = _m("@hypaware/local-fs", "destination", config_class=RootConfig, supports={QUERYABLE})
PARQUET = _m(
    "@hypaware/format-parquet",
    "encoder",
    requires={BLOB_STORE},
    config_class=ParquetConfig,
    supports={QUERYABLE},
)
JSONL = _m("@hypaware/format-jsonl", "encoder", requires={BLOB_STORE}, config_class=JsonlConfig)
ICEBERG = _m(
    "@hypaware/format-iceberg",
    "table-format",
    requires={BLOB_STORE, ENCODER},
    encoders=("@hypaware/format-parquet",),
    config_class=IcebergConfig,
    supports={QUERYABLE},
)
WEBHOOK = _m(
    "@hypaware/webhook",
    "sink",
    provides={HTTP_ENDPOINT},
    config_class=EndpointConfig,
)
CENTRAL = _m(
    "@hypaware/central",
    "sink",
    provides={HTTP_ENDPOINT},
    config_class=EndpointConfig,
)
NOT_A_SINK = _m("@test/not-a-sink", "sink", factory="tests.core.fakes:make_not_a_sink")
EXPLODING = _m("@test/exploding", "sink", factory="tests.core.fakes:make_exploding")

ALL = (S3, LOCAL, PARQUET, JSONL, ICEBERG, WEBHOOK, CENTRAL, NOT_A_SINK, EXPLODING)


def registry() -> Registry:
    return Registry(ALL)


SPEC_EXAMPLE: dict[str, Any] = {
    "sinks": {
        "archive": {
            "writer": "@hypaware/format-iceberg",
            "destination": "@hypaware/s3",
            "config": {"bucket": "acme-hyp-archive", "schedule": "0 * * * *"},
        },
        "forward": {
            "plugin": "@hypaware/central",
            "config": {"endpoint": "https://hypaware.acme.internal", "schedule": "*/5 * * * *"},
        },
    }
}
