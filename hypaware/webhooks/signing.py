"""Webhook signatures: the Standard Webhooks scheme, bound to hypaware's routing headers.

What the sender adds to each request (https://www.standardwebhooks.com):

- ``webhook-id``: the chunk id (``hc1-`` and 40 hex digits), the same on
  every re-send of the same rows, so it is also the dedupe key.
- ``webhook-timestamp``: whole seconds since the epoch when the request
  left, fresh on every attempt.
- ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of
  ``<id>.<timestamp>.<body>`` (the body exactly as sent, compressed or
  not); during a key rotation one such entry per key, separated by spaces.

Any Standard Webhooks library verifies these. `verify` checks more: the
chunk id is a hash of the gateway, sink, dataset, partition, chunk index and
the SHA-256 of the uncompressed body, which travel in ``X-Hyp-*`` headers;
`verify` recomputes it from those headers and refuses a request whose
routing headers were changed (the signed id would no longer match).

A secret starting with ``whsec_`` is the base64 of the key, as Standard
Webhooks writes keys; any other secret is used as its UTF-8 bytes.

The older ``body-hmac`` scheme (``X-Hyp-Signature: sha256=<hex HMAC of the
body>``) covers the body only: no replay window, no routing. It is kept for
receivers that already check it and must be asked for by name.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hashlib
import hmac
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote

import attrs

from hypaware.core.errors import HypawareError
from hypaware.request.chunking import ChunkIdentity, chunk_id

__all__ = [
    "DEFAULT_TOLERANCE",
    "SeenMessages",
    "VerifiedWebhook",
    "WebhookVerificationError",
    "secret_key",
    "sign",
    "sign_body",
    "verify",
    "verify_body",
]

DEFAULT_TOLERANCE = 300
_PREFIX = "whsec_"
# Headers hypaware routes on; `verify` needs every one to recompute the id.
_ROUTE = (
    "x-hyp-gateway",
    "x-hyp-sink",
    "x-hyp-dataset",
    "x-hyp-partition",
    "x-hyp-chunk-index",
    "x-hyp-content-sha256",
)


class WebhookVerificationError(HypawareError, ValueError):
    """A webhook request that must not be trusted; `reason` says which check refused it.

    `reason` is one of ``"missing"`` (a required header is absent or
    malformed), ``"signature"``, ``"timestamp"``, ``"replay"`` and ``"route"``.
    The message names the header or value refused, never the secret.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@attrs.frozen
class VerifiedWebhook:
    """What a verified request says about itself (routing headers decoded)."""

    id: str
    timestamp: int
    gateway: str
    sink: str
    dataset: str
    partition: str
    chunk_index: int


