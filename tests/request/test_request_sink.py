"""RequestSink on a scripted transport and a fake clock: status handling, lifecycle, secrets."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import ssl
import sys
import time

import httpx
import pyarrow as pa
import pytest

from hypaware.core.contracts import Sink
from hypaware.core.errors import ConfigError, SinkClosedError
from hypaware.core.types import ExportOptions, PartitionRef
from hypaware.request.backoff import BackoffPolicy
from hypaware.request.central import CentralWire
from hypaware.request.chunking import ChunkLimits
from hypaware.request.sink import RequestSink, Timeouts
from tests.timing import PROMPT

from .helpers import (
    DATASET,
    FakeClock,
    ScriptedTransport,
    central_ack,
    eventually,
    make_export,
    make_partition,
)

TOKEN = "tok-9f8e7d6c5b4a"


def make_sink(transport: httpx.AsyncBaseTransport, clock: FakeClock | None = None, **kw):
    clock = clock or FakeClock()
    kw.setdefault("policy", BackoffPolicy())
    return RequestSink(
        "fwd",
        CentralWire("https://central.example/base/", TOKEN, "gw-1"),
        gateway="gw-1",
        transport=transport,
        sleep=clock.sleep,
        clock=clock,
        secrets=[TOKEN],
        **kw,
    )


def json_error(status: int, message: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, json={"error": {"message": message}})


async def test_delivers_chunks_with_the_contract_headers() -> None:
    transport = ScriptedTransport()
    sink = make_sink(transport, limits=ChunkLimits(max_rows=40), codec="gzip")
    assert isinstance(sink, Sink)
    result = await sink.export_batch(make_export([make_partition("p1", 0, 100)]), ExportOptions())
    await sink.close()
    assert result.exported == ("p1",) and result.rows_written == 100
    assert result.bytes_written == sum(len(b) for b in transport.bodies)
    assert len(transport.requests) == 3
    ids = [r.headers["X-Hyp-Batch-Id"] for r in transport.requests]
    assert len(set(ids)) == 3 and all(i.startswith("hc1-") for i in ids)
    first = transport.requests[0]
    assert str(first.url) == "https://central.example/base/v1/datasets/events/rows"
    assert first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert first.headers["X-Hyp-Gateway"] == "gw-1"
    assert first.headers["X-Hyp-Partition"] == "p1"
    assert first.headers["Content-Type"] == "application/x-ndjson"
    assert first.headers["Content-Encoding"] == "gzip"
    rows = [
        json.loads(line) for body in transport.bodies for line in gzip.decompress(body).splitlines()
    ]
    assert [r["seq"] for r in rows] == list(range(100))
    assert [r.headers["X-Hyp-Rows"] for r in transport.requests] == ["40", "40", "20"]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 410, 422])
async def test_client_errors_are_permanent_and_not_retried(status: int) -> None:
    # The server echoes the token back: it must not reach the result or the logs.
    transport = ScriptedTransport([json_error(status, f"no thanks, Bearer {TOKEN}")])
    clock = FakeClock()
    sink = make_sink(transport, clock)
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert retry.partition_id == "p1" and retry.retryable is False
    assert f"({status})" in retry.reason and "no thanks" in retry.reason
    assert TOKEN not in retry.reason
    assert len(transport.requests) == 1 and clock.sleeps == []


async def test_413_points_at_the_chunk_byte_limit() -> None:
    transport = ScriptedTransport([json_error(413, "too big")])
    sink = make_sink(transport, limits=ChunkLimits(max_bytes=12345))
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert not retry.retryable
    assert "max_chunk_bytes" in retry.reason and "12345" in retry.reason


async def test_a_redirect_to_another_host_is_not_followed() -> None:
    transport = ScriptedTransport(
        [httpx.Response(307, headers={"Location": "https://evil.example/steal?x=1"})]
    )
    sink = make_sink(transport)
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert not retry.retryable and "redirect" in retry.reason and "evil.example" in retry.reason
    assert "x=1" not in retry.reason
    assert [r.url.host for r in transport.requests] == ["central.example"]


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html>hello</html>"),
        httpx.Response(200, content=b"\xff\xfe garbage"),
        httpx.Response(200, json={"batch_id": "hc1-someone-else", "rows": 5}),
        httpx.Response(200, json=[1, 2]),
        httpx.Response(204),
    ],
)
async def test_a_2xx_that_is_not_an_ack_is_a_clear_permanent_error(response) -> None:
    transport = ScriptedTransport([response])
    clock = FakeClock()
    sink = make_sink(transport, clock)
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert not retry.retryable and "acknowledgement" in retry.reason
    assert len(transport.requests) == 1 and clock.sleeps == []


async def test_an_ack_with_the_wrong_row_count_is_refused() -> None:
    def short(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"batch_id": request.headers["X-Hyp-Batch-Id"], "rows": 1})

    sink = make_sink(ScriptedTransport([short]))
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    assert "1 rows" in result.retry_partitions[0].reason


async def test_tls_failures_are_permanent() -> None:
    err = httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    err.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    transport = ScriptedTransport([err])
    sink = make_sink(transport)
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert not retry.retryable and "TLS" in retry.reason
    assert len(transport.requests) == 1


async def test_past_the_budget_the_rest_of_the_batch_waits_for_the_next_tick() -> None:
    transport = ScriptedTransport(default=lambda r: json_error(429, "slow down"))
    clock = FakeClock()
    sink = make_sink(transport, clock)
    parts = [make_partition(f"p{i}", i * 10, 10) for i in range(3)]
    result = await sink.export_batch(make_export(parts), ExportOptions())
    assert result.exported == ()
    assert [r.partition_id for r in result.retry_partitions] == ["p0", "p1", "p2"]
    assert all(r.retryable for r in result.retry_partitions)
    assert "inline budget" in result.retry_partitions[0].reason
    assert "not tried" in result.retry_partitions[1].reason
    assert clock.sleeps == [30.0, 60.0, 120.0]
    assert {r.headers["X-Hyp-Partition"] for r in transport.requests} == {"p0"}
    # The next tick, with the server recovered, delivers everything.
    transport.default = central_ack
    again = await sink.export_batch(make_export(parts, batch_id="b2"), ExportOptions())
    await sink.close()
    assert again.exported == ("p0", "p1", "p2") and again.rows_written == 30


async def test_the_driver_timeout_caps_the_inline_budget() -> None:
    transport = ScriptedTransport(default=lambda r: json_error(503, "busy"))
    clock = FakeClock()
    sink = make_sink(transport, clock)
    result = await sink.export_batch(
        make_export([make_partition("p1", 0, 5)]), ExportOptions(timeout=10)
    )
    await sink.close()
    assert result.retry_partitions[0].retryable and clock.sleeps == []
    assert len(transport.requests) == 1


async def test_transport_errors_follow_the_ladder() -> None:
    script = [
        httpx.ConnectError("refused"),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ReadTimeout("slow"),
        json_error(502, "bad gateway", **{"Retry-After": "5"}),
    ]
    transport = ScriptedTransport(script)
    clock = FakeClock()
    sink = make_sink(
        transport, clock, policy=BackoffPolicy(budget=10_000), timeouts=Timeouts(deadline=10_000)
    )
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    assert result.exported == ("p1",)
    assert clock.sleeps == [30.0, 60.0, 120.0, 300.0]


async def test_the_request_deadline_stops_waits_the_budget_would_allow() -> None:
    transport = ScriptedTransport([json_error(503, "busy")] * 10)
    clock = FakeClock()
    sink = make_sink(
        transport, clock, policy=BackoffPolicy(budget=10_000), timeouts=Timeouts(deadline=200)
    )
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    # 30 + 60 = 90 s waited; the next 120 s wait would end past the 200 s deadline.
    assert clock.sleeps == [30.0, 60.0]
    (retry,) = result.retry_partitions
    assert retry.retryable and "request deadline" in retry.reason
    assert len(transport.requests) == 3


async def test_a_row_over_the_hard_cap_is_permanent_and_sends_nothing() -> None:
    transport = ScriptedTransport()
    sink = make_sink(transport, limits=ChunkLimits(max_bytes=50, hard_max_bytes=60))
    part = make_partition("big", 0, 3, text_size=200)
    result = await sink.export_batch(make_export([part]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert not retry.retryable and "hard_max_chunk_bytes" in retry.reason
    assert transport.requests == []


async def test_unreadable_and_empty_partitions() -> None:
    def broken() -> pa.RecordBatchReader:
        raise OSError("segment file vanished")

    bad = PartitionRef(id="bad", dataset="events", seq=1, row_count=1, opener=broken)
    empty = PartitionRef(
        id="empty",
        dataset="events",
        seq=2,
        row_count=0,
        opener=lambda: pa.RecordBatchReader.from_batches(DATASET.schema, []),
    )
    transport = ScriptedTransport()
    sink = make_sink(transport)
    result = await sink.export_batch(make_export([bad, empty]), ExportOptions())
    await sink.close()
    assert result.exported == ("empty",)
    assert result.retry_partitions[0].retryable and "vanished" in result.retry_partitions[0].reason
    assert transport.requests == []


async def test_an_unexpected_failure_is_reported_not_raised(caplog) -> None:
    def odd() -> pa.RecordBatchReader:
        raise RuntimeError("reader exploded")

    part = PartitionRef(id="odd", dataset="events", seq=1, row_count=1, opener=odd)
    sink = make_sink(ScriptedTransport())
    with caplog.at_level(logging.ERROR):
        result = await sink.export_batch(make_export([part]), ExportOptions())
    await sink.close()
    (retry,) = result.retry_partitions
    assert retry.retryable and "RuntimeError: reader exploded" in retry.reason


async def test_close_aborts_a_parked_wait_at_once() -> None:
    transport = ScriptedTransport(
        default=lambda r: json_error(429, "later", **{"Retry-After": "250"})
    )
    sink = RequestSink(
        "fwd",
        CentralWire("https://central.example", TOKEN, "gw"),
        gateway="gw",
        transport=transport,
    )  # real asyncio.sleep: the wait is really parked
    parts = [make_partition("p1", 0, 5), make_partition("p2", 5, 5)]
    task = asyncio.ensure_future(sink.export_batch(make_export(parts), ExportOptions()))
    await eventually(lambda: bool(transport.requests))
    await asyncio.sleep(0.05)
    start = time.monotonic()
    await sink.close()
    result = await asyncio.wait_for(task, PROMPT)
    assert time.monotonic() - start < PROMPT
    assert [r.partition_id for r in result.retry_partitions] == ["p1", "p2"]
    assert all(r.retryable and "closed" in r.reason for r in result.retry_partitions)
    assert transport.closed
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


async def test_close_aborts_a_request_in_flight() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    class Hanging(ScriptedTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return await hang(request)

    transport = Hanging()
    sink = make_sink(transport)
    task = asyncio.ensure_future(
        sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    )
    await eventually(lambda: bool(transport.requests))
    start = time.monotonic()
    await sink.close()
    result = await asyncio.wait_for(task, PROMPT)
    assert time.monotonic() - start < PROMPT
    assert result.retry_partitions[0].partition_id == "p1"


async def test_lifecycle() -> None:
    sink = make_sink(ScriptedTransport())
    await sink.close()
    await sink.close()
    with pytest.raises(SinkClosedError, match="fwd"):
        await sink.export_batch(make_export([make_partition("p1", 0, 1)]), ExportOptions())


async def test_secrets_stay_out_of_logs_reprs_and_results(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    script = [
        json_error(429, f"rate limited {TOKEN}", **{"Retry-After": "1"}),
        httpx.ConnectError(f"refused Bearer {TOKEN}"),
        json_error(401, f"bad token {TOKEN}"),
    ]
    sink = make_sink(ScriptedTransport(script))
    result = await sink.export_batch(make_export([make_partition("p1", 0, 5)]), ExportOptions())
    await sink.close()
    assert "rate limited" in caplog.text and "bad token" in caplog.text
    for text in (caplog.text, repr(sink), repr(sink.wire), repr(result)):
        assert TOKEN not in text


def test_an_unusable_codec_fails_when_the_sink_is_built(monkeypatch) -> None:
    with pytest.raises(ConfigError, match="unknown compression 'lz4'"):
        make_sink(ScriptedTransport(), codec="lz4")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ConfigError, match=r"pip install 'hypaware\[zstd\]'"):
        make_sink(ScriptedTransport(), codec="zstd")
