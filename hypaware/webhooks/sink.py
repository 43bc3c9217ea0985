"""``@hypaware/webhook``: POST rows to any HTTP endpoint, signed and idempotent.

Each chunk is a JSON array or NDJSON body with an idempotency key (the chunk
id, stable across re-sends) and, when `signing_secret` is set, a Standard
Webhooks signature made fresh on every attempt (`hypaware.webhooks.signing`;
``docs/request-sinks.md`` shows how a receiver verifies it). Backpressure
follows the same rule as ``@hypaware/central``. Config::

    {"plugin": "@hypaware/webhook",
     "config": {"url": "https://hooks.example.com/hyp", "signing_secret": "${HOOK_KEY}"}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

import attrs

from hypaware.core.errors import ConfigError
from hypaware.core.secrets import Secret
from hypaware.request.endpoints import check_endpoint_url
from hypaware.request.settings import RequestSinkSettings, check_header_name, reveal_headers
from hypaware.request.wire import Reply
from hypaware.webhooks.signing import secret_key, sign, sign_body

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.request.chunking import Chunk, ChunkIdentity, Framing
    from hypaware.request.sink import RequestSink

__all__ = ["WebhookConfig", "WebhookWire", "build_webhook"]

PLUGIN = "@hypaware/webhook"
_FIXED = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-length",
        "host",
        "x-hyp-gateway",
        "x-hyp-sink",
        "x-hyp-content-sha256",
        "x-hyp-dataset",
        "x-hyp-partition",
        "x-hyp-chunk-index",
        "x-hyp-rows",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    }
)
Scheme = Literal["standard-webhooks", "body-hmac"]


def _header_name(_inst: object, _attribute: attrs.Attribute[str], value: str) -> None:
    check_header_name(value)


# The body-hmac scheme's header, unless `signature_header` names another.
_BODY_HEADER = "X-Hyp-Signature"


@attrs.frozen(kw_only=True)
class WebhookConfig(RequestSinkSettings):
    """Settings of ``@hypaware/webhook``; the shared ones are on `RequestSinkSettings`.

    - `url` (str, required): where every chunk is POSTed, ``https://``.
    - `format` (``"ndjson"`` default, or ``"json-array"``).
    - `signing_secret` (secret, default none): the signing key; ``whsec_``
      and base64, or any text.
    - `additional_signing_secrets` (list of secrets, default none): more keys
      to sign with during a rotation (one signature each).
    - `signature_scheme` (``"standard-webhooks"`` default, or the weaker
      ``"body-hmac"``: body only, no timestamp, no routing, no rotation).
    - `signature_header` (default ``"X-Hyp-Signature"``; ``body-hmac`` only).
    - `idempotency_header` (default ``"Idempotency-Key"``).
    - `compression` (``"none"`` default, ``"gzip"`` or ``"zstd"``).
    """

    url: str
    format: Literal["ndjson", "json-array"] = "ndjson"
    signing_secret: Secret | None = None
    additional_signing_secrets: tuple[Secret, ...] = ()
    signature_scheme: Scheme = "standard-webhooks"
    signature_header: str = attrs.field(default=_BODY_HEADER, validator=_header_name)
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
        if self.idempotency_header.lower() in _FIXED:
            raise ValueError(f"idempotency_header {self.idempotency_header!r} is set by the sink")
        if self.signature_scheme == "standard-webhooks" and self.signature_header != _BODY_HEADER:
            # Standard Webhooks signs in webhook-signature; a receiver checking the
            # named header would answer 401 to every request.
            raise ValueError(
                f"signature_header {self.signature_header!r} does nothing under "
                "signature_scheme 'standard-webhooks' (the signature goes in "
                "webhook-signature): set signature_scheme = 'body-hmac' or drop it"
            )
        if self.additional_signing_secrets and self.signing_secret is None:
            raise ValueError("additional_signing_secrets needs signing_secret")
        if self.additional_signing_secrets and self.signature_scheme == "body-hmac":
            raise ValueError("body-hmac signs with one key: drop additional_signing_secrets")


class WebhookWire:
    """Every dataset to one URL; the dataset travels in ``X-Hyp-Dataset``.

    `secrets` are the signing keys, the first the current one; the
    signature is made per attempt (`stamp`), so a re-send after a long wait
    carries a fresh timestamp.
    """

    plugin = PLUGIN

    def __init__(
        self,
        url: str,
        *,
        framing: Framing = "ndjson",
        secrets: Sequence[str] = (),
        scheme: Scheme = "standard-webhooks",
        signature_header: str = "X-Hyp-Signature",
        idempotency_header: str = "Idempotency-Key",
        gateway: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        self._url = url
        self.framing: Framing = framing
        self.content_type = "application/x-ndjson" if framing == "ndjson" else "application/json"
        self._keys = tuple(secret_key(s) for s in secrets if s)
        self._scheme: Scheme = scheme
        self._signature_header = signature_header
        self._idempotency_header = idempotency_header
        self._gateway = gateway
        self._extra = dict(extra or {})

    def __repr__(self) -> str:
        signed = self._scheme if self._keys else "no"
        return f"WebhookWire({self._url!r}, signed={signed!r})"

    def url(self, dataset: str) -> str:
        return self._url

    def headers(self, chunk: Chunk, identity: ChunkIdentity) -> dict[str, str]:
        headers = {
            **self._extra,
            "Content-Type": self.content_type,
            self._idempotency_header: chunk.id,
            "webhook-id": chunk.id,
            "X-Hyp-Gateway": self._gateway,
            "X-Hyp-Sink": quote(identity.sink, safe=""),
            "X-Hyp-Content-Sha256": chunk.digest,
            "X-Hyp-Dataset": quote(identity.dataset, safe=""),
            "X-Hyp-Partition": quote(identity.partition, safe=""),
            "X-Hyp-Chunk-Index": str(chunk.index),
            "X-Hyp-Rows": str(chunk.rows),
        }
        if chunk.content_encoding:
            headers["Content-Encoding"] = chunk.content_encoding
        if self._keys and self._scheme == "body-hmac":
            headers[self._signature_header] = sign_body(self._keys[0], chunk.body)
        return headers

    def stamp(self, headers: dict[str, str], chunk: Chunk, now: float) -> dict[str, str]:
        """`headers` with this attempt's ``webhook-timestamp`` and ``webhook-signature``."""
        if not self._keys or self._scheme != "standard-webhooks":
            return headers
        timestamp = int(now)
        return {
            **headers,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(self._keys, chunk.id, timestamp, chunk.body),
        }

    def check_ack(self, reply: Reply, chunk: Chunk) -> int:
        # Receivers answer 2xx in many shapes; the status is the acknowledgement.
        return chunk.rows


def build_webhook(config: WebhookConfig, ctx: BuildContext) -> RequestSink:
    """Factory: a `RequestSink` POSTing signed chunks to one URL."""
    from hypaware.request.sink import RequestSink

    reserved = _FIXED | {config.signature_header.lower(), config.idempotency_header.lower()}
    extra = reveal_headers(config.headers, ctx, reserved)
    secret = ctx.reveal(config.signing_secret, "signing_secret")
    extra_secrets = [
        ctx.reveal(s, f"additional_signing_secrets.{i}") or ""
        for i, s in enumerate(config.additional_signing_secrets)
    ]
    secrets = [s for s in (secret, *extra_secrets) if s]
    for i, s in enumerate(secrets):
        try:
            secret_key(s)
        except ValueError as exc:
            where = "signing_secret" if i == 0 else f"additional_signing_secrets.{i - 1}"
            raise ConfigError.single(f"sinks.{ctx.sink_name}.config.{where}", str(exc)) from None
    gateway = config.gateway()
    wire = WebhookWire(
        config.url,
        framing=config.format,
        secrets=secrets,
        scheme=config.signature_scheme,
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
        secrets=(*secrets, *extra.values()),
    )
