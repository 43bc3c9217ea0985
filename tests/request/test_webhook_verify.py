"""Receiving webhooks: `hypaware.webhooks.verify` against requests a real sink sent to loopback.

Each hostile request is a captured genuine one, changed the way an attacker
would change it and re-posted to the reference receiver over HTTP.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware import build, resolve
from hypaware.core.errors import ConfigError
from hypaware.core.types import ExportOptions
from hypaware.request.chunking import ChunkIdentity, ChunkLimits, chunk_batches
from hypaware.request.sink import RequestSink
from hypaware.testing.servers.webhook import WebhookReceiver, run_webhook_receiver
from hypaware.webhooks import SeenMessages, WebhookVerificationError, verify
from hypaware.webhooks.signing import secret_key, sign
from hypaware.webhooks.sink import WebhookWire

from .helpers import make_export, make_partition

KEY = "whsec_" + "c2lnbmluZy1rZXktZm9yLXRlc3RzLTAxMjM0NTY3"  # base64 of a test key
OLD_KEY = "old-signing-key-9f8e7d6c"


def webhook_sink(url: str, env: dict[str, str] | None = None, **config: Any) -> RequestSink:
    cfg = {
        "url": url,
        "signing_secret": "${HOOK_KEY}",
        "gateway_id": "gw-hook",
        "backoff_ladder": [0.005, 0.01],
        "backoff_budget": 0.1,
        **config,
    }
    (plan,) = resolve({"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": cfg}}})
    sink = build(plan, env={"HOOK_KEY": KEY, "OLD_KEY": OLD_KEY, **(env or {})})
    assert isinstance(sink, RequestSink)
    return sink


async def deliver(url: str, rows: int = 6, **config: Any) -> Any:
    sink = webhook_sink(url, **config)
    try:
        return await sink.export_batch(
            make_export([make_partition("p1", 0, rows)], sink="hook"), ExportOptions()
        )
    finally:
        await sink.close()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with run_webhook_receiver(KEY) as r:
        yield r


def repost(receiver: WebhookReceiver, headers: dict[str, str], body: bytes) -> int:
    drop = {"host", "content-length", "connection", "accept", "accept-encoding"}
    sent = {k: v for k, v in headers.items() if k.lower() not in drop}
    return httpx.post(receiver.url, headers=sent, content=body, timeout=10).status_code


async def captured(receiver: WebhookReceiver) -> tuple[dict[str, str], bytes]:
    result = await deliver(receiver.url)
    assert result.exported == ("p1",)
    assert [r["seq"] for r in receiver.rows_of("events")] == list(range(6))
    return dict(receiver.requests[0]), receiver.bodies[0]


def assert_stored_once(receiver: WebhookReceiver) -> None:
    assert [r["seq"] for r in receiver.rows_of("events")] == list(range(6))
    assert set(receiver.rows) <= {"events"}


async def test_a_genuine_request_is_accepted(receiver: WebhookReceiver) -> None:
    headers, body = await captured(receiver)
    hook = verify(headers, body, KEY)
    assert (hook.gateway, hook.sink, hook.dataset, hook.partition) == (
        "gw-hook",
        "hook",
        "events",
        "p1",
    )
    assert hook.id == headers["Idempotency-Key"] and hook.chunk_index == 0
    assert receiver.rejections == []


async def test_a_replayed_request_is_refused_and_stored_once(receiver: WebhookReceiver) -> None:
    headers, body = await captured(receiver)
    with pytest.raises(WebhookVerificationError, match="replay") as info:
        verify(headers, body, KEY, seen=receiver.seen)
    assert info.value.reason == "replay"
    # The receiver acknowledges the replay (it is genuine, and stored) but stores nothing.
    assert repost(receiver, headers, body) == 200
    assert [e.reason for e in receiver.rejections] == ["replay"]
    assert_stored_once(receiver)


async def test_a_fresh_id_with_an_old_timestamp_is_refused(receiver: WebhookReceiver) -> None:
    headers, body = await captured(receiver)
    forged = {
        **headers,
        "webhook-id": "hc1-" + "0" * 40,
        "Idempotency-Key": "hc1-" + "0" * 40,
        "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 3600),
    }
    with pytest.raises(WebhookVerificationError) as info:
        verify(forged, body, KEY)
    assert info.value.reason == "signature"
    assert repost(receiver, forged, body) == 401
    assert [e.reason for e in receiver.rejections] == ["signature"]
    assert_stored_once(receiver)


async def test_a_changed_dataset_header_is_refused(receiver: WebhookReceiver) -> None:
    headers, body = await captured(receiver)
    for name, value in [("X-Hyp-Dataset", "payroll"), ("X-Hyp-Sink", "other")]:
        moved = {**headers, name: value}
        with pytest.raises(WebhookVerificationError, match="do not match the signed") as info:
            verify(moved, body, KEY)
        assert info.value.reason == "route"
        assert repost(receiver, moved, body) == 400
    assert [e.reason for e in receiver.rejections] == ["route", "route"]
    assert receiver.rows_of("payroll") == []
    assert_stored_once(receiver)


async def test_a_stale_timestamp_is_refused(receiver: WebhookReceiver) -> None:
    headers, body = await captured(receiver)
    sent_at = int(headers["webhook-timestamp"])
    for skew in (301, -301):
        with pytest.raises(WebhookVerificationError, match="tolerance") as info:
            verify(headers, body, KEY, now=sent_at + skew)
        assert info.value.reason == "timestamp"
    assert verify(headers, body, KEY, now=sent_at + 299).id == headers["webhook-id"]
    receiver.clock = lambda: sent_at + 3600.0
    assert repost(receiver, headers, body) == 400
    assert [e.reason for e in receiver.rejections] == ["timestamp"]
    assert_stored_once(receiver)


@pytest.mark.parametrize("accepted", [[KEY], [OLD_KEY], [KEY, OLD_KEY]])
async def test_key_rotation_signs_with_both_secrets(accepted: list[str]) -> None:
    with run_webhook_receiver(accepted) as receiver:
        result = await deliver(receiver.url, additional_signing_secrets=["${OLD_KEY}"])
        assert result.exported == ("p1",)
        assert_stored_once(receiver)
        signatures = receiver.requests[0]["webhook-signature"].split()
        assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
        text = repr(receiver.requests) + str(result)
        assert KEY not in text and OLD_KEY not in text


async def test_a_receiver_with_another_key_refuses_every_chunk() -> None:
    with run_webhook_receiver("some-other-key-0000") as receiver:
        result = await deliver(receiver.url)
    (retry,) = result.retry_partitions
    assert not retry.retryable and "(401)" in retry.reason
    assert receiver.rows_of("events") == [] and receiver.bad_signatures >= 1


def test_standard_webhooks_test_vector() -> None:
    """The example from the Standard Webhooks spec, so any of its libraries can verify us."""
    key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    signature = sign([key], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_missing_and_malformed_headers_name_the_header() -> None:
    with pytest.raises(WebhookVerificationError, match="webhook-id") as info:
        verify({}, b"", KEY)
    assert info.value.reason == "missing"
    stamp = {"webhook-id": "x", "webhook-timestamp": "+12", "webhook-signature": "v1,AA=="}
    with pytest.raises(WebhookVerificationError, match="webhook-timestamp"):
        verify(stamp, b"", KEY)
    with pytest.raises(ValueError, match="whsec_"):
        verify({**stamp, "webhook-timestamp": "12"}, b"", "whsec_not base64!")


def test_a_bad_whsec_secret_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="signing_secret"):
        webhook_sink("http://127.0.0.1:9/hook", env={"HOOK_KEY": "whsec_***"})


def test_seen_messages_forget_after_twice_the_tolerance() -> None:
    seen = SeenMessages(tolerance=10)
    seen.add("a", now=100.0)
    assert seen.seen("a", now=119.0)
    assert not seen.seen("a", now=121.0)
    assert len(seen) == 0


ROUTE = ["X-Hyp-Gateway", "X-Hyp-Sink", "X-Hyp-Dataset", "X-Hyp-Partition", "X-Hyp-Chunk-Index"]
_SIGNED: dict[str, Any] = {}


def _genuine() -> tuple[dict[str, str], bytes]:
    """One signed request as the wire builds it (built once, outside the property loop)."""
    if not _SIGNED:
        identity = ChunkIdentity("gw", "hook", "events", "p1")
        chunk = next(chunk_batches(make_partition("p1", 0, 4).open(), identity, ChunkLimits()))
        wire = WebhookWire("https://hooks.example/in", secrets=[KEY], gateway="gw")
        headers = wire.stamp(wire.headers(chunk, identity), chunk, 1_780_000_000.0)
        _SIGNED.update(headers=headers, body=chunk.body)
    return dict(_SIGNED["headers"]), _SIGNED["body"]


@given(
    st.sampled_from([*ROUTE, "body", "webhook-timestamp", "webhook-id"]),
    st.text(alphabet=string.ascii_letters + string.digits + "%-_.", min_size=1, max_size=20),
)
def test_any_change_to_a_signed_or_routing_part_is_refused(part: str, value: str) -> None:
    headers, body = _genuine()
    if part == "body":
        changed_body = body + value.encode()
        changed = headers
    else:
        if headers[part] == value:
            return
        changed_body, changed = body, {**headers, part: value}
    with pytest.raises(WebhookVerificationError):
        verify(changed, changed_body, KEY, now=1_780_000_000.0)
    assert verify(headers, body, KEY, now=1_780_000_000.0).dataset == "events"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"additional_signing_secrets": ["x-key-1234"], "signing_secret": None}, "needs"),
        (
            {"additional_signing_secrets": ["x-key-1234"], "signature_scheme": "body-hmac"},
            "one key",
        ),
        ({"signature_scheme": "sha1"}, "signature_scheme"),
        ({"idempotency_header": "webhook-id"}, "set by the sink"),
        ({"headers": {"webhook-signature": "x"}}, "set by the sink itself"),
    ],
)
def test_bad_signing_settings_are_config_errors(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        webhook_sink("http://127.0.0.1:9/hook", **config)


@pytest.mark.parametrize("rotated", [False, True])
async def test_the_standard_webhooks_reference_library_verifies_what_the_sink_sent(
    receiver: WebhookReceiver, rotated: bool
) -> None:
    """PyPI's `standardwebhooks`, an independent receiver, signs the captured request alike.

    Its `verify` also parses the body as one JSON document, which an NDJSON
    body is not, so its own `sign` is compared with the header instead.
    """
    from datetime import UTC, datetime

    from standardwebhooks.webhooks import Webhook

    extra = {"additional_signing_secrets": ["${OLD_KEY}"]} if rotated else {}
    result = await deliver(receiver.url, **extra)
    assert result.exported == ("p1",)
    headers, body = dict(receiver.requests[0]), receiver.bodies[0]
    sent = headers["webhook-signature"].split()
    at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
    theirs = Webhook(KEY).sign(headers["webhook-id"], at, body.decode())
    assert theirs in sent and len(sent) == (2 if rotated else 1)
    # The library's signature moves with every byte and with the key.
    assert Webhook(KEY).sign(headers["webhook-id"], at, body.decode() + " ") not in sent
    other = "whsec_b3RoZXIta2V5LWZvci10ZXN0cy0wMTIzNDU2Nw=="
    assert Webhook(other).sign(headers["webhook-id"], at, body.decode()) not in sent
