"""Model-based: through any mix of answers, exports, closes and restarts, no row is lost or doubled.

A fake central server (in memory, deduping by batch id, able to store a chunk
and then drop the connection) answers from a random script; sinks are closed
and replaced as a restarted daemon would. After every step, no row is stored
twice and every partition a sink reported exported is fully stored; at the
end a calm server receives everything exactly once.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hypaware.core.errors import SinkClosedError
from hypaware.core.types import ExportOptions
from hypaware.request.backoff import BackoffPolicy
from hypaware.request.central import CentralWire
from hypaware.request.chunking import ChunkLimits
from hypaware.request.sink import RequestSink

from .helpers import FakeClock, make_export, make_partition

ANSWERS = st.sampled_from(
    ["ok", "429", "429-ra", "503-zero", "500", "conn", "drop-after-apply", "drop-before"]
)


class FakeCentral(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.script: list[str] = []
        self.batches: dict[str, list[int]] = {}

    def seqs(self) -> list[int]:
        return [s for rows in self.batches.values() for s in rows]

    def _store(self, request: httpx.Request, body: bytes) -> None:
        batch = request.headers["X-Hyp-Batch-Id"]
        if batch not in self.batches:
            self.batches[batch] = [json.loads(line)["seq"] for line in body.splitlines()]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        answer = self.script.pop(0) if self.script else "ok"
        if answer == "429":
            return httpx.Response(429)
        if answer == "429-ra":
            return httpx.Response(429, headers={"Retry-After": "7"})
        if answer == "503-zero":
            return httpx.Response(503, headers={"Retry-After": "0"})
        if answer == "500":
            return httpx.Response(500)
        if answer == "conn":
            raise httpx.ConnectError("refused")
        if answer == "drop-before":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        self._store(request, body)
        if answer == "drop-after-apply":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        batch = request.headers["X-Hyp-Batch-Id"]
        rows = len(self.batches[batch])
        return httpx.Response(200, json={"batch_id": batch, "rows": rows})


class SinkLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.server = FakeCentral()
        self.parts = {
            p.id: p for p in (make_partition(f"p{i}", i * 100, 12 + 7 * i) for i in range(5))
        }
        self.pending = set(self.parts)
        self.exported: set[str] = set()
        self.sink = self._new_sink()
        self.closed = False

    def _new_sink(self) -> RequestSink:
        clock = FakeClock()
        return RequestSink(
            "fwd",
            CentralWire("https://central.example", "tok-model-1234", "gw"),
            gateway="gw",
            limits=ChunkLimits(max_rows=10),
            policy=BackoffPolicy(budget=100),  # 30 + 60 fit, then give up
            transport=self.server,
            sleep=clock.sleep,
            clock=clock,
        )

    @rule(answers=st.lists(ANSWERS, max_size=8))
    def script(self, answers: list[str]) -> None:
        self.server.script.extend(answers)

    @precondition(lambda self: not self.closed and bool(self.pending))
    @rule()
    def export(self) -> None:
        batch = make_export([self.parts[i] for i in sorted(self.pending)])
        result = asyncio.run(self.sink.export_batch(batch, ExportOptions()))
        retried = {r.partition_id for r in result.retry_partitions}
        assert set(result.exported) | retried == self.pending
        assert not set(result.exported) & retried
        assert all(r.retryable for r in result.retry_partitions)
        self.exported |= set(result.exported)
        self.pending -= set(result.exported)

    @precondition(lambda self: not self.closed)
    @rule()
    def close(self) -> None:
        asyncio.run(self.sink.close())
        asyncio.run(self.sink.close())
        self.closed = True
        with pytest.raises(SinkClosedError):
            asyncio.run(self.sink.export_batch(make_export([self.parts["p0"]]), ExportOptions()))

    @precondition(lambda self: self.closed)
    @rule()
    def restart(self) -> None:
        self.sink = self._new_sink()
        self.closed = False

    @invariant()
    def nothing_doubled_nothing_lost(self) -> None:
        seqs = self.server.seqs()
        assert len(seqs) == len(set(seqs))
        stored = set(seqs)
        for pid in self.exported:
            part = self.parts[pid]
            start = int(pid[1:]) * 100
            assert set(range(start, start + part.row_count)) <= stored

    def teardown(self) -> None:
        if not self.closed:
            asyncio.run(self.sink.close())
        self.server.script.clear()
        sink = self._new_sink()
        batch = make_export(list(self.parts.values()))
        result = asyncio.run(sink.export_batch(batch, ExportOptions()))
        asyncio.run(sink.close())
        assert set(result.exported) == set(self.parts)
        expected = sorted(
            s
            for pid, p in self.parts.items()
            for s in range(int(pid[1:]) * 100, int(pid[1:]) * 100 + p.row_count)
        )
        assert sorted(self.server.seqs()) == expected


TestSinkLifecycle = SinkLifecycle.TestCase
TestSinkLifecycle.settings = settings(stateful_step_count=12, deadline=None)
