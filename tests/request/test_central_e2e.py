"""@hypaware/central against the reference server over real loopback HTTP.

Sinks are built from config through `resolve` and `build`, with the ladder
scaled down (milliseconds instead of minutes) so storms run fast.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import pytest

from hypaware import build, resolve
from hypaware.core.types import ExportOptions, ExportResult, PartitionRef
from hypaware.request.sink import RequestSink
from hypaware.testing.servers.central import CentralServer, Drop, Hold, RateLimit, Reply
from tests.timing import PROMPT

from .conftest import TOKEN
from .helpers import eventually, make_export, make_partition

FAST = {"backoff_ladder": [0.005, 0.01, 0.02, 0.04], "backoff_budget": 0.15}


def central_sink(url: str, **config: Any) -> RequestSink:
    cfg = {"endpoint": url, "token": "${HYP_TOKEN}", "gateway_id": "gw-e2e", **FAST, **config}
    (plan,) = resolve({"sinks": {"fwd": {"plugin": "@hypaware/central", "config": cfg}}})
    sink = build(plan, env={"HYP_TOKEN": TOKEN})
    assert isinstance(sink, RequestSink)
    return sink


async def export_until_done(
    sink: RequestSink, parts: list[PartitionRef], ticks: int = 30
) -> list[ExportResult]:
    """What the export driver does: export, then respool whatever came back, tick after tick."""
    pending = list(parts)
    results = []
    for tick in range(ticks):
        if not pending:
            break
        result = await sink.export_batch(
            make_export(pending, batch_id=f"tick-{tick}"), ExportOptions(attempt=tick + 1)
        )
        results.append(result)
        assert all(r.retryable for r in result.retry_partitions), result.retry_partitions
        again = {r.partition_id for r in result.retry_partitions}
        assert again | set(result.exported) == {p.id for p in pending}
        pending = [p for p in pending if p.id in again]
    assert not pending, f"still pending after {ticks} ticks"
    return results


def assert_exactly_once(server: CentralServer, parts: list[PartitionRef]) -> None:
    rows = server.rows("events")
    seqs = [r["seq"] for r in rows]
    expected = sorted(
        s for p in parts for s in range(int(p.id[1:]) * 1000, int(p.id[1:]) * 1000 + p.row_count)
    )
    assert len(seqs) == len(set(seqs)), "a row was stored twice"
    assert sorted(seqs) == expected
    # Within a partition the rows arrive in order.
    by_part = collections.defaultdict(list)
    for r in rows:
        by_part[r["text"].split(":")[0]].append(r["seq"])
    assert all(v == sorted(v) for v in by_part.values())


def parts_for(n: int, rows: int) -> list[PartitionRef]:
    return [make_partition(f"p{i}", i * 1000, rows, seq=i, batch_rows=17) for i in range(n)]


async def test_storm_then_dropped_connections_every_row_exactly_once(
    central: CentralServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    now = time.time()
    storm = [
        Reply(429, retry_after="0.01"),
        Reply(503, retry_after="0"),
        Reply(429, retry_after="garbage"),
        Reply(503),
        Reply(429, retry_after=""),
        Reply(429, retry_after="-3"),
        Reply(503, retry_after=formatdate(now - 60, usegmt=True)),
        Reply(429, retry_after="0.02"),
        Reply(503, retry_after="1e3"),
        Reply(429, retry_after="5"),  # honoured, but past the budget: respooled
        Reply(503, retry_after=formatdate(now + 3600, usegmt=True)),  # likewise
        Reply(429, retry_after="99999999999999999999999"),
        Reply(429, retry_after="0.005"),
    ]
    drops = [Drop(after_apply=True), Drop(), Drop(after_apply=True), Reply(500), Reply(502)]
    central.script(*storm, *drops, Reply(504), Drop(after_apply=True))
    parts = parts_for(6, 120)
    sink = central_sink(central.url, max_chunk_rows=25, compression="zstd")
    try:
        results = await export_until_done(sink, parts)
    finally:
        await sink.close()

    assert central.pending_script == 0
    assert_exactly_once(central, parts)
    # Some partitions ran out of budget and went through on a later tick.
    budget_hits = [r for res in results for r in res.retry_partitions if "budget" in r.reason]
    assert budget_hits and len(results) > 1
    # Rows that landed before a dropped reply were deduped, not doubled.
    outcomes = collections.Counter(s.outcome for s in central.seen)
    assert outcomes["duplicate"] >= 1 and outcomes["applied (200), dropped"] == 3
    # Every re-send of a chunk was byte-identical.
    bodies = collections.defaultdict(set)
    for s in central.seen:
        bodies[s.batch_id].add(s.body_sha256)
    assert all(len(v) == 1 for v in bodies.values())
    assert len(central.batches) == 6 * 5
    assert TOKEN not in caplog.text


async def test_close_during_a_parked_wait_returns_fast(central: CentralServer) -> None:
    central.script(Reply(429, retry_after="30"))
    sink = central_sink(central.url, backoff_budget=300, backoff_ladder=[30])
    parts = parts_for(2, 10)
    task = asyncio.ensure_future(sink.export_batch(make_export(parts), ExportOptions()))
    await eventually(lambda: central.request_count >= 1)
    await asyncio.sleep(0.05)
    start = time.monotonic()
    await sink.close()
    result = await asyncio.wait_for(task, PROMPT)
    assert time.monotonic() - start < PROMPT
    assert [r.partition_id for r in result.retry_partitions] == ["p0", "p1"]
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()
    assert central.rows("events") == []


async def test_per_gateway_rate_limit(central: CentralServer) -> None:
    # 3 requests a second per gateway against 10 chunks each: throttled even on a
    # machine too busy to send 60 requests a second (the old 50 ms window).
    central.rate_limit = RateLimit(requests=3, window=1.0, retry_after="0.2")
    a = central_sink(central.url, gateway_id="gw-a", max_chunk_rows=10, backoff_budget=5)
    b = central_sink(central.url, gateway_id="gw-b", max_chunk_rows=10, backoff_budget=5)
    parts_a = parts_for(2, 50)
    parts_b = [make_partition(f"p{i}", i * 1000, 50, batch_rows=17) for i in (5, 6)]
    try:
        await asyncio.gather(export_until_done(a, parts_a), export_until_done(b, parts_b))
    finally:
        await a.close()
        await b.close()
    assert_exactly_once(central, parts_a + parts_b)
    assert central.status_counts()[429] > 0
    assert {s.gateway for s in central.seen} == {"gw-a", "gw-b"}


async def test_a_slow_reply_times_out_and_the_resend_is_deduped(central: CentralServer) -> None:
    # The server holds the first request until the test releases it, so the
    # client's read timeout fires however busy the machine is; the held request
    # is handled only after the resend was stored, and must be a duplicate.
    hold = Hold()
    central.script(hold)
    sink = central_sink(central.url, read_timeout=1.0)
    parts = parts_for(1, 30)
    try:
        await export_until_done(sink, parts)
    finally:
        await sink.close()
    assert hold.arrived.is_set() and central.rows("events")
    handled = len(central.seen)
    hold.release.set()
    await eventually(lambda: len(central.seen) > handled, within=PROMPT)
    assert central.seen[handled].outcome == "duplicate"
    assert_exactly_once(central, parts)


# ---------------------------------------------------------------- bad input


async def single_export(sink: RequestSink, rows: int = 5) -> ExportResult:
    try:
        return await sink.export_batch(make_export(parts_for(1, rows)), ExportOptions())
    finally:
        await sink.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_refused_connection_gives_up_on_the_budget() -> None:
    # The ladder's third wait (an hour) does not fit the 0.15 s budget: a sink
    # that ignored the budget would start it and time out here.
    sink = central_sink(f"http://127.0.0.1:{free_port()}", backoff_ladder=[0.005, 0.01, 3600])
    result = await asyncio.wait_for(single_export(sink), PROMPT)
    (retry,) = result.retry_partitions
    assert retry.retryable and "ConnectError" in retry.reason and "budget" in retry.reason


@pytest.fixture
def not_http() -> Iterator[str]:
    """A TCP server that answers every connection with a non-HTTP banner."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(65536)
                    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n")
                    # Read what the client still sends before closing: closing with
                    # unread bytes resets the connection, and the client would see a
                    # ReadError instead of the banner.
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(2)
    listener.close()


