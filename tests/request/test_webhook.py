"""@hypaware/webhook: signed, idempotent chunks to a loopback receiver, with backpressure."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hypaware import build, resolve
from hypaware.core.types import ExportOptions
from hypaware.request.backoff import BackoffPolicy
from hypaware.request.sink import RequestSink
from hypaware.testing.servers.webhook import WebhookReceiver, run_webhook_receiver
from hypaware.webhooks import WebhookVerificationError, verify, verify_body
from hypaware.webhooks.signing import sign_body
from hypaware.webhooks.sink import WebhookWire

from .helpers import FakeClock, ScriptedTransport, make_export, make_partition, ok

KEY = "hook-key-0123456789abcdef"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with run_webhook_receiver(KEY) as r:
        yield r


def webhook_sink(url: str, **config: Any) -> RequestSink:
    cfg = {
        "url": url,
        "signing_secret": "${HOOK_KEY}",
        "gateway_id": "gw-hook",
        "backoff_ladder": [0.005, 0.01],
        "backoff_budget": 0.1,
        **config,
    }
    (plan,) = resolve({"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": cfg}}})
    sink = build(plan, env={"HOOK_KEY": KEY, "TENANT": "acme"})
    assert isinstance(sink, RequestSink)
    return sink


@pytest.mark.parametrize("fmt", ["ndjson", "json-array"])
async def test_rows_arrive_once_signed_through_backpressure(
    receiver: WebhookReceiver, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver.script.extend([(429, "0.01"), (503, "garbage"), (500, None), (429, "0")])
    sink = webhook_sink(
        receiver.url, format=fmt, max_chunk_rows=20, headers={"X-Tenant": "${TENANT}"}
    )
    parts = [make_partition(f"p{i}", i * 1000, 45) for i in range(3)]
    pending = parts
    try:
        for _tick in range(10):
            if not pending:
                break
            result = await sink.export_batch(make_export(pending, sink="hook"), ExportOptions())
            again = {r.partition_id for r in result.retry_partitions}
            pending = [p for p in pending if p.id in again]
    finally:
        await sink.close()
    assert not pending
    assert receiver.bad_signatures == 0
    assert sorted(r["seq"] for r in receiver.rows["events"]) == sorted(
        s for i in range(3) for s in range(i * 1000, i * 1000 + 45)
    )
    assert len(receiver.keys) == 9
    first = receiver.requests[0]
    assert first["X-Tenant"] == "acme" and first["X-Hyp-Dataset"] == "events"
    assert KEY not in caplog.text


async def test_signature_and_idempotency_key_are_stable() -> None:
    bodies = []
    keys = []
    for attempt in range(2):
        transport = ScriptedTransport(default=ok)
        clock = FakeClock(1_780_000_000.0 + attempt * 1000)
        wire = WebhookWire("https://hooks.example/in", secrets=[KEY], gateway="gw")
        sink = RequestSink(
            "hook", wire, gateway="gw", transport=transport, sleep=clock.sleep, clock=clock,
            secrets=[KEY],
        )  # fmt: skip
        result = await sink.export_batch(
            make_export([make_partition("p1", 0, 10)], sink="hook"), ExportOptions()
        )
        await sink.close()
        assert result.exported == ("p1",)
        (request,) = transport.requests
        body = transport.bodies[0]
        headers = dict(request.headers)
        hook = verify(headers, body, KEY, now=clock.now)
        assert hook.id == headers["idempotency-key"] == headers["webhook-id"]
        assert (hook.dataset, hook.sink, hook.partition) == ("events", "hook", "p1")
        assert headers["webhook-timestamp"] == str(int(clock.now))
        with pytest.raises(WebhookVerificationError, match="webhook-signature"):
            verify(headers, body + b" ", KEY, now=clock.now)
        with pytest.raises(WebhookVerificationError, match="webhook-signature"):
            verify(headers, body, "other-key", now=clock.now)
        assert "X-Hyp-Signature" not in request.headers
        bodies.append(body)
        keys.append(request.headers["Idempotency-Key"])
        assert KEY not in repr(sink) + repr(wire)
    assert bodies[0] == bodies[1] and keys[0] == keys[1]


async def test_body_hmac_is_kept_behind_its_option(receiver: WebhookReceiver) -> None:
    transport = ScriptedTransport(default=ok)
    wire = WebhookWire("https://hooks.example/in", secrets=[KEY], scheme="body-hmac", gateway="gw")
    sink = RequestSink("hook", wire, gateway="gw", transport=transport, secrets=[KEY])
    result = await sink.export_batch(
        make_export([make_partition("p1", 0, 10)], sink="hook"), ExportOptions()
    )
    await sink.close()
    assert result.exported == ("p1",)
    (request,) = transport.requests
    body = transport.bodies[0]
    assert request.headers["X-Hyp-Signature"] == sign_body(KEY.encode(), body)
    assert verify_body(KEY, body, request.headers["X-Hyp-Signature"])
    assert not verify_body(KEY, body + b" ", request.headers["X-Hyp-Signature"])
    assert "webhook-signature" not in request.headers


async def test_body_hmac_end_to_end() -> None:
    with run_webhook_receiver(KEY, scheme="body-hmac") as receiver:
        sink = webhook_sink(receiver.url, signature_scheme="body-hmac")
        try:
            result = await sink.export_batch(
                make_export([make_partition("p1", 0, 7)], sink="hook"), ExportOptions()
            )
        finally:
            await sink.close()
        assert result.exported == ("p1",)
        assert [r["seq"] for r in receiver.rows_of("events")] == list(range(7))


async def test_unsigned_webhook_and_custom_header_names() -> None:
    transport = ScriptedTransport([httpx.Response(429, headers={"Retry-After": "2"})], default=ok)
    clock = FakeClock()
    wire = WebhookWire(
        "https://hooks.example/in",
        framing="json-array",
        idempotency_header="X-Request-Key",
        gateway="gw",
    )
    sink = RequestSink(
        "hook", wire, gateway="gw", transport=transport, sleep=clock.sleep,
        policy=BackoffPolicy(),
    )  # fmt: skip
    result = await sink.export_batch(
        make_export([make_partition("p1", 0, 3)], sink="hook"), ExportOptions()
    )
    await sink.close()
    assert result.exported == ("p1",) and clock.sleeps == [2.0]
    first, second = transport.requests
    assert "X-Hyp-Signature" not in first.headers
    assert first.headers["X-Request-Key"] == second.headers["X-Request-Key"]
    assert first.headers["Content-Type"] == "application/json"
    assert [r["seq"] for r in json.loads(transport.bodies[1])] == [0, 1, 2]
