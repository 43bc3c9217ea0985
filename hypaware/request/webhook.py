"""``@hypaware/webhook``: POST rows to any HTTP endpoint, signed and idempotent.

Each chunk is a JSON array or NDJSON body with an idempotency key (the chunk
id, stable across re-sends) and, when `signing_secret` is set, an
HMAC-SHA256 signature of the exact body bytes (see ``docs/request-sinks.md``
for how a receiver verifies it). Backpressure follows the same rule as
``@hypaware/central``. Config::

    {"plugin": "@hypaware/webhook",
     "config": {"url": "https://hooks.example.com/hyp", "signing_secret": "${HOOK_KEY}"}}
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

import attrs

from hypaware.core.secrets import Secret
from hypaware.request.endpoints import check_endpoint_url
from hypaware.request.settings import RequestSinkSettings, check_header_name, reveal_headers
from hypaware.request.wire import Reply

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.request.chunking import Chunk, ChunkIdentity, Framing
    from hypaware.request.sink import RequestSink

__all__ = ["WebhookConfig", "WebhookWire", "build_webhook", "sign"]

PLUGIN = "@hypaware/webhook"
_FIXED = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-length",
        "host",
        "x-hyp-gateway",
        "x-hyp-dataset",
        "x-hyp-partition",
        "x-hyp-chunk-index",
        "x-hyp-rows",
    }
)


def sign(secret: bytes, body: bytes) -> str:
    """The signature header value for `body`: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def _header_name(_inst: object, _attribute: attrs.Attribute[str], value: str) -> None:
    check_header_name(value)


@attrs.frozen(kw_only=True)
class WebhookConfig(RequestSinkSettings):
    """Settings of ``@hypaware/webhook``; the shared ones are on `RequestSinkSettings`.

    - `url` (str, required): where every chunk is POSTed, ``https://``.
    - `format` (``"ndjson"`` default, or ``"json-array"``).
    - `signing_secret` (secret, default none): key of the HMAC-SHA256 body signature.
    - `signature_header` (default ``"X-Hyp-Signature"``).
    - `idempotency_header` (default ``"Idempotency-Key"``).
    - `compression` (``"none"`` default, ``"gzip"`` or ``"zstd"``).
    """

    url: str
    format: Literal["ndjson", "json-array"] = "ndjson"
    signing_secret: Secret | None = None
    signature_header: str = attrs.field(default="X-Hyp-Signature", validator=_header_name)
    idempotency_header: str = attrs.field(default="Idempotency-Key", validator=_header_name)
    compression: Literal["none", "gzip", "zstd"] = "none"

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        try:
            check_endpoint_url(self.url, allow_insecure_http=self.allow_insecure_http)
        except ValueError as exc:
            raise ValueError(f"url {exc}") from None
        if self.signature_header.lower() == self.idempotency_header.lower():
            raise ValueError("signature_header and idempotency_header must differ")


class WebhookWire:
    """Every dataset to one URL; the dataset travels in ``X-Hyp-Dataset``."""

    plugin = PLUGIN

    def __init__(
        self,
        url: str,
        *,
        framing: Framing = "ndjson",
        secret: str | None = None,
        signature_header: str = "X-Hyp-Signature",
        idempotency_header: str = "Idempotency-Key",
        gateway: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        self._url = url
        self.framing: Framing = framing
        self.content_type = "application/x-ndjson" if framing == "ndjson" else "application/json"
        self._key = secret.encode("utf-8") if secret else None
        self._signature_header = signature_header
        self._idempotency_header = idempotency_header
        self._gateway = gateway
        self._extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"WebhookWire({self._url!r}, signed={self._key is not None})"

    def url(self, dataset: str) -> str:
        return self._url

    def headers(self, chunk: Chunk, identity: ChunkIdentity) -> dict[str, str]:
        headers = {
            **self._extra,
            "Content-Type": self.content_type,
            self._idempotency_header: chunk.id,
            "X-Hyp-Gateway": self._gateway,
            "X-Hyp-Dataset": quote(identity.dataset, safe=""),
            "X-Hyp-Partition": quote(identity.partition, safe=""),
            "X-Hyp-Chunk-Index": str(chunk.index),
            "X-Hyp-Rows": str(chunk.rows),
        }
        if chunk.content_encoding:
            headers["Content-Encoding"] = chunk.content_encoding
        if self._key is not None:
            headers[self._signature_header] = sign(self._key, chunk.body)
        return headers

    def check_ack(self, reply: Reply, chunk: Chunk) -> int:
        # Receivers answer 2xx in many shapes; the status is the acknowledgement.
        return chunk.rows


def build_webhook(config: WebhookConfig, ctx: BuildContext) -> RequestSink:
    """Factory: a `RequestSink` POSTing signed chunks to one URL."""
    from hypaware.request.sink import RequestSink

    reserved = _FIXED | {config.signature_header.lower(), config.idempotency_header.lower()}
    extra = reveal_headers(config.headers, ctx, reserved)
    secret = ctx.reveal(config.signing_secret, "signing_secret")
    gateway = config.gateway()
    wire = WebhookWire(
        config.url,
        framing=config.format,
        secret=secret,
        signature_header=config.signature_header,
        idempotency_header=config.idempotency_header,
        gateway=gateway,
        extra=extra,
    )
    return RequestSink(
        ctx.sink_name,
        wire,
        gateway=gateway,
        limits=config.limits(),
        codec=config.compression,
        policy=config.policy(),
        timeouts=config.timeouts(),
        secrets=(*(s for s in (secret,) if s), *extra.values()),
    )