async def test_a_non_http_reply_is_a_clear_error_without_spinning(not_http: str) -> None:
    result = await single_export(central_sink(not_http))
    (retry,) = result.retry_partitions
    assert "did not answer with valid HTTP" in retry.reason and "budget" in retry.reason


async def test_https_to_a_plain_http_server_is_a_tls_error(central: CentralServer) -> None:
    url = central.url.replace("http://", "https://")
    result = await single_export(central_sink(url))
    (retry,) = result.retry_partitions
    assert not retry.retryable and "TLS" in retry.reason
    assert central.rows("events") == []


@pytest.mark.parametrize("value", ["9" * 30, "4000000000", "Fri, 31 Dec 9999 23:59:59 GMT"])
async def test_a_huge_retry_after_is_not_waited_inline(central: CentralServer, value: str) -> None:
    central.script(Reply(429, retry_after=value))
    start = time.monotonic()
    result = await single_export(central_sink(central.url))
    assert time.monotonic() - start < PROMPT
    (retry,) = result.retry_partitions
    assert retry.retryable and "budget" in retry.reason
    assert central.request_count == 1


async def test_a_malformed_retry_after_falls_back_to_the_ladder(central: CentralServer) -> None:
    central.script(Reply(429, retry_after="Fri, 99 Foo 20x6"), Reply(503, retry_after="\x7f\x01"))
    result = await single_export(central_sink(central.url))
    assert result.exported == ("p0",)
    assert central.request_count == 3


