"""``@hypaware/central``: forward rows to a hypaware central server.

The wire contract is ``docs/central-proto.md``; the settings and the
backpressure rule are in ``docs/request-sinks.md``. Config::

    {"plugin": "@hypaware/central",
     "config": {"endpoint": "https://hyp.example.com", "token": "${HYP_TOKEN}",
                "schedule": "*/5 * * * *"}}
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

import attrs

from hypaware.core.secrets import Secret
from hypaware.request.endpoints import check_endpoint_url
from hypaware.request.settings import RequestSinkSettings, reveal_headers
from hypaware.request.wire import PermanentRequestError, Reply

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.request.chunking import Chunk, ChunkIdentity, Framing
    from hypaware.request.sink import RequestSink

__all__ = ["CentralConfig", "CentralWire", "build_central"]

PLUGIN = "@hypaware/central"
RESERVED = frozenset(
    {
        "authorization",
        "content-type",
        "content-encoding",
        "content-length",
        "host",
        "x-hyp-gateway",
        "x-hyp-batch-id",
        "x-hyp-partition",
        "x-hyp-chunk-index",
        "x-hyp-rows",
        "x-hyp-content-sha256",
    }
)


# The spec's example config names no token: it comes from the environment.
DEFAULT_TOKEN = Secret("${HYP_CENTRAL_TOKEN}")


@attrs.frozen(kw_only=True)
class CentralConfig(RequestSinkSettings):
    """Settings of ``@hypaware/central``; the shared ones are on `RequestSinkSettings`.

    - `endpoint` (str, required): the server's base URL, ``https://`` (plain
      ``http://`` only to loopback unless `allow_insecure_http`).
    - `token` (secret, default ``"${HYP_CENTRAL_TOKEN}"``): the gateway's bearer
      token; by default it is read from the environment variable
      ``HYP_CENTRAL_TOKEN`` when the sink is built.
    - `compression` (``"gzip"`` default, ``"zstd"`` or ``"none"``).
    """

    endpoint: str
    token: Secret = DEFAULT_TOKEN
    compression: Literal["none", "gzip", "zstd"] = "gzip"

    def required_modules(self) -> Iterator[tuple[str, str, str]]:
        """What the chosen options need installed, as (key, module, extra)."""
        if self.compression == "zstd":
            yield ("compression", "zstandard", "zstd")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        try:
            check_endpoint_url(self.endpoint, allow_insecure_http=self.allow_insecure_http)
        except ValueError as exc:
            raise ValueError(f"endpoint {exc}") from None


class CentralWire:
    """The central protocol: ``POST {endpoint}/v1/datasets/{dataset}/rows`` with NDJSON."""

    plugin = PLUGIN
    framing: Framing = "ndjson"
    content_type = "application/x-ndjson"

    def __init__(
        self, endpoint: str, token: str, gateway: str, extra: dict[str, str] | None = None
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._token = token
        self._gateway = gateway
        self._extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"CentralWire({self._endpoint!r}, gateway={self._gateway!r})"

    def url(self, dataset: str) -> str:
        return f"{self._endpoint}/v1/datasets/{quote(dataset, safe='')}/rows"

    def headers(self, chunk: Chunk, identity: ChunkIdentity) -> dict[str, str]:
        headers = {
            **self._extra,
            "Authorization": f"Bearer {self._token}",
            "Content-Type": self.content_type,
            "X-Hyp-Gateway": self._gateway,
            "X-Hyp-Batch-Id": chunk.id,
            "X-Hyp-Partition": quote(identity.partition, safe=""),
            "X-Hyp-Chunk-Index": str(chunk.index),
            "X-Hyp-Rows": str(chunk.rows),
            "X-Hyp-Content-Sha256": chunk.digest,
        }
        if chunk.content_encoding:
            headers["Content-Encoding"] = chunk.content_encoding
        return headers

    def stamp(self, headers: dict[str, str], chunk: Chunk, now: float) -> dict[str, str]:
        return headers  # nothing in a central request goes stale between attempts

    def check_ack(self, reply: Reply, chunk: Chunk) -> int:
        try:
            doc = json.loads(reply.body)
        except (ValueError, UnicodeDecodeError):
            doc = None
        if (
            not isinstance(doc, dict)
            or doc.get("batch_id") != chunk.id
            or not isinstance(doc.get("rows"), int)
            or isinstance(doc.get("rows"), bool)
        ):
            raise PermanentRequestError(
                f"endpoint answered {reply.status} but not with a central acknowledgement "
                f"of batch {chunk.id} (expected JSON with batch_id and rows); is the "
                "endpoint a hypaware central server?"
            )
        if doc["rows"] != chunk.rows:
            raise PermanentRequestError(
                f"endpoint acknowledged batch {chunk.id} with {doc['rows']} rows; "
                f"the chunk holds {chunk.rows}"
            )
        return 0 if doc.get("duplicate") is True else chunk.rows


def build_central(config: CentralConfig, ctx: BuildContext) -> RequestSink:
    """Factory: a `RequestSink` speaking the central protocol."""
    from hypaware.request.sink import RequestSink

    token = ctx.reveal(config.token, "token") or ""
    extra = reveal_headers(config.headers, ctx, RESERVED)
    gateway = config.gateway()
    return RequestSink(
        ctx.sink_name,
        CentralWire(config.endpoint, token, gateway, extra),
        gateway=gateway,
        limits=config.limits(),
        codec=config.compression,
        policy=config.policy(),
        timeouts=config.timeouts(),
        secrets=(token, *extra.values()),
    )