def secret_key(secret: str | bytes) -> bytes:
    """The HMAC key of a secret: base64-decoded after ``whsec_``, else its UTF-8 bytes."""
    if isinstance(secret, bytes):
        return secret
    if secret.startswith(_PREFIX):
        try:
            return base64.b64decode(secret[len(_PREFIX) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a whsec_ secret must be base64 after the prefix") from exc
    return secret.encode("utf-8")


def _signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode("ascii")


def sign(keys: Sequence[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64>`` for each key, space separated."""
    return " ".join(f"v1,{_signature(k, msg_id, timestamp, body)}" for k in keys)


def sign_body(key: bytes, body: bytes) -> str:
    """The weaker ``body-hmac`` signature: ``sha256=`` and the hex HMAC-SHA256 of `body`."""
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify_body(secret: str | bytes, body: bytes, header: str) -> bool:
    """Whether `header` is the ``body-hmac`` signature of `body` (no replay protection)."""
    return hmac.compare_digest(sign_body(secret_key(secret), body), header)


class SeenMessages:
    """Ids of the webhook messages a receiver has stored, remembered for a while.

    `verify` refuses a message whose id is here as a replay. Record an id
    with `add` only once its rows are stored: a sender re-sends a chunk
    (same id, fresh timestamp) when it did not get the answer, and a replay
    of a stored message should be answered 2xx without storing it again.
    Ids are forgotten `2 * tolerance` seconds after they were added; a
    request older than that fails the timestamp check anyway, and a later
    re-send of the same chunk is the receiver's own dedupe to catch (its
    store knows every id it holds). Safe to share between threads.
    """

    def __init__(self, tolerance: float = DEFAULT_TOLERANCE) -> None:
        self.tolerance = tolerance
        self._seen: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def _prune(self, now: float) -> None:
        horizon = now - 2 * self.tolerance
        while self._seen and next(iter(self._seen.values())) < horizon:
            self._seen.popitem(last=False)

    def add(self, msg_id: str, now: float | None = None) -> None:
        """Remember that the message `msg_id` was stored (at `now`, epoch seconds)."""
        current = time.time() if now is None else now
        with self._lock:
            self._prune(current)
            self._seen.pop(msg_id, None)
            self._seen[msg_id] = current

    def seen(self, msg_id: str, now: float | None = None) -> bool:
        """Whether `msg_id` was stored within the window."""
        with self._lock:
            self._prune(time.time() if now is None else now)
            return msg_id in self._seen


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None or not value.strip():
        raise WebhookVerificationError("missing", f"header {name} is missing")
    return value.strip()


def _keys(secret: str | bytes | Iterable[str | bytes]) -> list[bytes]:
    items = [secret] if isinstance(secret, str | bytes) else list(secret)
    if not items:
        raise ValueError("verify needs at least one secret")
    return [secret_key(s) for s in items]


def _timestamp(headers: Mapping[str, str]) -> int:
    stamp = _header(headers, "webhook-timestamp")
    if not stamp.isascii() or not stamp.isdigit():
        raise WebhookVerificationError(
            "missing", f"header webhook-timestamp {stamp[:40]!r} is not whole seconds"
        )
    return int(stamp)


def _check_signature(
    headers: Mapping[str, str],
    msg_id: str,
    timestamp: int,
    body: bytes,
    secret: str | bytes | Iterable[str | bytes],
) -> None:
    """Refuse the request unless one offered ``v1`` signature is that of one of the keys."""
    offered = [
        entry[3:]
        for entry in _header(headers, "webhook-signature").split()
        if entry.startswith("v1,")
    ]
    keys = _keys(secret)
    expected = [_signature(k, msg_id, timestamp, body) for k in keys]
    if not any(hmac.compare_digest(e, o) for e in expected for o in offered):
        raise WebhookVerificationError(
            "signature", f"no webhook-signature of message {msg_id[:80]!r} matches the secret"
        )


def _check_timestamp(msg_id: str, timestamp: int, current: float, tolerance: float) -> None:
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError(
            "timestamp",
            f"webhook-timestamp {timestamp} of message {msg_id[:80]!r} is "
            f"{current - timestamp:+.0f}s from now, outside the tolerance of {tolerance:g}s",
        )


def _routed(headers: Mapping[str, str], msg_id: str, timestamp: int) -> VerifiedWebhook:
    """The routing headers decoded, refused unless they hash to the signed `msg_id`."""
    route = {name: _header(headers, name) for name in _ROUTE}
    index = route["x-hyp-chunk-index"]
    if not index.isascii() or not index.isdigit():
        raise WebhookVerificationError("missing", f"header X-Hyp-Chunk-Index {index[:40]!r}")
    verified = VerifiedWebhook(
        id=msg_id,
        timestamp=timestamp,
        gateway=route["x-hyp-gateway"],
        sink=unquote(route["x-hyp-sink"]),
        dataset=unquote(route["x-hyp-dataset"]),
        partition=unquote(route["x-hyp-partition"]),
        chunk_index=int(index),
    )
    identity = ChunkIdentity(verified.gateway, verified.sink, verified.dataset, verified.partition)
    if chunk_id(identity, verified.chunk_index, route["x-hyp-content-sha256"]) != msg_id:
        raise WebhookVerificationError(
            "route",
            f"the X-Hyp-* routing headers (dataset {verified.dataset[:80]!r}, sink "
            f"{verified.sink[:80]!r}) do not match the signed webhook-id {msg_id[:80]!r}",
        )
    return verified


def verify(
    headers: Mapping[str, str],
    body: bytes,
    secret: str | bytes | Iterable[str | bytes],
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    seen: SeenMessages | None = None,
    now: float | None = None,
) -> VerifiedWebhook:
    """Check a webhook request from ``@hypaware/webhook``; return what it says, or raise.

    - `headers`: the request headers (any case); `body`: the raw body bytes,
      before any decompression.
    - `secret`: the signing secret, or several (any one may match; for key
      rotation).
    - `tolerance`: seconds the ``webhook-timestamp`` may be from `now`
      (default 300, either way).
    - `seen`: the `SeenMessages` the receiver adds each stored id to; a
      message whose id is there is refused as a replay (answer it 2xx and
      do not store it again). Without it, dedupe on `VerifiedWebhook.id`.

    Raises `WebhookVerificationError` naming the check that failed: a
    missing header, no matching signature, a timestamp outside the
    tolerance, a replayed message, or routing headers that do not match
    the signed id.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id = _header(lower, "webhook-id")
    timestamp = _timestamp(lower)
    _check_signature(lower, msg_id, timestamp, body, secret)
    current = time.time() if now is None else now
    _check_timestamp(msg_id, timestamp, current, tolerance)
    verified = _routed(lower, msg_id, timestamp)
    if seen is not None and seen.seen(msg_id, current):
        raise WebhookVerificationError(
            "replay", f"message {msg_id[:80]!r} was already received (a replay)"
        )
    return verified