async def test_a_redirect_to_another_host_is_refused(central: CentralServer) -> None:
    port = central.url.rsplit(":", 1)[1]
    central.script(Reply(307, headers={"Location": f"http://127.0.0.2:{port}/v1/datasets/x/rows"}))
    result = await single_export(central_sink(central.url))
    (retry,) = result.retry_partitions
    assert not retry.retryable and "redirect" in retry.reason and "127.0.0.2" in retry.reason
    assert central.request_count == 1


async def test_a_200_with_a_garbage_body_is_a_clear_error(central: CentralServer) -> None:
    central.script(Reply(200, body=b"OK!"))
    result = await single_export(central_sink(central.url))
    (retry,) = result.retry_partitions
    assert not retry.retryable and "acknowledgement" in retry.reason
    assert central.request_count == 1


async def test_a_wrong_token_is_permanent_and_not_shown(
    central: CentralServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cfg = {"endpoint": central.url, "token": "wrong-token-0000", "gateway_id": "gw", **FAST}
    (plan,) = resolve({"sinks": {"fwd": {"plugin": "@hypaware/central", "config": cfg}}})
    result = await single_export(build(plan, env={}))
    (retry,) = result.retry_partitions
    assert not retry.retryable and "(401)" in retry.reason and "token" in retry.reason
    assert "wrong-token-0000" not in caplog.text + repr(result)
    assert central.request_count == 1


async def test_413_from_the_server_names_the_limit() -> None:
    with CentralServer(token=TOKEN, max_body_bytes=500) as server:
        result = await single_export(central_sink(server.url, compression="none"), rows=40)
    (retry,) = result.retry_partitions
    assert not retry.retryable and "max_chunk_bytes" in retry.reason
