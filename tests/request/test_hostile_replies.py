"""Hostile answers over real loopback HTTP: undecodable backpressure bodies, trickling replies."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from hypaware.core.types import ExportOptions
from hypaware.testing.servers.webhook import Answer, Trickle, WebhookReceiver, run_webhook_receiver

from .helpers import make_export, make_partition
from .test_webhook_verify import KEY, webhook_sink


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with run_webhook_receiver(KEY) as r:
        yield r


GZIP_LIE = ("Content-Encoding", "gzip")


@pytest.mark.parametrize(
    "answer",
    [
        Answer(429, (GZIP_LIE, ("Retry-After", "0.01")), b"slow down, not gzip at all"),
        Answer(503, (GZIP_LIE,), b"\x1f\x8b\x08 truncated"),
        Answer(503, (("Content-Encoding", "br, zstd"),), b"??"),
        Answer(502, (GZIP_LIE,), b"<html>bad gateway</html>"),
    ],
)
async def test_backpressure_with_an_undecodable_body_waits_then_delivers_once(
    receiver: WebhookReceiver, answer: Answer
) -> None:
    receiver.script.append(answer)
    sink = webhook_sink(receiver.url)
    try:
        result = await sink.export_batch(
            make_export([make_partition("p1", 0, 8)], sink="hook"), ExportOptions()
        )
    finally:
        await sink.close()
    assert result.exported == ("p1",) and result.retry_partitions == ()
    assert [r["seq"] for r in receiver.rows_of("events")] == list(range(8))
    # The same chunk twice: refused once, then accepted.
    assert len(receiver.requests) == 2
    assert receiver.requests[0]["webhook-id"] == receiver.requests[1]["webhook-id"]


async def test_an_undecodable_2xx_is_still_permanent(receiver: WebhookReceiver) -> None:
    receiver.script.append(Answer(200, (GZIP_LIE,), b"not gzip"))
    sink = webhook_sink(receiver.url)
    try:
        result = await sink.export_batch(
            make_export([make_partition("p1", 0, 3)], sink="hook"), ExportOptions()
        )
    finally:
        await sink.close()
    (retry,) = result.retry_partitions
    assert not retry.retryable and "could not be decoded" in retry.reason


async def test_a_trickling_reply_gives_up_at_the_request_deadline(
    receiver: WebhookReceiver,
) -> None:
    # One header byte every 50 ms would hold the chunk for 100 s; the read
    # timeout (30 s) never fires because bytes keep coming.
    receiver.script.append(Trickle(interval=0.05, max_bytes=2_000))
    sink = webhook_sink(receiver.url, request_deadline=0.5, read_timeout=30)
    part = make_partition("p1", 0, 8)
    try:
        start = time.monotonic()
        first = await sink.export_batch(make_export([part], sink="hook"), ExportOptions())
        elapsed = time.monotonic() - start
        assert first.exported == ()
        (retry,) = first.retry_partitions
        assert retry.retryable and "request deadline of 0.5s" in retry.reason
        assert elapsed < 10, elapsed  # the deadline, not the trickle, ended it
        assert receiver.rows_of("events") == []
        # The driver respools the partition; the next pass delivers it exactly once.
        second = await sink.export_batch(make_export([part], sink="hook"), ExportOptions())
        assert second.exported == ("p1",)
    finally:
        await sink.close()
    assert [r["seq"] for r in receiver.rows_of("events")] == list(range(8))
